// The built discovery daemon's Gateway API writers against a real Kubernetes API server (../shared/kube), two
// replicas and one Lease per controller:
// - the default GatewayClass `mesh` (controller mesh.io/gateway-controller) made by the GatewayClass controller;
// - status (Istio 1.26's gateway status writer, pilot/pkg/config/kube/gateway conditions.go/conversion.go): only the
//   holder of `mesh-gateway-status-leader` writes; GatewayClass Accepted, Gateway Accepted/Programmed with Istio's
//   reasons and messages, addresses from the gateway Service (hostname, then the load balancer's), listener
//   conditions and attachedRoutes, HTTPRoute parents; observedGeneration follows the spec and an unchanged
//   condition keeps its lastTransitionTime; an unchanged status is not written again; waypoint-class Gateways say
//   mesh has no waypoint data plane;
// - beyond Istio: while a connected router of the Gateway NACKs its configuration, the routes bound to it carry the
//   condition `mesh.io/ConfigRejected` on that parent, with the proxy's error; it goes when the NACK does.
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { applyGatewayApiCrds, type Kube, namespace, type Obj, service, startKube, requireKube } from '../helpers/kube';
import { waitFor, waitForValue } from '../helpers/wait';
import { LDS, XdsWatch } from '../helpers/xds';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'default';
const GW_API = '/apis/gateway.networking.k8s.io/v1';
const STATUS_LEASE = '/apis/coordination.k8s.io/v1/namespaces/mesh-system/leases/mesh-gateway-status-leader';
const G = 'gateway.networking.k8s.io';
const GW_HOST = `gw-mesh.${NS}.svc.cluster.local`;

let kube: Kube;
const replicas: RunningDaemon[] = [];

t.before(async () => {
  kube = await startKube(t, { crds: 'none', controllerManager: true });
  await applyGatewayApiCrds(kube);
  await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
  for (const name of ['replica-a', 'replica-b'])
    replicas.push(await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: name, PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER: 'false' }));
});
t.teardown(async () => {
  for (const d of replicas) await d.stop();
  kube?.api.close();
});

const path = (plural: string, name: string) =>
  plural === 'gatewayclasses' ? `${GW_API}/${plural}/${name}` : `${GW_API}/namespaces/${NS}/${plural}/${name}`;
/** Conditions without their times, which the test cannot know. */
const bare = (conds: Obj[] | undefined) => (conds ?? []).map(({ lastTransitionTime: _t, ...c }) => c);

async function statusOf(plural: string, name: string, ok: (s: Obj) => boolean, what: string): Promise<Obj> {
  let last: Obj = {};
  await waitFor(
    () => `${what}: ${JSON.stringify(last, null, 1)}\n${replicas.map((r) => r.log()).join('\n')}`,
    async () => ok((last = (await kube.api.get(path(plural, name))).status ?? {})),
    { timeoutMs: 20_000 },
  );
  return last;
}

const listenerOk = (gen: number) => [
  { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'No errors found', observedGeneration: gen },
  { type: 'Conflicted', status: 'False', reason: 'NoConflicts', message: 'No errors found', observedGeneration: gen },
  { type: 'Programmed', status: 'True', reason: 'Programmed', message: 'No errors found', observedGeneration: gen },
  { type: 'ResolvedRefs', status: 'True', reason: 'ResolvedRefs', message: 'No errors found', observedGeneration: gen },
];

t.test('status: only the leader writes, with Istio values', async (t) => {
  // The default GatewayClass, made by the GatewayClass controller (every replica; one create wins).
  const cls = await waitForValue(
    () => 'GatewayClass mesh',
    async () => kube.api.find(path('gatewayclasses', 'mesh')),
    { timeoutMs: 20_000 },
  );
  t.same(cls.spec, { controllerName: 'mesh.io/gateway-controller', description: 'The default mesh GatewayClass' });
  await kube.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'web', { selector: { app: 'web' } }));
  await kube.api.create(`${GW_API}/namespaces/${NS}/gateways`, {
    apiVersion: `${G}/v1`,
    kind: 'Gateway',
    metadata: { name: 'gw', namespace: NS },
    spec: { gatewayClassName: 'mesh', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] },
  });
  await kube.api.create(`${GW_API}/namespaces/${NS}/httproutes`, {
    apiVersion: `${G}/v1`,
    kind: 'HTTPRoute',
    metadata: { name: 'web', namespace: NS },
    spec: { parentRefs: [{ name: 'gw' }], rules: [{ backendRefs: [{ name: 'web', port: 80 }] }] },
  });
  await kube.api.create(`${GW_API}/namespaces/${NS}/httproutes`, {
    apiVersion: `${G}/v1`,
    kind: 'HTTPRoute',
    metadata: { name: 'broken', namespace: NS },
    spec: { parentRefs: [{ name: 'gw' }], hostnames: ['broken.example.com'], rules: [{ backendRefs: [{ name: 'nonexistent', port: 80 }] }] },
  });

  const gc = await statusOf(
    'gatewayclasses',
    'mesh',
    (s) => (s.conditions ?? []).some((c: Obj) => c.reason === 'Accepted' && c.status === 'True'),
    'GatewayClass accepted',
  );
  t.same(bare(gc.conditions), [
    { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Handled by mesh controller', observedGeneration: 1 },
  ]);

  const holder = (await kube.api.get(STATUS_LEASE)).spec.holderIdentity as string;
  const leader = replicas.find((_, i) => holder === ['replica-a', 'replica-b'][i])!;
  const follower = replicas.find((r) => r !== leader)!;
  t.ok(leader, `one replica holds the gateway status Lease (${holder})`);
  t.match(leader.log(), /Starting gateway status writer/);
  t.notMatch(follower.log(), /Starting gateway status writer/, 'the other replica writes no status');

  // No Service gw-mesh yet: accepted, not programmed (Istio's AddressNotUsable).
  let gw = await statusOf('gateways', 'gw', (s) => (s.listeners ?? [])[0]?.attachedRoutes === 2, 'Gateway status with 2 routes');
  t.same(bare(gw.conditions), [
    { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Resource accepted', observedGeneration: 1 },
    {
      type: 'Programmed',
      status: 'False',
      reason: 'AddressNotUsable',
      message: `Failed to assign to any requested addresses: hostname "${GW_HOST}" not found`,
      observedGeneration: 1,
    },
  ]);
  t.same(gw.listeners[0].supportedKinds, [
    { group: G, kind: 'HTTPRoute' },
    { group: G, kind: 'GRPCRoute' },
  ]);
  t.same(bare(gw.listeners[0].conditions), listenerOk(1));
  t.notOk(gw.addresses, 'no address before the Service exists');

  const web = await statusOf('httproutes', 'web', (s) => (s.parents ?? []).length > 0, 'HTTPRoute web parents');
  t.same(
    web.parents.map((p: Obj) => ({ ...p, conditions: bare(p.conditions) })),
    [
      {
        parentRef: { group: G, kind: 'Gateway', name: 'gw' },
        controllerName: 'mesh.io/gateway-controller',
        conditions: [
          { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'Route was valid', observedGeneration: 1 },
          { type: 'ResolvedRefs', status: 'True', reason: 'ResolvedRefs', message: 'All references resolved', observedGeneration: 1 },
        ],
      },
    ],
  );
  const broken = await statusOf('httproutes', 'broken', (s) => (s.parents ?? []).length > 0, 'HTTPRoute broken parents');
  t.same(bare(broken.parents[0].conditions)[1], {
    type: 'ResolvedRefs',
    status: 'False',
    reason: 'BackendNotFound',
    message: `backend(nonexistent.${NS}.svc.cluster.local) not found`,
    observedGeneration: 1,
  });

  // The Service the deployment controller would make: programmed, the internal hostname as address (class address type Hostname).
  const gwLabel = { [`${G}/gateway-name`]: 'gw' };
  await kube.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'gw-mesh', { selector: gwLabel, labels: gwLabel }));
  gw = await statusOf(
    'gateways',
    'gw',
    (s) => (s.conditions ?? []).some((c: Obj) => c.type === 'Programmed' && c.status === 'True'),
    'Gateway programmed',
  );
  t.same(bare(gw.conditions)[1], {
    type: 'Programmed',
    status: 'True',
    reason: 'Programmed',
    message: `Resource programmed, assigned to service(s) ${GW_HOST}:80`,
    observedGeneration: 1,
  });
  t.same(gw.addresses, [{ type: 'Hostname', value: GW_HOST }]);
  const acceptedAt = gw.conditions[0].lastTransitionTime as string;

  // Nothing changed: no write (the resourceVersion stays) even when another object's change makes the daemon look again.
  const rv = (await kube.api.get(path('gateways', 'gw'))).metadata.resourceVersion;
  await kube.api.merge(`/api/v1/namespaces/${NS}/services/web`, { metadata: { labels: { touched: 'yes' } } });
  await new Promise((r) => setTimeout(r, 1500));
  t.equal((await kube.api.get(path('gateways', 'gw'))).metadata.resourceVersion, rv, 'an unchanged status is not written');

  // A LoadBalancer Service with no address yet: Istio's "address pending", the address kept.
  await kube.api.merge(`/api/v1/namespaces/${NS}/services/gw-mesh`, { spec: { type: 'LoadBalancer' } });
  gw = await statusOf('gateways', 'gw', (s) => (s.conditions ?? []).some((c: Obj) => c.reason === 'AddressNotAssigned'), 'address pending');
  t.equal(
    gw.conditions[1].message,
    `Assigned to service(s) ${GW_HOST}:80, but failed to assign to all requested addresses: address pending for hostname "${GW_HOST}"`,
  );
  t.same(gw.addresses, [{ type: 'Hostname', value: GW_HOST }], 'once reported, an address is not removed');
  await kube.api.merge(`/api/v1/namespaces/${NS}/services/gw-mesh`, { status: { loadBalancer: { ingress: [{ ip: '203.0.113.7' }] } } }, 'status');
  gw = await statusOf('gateways', 'gw', (s) => (s.addresses ?? [])[0]?.value === '203.0.113.7', 'load balancer address');
  t.same(gw.addresses, [{ type: 'IPAddress', value: '203.0.113.7' }]);
  t.equal(gw.conditions[1].status, 'True');

  // A spec change: observedGeneration follows; an unchanged condition keeps its transition time.
  await kube.api.merge(path('gateways', 'gw'), {
    spec: {
      listeners: [
        { name: 'http', port: 80, protocol: 'HTTP' },
        { name: 'other', port: 8080, protocol: 'HTTP', hostname: 'other.example.com' },
      ],
    },
  });
  gw = await statusOf('gateways', 'gw', (s) => (s.conditions ?? [])[0]?.observedGeneration === 2 && (s.listeners ?? []).length === 2, 'generation 2');
  t.equal(gw.conditions[0].lastTransitionTime, acceptedAt, 'Accepted did not change status: its lastTransitionTime stays');
  t.same(
    gw.listeners.map((l: Obj) => [l.name, l.attachedRoutes]),
    [
      ['http', 2],
      ['other', 1],
    ],
    'the route with no hostnames attaches to the new listener too',
  );

  // A waypoint written by `meshctl waypoint apply`: said plainly to have no data plane.
  await kube.api.create(`${GW_API}/namespaces/${NS}/gateways`, {
    apiVersion: `${G}/v1`,
    kind: 'Gateway',
    metadata: { name: 'waypoint', namespace: NS },
    spec: { gatewayClassName: 'mesh-waypoint', listeners: [{ name: 'mesh', port: 15008, protocol: 'HBONE' }] },
  });
  const wp = await statusOf('gateways', 'waypoint', (s) => (s.conditions ?? []).some((c: Obj) => c.reason === 'Unsupported'), 'waypoint status');
  t.match(
    wp.conditions.find((c: Obj) => c.type === 'Programmed'),
    { status: 'False', message: /mesh has no waypoint data plane yet/ },
  );

  // A router of this Gateway (its gateway-name label) connected to the leader rejects its listeners.
  const router = {
    id: `router~10.200.0.20~gw-mesh-1.${NS}~${NS}.svc.cluster.local`,
    metadata: {
      NAMESPACE: NS,
      MESH_VERSION: '1.26.0',
      INSTANCE_IPS: '10.200.0.20',
      LABELS: { [`${G}/gateway-name`]: 'gw' },
      CLUSTER_ID: 'Orchestrator',
    },
  };
  const lds = new XdsWatch(leader.grpc, router, LDS, [], () => 'bogus listener: rejected by the test');
  const rejected = await statusOf(
    'httproutes',
    'web',
    (s) => (s.parents?.[0]?.conditions ?? []).some((c: Obj) => c.type === 'mesh.io/ConfigRejected'),
    'route says its configuration was rejected',
  );
  t.match(
    rejected.parents[0].conditions.find((c: Obj) => c.type === 'mesh.io/ConfigRejected'),
    {
      status: 'True',
      reason: 'Rejected',
      message: `proxy gw-mesh-1.${NS} rejected the Listener configuration generated for this route: bogus listener: rejected by the test`,
      observedGeneration: 1,
    },
  );
  t.same(
    bare(rejected.parents[0].conditions)
      .slice(0, 2)
      .map((c) => c.type),
    ['Accepted', 'ResolvedRefs'],
    "Istio's conditions stay as they were",
  );
  lds.close();
  await statusOf(
    'httproutes',
    'web',
    (s) => !(s.parents?.[0]?.conditions ?? []).some((c: Obj) => c.type === 'mesh.io/ConfigRejected'),
    'the condition gone with the NACK',
  );
  t.pass('the condition goes when no connected proxy rejects the configuration');
});
