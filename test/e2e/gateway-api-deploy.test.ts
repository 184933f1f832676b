// The built discovery daemon's Gateway API deployment controller against a real Kubernetes API server
// (../shared/kube, with its controller manager: owner-reference garbage collection works; no kubelet, so no pod
// runs). As Istio 1.26's pilot/pkg/config/kube/gateway/deploymentcontroller.go with the kube-gateway template:
// for a Gateway of class `mesh`, a ServiceAccount, Deployment (`pilot-agent proxy router`, the image from the
// injector's values) and Service (ports from listeners plus the status port, LoadBalancer unless the service-type
// annotation says otherwise) named `<gateway>-<class>`, owner-referenced to the Gateway and applied server-side by
// the field manager `mesh.io/gateway-controller`; updated when the Gateway changes, put back when deleted, removed
// with the Gateway; an object of that name the controller does not manage is left alone; a waypoint-class Gateway
// gets nothing; with two replicas only the holder of the per-revision `mesh-gateway-deployment-default` Lease writes.
import t from 'tap';
import { builtinInjectConfig } from '../../src/inject/config';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { applyGatewayApiCrds, type Kube, namespace, type Obj, service, startKube, requireKube } from '../helpers/kube';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'apps';
const G = 'gateway.networking.k8s.io';
const GWS = `/apis/${G}/v1/namespaces/${NS}/gateways`;
const LEASE = '/apis/coordination.k8s.io/v1/namespaces/mesh-system/leases/mesh-gateway-deployment-default';
const SA = `/api/v1/namespaces/${NS}/serviceaccounts`;
const DEPLOY = `/apis/apps/v1/namespaces/${NS}/deployments`;
const SVC = `/api/v1/namespaces/${NS}/services`;
const HUB = 'registry.example.com/mesh';

let kube: Kube;
const replicas: RunningDaemon[] = [];

t.before(async () => {
  kube = await startKube(t, { crds: 'none', controllerManager: true });
  await applyGatewayApiCrds(kube);
  for (const ns of ['mesh-system', NS]) await kube.api.create('/api/v1/namespaces', namespace(ns));
  // The injector's configuration, as the chart's ConfigMap holds it, with the images from another hub and tag.
  const builtin = builtinInjectConfig();
  const values = JSON.parse(builtin.valuesText) as Obj;
  values.global.hub = HUB;
  values.global.tag = '9.9.9';
  await kube.api.create('/api/v1/namespaces/mesh-system/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'mesh-sidecar-injector' },
    data: {
      config: JSON.stringify({ policy: 'enabled', defaultTemplates: ['sidecar'], templates: builtin.config.templates }),
      values: JSON.stringify(values),
    },
  });
  for (const name of ['replica-a', 'replica-b']) replicas.push(await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: name }));
});
t.teardown(async () => {
  for (const d of replicas) await d.stop();
  kube?.api.close();
});

async function until<T>(what: string, get: () => Promise<T | undefined>, ok: (v: T) => boolean = () => true, timeoutMs = 20_000): Promise<T> {
  let last: T | undefined;
  await waitFor(
    () => `${what}: ${JSON.stringify(last)}\n${replicas.map((r) => r.log()).join('\n')}`,
    async () => (last = await get()) !== undefined && ok(last),
    { timeoutMs },
  );
  return last!;
}

function gateway(name: string, cls: string, listeners: Obj[], annotations: Record<string, string> = {}): Obj {
  return { apiVersion: `${G}/v1`, kind: 'Gateway', metadata: { name, namespace: NS, annotations }, spec: { gatewayClassName: cls, listeners } };
}

t.test('deployment controller: objects created, updated, put back and removed with the Gateway', async (t) => {
  const gw = await kube.api.create(
    GWS,
    gateway('edge', 'mesh', [
      { name: 'http', port: 80, protocol: 'HTTP' },
      { name: 'web.secure', port: 443, protocol: 'HTTPS', tls: { certificateRefs: [{ name: 'edge-cert' }] } },
    ]),
  );
  const owner = { apiVersion: `${G}/v1beta1`, kind: 'Gateway', name: 'edge', uid: gw.metadata.uid };
  const managed = { [`${G}/gateway-name`]: 'edge', 'gateway.mesh.io/managed': 'mesh.io-gateway-controller' };

  const sa = await until('ServiceAccount edge-mesh', () => kube.api.find(`${SA}/edge-mesh`));
  t.same(sa.metadata.ownerReferences, [owner], 'owned by the Gateway');
  t.match(sa.metadata.labels, managed);

  const dep = await until('Deployment edge-mesh', () => kube.api.find(`${DEPLOY}/edge-mesh`));
  t.same(dep.metadata.ownerReferences, [owner]);
  t.match(dep.metadata.labels, managed);
  t.same(dep.spec.selector.matchLabels, { [`${G}/gateway-name`]: 'edge' });
  const pod = dep.spec.template;
  t.match(pod.metadata.labels, { ...managed, 'sidecar.mesh.io/inject': 'false', 'service.mesh.io/canonical-name': 'edge-mesh' });
  t.equal(pod.spec.serviceAccountName, 'edge-mesh');
  const proxy = pod.spec.containers[0];
  t.equal(proxy.name, 'mesh-proxy');
  t.equal(proxy.image, `${HUB}/proxyv2:9.9.9`, "the image from the injector's values (hub, proxy image, tag)");
  t.same(
    proxy.args.slice(0, 4),
    ['proxy', 'router', '--domain', '$(POD_NAMESPACE).svc.cluster.local'],
    'our executable as `pilot-agent proxy router`',
  );
  t.match(
    proxy.env.find((e: Obj) => e.name === 'MESH_META_OWNER'),
    { value: `kubernetes://apis/apps/v1/namespaces/${NS}/deployments/edge-mesh` },
  );
  t.ok(
    (dep.metadata.managedFields as Obj[]).some((f) => f.manager === 'mesh.io/gateway-controller' && f.operation === 'Apply'),
    'applied server-side by the controller as field manager',
  );

  const svc = await until('Service edge-mesh', () => kube.api.find(`${SVC}/edge-mesh`));
  t.same(svc.metadata.ownerReferences, [owner]);
  t.equal(svc.spec.type, 'LoadBalancer', "the class's default service type");
  t.same(
    svc.spec.ports.map((p: Obj) => [p.name, p.port, p.appProtocol, p.protocol]),
    [
      ['status-port', 15021, 'tcp', 'TCP'],
      ['http', 80, 'http', 'TCP'],
      ['web-secure', 443, 'https', 'TCP'],
    ],
    "Istio's extractServicePorts: status port first, dots in listener names made dashes",
  );
  t.same(svc.spec.selector, { [`${G}/gateway-name`]: 'edge' });

  // Only the holder of the per-revision Lease reconciles.
  const holder = (await kube.api.get(LEASE)).spec.holderIdentity as string;
  const [a, b] = replicas;
  const leader = holder === 'replica-a' ? a! : b!;
  const follower = leader === a ? b! : a!;
  t.match(leader.log(), /reconciling gateway apps\/edge/);
  t.notMatch(follower.log(), /reconciling gateway/, 'the replica that does not hold the Lease deploys nothing');

  // A Gateway change: a new listener port and a ClusterIP Service by annotation.
  await kube.api.merge(`${GWS}/edge`, {
    metadata: { annotations: { 'networking.mesh.io/service-type': 'ClusterIP' } },
    spec: {
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP' },
        { name: 'web.secure', port: 443, protocol: 'HTTPS', tls: { certificateRefs: [{ name: 'edge-cert' }] } },
        { name: 'admin', port: 8080, protocol: 'HTTP' },
      ],
    },
  });
  const updated = await until(
    'Service edge-mesh updated',
    () => kube.api.find(`${SVC}/edge-mesh`),
    (s) => s.spec.type === 'ClusterIP' && s.spec.ports.length === 4,
  );
  t.same(updated.spec.ports[3], { name: 'admin', port: 8080, appProtocol: 'http', protocol: 'TCP', targetPort: 8080 });

  // Deleted by someone: put back.
  await kube.api.delete(`${DEPLOY}/edge-mesh`);
  await until(
    'Deployment edge-mesh put back',
    () => kube.api.find(`${DEPLOY}/edge-mesh`),
    (d) => d.metadata.uid !== dep.metadata.uid,
  );
  t.pass('a deleted Deployment is made again');

  // Removed with the Gateway (the garbage collector follows the owner references).
  await kube.api.delete(`${GWS}/edge`);
  for (const p of [`${SA}/edge-mesh`, `${DEPLOY}/edge-mesh`, `${SVC}/edge-mesh`])
    await until(
      `${p} gone`,
      async () => ((await kube.api.find(p)) === undefined ? true : undefined),
      () => true,
      60_000,
    );
  t.pass('ServiceAccount, Deployment and Service go with the Gateway');
});

t.test('objects the controller does not manage, and waypoints, are left alone', async (t) => {
  // A Service of the name the controller would use, made by someone else first.
  await kube.api.create(SVC, service(NS, 'own-mesh', { selector: { app: 'mine' } }));
  await kube.api.create(GWS, gateway('own', 'mesh', [{ name: 'http', port: 80, protocol: 'HTTP' }]));
  await until('Deployment own-mesh', () => kube.api.find(`${DEPLOY}/own-mesh`));
  const svc = (await kube.api.get(`${SVC}/own-mesh`)) as Obj;
  t.same(svc.spec.selector, { app: 'mine' }, 'a Service without the managed label is not overwritten');
  t.notOk(svc.metadata.ownerReferences, 'nor owned');

  await kube.api.create(GWS, gateway('waypoint', 'mesh-waypoint', [{ name: 'mesh', port: 15008, protocol: 'HBONE' }]));
  const wp = await until(
    'waypoint status',
    async () => (await kube.api.get(`${GWS}/waypoint`)).status,
    (s: Obj) => (s.conditions ?? []).some((c: Obj) => c.reason === 'Unsupported'),
  );
  t.match(
    wp.conditions.find((c: Obj) => c.type === 'Accepted'),
    { status: 'False', message: /no waypoint data plane yet/ },
  );
  for (const name of ['waypoint', 'waypoint-mesh-waypoint']) t.notOk(await kube.api.find(`${DEPLOY}/${name}`), `no Deployment ${name}`);
});
