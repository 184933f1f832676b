// PILOT_ENABLE_ANALYSIS against a real Kubernetes API server: the built discovery daemon holding the
// `mesh-analyze-leader` Lease (Istio's istio-analyze-leader, renamed) runs the analyzers over the
// configuration it watches and writes their messages into each mesh resource's status the way istiod
// does (pilot/pkg/status, diag.Message.AnalysisMessageBase):
//
//   status:
//     observedGeneration: "<generation>"        # protojson writes int64 as a string
//     validationMessages:
//     - documentationUrl: <docs>/ist0101/       # no ?ref= in istiod
//       level: ERROR
//       type: {code: IST0101}
//
// A VirtualService bound to a Gateway that does not exist gets IST0101 (ReferencedResourceNotFound, an
// Error) and IST0132; fixing it, or creating the Gateway, clears the messages; only the leader writes;
// a status that would not change is not written (the resourceVersion stays).
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { type Kube, namespace, type Obj, service, startKube, requireKube } from '../helpers/kube';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'team-a';
const LEASE = '/apis/coordination.k8s.io/v1/namespaces/mesh-system/leases/mesh-analyze-leader';
const VS_MESH = `/apis/networking.mesh.io/v1/namespaces/${NS}/virtualservices`;
const VS_ISTIO = `/apis/networking.istio.io/v1/namespaces/${NS}/virtualservices`;
const DOCS = 'https://mesh.io/v1.26/docs/reference/config/analysis';

let kube: Kube;
t.before(async () => {
  kube = await startKube(t, { controllerManager: false });
  for (const ns of ['mesh-system', NS]) await kube.api.create('/api/v1/namespaces', namespace(ns));
  await kube.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'web'));
});
t.teardown(() => kube?.api.close());

function virtualService(group: string, name: string, gateways: string[]): Obj {
  return {
    apiVersion: `${group}/v1`,
    kind: 'VirtualService',
    metadata: { name, namespace: NS },
    spec: {
      hosts: [`${name}.example.com`],
      ...(gateways.length ? { gateways } : {}),
      http: [{ route: [{ destination: { host: `web.${NS}.svc.cluster.local` } }] }],
    },
  };
}

/**
 * What istiod writes at `generation` for a VirtualService bound to a missing Gateway: its gateway
 * analyzer reports the gateway not found (IST0101, Error) and, since no gateway holds the host, the host
 * not found in the gateway (IST0132, Warning); sorted by level, then code.
 */
function missingGateway(generation: number): Obj {
  return {
    observedGeneration: String(generation),
    validationMessages: [
      { documentationUrl: `${DOCS}/ist0101/`, level: 'ERROR', type: { code: 'IST0101' } },
      { documentationUrl: `${DOCS}/ist0132/`, level: 'WARNING', type: { code: 'IST0132' } },
    ],
  };
}

const holder = async () => ((await kube.api.find(LEASE))?.spec?.holderIdentity as string | undefined) ?? '';
const runs = (d: RunningDaemon) => (d.log().match(/analysis run \d+:/g) ?? []).length;
const started = (d: RunningDaemon) => d.log().includes('Starting analysis controller');

async function replica(name: string): Promise<RunningDaemon> {
  return startDaemon(['--orchconfig', kube.kubeconfig, '--log_output_level', 'analysis:debug'], {
    POD_NAME: name,
    PILOT_ENABLE_ANALYSIS: 'true',
    // Istio's lower bound: at most 1 s between a change and its analysis once changes keep coming.
    PILOT_ANALYSIS_INTERVAL: '1s',
  });
}

t.test('the analysis leader writes validationMessages, keeps unchanged status unwritten, clears fixed ones', async (t) => {
  const a = await replica('replica-a');
  const b = await replica('replica-b');
  const replicas: Record<string, RunningDaemon> = { 'replica-a': a, 'replica-b': b };
  t.teardown(async () => Promise.all([a.stop(), b.stop()]));
  await waitFor(
    () => `no analysis leader:\n${a.log()}\n${b.log()}`,
    async () => (await holder()) in replicas,
    { timeoutMs: 30_000 },
  );
  const leader = replicas[await holder()]!;
  const follower = leader === a ? b : a;
  await waitFor(
    () => leader.log(),
    () => runs(leader) >= 1,
    { timeoutMs: 30_000 },
  );

  // Invalid by analysis (its gateway does not exist), valid by schema: the API server accepts it.
  await kube.api.create(VS_MESH, virtualService('networking.mesh.io', 'bad', ['missing-gw']));
  const bad = `${VS_MESH}/bad`;
  await waitFor(
    () => leader.log(),
    async () => Boolean((await kube.api.get(bad)).status?.validationMessages),
    { timeoutMs: 30_000 },
  );
  const written = await kube.api.get(bad);
  t.same(written.status, missingGateway(1), "Istio's status shape: observedGeneration and the gateway analyzer's two messages");
  t.match(leader.log(), /Configuration analysis: Error \[IST0101\] \(VirtualService team-a\/bad\) Referenced gateway not found: "missing-gw"/);
  t.notOk(started(follower), 'the replica not holding the Lease runs no analysis');
  t.equal(runs(follower), 0);

  // A valid VirtualService never gets a status; an Istio-group one with a missing gateway gets its own.
  // The analysis after these changes leaves `bad` as it was: no write, same resourceVersion.
  const rv = written.metadata.resourceVersion;
  const before = runs(leader);
  await kube.api.create(VS_MESH, virtualService('networking.mesh.io', 'good', []));
  await kube.api.create(VS_ISTIO, virtualService('networking.istio.io', 'legacy', ['gone']));
  await waitFor(
    () => leader.log(),
    async () => Boolean((await kube.api.get(`${VS_ISTIO}/legacy`)).status?.validationMessages),
    { timeoutMs: 30_000 },
  );
  t.same((await kube.api.get(`${VS_ISTIO}/legacy`)).status, missingGateway(1), "Istio's group gets the same status");
  await waitFor(
    () => leader.log(),
    () => runs(leader) > before,
    { timeoutMs: 30_000 },
  );
  t.equal((await kube.api.get(bad)).metadata.resourceVersion, rv, 'an unchanged status is not written again');
  t.notOk((await kube.api.get(`${VS_MESH}/good`)).status?.validationMessages, 'no messages written for a valid resource');

  // The leader steps down; the other replica takes over, finds the status already right (no write), and
  // clears the messages once the VirtualService is fixed (generation 2).
  await leader.stop();
  await waitFor(
    () => follower.log(),
    async () => (await holder()) === (follower === a ? 'replica-a' : 'replica-b'),
    { timeoutMs: 30_000 },
  );
  await waitFor(
    () => follower.log(),
    () => runs(follower) >= 1,
    { timeoutMs: 30_000 },
  );
  t.equal((await kube.api.get(bad)).metadata.resourceVersion, rv, 'the new leader does not rewrite an unchanged status');

  const fixed = await kube.api.merge(bad, { spec: { gateways: null } });
  t.equal(fixed.metadata.generation, 2);
  await waitFor(
    () => follower.log(),
    async () => (await kube.api.get(bad)).status?.observedGeneration === '2',
    { timeoutMs: 30_000 },
  );
  t.same((await kube.api.get(bad)).status, { observedGeneration: '2' }, 'messages cleared: only observedGeneration remains');
  t.match(follower.log(), /Configuration analysis resolved: Error \[IST0101\] \(VirtualService team-a\/bad\)/);
  t.same((await kube.api.get(`${VS_ISTIO}/legacy`)).status, missingGateway(1), 'the other resource keeps its messages');

  // A change of another kind re-runs the analyzers reading it: the Gateway appearing clears the messages
  // of the VirtualService bound to it (same generation: only the messages go).
  await kube.api.create(`/apis/networking.istio.io/v1/namespaces/${NS}/gateways`, {
    apiVersion: 'networking.istio.io/v1',
    kind: 'Gateway',
    metadata: { name: 'gone', namespace: NS },
    spec: { servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }] },
  });
  await waitFor(
    () => follower.log(),
    async () => !(await kube.api.get(`${VS_ISTIO}/legacy`)).status?.validationMessages,
    { timeoutMs: 30_000 },
  );
  t.same((await kube.api.get(`${VS_ISTIO}/legacy`)).status, { observedGeneration: '1' }, 'cleared by a Gateway event');
});
