// The generated manifests against a real API server (../shared/kube, no CRDs preinstalled): every object of the
// demo and ambient profiles is accepted, `meshctl install -y` applies each component with the installer's labels
// and reports the Deployment that cannot become ready (the test tier has no kubelet), and `uninstall` finds what
// the install left by those labels — listed on --dry-run, removed on --purge.
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { built, DIST, exec } from '../helpers/binary';
import { namespace, objectPath, startKube, type Obj, requireKube } from '../helpers/kube';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');

t.test('manifests on a real API server', async (t) => {
  const kube = await startKube(t, { crds: 'none' });
  t.teardown(() => kube.api.close());
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', ORCHCONFIG: kube.kubeconfig };
  const meshctl = (args: string[]) => exec(MESHCTL, args, { env });
  await kube.api.apply(namespace('mesh-system'));

  for (const profile of ['demo', 'ambient']) {
    const r = await meshctl(['manifest', 'generate', '--set', `profile=${profile}`]);
    t.equal(r.code, 0, r.stderr);
    const objs = r.stdout
      .split('\n---\n')
      .filter((d) => d.trim())
      .map((d) => parseYaml(d) as Obj);
    t.ok(objs.length > 40, `${profile}: ${objs.length} objects`);
    const refused: string[] = [];
    for (const o of objs) {
      try {
        await kube.api.apply(o);
      } catch (e) {
        refused.push(`${o.kind} ${o.metadata.name}: ${(e as Error).message}`);
      }
    }
    t.same(refused, [], `${profile}: every object accepted`);
  }
  const crd = await kube.api.get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.mesh.io');
  await waitFor(
    () => `CRD ${crd.metadata.name} not Established`,
    async () => {
      const c = await kube.api.get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.mesh.io');
      return (c.status?.conditions ?? []).some((x: Obj) => x.type === 'Established' && x.status === 'True');
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const cni = await kube.api.get('/apis/apps/v1/namespaces/mesh-system/daemonsets/mesh-cni-node');
  t.equal(cni.spec.template.spec.containers[0].name, 'install-cni');

  // --cluster-specific asks the server its version (Istio adjusts for GKE only): this one changes nothing.
  const [plain, specific] = await Promise.all([
    meshctl(['manifest', 'generate', '--set', 'profile=minimal']),
    meshctl(['manifest', 'generate', '--set', 'profile=minimal', '--cluster-specific']),
  ]);
  t.equal(specific.code, 0, specific.stderr);
  t.equal(specific.stdout, plain.stdout);

  // install: base is applied and reported; discovery's Deployment never becomes ready here (no kubelet).
  const inst = await meshctl(['install', '-y', '--readiness-timeout', '3s', '--set', 'profile=minimal']);
  t.equal(inst.code, 1, inst.stdout + inst.stderr);
  t.match(inst.stdout, /^✔ Mesh core installed$/m);
  t.match(inst.stdout, /✘ Meshd encountered an error: failed to wait for resource: resources not ready after 3s: Deployment\/mesh-system\/meshd/);
  t.match(inst.stderr, /Error: failed to install manifests:/);
  const d = await kube.api.get('/apis/apps/v1/namespaces/mesh-system/deployments/meshd');
  t.equal(d.metadata.labels['operator.mesh.io/component'], 'Pilot');
  t.equal(d.metadata.labels['mesh.io/rev'], 'default');
  t.equal(
    d.metadata.managedFields.some((f: Obj) => f.manager === 'mesh-operator'),
    true,
    'server-side applied by the installer',
  );
  const vs = await kube.api.get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.mesh.io');
  t.equal(vs.metadata.labels['operator.mesh.io/component'], 'Base');

  // uninstall --dry-run: lists what the revision's install left, removes nothing.
  const dry = await meshctl(['uninstall', '--revision', 'default', '--dry-run']);
  t.equal(dry.code, 0, dry.stderr);
  t.match(dry.stdout, /^The following resources will be pruned from the cluster:$/m);
  t.match(dry.stdout, /^Not pruning object apps\/v1, Kind=Deployment\/meshd\.mesh-system because of dry run\.$/m);
  t.notMatch(dry.stdout, /CustomResourceDefinition/, 'a revision uninstall keeps the shared base');
  t.ok(await kube.api.find('/apis/apps/v1/namespaces/mesh-system/deployments/meshd'), 'still there after the dry run');

  const none = await meshctl(['uninstall']);
  t.equal(none.code, 1);
  t.match(none.stderr, /at least one of the --revision \(or --set revision=<revision>\), --filename or --purge flags must be set/);

  // uninstall --purge: everything the installer labelled, CRDs included.
  const purge = await meshctl(['uninstall', '--purge', '-y']);
  t.equal(purge.code, 0, purge.stdout + purge.stderr);
  t.match(purge.stdout, /^All mesh resources will be pruned from the cluster$/m);
  t.match(purge.stdout, /Removed apps\/v1, Kind=Deployment\/meshd\.mesh-system\./);
  await waitFor(
    () => 'meshd Deployment or the mesh CRDs still present after uninstall --purge',
    async () =>
      !(await kube.api.find(objectPath({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'meshd', namespace: 'mesh-system' } }))) &&
      !(await kube.api.find('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.mesh.io')),
    { timeoutMs: 60_000, intervalMs: 50 },
  );
});

t.test('values.base.gatewayApiCRDs installs the Gateway API v1.3.0 CRDs with the mesh, and purge takes them', async (t) => {
  const kube = await startKube(t, { crds: 'none' });
  t.teardown(() => kube.api.close());
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', ORCHCONFIG: kube.kubeconfig };
  const meshctl = (args: string[]) => exec(MESHCTL, args, { env });
  await kube.api.apply(namespace('mesh-system'));
  const inst = await meshctl([
    'install',
    '-y',
    '--readiness-timeout',
    '3s',
    '--set',
    'profile=minimal',
    '--set',
    'values.base.gatewayApiCRDs=standard',
  ]);
  t.match(inst.stdout, /^✔ Mesh core installed$/m, inst.stdout + inst.stderr);
  const gateways = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gateways.gateway.networking.k8s.io';
  await waitFor(
    () => 'the Gateway CRD not Established',
    async () => ((await kube.api.find(gateways))?.status?.conditions ?? []).some((x: Obj) => x.type === 'Established' && x.status === 'True'),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const crd = await kube.api.get(gateways);
  t.equal(crd.metadata.annotations['gateway.networking.k8s.io/bundle-version'], 'v1.3.0');
  t.equal(crd.metadata.annotations['gateway.networking.k8s.io/channel'], 'standard');
  t.equal(crd.metadata.labels['operator.mesh.io/component'], 'Base', 'owned by the installer like the mesh CRDs');
  t.notOk(
    await kube.api.find('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/tcproutes.gateway.networking.k8s.io'),
    'TCPRoute is experimental only',
  );
  await kube.api.apply({
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name: 'gw', namespace: 'mesh-system' },
    spec: { gatewayClassName: 'mesh', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] },
  });
  t.ok(await kube.api.find('/apis/gateway.networking.k8s.io/v1/namespaces/mesh-system/gateways/gw'), 'a Gateway is accepted by the API server');

  const purge = await meshctl(['uninstall', '--purge', '-y']);
  t.equal(purge.code, 0, purge.stdout + purge.stderr);
  await waitFor(
    () => 'the Gateway CRD still present after uninstall --purge',
    async () => !(await kube.api.find(gateways)),
    { timeoutMs: 60_000, intervalMs: 50 },
  );
});

t.test('install --verify reads every object back and judges the Deployments by their status', async (t) => {
  const kube = await startKube(t, { crds: 'none' });
  t.teardown(() => kube.api.close());
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', ORCHCONFIG: kube.kubeconfig };
  await kube.api.apply(namespace('mesh-system'));
  // No kubelet here: the test plays the Deployment controller's part once meshd exists, marking its rollout done.
  const meshd = '/apis/apps/v1/namespaces/mesh-system/deployments/meshd';
  let stop = false;
  const rollout = (async () => {
    while (!stop) {
      const d = await kube.api.find(meshd);
      if (d && !d.status?.readyReplicas) {
        const n = d.spec.replicas ?? 1;
        d.status = { replicas: n, updatedReplicas: n, readyReplicas: n, availableReplicas: n, observedGeneration: d.metadata.generation };
        await kube.api.request('PUT', `${meshd}/status`, d).catch(() => undefined);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  const r = await exec(MESHCTL, ['install', '-y', '--verify', '--readiness-timeout', '60s', '--set', 'profile=minimal'], { env });
  stop = true;
  await rollout;
  t.equal(r.code, 0, r.stdout + r.stderr);
  t.match(r.stdout, /✔ Installation complete\n\n\nVerifying installation:\n/);
  t.match(r.stdout, /^✔ Deployment: meshd\.mesh-system checked successfully$/m);
  t.match(r.stdout, /^✔ CustomResourceDefinition: virtualservices\.networking\.mesh\.io\.mesh-system checked successfully$/m);
  t.match(r.stdout, /^Checked \d+ custom resource definitions\nChecked 1 mesh Deployments\n✔ mesh is installed and verified successfully\n$/m);
  const crds = Number(/^Checked (\d+) custom resource definitions$/m.exec(r.stdout)?.[1]);
  const list = await kube.api.get('/apis/apiextensions.k8s.io/v1/customresourcedefinitions');
  t.equal(crds, list.items.length, 'every CRD the install made was checked');

  const dry = await exec(MESHCTL, ['install', '--dry-run', '--verify', '--set', 'profile=minimal'], { env });
  t.match(dry.stdout, /^Control plane health check is not applicable in dry-run mode$/m);
});
