// Incremental (delta) ADS over a real grpc-js server and client. Expectations come from Envoy's xDS
// protocol documentation: subscribe/unsubscribe, `*` and legacy wildcard, initial_resource_versions,
// removed_resources, per-resource versions, required nonces; and MESH_DELTA_XDS=false answering UNIMPLEMENTED.
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { StatusSchema } from '../../../src/gen/google/rpc/status_pb';
import type { DeltaDiscoveryResponse } from '../../../src/gen/envoy/service/discovery/v3/discovery_pb';
import {
  captureLogs,
  CDS,
  CLUSTER_A,
  CLUSTER_B,
  claIps,
  DeltaStream,
  EDS,
  HOST_A,
  LDS,
  metricValue,
  node,
  pushReq,
  RDS,
  SotwStream,
  startServer,
  world,
  serverWithStream,
} from './helpers';
import { waitFor } from '../../helpers/wait';

const W1 = world('2026-11-22T04:00:00Z', { [CLUSTER_A]: ['10.1.0.1'], [CLUSTER_B]: ['10.2.0.1'] });
const CLUSTER_C = 'outbound|80||c.default.svc.cluster.local';

const rnames = (r: DeltaDiscoveryResponse) => r.resources.map((x) => x.name).sort();

let sentinelSeq = 0;
/** Subscribing to a new route name always gets an answer (it does not exist: removed_resources). */
async function sentinel(d: DeltaStream): Promise<void> {
  const name = `sentinel-${++sentinelSeq}`;
  d.send({ typeUrl: RDS, resourceNamesSubscribe: [name] });
  const r = await d.expect(RDS);
  if (!r.removedResources.includes(name)) throw new Error(`sentinel answer lacks ${name}`);
}

t.test('delta subscribe and unsubscribe: resources, versions, removed_resources and nonces', async (t) => {
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1);

  // Legacy wildcard: a first CDS request naming nothing means everything.
  d.send({ node: node(), typeUrl: CDS });
  const cds = await d.expect(CDS);
  t.same(rnames(cds), [CLUSTER_A, CLUSTER_B].sort());
  t.match(cds.systemVersionInfo, /^2026-11-22T04:00:00Z\/\d+$/);
  t.ok(cds.nonce.length > 0);
  t.same(cds.removedResources, []);
  for (const r of cds.resources) t.match(r.version, /^[0-9a-f]{16}$/, 'per-resource version is a content hash');
  d.ack(cds);

  d.send({ typeUrl: EDS, resourceNamesSubscribe: [CLUSTER_A] });
  const e1 = await d.expect(EDS);
  t.same(rnames(e1), [CLUSTER_A]);
  t.same(claIps(e1.resources[0]!.resource!), ['10.1.0.1']);
  d.ack(e1, { resourceNamesSubscribe: [CLUSTER_B] });
  const e2 = await d.expect(EDS);
  t.same(rnames(e2), [CLUSTER_B], 'only the newly subscribed resource is sent');
  t.not(e2.nonce, e1.nonce);
  d.ack(e2);

  d.send({ typeUrl: EDS, resourceNamesUnsubscribe: [CLUSTER_A] });
  await sentinel(d);
  t.equal(d.inbox.pending(), 0, 'an unsubscribe needs no answer');
  await waitFor('unsubscribe applied', () => srv.ads.connections()[0]!.watches.find((w) => w.typeUrl === EDS)!.resourceNames.length === 1, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  t.same(srv.ads.connections()[0]!.watches.find((w) => w.typeUrl === EDS)!.resourceNames, [CLUSTER_B]);

  // Cluster B goes away: CDS lists it removed and sends nothing unchanged; EDS does the same for B.
  const W2 = world('2026-11-22T04:10:00Z', { [CLUSTER_A]: ['10.1.0.1'] });
  srv.setWorld(W2);
  srv.ads.pushAll(pushReq(W2));
  const cds2 = await d.expect(CDS);
  t.same(cds2.resources, [], 'unchanged cluster A is not resent');
  t.same(cds2.removedResources, [CLUSTER_B]);
  t.match(cds2.systemVersionInfo, /^2026-11-22T04:10:00Z\//);
  const eds2 = await d.expect(EDS);
  t.same(eds2.resources, []);
  t.same(eds2.removedResources, [CLUSTER_B]);
  t.equal(new Set([cds.nonce, e1.nonce, e2.nonce, cds2.nonce, eds2.nonce]).size, 5, 'nonces are unique');
});

t.test('explicit wildcard: only changes are sent; leaving the wildcard keeps explicit names only', async (t) => {
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1);
  d.send({ node: node(), typeUrl: CDS, resourceNamesSubscribe: ['*'] });
  const all = await d.expect(CDS);
  t.same(rnames(all), [CLUSTER_A, CLUSTER_B].sort());
  d.ack(all);

  const W2 = world('v2', { ...W1.clusters, [CLUSTER_C]: ['10.3.0.1'] });
  srv.ads.pushAll(pushReq(W2), { immediate: true });
  const added = await d.expect(CDS);
  t.same(rnames(added), [CLUSTER_C], 'only the new cluster');
  t.same(added.removedResources, []);
  d.ack(added);

  // Name A explicitly and drop `*`: the client now tracks A only.
  d.send({ typeUrl: CDS, resourceNamesSubscribe: [CLUSTER_A] });
  const a = await d.expect(CDS);
  t.same(rnames(a), [CLUSTER_A], 'an explicit subscription is answered even if the client holds it');
  d.ack(a, { resourceNamesUnsubscribe: ['*'] });
  await sentinel(d);
  await waitFor('wildcard dropped', () => srv.ads.connections()[0]!.watches.find((w) => w.typeUrl === CDS)!.wildcard === false, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  const w = srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!;
  t.same(w.resourceNames, [CLUSTER_A]);
  t.equal(w.resourceCount, 1);

  // C disappearing concerns no one subscribed to it any more.
  srv.ads.pushAll(pushReq(world('v3', W1.clusters)), { immediate: true });
  await waitFor('push drained', () => srv.ads.stats().pendingPushes === 0 && srv.ads.stats().inFlightPushes === 0, {
    timeoutMs: 5_000,
    intervalMs: 5,
  });
  await sentinel(d);
  t.equal(d.inbox.pending(), 0, 'nothing sent for resources outside the subscription');
});

t.test('initial_resource_versions: a reconnecting client gets only what changed', async (t) => {
  const srv = await startServer(W1);
  t.teardown(srv.close);
  const d1 = new DeltaStream(srv.address);
  d1.send({ node: node(), typeUrl: CDS });
  const first = await d1.expect(CDS);
  const held = Object.fromEntries(first.resources.map((r) => [r.name, r.version]));
  d1.close();
  await waitFor('first stream released', () => srv.ads.connections().length === 0, { timeoutMs: 5_000, intervalMs: 5 });

  srv.setWorld(world('v2', { [CLUSTER_A]: ['10.1.0.1'], [CLUSTER_C]: ['10.3.0.1'] }));
  const d2 = new DeltaStream(srv.address);
  t.teardown(() => d2.close());
  d2.send({ node: node(), typeUrl: CDS, initialResourceVersions: held });
  const r = await d2.expect(CDS);
  t.same(rnames(r), [CLUSTER_C], 'A is held at the current version: not resent');
  t.same(r.removedResources, [CLUSTER_B], 'B no longer exists');

  d2.send({ typeUrl: EDS, resourceNamesSubscribe: [CLUSTER_A], initialResourceVersions: { [CLUSTER_A]: 'stale-version' } });
  const e = await d2.expect(EDS);
  t.same(rnames(e), [CLUSTER_A], 'a held resource at another version is resent');
});

t.test('a delta NACK is counted and not answered', async (t) => {
  const sink = captureLogs(t);
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1);
  d.send({ node: node(), typeUrl: CDS });
  const cds = await d.expect(CDS);
  const before = await metricValue('pilot_total_xds_rejects', { type: 'cds' });
  d.send({
    typeUrl: CDS,
    responseNonce: cds.nonce,
    errorDetail: create(StatusSchema, { code: grpc.status.INVALID_ARGUMENT, message: 'duplicate cluster name' }),
  });
  await sentinel(d);
  t.equal(d.inbox.pending(), 0);
  t.equal(await metricValue('pilot_total_xds_rejects', { type: 'cds' }), before + 1);
  t.match(sink.text, /\twarn\tads\tADS:CDS: ACK ERROR app-1\.default-\d+ InvalidArgument:duplicate cluster name/);
  const w = srv.ads.connections()[0]!.watches.find((x) => x.typeUrl === CDS)!;
  t.equal(w.lastNack?.message, 'duplicate cluster name');
  t.equal(w.nonceAcked, '', 'a NACK is not an ACK');
});

t.test('delta incremental EDS sends only the changed clusters', async (t) => {
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1);
  d.send({ node: node(), typeUrl: EDS, resourceNamesSubscribe: [CLUSTER_A, CLUSTER_B] });
  const e = await d.expect(EDS);
  t.same(rnames(e), [CLUSTER_A, CLUSTER_B].sort());
  d.ack(e);
  const W2 = world(W1.version, { [CLUSTER_A]: ['10.1.0.5'], [CLUSTER_B]: ['10.2.0.1'] });
  srv.ads.pushAll(pushReq(W2, { full: false, edsUpdates: new Set([HOST_A]) }));
  const inc = await d.expect(EDS);
  t.same(rnames(inc), [CLUSTER_A]);
  t.same(inc.removedResources, []);
  t.same(claIps(inc.resources[0]!.resource!), ['10.1.0.5']);
  t.not(inc.resources[0]!.version, e.resources.find((r) => r.name === CLUSTER_A)!.version, 'new content, new version');
});

t.test('a full push naming only services regenerates only their load assignments (Istio canSendPartialFullPushes)', async (t) => {
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1);
  d.send({ node: node(), typeUrl: EDS, resourceNamesSubscribe: [CLUSTER_A, CLUSTER_B] });
  d.ack(await d.expect(EDS));
  // every push moves both clusters' endpoints: what is regenerated shows in what is asked and sent
  const cases: Array<[string, string[], string[]]> = [
    ['a ServiceEntry key: its clusters only', [`ServiceEntry/default/${HOST_A}`], [CLUSTER_A]],
    ['a ServiceEntry key beside a kind EDS skips (VirtualService)', [`ServiceEntry/default/${HOST_A}`, 'VirtualService/default/v'], [CLUSTER_A]],
    ['a DestinationRule key: every watched name', ['DestinationRule/default/a'], [CLUSTER_A, CLUSTER_B]],
    [
      'a ServiceEntry and a DestinationRule: every watched name',
      [`ServiceEntry/default/${HOST_A}`, 'DestinationRule/default/a'],
      [CLUSTER_A, CLUSTER_B],
    ],
    ['a push naming nothing: every watched name', [], [CLUSTER_A, CLUSTER_B]],
  ];
  let ip = 10;
  for (const [what, configs, expected] of cases) {
    ip++;
    const w = world(W1.version, { [CLUSTER_A]: [`10.1.0.${ip}`], [CLUSTER_B]: [`10.2.0.${ip}`] });
    srv.gens.edsAsked.length = 0;
    srv.ads.pushAll(pushReq(w, { configsUpdated: new Set(configs) }));
    const r = await d.expect(EDS);
    d.ack(r);
    t.same(rnames(r), expected.sort(), `${what}: sent`);
    t.same(srv.gens.edsAsked, [expected.sort()], `${what}: generated`);
  }
});

t.test('a cluster request is followed by endpoints for warming', async (t) => {
  const { s: d } = await serverWithStream(t, DeltaStream, W1);
  d.send({ node: node(), typeUrl: EDS, resourceNamesSubscribe: [CLUSTER_A] });
  d.ack(await d.expect(EDS));
  d.send({ typeUrl: CDS });
  const cds = await d.expect(CDS);
  t.same(rnames(cds), [CLUSTER_A, CLUSTER_B].sort());
  const eds = await d.expect(EDS);
  t.same(rnames(eds), [CLUSTER_A], 'endpoints resent although unchanged');
});

t.test('MESH_DELTA_XDS=false answers the delta method UNIMPLEMENTED; SotW still works', async (t) => {
  const { srv, s: d } = await serverWithStream(t, DeltaStream, W1, { deltaXds: false });
  d.send({ node: node(), typeUrl: CDS });
  const st = await d.inbox.status();
  t.equal(st.code, grpc.status.UNIMPLEMENTED);
  const s = new SotwStream(srv.address);
  t.teardown(() => s.close());
  s.send({ node: node(), typeUrl: LDS });
  t.equal((await s.expect(LDS)).resources.length, 1);
});
