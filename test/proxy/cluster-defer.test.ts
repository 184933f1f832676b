// An engine worker's cluster manager builds an EDS cluster on its first use (src/proxy/upstream/cluster-manager.ts,
// deferEds): until then the cluster is its encoded bytes, counted and dumped as the main thread's are. Against the
// real ADS server, the worker's manager fed by a relay mux as an engine worker is (src/proxy/xds/grpc-mux.ts).
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { LoggerRegistry } from '../../src/proxy/log';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { StatsStore } from '../../src/proxy/stats/store';
import { SecretManager } from '../../src/proxy/tls/secrets';
import { ClusterManager } from '../../src/proxy/upstream/cluster-manager';
import { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { cla, edsCluster, relayRig, startAds } from './helpers';
import { waitForValue } from '../helpers/wait';

const A = 'outbound|80||a.demo.svc.cluster.local';
const B = 'outbound|80||b.demo.svc.cluster.local';
const C = 'outbound|80||c.demo.svc.cluster.local';

function manager(mux: GrpcMux, deferEds: boolean, loggers: LoggerRegistry) {
  const stats = new StatsStore();
  const secrets = new SecretManager(
    () => {
      throw new Error('no secrets here');
    },
    loggers.get('secret'),
    stats,
  );
  const clusters = new ClusterManager(stats, loggers.get('upstream'), secrets, deferEds);
  clusters.subscribeCds(mux);
  return { stats, clusters };
}

/** Whether a cluster's stats exist: a cluster makes its cluster.<name>.* stats when it is built. */
const built = (stats: StatsStore, name: string) => stats.allCounters().some((c) => c.name === `cluster.${name}.upstream_rq_total`);
const ports = (m: ClusterManager, name: string) =>
  m
    .get(name)
    ?.hosts.map((h) => h.port)
    .sort();

for (const delta of [false, true]) {
  t.test(
    `${delta ? 'delta' : 'state of the world'}: a worker builds an EDS cluster on first use, from the bytes and assignment it holds`,
    async (t) => {
      const { ads, loggers, mux } = await relayRig(t, 'sidecar~10.0.0.1~app-0.demo~demo.svc.cluster.local', A, B);
      const mainMux = mux({ relay: false, delta });
      const relay = mux({ relay: true });
      mainMux.onRelay = (r) => relay.receive(r);
      const main = manager(mainMux, false, loggers);
      const worker = manager(relay, true, loggers);
      t.teardown(() => main.clusters.close());
      t.teardown(() => worker.clusters.close());
      relay.start();
      mainMux.start();
      await waitForValue('both managers hold both assignments', () => main.clusters.has(A) && main.clusters.has(B) && worker.clusters.has(B), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });

      t.ok(built(main.stats, A) && built(main.stats, B), 'the main thread builds every cluster');
      t.notOk(built(worker.stats, A) || built(worker.stats, B), 'the worker has built none: has() does not build');
      t.equal(worker.stats.value('cluster_manager.active_clusters'), 2, 'deferred clusters count as active, as on the main thread');
      t.equal(worker.stats.value('cluster_manager.cluster_added'), main.stats.value('cluster_manager.cluster_added'));
      t.same(
        worker.clusters
          .dump()
          .active.map((e) => e.cluster.name)
          .sort(),
        [A, B],
        'the dump shows deferred clusters',
      );

      t.same(ports(worker.clusters, A), [1001], 'first use builds A with its assignment');
      t.ok(built(worker.stats, A), "A's stats exist once it is built");
      t.notOk(built(worker.stats, B), 'B is still bytes');

      ads.update({
        clusters: [edsCluster(A), edsCluster(B), edsCluster(C)],
        endpoints: [cla(A, [{ port: 1002 }]), cla(B, [{ port: 2002 }, { port: 2003 }]), cla(C, [{ port: 3001 }])],
      });
      await waitForValue('the worker applied the update', () => ports(worker.clusters, A)?.[0] === 1002 && worker.clusters.has(C), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      t.same(ports(worker.clusters, B), [2002, 2003], 'B is built with the assignment that came while it was deferred');
      t.same(ports(worker.clusters, C), [3001], 'a cluster added later is deferred and built the same way');
      t.equal(worker.stats.value('cluster_manager.active_clusters'), 3);

      ads.update({ clusters: [edsCluster(A)], endpoints: [cla(A, [{ port: 1002 }])] });
      await waitForValue('the worker removed B and C', () => !worker.clusters.has(B) && !worker.clusters.has(C), {
        timeoutMs: 10_000,
        intervalMs: 20,
      });
      t.equal(worker.clusters.get(C), undefined);
      t.equal(worker.stats.value('cluster_manager.active_clusters'), 1);
    },
  );
}

t.test('a deferred cluster whose assignment has not come is not served, as a warming cluster is not', async (t) => {
  const ads = await startAds({ clusters: [edsCluster(A)], endpoints: [], listeners: [], routes: [] });
  t.teardown(() => ads.close());
  const loggers = new LoggerRegistry('warning', () => undefined);
  const mux = new GrpcMux({
    node: create(NodeSchema, { id: 'sidecar~10.0.0.1~app-0.demo~demo.svc.cluster.local' }),
    setNodeOnFirstMessageOnly: true,
    log: loggers.get('config'),
    typeRegistry: proxyTypeRegistry(),
    target: ads.address,
    credentials: grpc.credentials.createInsecure(),
    service: 'ads',
  });
  t.teardown(() => mux.close());
  const w = manager(mux, true, loggers);
  t.teardown(() => w.clusters.close());
  mux.start();
  await waitForValue('CDS applied', () => w.stats.value('cluster_manager.active_clusters') === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(w.clusters.get(A), undefined);
  t.notOk(w.clusters.has(A));
  ads.update({ endpoints: [cla(A, [{ port: 1001 }])] });
  await waitForValue('EDS applied', () => w.clusters.has(A), { timeoutMs: 10_000, intervalMs: 20 });
  t.same(ports(w.clusters, A), [1001]);
});
