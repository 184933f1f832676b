// Multicluster with the built discovery daemon and two real Kubernetes API servers: a secret labelled
// `mesh/multiCluster: "true"` in --clusterRegistriesNamespace joins the second one as a remote cluster at
// run time; its Services merge with the config cluster's by hostname (EDS carries both clusters'
// endpoints), its edits are served, removing the secret removes them; meshd_managed_clusters counts
// them; a secret naming the config cluster, or with credentials that run programs, is refused;
// --clusterAliases renames a proxy's cluster; PILOT_REMOTE_CLUSTER_TIMEOUT bounds how long readiness
// waits for a remote cluster that cannot sync.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { metricValue } from '../helpers/prometheus';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { endpointSlice, type Kube, namespace, type Obj, service, startKube, requireKube } from '../helpers/kube';
import { addressesOf, CDS, EDS, sidecarNode, XdsWatch } from '../helpers/xds';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'shop';
const WEB = `outbound|80||web.${NS}.svc.cluster.local`;
const ONLY_REMOTE = `outbound|80||only-remote.${NS}.svc.cluster.local`;
const SECRETS = '/api/v1/namespaces/mesh-system/secrets';

let primary: Kube;
let remote: Kube;
let daemon: RunningDaemon;

/** A client configuration for `k` as `meshctl create-remote-secret` writes one: CA and token inline. */
function remoteKubeconfig(k: Kube, server = k.env.API_URL!): string {
  const ca = readFileSync(k.env.KUBE_CA!).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    `- name: c`,
    `  cluster: {server: "${server}", certificate-authority-data: ${ca}}`,
    'users:',
    `- name: u`,
    `  user: {token: ${k.env.KUBE_TOKEN}}`,
    'contexts:',
    `- name: c`,
    `  context: {cluster: c, user: u}`,
    'current-context: c',
    '',
  ].join('\n');
}

function secret(name: string, clusters: Record<string, string>, label = 'mesh/multiCluster'): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'mesh-system', labels: { [label]: 'true' } },
    data: Object.fromEntries(Object.entries(clusters).map(([id, text]) => [id, Buffer.from(text).toString('base64')])),
  };
}

async function metrics(d: RunningDaemon): Promise<string> {
  return (await fetch(`http://${d.monitoring}/metrics`)).text();
}

t.before(async () => {
  [primary, remote] = await Promise.all([
    startKube(t, { crds: 'istio', controllerManager: false }),
    startKube(t, { crds: 'none', controllerManager: false }),
  ]);
  for (const [k, ip] of [
    [primary, '10.1.0.1'],
    [remote, '10.2.0.1'],
  ] as const) {
    await k.api.create('/api/v1/namespaces', namespace(NS));
    await k.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'web'));
    await k.api.create(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`, endpointSlice(NS, 'web-1', 'web', [{ ip }]));
  }
  await primary.api.create('/api/v1/namespaces', namespace('mesh-system'));
  await remote.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'only-remote'));
  await remote.api.create(
    `/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices`,
    endpointSlice(NS, 'only-remote-1', 'only-remote', [{ ip: '10.2.0.9' }]),
  );
  daemon = await startDaemon(['--orchconfig', primary.kubeconfig, '--clusterID', 'primary', '--clusterAliases', 'old-primary=primary']);
});
t.teardown(async () => {
  await daemon?.stop();
  primary?.api.close();
  remote?.api.close();
});

t.test('a remote cluster joined by a secret merges its endpoints by hostname; removing the secret removes them', async (t) => {
  const eds = new XdsWatch(daemon.grpc, sidecarNode(NS), EDS, [WEB]);
  const cds = new XdsWatch(daemon.grpc, sidecarNode(NS), CDS);
  t.teardown(() => (eds.close(), cds.close()));
  await eds.until((w) => addressesOf(w.resources.get(WEB)).join() === '10.1.0.1:8080', 'the config cluster alone');
  t.notOk(cds.resources.has(ONLY_REMOTE));
  t.equal(metricValue(await metrics(daemon), 'meshd_managed_clusters', 'cluster_type="remote"'), 0);

  await primary.api.create(SECRETS, secret('remote-1', { remote1: remoteKubeconfig(remote) }));
  await eds.until((w) => addressesOf(w.resources.get(WEB)).join() === '10.1.0.1:8080,10.2.0.1:8080', 'both clusters behind one hostname', 30_000);
  await cds.until((w) => w.resources.has(ONLY_REMOTE), "the remote cluster's own Service");
  const m = await metrics(daemon);
  t.equal(metricValue(m, 'meshd_managed_clusters', 'cluster_type="remote"'), 1, 'meshd_managed_clusters{cluster_type="remote"}');
  t.equal(metricValue(m, 'meshd_managed_clusters', 'cluster_type="local"'), 1);
  const shardz = (await (await fetch(`http://${daemon.monitoring}/debug/endpointShardz`)).json()) as Record<
    string,
    Record<string, { Shards: Record<string, unknown[]> }>
  >;
  t.same(
    Object.keys(shardz[`web.${NS}.svc.cluster.local`]![NS]!.Shards).sort(),
    ['Orchestrator/primary', 'Orchestrator/remote1'],
    'one shard per cluster',
  );

  // An edit in the remote cluster is served.
  await remote.api.merge(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices/web-1`, { endpoints: [{ addresses: ['10.2.0.2'] }] });
  await eds.until((w) => addressesOf(w.resources.get(WEB)).join() === '10.1.0.1:8080,10.2.0.2:8080', 'the remote edit');

  await primary.api.delete(`${SECRETS}/remote-1`);
  await eds.until((w) => addressesOf(w.resources.get(WEB)).join() === '10.1.0.1:8080', 'the remote endpoints gone with the secret', 30_000);
  await cds.until((w) => !w.resources.has(ONLY_REMOTE), "the remote cluster's Service gone");
  t.equal(metricValue(await metrics(daemon), 'meshd_managed_clusters', 'cluster_type="remote"'), 0);
  t.match(daemon.log(), /Deleting cluster_id=remote1 configured by secret=mesh-system\/remote-1/);
});

t.test("Istio's label is accepted; a secret for the config cluster or with unsafe credentials is refused", async (t) => {
  const exec = remoteKubeconfig(remote).replace(
    /user: \{token: \S+\}/,
    'user: {exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}',
  );
  await primary.api.create(
    SECRETS,
    secret('istio-style', { primary: remoteKubeconfig(remote), unsafe: exec, remote1: remoteKubeconfig(remote) }, 'istio/multiCluster'),
  );
  const eds = new XdsWatch(daemon.grpc, sidecarNode(NS), EDS, [WEB]);
  t.teardown(() => eds.close());
  await eds.until((w) => addressesOf(w.resources.get(WEB)).length === 2, 'the remote cluster of the istio/multiCluster secret', 30_000);
  t.match(daemon.log(), /ignoring cluster primary from secret mesh-system\/istio-style as it would overwrite the config cluster/);
  t.match(
    daemon.log(),
    /Add cluster unsafe: create remote cluster failed: orchestrator client configuration secret mesh-system\/istio-style key unsafe: user "u": exec is not allowed/,
  );
  t.equal(metricValue(await metrics(daemon), 'meshd_managed_clusters', 'cluster_type="remote"'), 1, 'only remote1 is managed');
  await primary.api.delete(`${SECRETS}/istio-style`);
  await eds.until((w) => addressesOf(w.resources.get(WEB)).length === 1, 'gone again', 30_000);
});

t.test('--clusterAliases: a proxy of cluster old-primary is in cluster primary', async (t) => {
  const node = sidecarNode(NS, '10.200.0.7', 'aliased');
  const cds = new XdsWatch(daemon.grpc, { ...node, metadata: { ...node.metadata, CLUSTER_ID: 'old-primary' } }, CDS);
  t.teardown(() => cds.close());
  await cds.until((w) => w.resources.size > 0, 'clusters');
  const syncz = (await (await fetch(`http://${daemon.monitoring}/debug/syncz`)).json()) as Array<{ proxy: string; cluster_id?: string }>;
  t.equal(syncz.find((s) => s.proxy === `aliased.${NS}`)?.cluster_id, 'primary');
});

t.test('PILOT_REMOTE_CLUSTER_TIMEOUT: readiness stops waiting for a remote cluster that cannot sync', async (t) => {
  // A remote cluster whose API server is not there, present before the daemon starts.
  await primary.api.create(SECRETS, secret('dead', { dead: remoteKubeconfig(remote, 'https://127.0.0.1:1') }));
  t.teardown(() => primary.api.remove(`${SECRETS}/dead`));
  const started = Date.now();
  const d = await startDaemon(['--orchconfig', primary.kubeconfig, '--clusterID', 'primary'], { PILOT_REMOTE_CLUSTER_TIMEOUT: '4s' });
  t.teardown(() => d.stop());
  const took = Date.now() - started;
  t.ok(took >= 3_500, `ready after ${took}ms: it waited for the remote cluster`);
  t.match(d.log(), /not ready: remote clusters not synced/);
  t.match(d.log(), /remote cluster dead failed to sync after 4s/);
  await waitFor(
    () => d.log(),
    async () => metricValue(await metrics(d), 'remote_cluster_sync_timeouts_total', 'cluster="dead"') === 1,
    { timeoutMs: 5_000 },
  );
});
