// Leader election of the built discovery daemon against a real Kubernetes API server: two replicas
// elect one holder of each Lease (Istio's election names with istio → mesh), both serve xDS; SIGKILL of
// the leader hands the Lease over within the lease duration; a leader stopped with SIGTERM releases it at
// once; ENABLE_LEADER_ELECTION=false skips the election; the default revision (named by the revision-tag
// webhook configuration) takes the Lease from another revision.
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { type Kube, namespace, type Obj, startKube, requireKube } from '../helpers/kube';
import { CDS, sidecarNode, XdsWatch } from '../helpers/xds';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const ELECTION = 'mesh-namespace-controller-election';
const LEASE = `/apis/coordination.k8s.io/v1/namespaces/mesh-system/leases/${ELECTION}`;
const LEASE_DURATION_MS = 30_000;

let kube: Kube;
const replicas = new Map<string, RunningDaemon>();

async function replica(name: string, env: NodeJS.ProcessEnv = {}): Promise<RunningDaemon> {
  const d = await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: name, ...env });
  replicas.set(name, d);
  return d;
}

async function lease(): Promise<Obj | undefined> {
  return kube.api.find(LEASE);
}

async function holder(): Promise<string> {
  return ((await lease())?.spec?.holderIdentity as string | undefined) ?? '';
}

const obtained = (d: RunningDaemon) => d.log().includes(`leader election lock obtained: ${ELECTION}`);

t.before(async () => {
  kube = await startKube(t, { crds: 'none', controllerManager: false });
  await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
});
t.teardown(async () => {
  for (const d of replicas.values()) await d.stop();
  kube?.api.close();
});

t.test('two replicas: one holds the Lease, both serve xDS; SIGKILL of the leader hands it over within the lease duration', async (t) => {
  const [a, b] = await Promise.all([replica('replica-a'), replica('replica-b')]);
  await waitFor(
    () => `no holder:\n${a.log()}\n${b.log()}`,
    async () => ['replica-a', 'replica-b'].includes(await holder()),
    { timeoutMs: 20_000 },
  );
  const first = await holder();
  const leader = first === 'replica-a' ? a : b;
  const follower = first === 'replica-a' ? b : a;
  const l = (await lease())!;
  t.equal(l.spec.leaseDurationSeconds, 30, "Istio's 30 s lease");
  t.equal(l.metadata.annotations?.['leader.mesh.io/holder-key'], 'default', 'the holder revision (REVISION unset: default)');
  await waitFor(
    () => leader.log(),
    () => obtained(leader),
    { timeoutMs: 10_000 },
  );
  t.notOk(obtained(follower), 'the other replica does not run the controllers that write');
  t.match(follower.log(), new RegExp(`attempting to acquire leader lease mesh-system/${ELECTION}`));

  for (const d of [a, b]) {
    const cds = new XdsWatch(d.grpc, sidecarNode('default'), CDS);
    await cds.until((w) => w.resources.has('outbound|443||kubernetes.default.svc.cluster.local'), 'the kubernetes Service over xDS');
    cds.close();
  }
  t.pass('both replicas serve xDS');

  // Kill the leader right after a renewal, the worst case: its lease stays valid for a full duration.
  const renewed = l.spec.renewTime as string;
  await waitFor(
    () => 'a renewal',
    async () => (await lease())?.spec.renewTime !== renewed,
    { timeoutMs: 15_000 },
  );
  leader.child.kill('SIGKILL');
  const killed = Date.now();
  await waitFor(
    () => follower.log(),
    async () => (await holder()) === (first === 'replica-a' ? 'replica-b' : 'replica-a'),
    { timeoutMs: LEASE_DURATION_MS + 15_000 },
  );
  const took = Date.now() - killed;
  t.ok(took <= LEASE_DURATION_MS + 2_000, `taken over ${took}ms after the kill (lease duration 30 s)`);
  t.ok(took >= LEASE_DURATION_MS - 8_000, 'not before the lease could have expired');
  await waitFor(
    () => follower.log(),
    () => obtained(follower),
    { timeoutMs: 5_000 },
  );
  t.equal((await lease())!.spec.leaseTransitions, 1, 'one transition');
  replicas.delete(first);
});

t.test('a leader stopped with SIGTERM releases the Lease: the next replica leads at once', async (t) => {
  const current = await holder();
  const leader = replicas.get(current)!;
  const next = await replica('replica-c');
  await waitFor(
    () => next.log(),
    () => /attempting to acquire leader lease/.test(next.log()),
    { timeoutMs: 10_000 },
  );
  const stopped = Date.now();
  t.equal(await leader.stop(), 0);
  replicas.delete(current);
  t.match(leader.log(), new RegExp(`released leader lease mesh-system/${ELECTION}`));
  await waitFor(
    () => next.log(),
    async () => (await holder()) === 'replica-c',
    { timeoutMs: 10_000 },
  );
  t.ok(Date.now() - stopped < 5_000, `replica-c leads ${Date.now() - stopped}ms after the leader stopped`);
});

t.test('ENABLE_LEADER_ELECTION=false: a single daemon leads without a Lease', async (t) => {
  const before = (await lease())!.metadata.resourceVersion;
  const solo = await replica('solo', { ENABLE_LEADER_ELECTION: 'false' });
  t.match(solo.log(), new RegExp(`bypassing leader election: ${ELECTION}`));
  t.ok(obtained(solo), 'runs as leader');
  await solo.stop();
  replicas.delete('solo');
  t.equal((await lease())!.spec.holderIdentity, 'replica-c', 'the Lease is not touched');
  await waitFor(
    () => 'a renewal',
    async () => (await lease())!.metadata.resourceVersion !== before,
    { timeoutMs: 10_000 },
  );
  t.equal((await lease())!.spec.holderIdentity, 'replica-c', 'and its holder keeps renewing it');
});

t.test('the default revision takes the Lease from another revision', async (t) => {
  // replica-c runs the default revision; a canary replica made the default (revision tag) steals the lock.
  await kube.api.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: 'mesh-revision-tag-default', labels: { 'mesh.io/rev': 'canary', 'mesh.io/tag': 'default' } },
    webhooks: [],
  });
  const canary = await replica('canary-1', { REVISION: 'canary' });
  await waitFor(
    () => canary.log(),
    async () => (await holder()) === 'canary-1',
    { timeoutMs: 25_000 },
  );
  t.match(canary.log(), /default revision: canary/);
  t.match(canary.log(), /takes it over/);
  t.equal((await lease())!.metadata.annotations?.['leader.mesh.io/holder-key'], 'canary');
  await waitFor(
    () => replicas.get('replica-c')!.log(),
    () => replicas.get('replica-c')!.log().includes(`leader election lock lost: ${ELECTION}`),
    { timeoutMs: 25_000 },
  );
  t.pass('the default-revision holder stepped down');
});
