// The built `pilot-discovery discovery --orchconfig` against a real Kubernetes API server
// (../shared/kube): edits made through the API (Service, Pod, Node, EndpointSlice from the controller
// manager, VirtualService) are served over xDS to a connected client; a VirtualService CRD deleted and
// applied again is watched again within seconds (the CRD watcher, not a timer); unready endpoints are
// sent only with PILOT_SEND_UNHEALTHY_ENDPOINTS and terminating ones never; meshConfig
// discoverySelectors (edited on disk) decide which namespaces are served; the API server's audit log
// names the program and version; the single executable prints no require() warning.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { applyCrds, type Kube, namespace, node, pod, podStatus, service, startKube, requireKube } from '../helpers/kube';
import { addressesOf, CDS, EDS, endpointsOf, RDS, sidecarNode, XdsWatch } from '../helpers/xds';
import type { RouteConfiguration } from '../../src/gen/envoy/config/route/v3/route_pb';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'shop';
const HOST = `web.${NS}.svc.cluster.local`;
const CLUSTER = `outbound|80||${HOST}`;
const VS_PATH = `/apis/networking.istio.io/v1/namespaces/${NS}/virtualservices`;

function virtualService(header: string) {
  return {
    apiVersion: 'networking.istio.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'web', namespace: NS },
    spec: {
      hosts: [HOST],
      http: [
        { match: [{ headers: { [header]: { exact: '1' } } }], route: [{ destination: { host: HOST, port: { number: 80 } } }] },
        { route: [{ destination: { host: HOST, port: { number: 80 } } }] },
      ],
    },
  };
}

/** Header names matched by the routes of the web virtual host in route config `80`. */
function headerMatches(rc: RouteConfiguration | undefined): string[] {
  const vh = rc?.virtualHosts.find((v) => v.domains.includes(HOST));
  return (vh?.routes ?? []).flatMap((r) => (r.match?.headers ?? []).map((h) => h.name)).sort();
}

let kube: Kube;
let daemon: RunningDaemon;

t.before(async () => {
  kube = await startKube(t, { audit: true });
  const api = kube.api;
  // The daemon's own namespace holds its CA Secret and Leases, as istio-system does.
  await api.create('/api/v1/namespaces', namespace('mesh-system'));
  await api.create('/api/v1/namespaces', namespace(NS));
  await api.create('/api/v1/nodes', node('node-a', { 'topology.kubernetes.io/region': 'eu', 'topology.kubernetes.io/zone': 'eu-1' }));
  await api.create(`/api/v1/namespaces/${NS}/services`, service(NS, 'web', { selector: { app: 'web' } }));
  await api.create(`/api/v1/namespaces/${NS}/pods`, pod(NS, 'web-1', { labels: { app: 'web' }, nodeName: 'node-a' }));
  await api.merge(`/api/v1/namespaces/${NS}/pods/web-1`, podStatus('10.1.0.1'), 'status');
  daemon = await startDaemon(['--orchconfig', kube.kubeconfig]);
});
t.teardown(async () => {
  await daemon?.stop();
  kube?.api.close();
});

t.test('Service, Pod, Node and the EndpointSlice the controller manager makes are served by EDS', async (t) => {
  const eds = new XdsWatch(daemon.grpc, sidecarNode(NS), EDS, [CLUSTER]);
  t.teardown(() => eds.close());
  const first = await eds.until((w) => endpointsOf(w.resources.get(CLUSTER))[0], 'the endpoint of web-1');
  t.same(first, { address: '10.1.0.1', port: 8080, health: 1, locality: 'eu/eu-1/' }, 'pod IP, target port, HEALTHY, locality from the Node');

  // A second ready pod joins; the first stops being ready and leaves EDS (unready endpoints are not sent).
  await kube.api.create(`/api/v1/namespaces/${NS}/pods`, pod(NS, 'web-2', { labels: { app: 'web' }, nodeName: 'node-a' }));
  await kube.api.merge(`/api/v1/namespaces/${NS}/pods/web-2`, podStatus('10.1.0.2'), 'status');
  await eds.until((w) => addressesOf(w.resources.get(CLUSTER)).join() === '10.1.0.1:8080,10.1.0.2:8080', 'both pods');
  await kube.api.merge(`/api/v1/namespaces/${NS}/pods/web-1`, podStatus('10.1.0.1', false), 'status');
  await eds.until((w) => addressesOf(w.resources.get(CLUSTER)).join() === '10.1.0.2:8080', 'web-1 gone once not ready');

  // The Node gets a subzone label (which the EndpointSlice does not carry): the locality follows the Node.
  await kube.api.merge('/api/v1/nodes/node-a', { metadata: { labels: { 'topology.istio.io/subzone': 'rack-7' } } });
  await eds.until(
    (w) => endpointsOf(w.resources.get(CLUSTER))[0]?.locality === 'eu/eu-1/rack-7',
    'locality eu/eu-1/rack-7 after the Node label edit',
  );
  t.pass('endpoint edits through the API server reached the xDS client');
});

t.test('a VirtualService created and edited in the API is served by RDS', async (t) => {
  const rds = new XdsWatch(daemon.grpc, sidecarNode(NS), RDS, ['80']);
  t.teardown(() => rds.close());
  await rds.until((w) => w.resources.get('80')?.virtualHosts.some((v) => v.domains.includes(HOST)), 'a virtual host for web');
  t.same(headerMatches(rds.resources.get('80')), [], 'no VirtualService yet: no header match');

  await kube.api.create(VS_PATH, virtualService('x-canary'));
  await rds.until((w) => headerMatches(w.resources.get('80')).includes('x-canary'), 'the x-canary match');
  await kube.api.merge(`${VS_PATH}/web`, { spec: { http: virtualService('x-beta').spec.http } });
  await rds.until((w) => headerMatches(w.resources.get('80')).join() === 'x-beta', 'the edited match x-beta');
  t.pass('create and edit served');
});

t.test('a VirtualService CRD deleted and applied again is served again within seconds', async (t) => {
  const rds = new XdsWatch(daemon.grpc, sidecarNode(NS), RDS, ['80']);
  t.teardown(() => rds.close());
  await rds.until((w) => headerMatches(w.resources.get('80')).join() === 'x-beta', 'the VirtualService of the previous test');

  await kube.api.delete('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.istio.io');
  // Deleting a CRD deletes its objects: the route goes with it.
  await rds.until((w) => headerMatches(w.resources.get('80')).length === 0, 'the route gone with its CRD', 30_000);
  // The CRD itself goes once its objects are deleted; the daemon then stops watching the kind.
  await waitFor(
    () => daemon.log(),
    () => /VirtualService is no longer served by CRD group networking\.istio\.io/.test(daemon.log()),
    { timeoutMs: 30_000 },
  );

  await applyCrds(kube, 'istio');
  const applied = Date.now();
  // The API answers 404 for a moment after the CRD is created, until it is Established.
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await kube.api.create(VS_PATH, virtualService('x-again'));
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  await rds.until((w) => headerMatches(w.resources.get('80')).join() === 'x-again', 'the VirtualService made after the CRD came back', 10_000);
  const took = Date.now() - applied;
  t.ok(took < 10_000, `served ${took}ms after the CRD was applied again (the CRD watcher, not a 60 s recheck)`);
});

t.test('PILOT_SEND_UNHEALTHY_ENDPOINTS sends unready endpoints as UNHEALTHY; terminating ones are never sent', async (t) => {
  const unhealthy = await startDaemon(['--orchconfig', kube.kubeconfig], { PILOT_SEND_UNHEALTHY_ENDPOINTS: 'true' });
  t.teardown(() => unhealthy.stop());
  const plain = new XdsWatch(daemon.grpc, sidecarNode(NS), EDS, [CLUSTER]);
  const all = new XdsWatch(unhealthy.grpc, sidecarNode(NS), EDS, [CLUSTER]);
  t.teardown(() => (plain.close(), all.close()));
  // web-1 was made unready by the first test; web-2 is ready.
  const health = (w: XdsWatch<typeof EDS>) =>
    endpointsOf(w.resources.get(CLUSTER))
      .map((e) => `${e.address} ${e.health}`)
      .join();
  await all.until((w) => health(w) === '10.1.0.1 2,10.1.0.2 1', 'web-1 UNHEALTHY (2) beside web-2 HEALTHY (1)');
  await plain.until((w) => health(w) === '10.1.0.2 1', 'only web-2 without the variable');
  // Deleting a Pod bound to a Node waits for a kubelet: it stays terminating (serving, not ready).
  await kube.api.delete(`/api/v1/namespaces/${NS}/pods/web-2`);
  await all.until((w) => health(w) === '10.1.0.1 2', 'the terminating endpoint left out even when sending unhealthy ones', 30_000);
  await plain.until((w) => health(w) === '', 'and without the variable', 30_000);
  const slices = await kube.api.get(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io/service-name%3Dweb`);
  const web2 = (slices.items as Array<{ endpoints?: Array<{ addresses: string[]; conditions: Record<string, boolean> }> }>)
    .flatMap((s) => s.endpoints ?? [])
    .find((e) => e.addresses[0] === '10.1.0.2');
  t.same(web2?.conditions, { ready: false, serving: true, terminating: true }, 'the API server says it is terminating');
  await kube.api.delete(`/api/v1/namespaces/${NS}/pods/web-2`, '?gracePeriodSeconds=0');
});

t.test('meshConfig discoverySelectors decide which namespaces are served, and an edit of the file applies', async (t) => {
  const dir = tempDir(t, 'mesh-config-');
  const file = path.join(dir, 'mesh');
  writeFileSync(file, 'discoverySelectors:\n- matchLabels: {mesh-discovery: "on"}\n');
  const selective = await startDaemon(['--orchconfig', kube.kubeconfig, '--meshConfig', file]);
  t.teardown(() => selective.stop());
  const cds = new XdsWatch(selective.grpc, sidecarNode(NS), CDS);
  t.teardown(() => cds.close());
  await cds.until((w) => w.resources.size > 0, 'clusters');
  t.notOk(cds.resources.has(CLUSTER), 'the namespace is not selected: its Service is not served');
  await kube.api.merge(`/api/v1/namespaces/${NS}`, { metadata: { labels: { 'mesh-discovery': 'on' } } });
  await cds.until((w) => w.resources.has(CLUSTER), 'the Service once its namespace is labelled');
  writeFileSync(file, 'discoverySelectors:\n- matchExpressions: [{key: mesh-discovery, operator: NotIn, values: ["on"]}]\n');
  await cds.until((w) => !w.resources.has(CLUSTER), 'the Service gone after the mesh config edit');
  t.match(selective.log(), /mesh config \S+ changed/);
});

t.test('requests name the program and version; no require() warning from the single executable', async (t) => {
  const version = (JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  const agents = new Map<string, number>();
  for (const line of readFileSync(path.join(kube.dir, 'audit.log'), 'utf8').split('\n')) {
    if (!line) continue;
    const ua = (JSON.parse(line) as { userAgent?: string }).userAgent ?? '';
    if (ua.startsWith('pilot-discovery') || ua.startsWith('kubernetes-client-javascript')) agents.set(ua, (agents.get(ua) ?? 0) + 1);
  }
  t.same([...agents.keys()], [`pilot-discovery/${version}`], "Istio's IstioUserAgent form, <program>/<version>, on every request");
  t.ok(agents.get(`pilot-discovery/${version}`)! > 20, `${agents.get(`pilot-discovery/${version}`)} requests`);
  t.notMatch(daemon.log(), /require\(\)|Warning:/, 'nothing but log lines on the way');
});
