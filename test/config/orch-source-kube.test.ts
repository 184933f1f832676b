// The orchestrator ConfigStore and registry against a real Kubernetes API server (../shared/kube,
// kube-apiserver v1.36 with Istio's CRDs; ours are applied during the run): CRD groups that appear,
// change their served versions, disappear and come back (Istio's CRD watcher); initial sync and
// conversion; events of registry objects and CRDs of both API groups; rejection of invalid configs;
// our group winning over Istio's; MESH_WATCH_NAMESPACE, discoverySelectors, paged lists,
// --orchApiQPS/--orchApiBurst and the user agent, as the API server's audit log saw them; Node
// locality; and the registry's join of EndpointSlices with Pods (an endpoint waiting for its Pod, an IP
// reused, conditions from the controller manager).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startOrchConfigStore, type OrchConfigStore, type OrchConfigStoreOptions } from '../../src/config/orch/source';
import { localityString } from '../../src/config/orch/resources';
import type { ConfigEvent } from '../../src/config/store';
import type { Config, Kind } from '../../src/config/types';
import { OrchestratorRegistry } from '../../src/discovery/registry/orchestrator';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { registry as metrics } from '../../src/lib/metrics';
import {
  applyCrds,
  endpointSlice,
  type Kube,
  KubeApiError,
  namespace,
  node,
  type Obj,
  pod,
  podStatus,
  service,
  startKube,
  requireKube,
} from '../helpers/kube';
import { waitFor } from '../helpers/wait';

requireKube();

const logSink = new MemorySink();
configure(parseLogOptions({}), { sinks: [logSink] });

let kube: Kube;
t.before(async () => {
  kube = await startKube(t, { crds: 'istio', audit: true });
});
t.teardown(() => kube?.api.close());

// -----------------------------------------------------------------------------------------------

interface Harness {
  store: OrchConfigStore;
  events: ConfigEvent[];
}

async function startStore(
  t: Test,
  o: Partial<Omit<OrchConfigStoreOptions, 'client'>> & { qps?: number; burst?: number; userAgent?: string } = {},
): Promise<Harness> {
  const store = await startOrchConfigStore({
    orchconfig: kube.kubeconfig,
    qps: -1,
    burst: 0,
    backoff: { initialMs: 50, maxMs: 500, jitter: 0.5 },
    ...o,
  });
  t.teardown(() => store.close());
  const events: ConfigEvent[] = [];
  store.subscribe((b) => events.push(...b));
  await store.whenSynced();
  return { store, events };
}

/** Retries a write while its CRD is not served yet (404 right after the CRD is created). */
async function whenServed<T>(write: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return await write();
    } catch (e) {
      if (!(e instanceof KubeApiError && e.status === 404) || Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

function logSince(mark: number): string[] {
  const text = logSink.text.slice(mark);
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  const m = metrics.getSingleMetric(name);
  if (!m) return 0;
  const { values } = await m.get();
  const keys = Object.keys(labels);
  return values.filter((x) => keys.every((k) => x.labels[k] === labels[k])).reduce((n, x) => n + x.value, 0);
}

function eventsFor(events: readonly ConfigEvent[], kind: Kind, name: string): string[] {
  return events.filter((e) => e.config.kind === kind && e.config.meta.name === name).map((e) => e.type);
}

function names(cs: readonly Config[]): string[] {
  return cs.map((c) => `${c.meta.namespace}/${c.meta.name}`).sort();
}

const ns = async (name: string, labels: Record<string, string> = {}) => kube.api.create('/api/v1/namespaces', namespace(name, labels));
const createSvc = (n: string, name: string, o: Parameters<typeof service>[2] = {}) =>
  kube.api.create(`/api/v1/namespaces/${n}/services`, service(n, name, o));

async function createPod(
  n: string,
  name: string,
  ip: string | undefined,
  o: Parameters<typeof pod>[2] & { ready?: boolean; phase?: string } = {},
): Promise<void> {
  // The ServiceAccount admission plugin refuses a Pod whose ServiceAccount does not exist.
  if (o.serviceAccount)
    await kube.api
      .create(`/api/v1/namespaces/${n}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: o.serviceAccount } })
      .catch(() => undefined);
  await kube.api.create(`/api/v1/namespaces/${n}/pods`, pod(n, name, o));
  if (ip) await kube.api.merge(`/api/v1/namespaces/${n}/pods/${name}`, podStatus(ip, o.ready ?? true, o.phase), 'status');
}

const vs = (n: string, name: string, hosts: string[], group = 'networking.istio.io'): Obj => ({
  apiVersion: `${group}/v1`,
  kind: 'VirtualService',
  metadata: { name, namespace: n },
  spec: { hosts, http: [{ route: [{ destination: { host: 'reviews.default.svc.cluster.local' } }] }] },
});

const dr = (n: string, name: string, host: string, group = 'networking.mesh.io'): Obj => ({
  apiVersion: `${group}/v1`,
  kind: 'DestinationRule',
  metadata: { name, namespace: n },
  spec: { host, subsets: [{ name: 'v1', labels: { version: 'v1' } }] },
});

const collection = (o: Obj) => {
  const [group, version] = (o.apiVersion as string).split('/');
  const plural = `${(o.kind as string).toLowerCase()}s`;
  return `/apis/${group}/${version}/namespaces/${o.metadata.namespace}/${plural}`;
};

interface AuditEvent {
  auditID: string;
  stage: string;
  requestURI: string;
  verb: string;
  userAgent?: string;
  requestReceivedTimestamp: string;
}

/** Requests the audit log recorded from one user agent, once each, in arrival order. */
function audited(userAgent: string): AuditEvent[] {
  const seen = new Map<string, AuditEvent>();
  for (const line of readFileSync(path.join(kube.dir, 'audit.log'), 'utf8').split('\n')) {
    if (!line) continue;
    const e = JSON.parse(line) as AuditEvent;
    if (e.userAgent === userAgent && !seen.has(e.auditID)) seen.set(e.auditID, e);
  }
  return [...seen.values()].sort((a, b) => Date.parse(a.requestReceivedTimestamp) - Date.parse(b.requestReceivedTimestamp));
}

/** Microsecond timestamps of the audit log, as milliseconds. */
function ms(ts: string): number {
  const m = /\.(\d+)Z$/.exec(ts);
  const frac = m ? Number(`0.${m[1]}`) * 1000 : 0;
  return Date.parse(ts.replace(/\.\d+Z$/, 'Z')) + frac;
}

// -----------------------------------------------------------------------------------------------
// CRDs

t.test('CRD groups that are not installed are logged once; applying them is picked up within seconds', async (t) => {
  const mark = logSink.text.length;
  const h = await startStore(t);
  await ns('crd-late');
  await new Promise((r) => setTimeout(r, 500));
  for (const g of ['networking.mesh.io', 'security.mesh.io']) {
    t.equal(logSince(mark).filter((l) => l.includes(`CRD group ${g} is not installed`)).length, 1, `${g} said once`);
  }
  t.equal(logSince(mark).filter((l) => l.includes('CRD group networking.istio.io')).length, 0, "Istio's group is there");

  await applyCrds(kube, 'mesh');
  const applied = Date.now();
  await whenServed(() => kube.api.create(collection(dr('crd-late', 'x', 'x')), dr('crd-late', 'x', 'x')));
  await waitFor('the DestinationRule of the CRD applied after start', () => !!h.store.get('DestinationRule', 'crd-late', 'x'), { timeoutMs: 10_000 });
  t.ok(Date.now() - applied < 10_000, `served ${Date.now() - applied}ms after the CRDs were applied`);
  t.ok(logSince(mark).some((l) => /DestinationRule is now served as networking\.mesh\.io\/v1 destinationrules: watching it/.test(l)));
  t.equal(logSince(mark).filter((l) => l.includes('CRD group networking.mesh.io is not installed')).length, 1, 'no repeat');
});

t.test('a CRD deleted while watched: its objects go; applied again, it is watched again', async (t) => {
  await ns('crd-gone');
  const h = await startStore(t);
  await kube.api.create(collection(dr('crd-gone', 'a', 'a')), dr('crd-gone', 'a', 'a'));
  await waitFor('the DestinationRule', () => !!h.store.get('DestinationRule', 'crd-gone', 'a'), { timeoutMs: 15_000 });
  const mark = logSink.text.length;
  await kube.api.delete('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/destinationrules.networking.mesh.io');
  await waitFor('objects of the deleted CRD gone', () => h.store.get('DestinationRule', 'crd-gone', 'a') === undefined, { timeoutMs: 30_000 });
  t.same(eventsFor(h.events, 'DestinationRule', 'a'), ['add', 'delete']);
  await waitFor('the message', () => logSince(mark).some((l) => l.includes('DestinationRule is no longer served by CRD group networking.mesh.io')), {
    timeoutMs: 30_000,
  });
  t.ok(logSince(mark).some((l) => l.includes('CRD group networking.mesh.io does not serve DestinationRule: skipped')));
  await applyCrds(kube, 'mesh');
  await whenServed(() => kube.api.create(collection(dr('crd-gone', 'b', 'b')), dr('crd-gone', 'b', 'b')));
  await waitFor('the CRD back', () => !!h.store.get('DestinationRule', 'crd-gone', 'b'), { timeoutMs: 10_000 });
});

t.test('a CRD that stops serving v1 is watched at the next version it serves', async (t) => {
  await ns('crd-ver');
  const h = await startStore(t);
  await kube.api.create(collection(vs('crd-ver', 'old', ['old'])), vs('crd-ver', 'old', ['old']));
  await waitFor('v1', () => h.store.get('VirtualService', 'crd-ver', 'old')?.apiVersion === 'networking.istio.io/v1', { timeoutMs: 15_000 });
  const crdPath = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/virtualservices.networking.istio.io';
  const setServed = async (served: boolean) => {
    const crd = await kube.api.get(crdPath);
    for (const v of crd.spec.versions as Obj[]) if (v.name === 'v1') v.served = served;
    await kube.api.request('PUT', crdPath, crd);
  };
  await setServed(false);
  t.teardown(() => setServed(true));
  await waitFor('served as v1beta1', () => h.store.get('VirtualService', 'crd-ver', 'old')?.apiVersion === 'networking.istio.io/v1beta1', {
    timeoutMs: 20_000,
  });
  t.same(h.store.get('VirtualService', 'crd-ver', 'old')!.spec.hosts, ['old'], 'the same object, read at v1beta1');
  await setServed(true);
  await waitFor('back at v1', () => h.store.get('VirtualService', 'crd-ver', 'old')?.apiVersion === 'networking.istio.io/v1', { timeoutMs: 20_000 });
});

// -----------------------------------------------------------------------------------------------
// Objects

t.test('initial sync: every collection listed, objects converted as the file source does', async (t) => {
  await ns('sync', { team: 'sync' });
  await createSvc('sync', 'reviews', { labels: { app: 'reviews' }, annotations: { note: 'n' } });
  await kube.api.create(
    '/apis/discovery.k8s.io/v1/namespaces/sync/endpointslices',
    endpointSlice('sync', 'reviews-abc', 'reviews', [{ ip: '10.1.0.5', pod: 'reviews-1' }]),
  );
  await kube.api.create(
    '/api/v1/nodes',
    node('sync-node', { 'topology.kubernetes.io/region': 'eu-west1', 'topology.kubernetes.io/zone': 'eu-west1-b' }),
  );
  await createPod('sync', 'reviews-1', '10.1.0.5', { labels: { app: 'reviews' }, nodeName: 'sync-node', serviceAccount: 'reviews' });
  await kube.api.create(collection(vs('sync', 'reviews-route', ['reviews'])), vs('sync', 'reviews-route', ['reviews']));
  await kube.api.create(collection(dr('sync', 'reviews-dr', 'reviews')), dr('sync', 'reviews-dr', 'reviews'));

  const h = await startStore(t);
  const s = h.store.get('Service', 'sync', 'reviews')!;
  t.equal(s.apiVersion, 'v1');
  t.same(s.meta.labels, { app: 'reviews' });
  t.same(s.meta.annotations, { note: 'n' });
  t.match(s.meta.resourceVersion, /^\d+$/);
  t.match(s.meta.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
  t.match(s.meta.uid, /^[0-9a-f-]{36}$/);
  t.same(s.spec.ports, [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }], 'the server defaulted protocol TCP');
  t.match(s.spec.clusterIP, /^10\.(9[6-9]|10\d|11[01])\./, 'a cluster IP from the service range 10.96.0.0/12');

  const es = h.store.get('EndpointSlice', 'sync', 'reviews-abc')!;
  t.equal(es.apiVersion, 'discovery.k8s.io/v1');
  t.equal(es.spec.addressType, 'IPv4');
  t.same(es.spec.endpoints[0]!.addresses, ['10.1.0.5']);
  t.equal(es.meta.labels['kubernetes.io/service-name'], 'reviews');

  const p = h.store.get('Pod', 'sync', 'reviews-1')!;
  t.same(p.status, { phase: 'Running', podIP: '10.1.0.5', podIPs: [{ ip: '10.1.0.5' }], conditions: [{ type: 'Ready', status: 'True' }] });
  t.equal(p.spec.serviceAccountName, 'reviews');
  t.equal(p.spec.nodeName, 'sync-node');
  t.same(
    p.spec.containers,
    [{ name: 'app', ports: [{ containerPort: 8080, name: 'http', protocol: 'TCP' }] }],
    'the pod spec keeps only what registries read',
  );

  t.same(h.store.get('Namespace', '', 'sync')!.meta.labels, { team: 'sync', 'kubernetes.io/metadata.name': 'sync' });
  t.same(h.store.nodeLocality('sync-node'), { region: 'eu-west1', zone: 'eu-west1-b', subzone: '' });
  t.equal(h.store.nodeLocality('no-such-node'), undefined);

  const v = h.store.get('VirtualService', 'sync', 'reviews-route')!;
  t.equal(v.apiVersion, 'networking.istio.io/v1');
  t.same(v.spec.hosts, ['reviews']);
  t.equal(v.source, 'orchestrator:networking.istio.io/v1');
  t.equal(h.store.get('DestinationRule', 'sync', 'reviews-dr')!.apiVersion, 'networking.mesh.io/v1');
  t.ok(
    h.store.list('Service').some((c) => c.meta.name === 'kubernetes' && c.meta.namespace === 'default'),
    'the kubernetes Service',
  );
  t.same(
    [...new Set(h.events.filter((e) => e.config.meta.namespace === 'sync').map((e) => e.type))],
    ['add'],
    'the initial state arrives as add events',
  );
});

t.test('add, update and delete of registry objects and CRDs of both groups arrive as events', async (t) => {
  await ns('events');
  const h = await startStore(t);
  const regAdd = await metric('pilot_k8s_reg_events', { type: 'Services', event: 'add' });
  const cfgUpd = await metric('pilot_orch_cfg_events', { type: 'VirtualService', event: 'update' });
  const base = '/api/v1/namespaces/events';
  const steps: Array<[Kind, string, () => Promise<unknown>, (c: Config | undefined) => boolean]> = [
    ['Service', 'ratings', () => createSvc('events', 'ratings'), (c) => !!c],
    [
      'Service',
      'ratings',
      () => kube.api.merge(`${base}/services/ratings`, { spec: { ports: [{ name: 'http', port: 9080 }] } }),
      (c) => (c as Config<'Service'>)?.spec.ports?.[0]?.port === 9080,
    ],
    [
      'EndpointSlice',
      'ratings-x',
      () =>
        kube.api.create(
          '/apis/discovery.k8s.io/v1/namespaces/events/endpointslices',
          endpointSlice('events', 'ratings-x', 'ratings', [{ ip: '10.2.0.1' }]),
        ),
      (c) => !!c,
    ],
    [
      'EndpointSlice',
      'ratings-x',
      () => kube.api.merge('/apis/discovery.k8s.io/v1/namespaces/events/endpointslices/ratings-x', { endpoints: [{ addresses: ['10.2.0.2'] }] }),
      (c) => (c as Config<'EndpointSlice'>)?.spec.endpoints[0]?.addresses[0] === '10.2.0.2',
    ],
    ['Pod', 'ratings-1', () => createPod('events', 'ratings-1', '10.2.0.1'), (c) => c?.status?.podIP === '10.2.0.1'],
    [
      'Pod',
      'ratings-1',
      () => kube.api.merge(`${base}/pods/ratings-1`, { status: { phase: 'Succeeded' } }, 'status'),
      (c) => c?.status?.phase === 'Succeeded',
    ],
    [
      'VirtualService',
      'ratings',
      () => kube.api.create(collection(vs('events', 'ratings', ['ratings'])), vs('events', 'ratings', ['ratings'])),
      (c) => !!c,
    ],
    [
      'VirtualService',
      'ratings',
      () => kube.api.merge(`${collection(vs('events', 'x', []))}/ratings`, { spec: { hosts: ['ratings', 'ratings.example.com'] } }),
      (c) => (c as Config<'VirtualService'>)?.spec.hosts.length === 2,
    ],
    [
      'DestinationRule',
      'ratings',
      () => kube.api.create(collection(dr('events', 'ratings', 'ratings')), dr('events', 'ratings', 'ratings')),
      (c) => !!c,
    ],
    [
      'DestinationRule',
      'ratings',
      () => kube.api.merge(`${collection(dr('events', 'x', ''))}/ratings`, { spec: { host: 'ratings.events.svc.cluster.local' } }),
      (c) => (c as Config<'DestinationRule'>)?.spec.host === 'ratings.events.svc.cluster.local',
    ],
  ];
  for (const [kind, name, act, done] of steps) {
    await act();
    await waitFor(`${kind} ${name} change`, () => done(h.store.get(kind, 'events', name)), { timeoutMs: 15_000 });
  }
  for (const [kind, name, p] of [
    ['Service', 'ratings', `${base}/services/ratings`],
    ['EndpointSlice', 'ratings-x', '/apis/discovery.k8s.io/v1/namespaces/events/endpointslices/ratings-x'],
    ['Pod', 'ratings-1', `${base}/pods/ratings-1`],
    ['VirtualService', 'ratings', `${collection(vs('events', 'x', []))}/ratings`],
    ['DestinationRule', 'ratings', `${collection(dr('events', 'x', ''))}/ratings`],
  ] as const) {
    await kube.api.delete(p, kind === 'Pod' ? '?gracePeriodSeconds=0' : '');
    await waitFor(`${kind} ${name} deleted`, () => h.store.get(kind, 'events', name) === undefined, { timeoutMs: 15_000 });
    t.same(
      eventsFor(h.events, kind, name).filter((e, i, a) => i === 0 || e !== a[i - 1]),
      ['add', 'update', 'delete'],
      `${kind}: add, update, delete`,
    );
  }
  const upd = h.events.find((e) => e.type === 'update' && e.config.kind === 'VirtualService')!;
  t.same((upd.old as Config<'VirtualService'>).spec.hosts, ['ratings'], 'an update carries the previous version');
  const del = h.events.find((e) => e.type === 'delete' && e.config.kind === 'DestinationRule')!;
  t.equal((del.config as Config<'DestinationRule'>).spec.host, 'ratings.events.svc.cluster.local', 'a delete carries the last version');
  t.equal((await metric('pilot_k8s_reg_events', { type: 'Services', event: 'add' })) - regAdd, 1, 'pilot_k8s_reg_events{type=Services,event=add}');
  t.equal(
    (await metric('pilot_orch_cfg_events', { type: 'VirtualService', event: 'update' })) - cfgUpd,
    1,
    'pilot_orch_cfg_events{type=VirtualService,event=update}',
  );
});

t.test('an invalid VirtualService is rejected, counted and logged; the previous version stays', async (t) => {
  await ns('invalid');
  const h = await startStore(t);
  const p = collection(vs('invalid', 'x', []));
  await kube.api.create(p, vs('invalid', 'reviews', ['reviews']));
  await waitFor('the valid VirtualService', () => !!h.store.get('VirtualService', 'invalid', 'reviews'), { timeoutMs: 15_000 });
  const before = await metric('pilot_total_rejected_configs', { type: 'virtualservice', name: 'invalid/reviews' });
  const mark = logSink.text.length;
  // Istio: "wildcard host * is not allowed for virtual services bound to the mesh gateway".
  await kube.api.merge(`${p}/reviews`, { spec: { hosts: ['*'] } });
  await waitFor(
    'the rejection counted',
    async () => (await metric('pilot_total_rejected_configs', { type: 'virtualservice', name: 'invalid/reviews' })) === before + 1,
    { timeoutMs: 15_000 },
  );
  t.same(h.store.get('VirtualService', 'invalid', 'reviews')!.spec.hosts, ['reviews'], 'the last good version serves');
  t.match(
    logSince(mark).find((l) => l.includes('rejected orchestrator:'))!,
    /\twarn\tvalidation\trejected orchestrator:networking\.istio\.io\/v1 VirtualService\/invalid\/reviews: spec\.hosts\[0\]: wildcard host \* is not allowed for virtual services bound to the mesh gateway \(the previous version stays\)$/,
  );
  await kube.api.merge(`${p}/reviews`, { spec: { hosts: ['reviews', 'reviews.example.com'] } });
  await waitFor('the fix', () => h.store.get('VirtualService', 'invalid', 'reviews')!.spec.hosts.length === 2, { timeoutMs: 15_000 });
  t.same(eventsFor(h.events, 'VirtualService', 'reviews'), ['add', 'update']);
});

t.test("the same name in our group and Istio's: ours is served, Istio's takes over when ours goes", async (t) => {
  await ns('both');
  const h = await startStore(t);
  const istio = vs('both', 'shared', ['from-istio'], 'networking.istio.io');
  const mesh = vs('both', 'shared', ['from-mesh'], 'networking.mesh.io');
  await kube.api.create(collection(istio), istio);
  await waitFor("Istio's", () => !!h.store.get('VirtualService', 'both', 'shared'), { timeoutMs: 15_000 });
  await kube.api.create(collection(mesh), mesh);
  await waitFor('ours wins', () => h.store.get('VirtualService', 'both', 'shared')?.apiVersion === 'networking.mesh.io/v1', { timeoutMs: 15_000 });
  await kube.api.delete(`${collection(mesh)}/shared`);
  await waitFor("Istio's back", () => h.store.get('VirtualService', 'both', 'shared')?.apiVersion === 'networking.istio.io/v1', {
    timeoutMs: 15_000,
  });
  t.same(eventsFor(h.events, 'VirtualService', 'shared'), ['add', 'update', 'update']);
});

// -----------------------------------------------------------------------------------------------
// Scope, pages, throttling, user agent (as the audit log saw them)

t.test("Secrets are read with Istio's field selector: Helm release records and service-account tokens never arrive", async (t) => {
  await ns('secrets');
  const secret = (name: string, type: string, data: Record<string, string>): Obj => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: 'secrets',
      ...(type === 'kubernetes.io/service-account-token' ? { annotations: { 'kubernetes.io/service-account.name': 'default' } } : {}),
    },
    type,
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });
  await kube.api
    .create('/api/v1/namespaces/secrets/serviceaccounts', {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: 'secrets' },
    })
    .catch(() => undefined);
  for (const [name, type, data] of [
    ['opaque', 'Opaque', { key: 'v' }],
    ['tls', 'kubernetes.io/tls', { 'tls.crt': 'c', 'tls.key': 'k' }],
    ['sh.helm.release.v1.app.v1', 'helm.sh/release.v1', { release: 'r' }],
    ['sa-token', 'kubernetes.io/service-account-token', {}],
  ] as const) {
    await kube.api.create('/api/v1/namespaces/secrets/secrets', secret(name, type, data));
  }
  const ua = 'secret-selector-test/1';
  const h = await startStore(t, { userAgent: ua });
  await waitFor('the TLS Secret', () => !!h.store.get('Secret', 'secrets', 'tls'), { timeoutMs: 15_000 });
  t.same(
    names(h.store.list('Secret').filter((c) => c.meta.namespace === 'secrets')),
    ['secrets/opaque', 'secrets/tls'],
    'only the Opaque and TLS Secrets',
  );
  // one that arrives while watched is filtered the same way
  await kube.api.create('/api/v1/namespaces/secrets/secrets', secret('sh.helm.release.v1.app.v2', 'helm.sh/release.v1', { release: 'r2' }));
  await kube.api.create('/api/v1/namespaces/secrets/secrets', secret('later', 'Opaque', { key: 'v' }));
  await waitFor('the Opaque Secret created while watched', () => !!h.store.get('Secret', 'secrets', 'later'), { timeoutMs: 15_000 });
  t.same(
    names(h.store.list('Secret').filter((c) => c.meta.namespace === 'secrets')),
    ['secrets/later', 'secrets/opaque', 'secrets/tls'],
    'the Helm record created while watched never arrived',
  );
  const secretCalls = audited(ua).filter((e) => e.requestURI.startsWith('/api/v1/secrets?'));
  t.ok(secretCalls.length >= 2, 'listed and watched');
  const selectors = new Set(secretCalls.map((e) => new URL(e.requestURI, 'https://x').searchParams.get('fieldSelector')));
  t.same([...selectors], ['type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token'], 'every list and watch carries the selector');
});

t.test('MESH_WATCH_NAMESPACE scopes every namespaced list and watch', async (t) => {
  for (const n of ['scoped', 'outside']) {
    await ns(n);
    await createSvc(n, 's');
    await kube.api.create(collection(vs(n, 'v', ['v'])), vs(n, 'v', ['v']));
  }
  const ua = 'watch-namespace-test/1';
  const h = await startStore(t, { watchNamespace: 'scoped', userAgent: ua });
  t.same(names(h.store.list('Service')), ['scoped/s']);
  t.same(names(h.store.list('VirtualService')), ['scoped/v']);
  t.same(names(h.store.list('Namespace')), ['/scoped']);
  const paths = audited(ua).map((e) => e.requestURI.split('?')[0]!);
  t.ok(paths.length > 10, `${paths.length} requests`);
  for (const p of new Set(paths)) {
    if (p === '/api/v1/nodes' || p === '/api/v1/namespaces' || p === '/apis/apiextensions.k8s.io/v1/customresourcedefinitions') continue;
    t.match(p, /\/namespaces\/scoped\//, `${p} is scoped`);
  }
  t.ok(
    audited(ua).some((e) => e.requestURI.startsWith('/api/v1/namespaces?') && e.requestURI.includes('fieldSelector=metadata.name%3Dscoped')),
    'namespaces narrowed to the one',
  );
});

t.test('lists are paged with limit and continue, and every page is read', async (t) => {
  await ns('paged');
  for (let i = 0; i < 5; i++) await createSvc('paged', `s${i}`);
  const ua = 'paging-test/1';
  const h = await startStore(t, { watchNamespace: 'paged', listPageSize: 2, userAgent: ua });
  t.same(names(h.store.list('Service')), ['paged/s0', 'paged/s1', 'paged/s2', 'paged/s3', 'paged/s4']);
  const lists = audited(ua).filter((e) => e.verb === 'list' && e.requestURI.startsWith('/api/v1/namespaces/paged/services?'));
  t.equal(lists.length, 3, 'three pages of at most two');
  t.ok(lists.every((e) => e.requestURI.includes('limit=2')));
  t.equal(lists.filter((e) => e.requestURI.includes('continue=')).length, 2, 'the later pages continue the first');
});

t.test('--orchApiQPS/--orchApiBurst space every request the source sends; each names the program', async (t) => {
  const qps = 10;
  const burst = 2;
  const ua = 'pilot-discovery/qps-test';
  await startStore(t, { qps, burst, userAgent: ua, watchNamespace: 'sync' });
  // Lists and watches of every collection, the CRDs' included (about 50 requests, 5 s at 10/s): wait
  // until the audit log stops growing.
  let last = -1;
  await waitFor(
    'the requests of the start',
    async () => {
      const n = audited(ua).length;
      if (n === last && n >= 20) return true;
      last = n;
      await new Promise((r) => setTimeout(r, 1500));
      return false;
    },
    { timeoutMs: 30_000 },
  );
  const times = audited(ua).map((e) => ms(e.requestReceivedTimestamp));
  // A token bucket of `burst` refilled at `qps`: any window [t_i, t_j] holds at most burst + (t_j - t_i) * qps
  // requests, as the server saw them. The server's clock sees a request after its TCP and TLS handshake
  // (every watch holds a connection of its own, so each opens one), which on a busy 2-core machine takes
  // up to a few hundred ms: that much jitter is allowed. Unthrottled, all of them arrive within ~1 s.
  const jitterMs = 400;
  let over = 0;
  for (let i = 0; i < times.length; i++) {
    for (let j = i + 1; j < times.length; j++) {
      if (j - i + 1 > burst + ((times[j]! - times[i]! + jitterMs) * qps) / 1000) over++;
    }
  }
  t.equal(over, 0, 'no window holds more requests than the bucket allows');
  const span = times[times.length - 1]! - times[0]!;
  t.ok(span >= ((times.length - burst) / qps) * 1000 - jitterMs, `${times.length} requests over ${span.toFixed(0)}ms at ${qps}/s`);
  t.ok(
    audited(ua).some((e) => e.verb === 'watch'),
    'watches are among the throttled requests',
  );
});

// -----------------------------------------------------------------------------------------------
// Nodes, discoverySelectors

t.test('node topology labels feed nodeLocality, and changes are announced', async (t) => {
  await kube.api.create('/api/v1/nodes', node('n-topo', { 'failure-domain.beta.kubernetes.io/region': 'old-region' }));
  const h = await startStore(t);
  t.same(h.store.nodeLocality('n-topo'), { region: 'old-region', zone: '', subzone: '' }, 'the legacy labels are read');
  const changed: string[] = [];
  h.store.subscribeNodes((n) => changed.push(n));
  await kube.api.merge('/api/v1/nodes/n-topo', {
    metadata: { labels: { 'topology.kubernetes.io/region': 'r', 'topology.kubernetes.io/zone': 'z', 'topology.istio.io/subzone': 's' } },
  });
  await waitFor('the locality update', () => h.store.nodeLocality('n-topo')?.zone === 'z', { timeoutMs: 15_000 });
  t.equal(localityString(h.store.nodeLocality('n-topo')), 'r/z/s', "Istio's region/zone/subzone");
  await kube.api.merge('/api/v1/nodes/n-topo', { metadata: { annotations: { unrelated: 'x' } } });
  await kube.api.delete('/api/v1/nodes/n-topo');
  await waitFor('the node gone', () => h.store.nodeLocality('n-topo') === undefined, { timeoutMs: 15_000 });
  t.same(changed, ['n-topo', 'n-topo'], 'a change that is not topology is not announced');
});

t.test('discoverySelectors: only selected namespaces are served, and relabelling follows', async (t) => {
  await ns('sel-a', { team: 'a' });
  await ns('sel-b');
  for (const n of ['sel-a', 'sel-b']) {
    await createSvc(n, 'web');
    await kube.api.create(collection(vs(n, 'v', ['v'])), vs(n, 'v', ['v']));
  }
  const h = await startStore(t, { discoverySelectors: [{ matchLabels: { team: 'a' } }] });
  const inSel = () => names(h.store.list('Service')).filter((n) => n.startsWith('sel-'));
  t.same(inSel(), ['sel-a/web']);
  t.same(
    names(h.store.list('VirtualService')).filter((n) => n.startsWith('sel-')),
    ['sel-a/v'],
    'configs too',
  );
  t.notOk(h.store.get('Namespace', '', 'sel-b'), 'the Namespace object itself too');
  t.ok(
    h.store.list('Service').every((s) => s.meta.namespace === 'sel-a'),
    'nothing of namespaces that are not selected',
  );

  await kube.api.merge('/api/v1/namespaces/sel-b', { metadata: { labels: { team: 'a' } } });
  await waitFor('sel-b selected after its label', () => inSel().join() === 'sel-a/web,sel-b/web', { timeoutMs: 15_000 });
  t.ok(h.store.get('VirtualService', 'sel-b', 'v'));
  await kube.api.merge('/api/v1/namespaces/sel-a', { metadata: { labels: { team: null } } });
  await waitFor('sel-a gone after losing its label', () => inSel().join() === 'sel-b/web', { timeoutMs: 15_000 });
  t.same(eventsFor(h.events, 'Service', 'web').sort(), ['add', 'add', 'delete'].sort());

  h.store.setDiscoverySelectors([{ matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }]);
  await waitFor('the selector changed: now sel-a only', () => inSel().join() === 'sel-a/web', { timeoutMs: 15_000 });
  h.store.setDiscoverySelectors([]);
  await waitFor('no selector: all', () => inSel().join() === 'sel-a/web,sel-b/web', { timeoutMs: 15_000 });
});

// -----------------------------------------------------------------------------------------------
// Registry: EndpointSlices joined with Pods and Nodes

async function registryOver(t: Test, namespaceName: string): Promise<{ h: Harness; reg: OrchestratorRegistry }> {
  const h = await startStore(t, { watchNamespace: namespaceName });
  const reg = new OrchestratorRegistry(h.store, { nodeLocality: (n) => localityString(h.store.nodeLocality(n)) || undefined });
  h.store.subscribeNodes((n) => reg.nodeChanged(n));
  t.teardown(() => reg.close());
  return { h, reg };
}

const epsOf = (reg: OrchestratorRegistry, host: string) =>
  reg
    .endpoints(host)
    .map((e) => `${e.address}:${e.port} ${e.healthStatus} ${e.workloadName ?? '-'} ${e.serviceAccount?.replace(/^.*\/sa\//, 'sa=') ?? '-'}`);

t.test('an endpoint whose Pod is not known yet waits for it', async (t) => {
  await ns('late');
  const { reg } = await registryOver(t, 'late');
  await createSvc('late', 'web');
  await kube.api.create(
    '/apis/discovery.k8s.io/v1/namespaces/late/endpointslices',
    endpointSlice('late', 'web-1', 'web', [{ ip: '10.6.0.1', pod: 'web-late' }]),
  );
  const host = 'web.late.svc.cluster.local';
  await waitFor('the endpoint noticed without its Pod', () => reg.endpointsWithoutPod().length === 1, { timeoutMs: 15_000 });
  t.same(epsOf(reg, host), [], 'not served without the Pod');
  t.equal(await metric('pilot_k8s_endpoints_pending_pod'), 1, 'pilot_k8s_endpoints_pending_pod');
  t.ok((await metric('pilot_k8s_endpoints_with_no_pods')) >= 1, 'pilot_k8s_endpoints_with_no_pods');
  await createPod('late', 'web-late', '10.6.0.1', { serviceAccount: 'web-sa' });
  await waitFor('served once the Pod arrived', () => epsOf(reg, host).length === 1, { timeoutMs: 15_000 });
  t.same(epsOf(reg, host), ['10.6.0.1:8080 Healthy web-late sa=web-sa']);
  t.equal(await metric('pilot_k8s_endpoints_pending_pod'), 0);
});

t.test('an endpoint without targetRef takes the ready Pod that has its IP now (IP reuse)', async (t) => {
  await ns('reuse');
  const { reg } = await registryOver(t, 'reuse');
  await createSvc('reuse', 'db');
  await createPod('reuse', 'db-old', '10.6.1.1', { serviceAccount: 'old' });
  await kube.api.create('/apis/discovery.k8s.io/v1/namespaces/reuse/endpointslices', endpointSlice('reuse', 'db-1', 'db', [{ ip: '10.6.1.1' }]));
  const host = 'db.reuse.svc.cluster.local';
  await waitFor('the endpoint', () => epsOf(reg, host).length > 0, { timeoutMs: 15_000 });
  t.same(epsOf(reg, host), ['10.6.1.1:8080 Healthy db-old sa=old'], 'the ready Pod with the IP');
  await kube.api.merge('/api/v1/namespaces/reuse/pods/db-old', { status: { phase: 'Succeeded' } }, 'status');
  await waitFor('a change after the Pod finished', () => epsOf(reg, host).join() !== '10.6.1.1:8080 Healthy db-old sa=old', { timeoutMs: 15_000 });
  t.same(epsOf(reg, host), ['10.6.1.1:8080 Healthy - -'], 'a finished Pod is no longer matched by its IP');
  await createPod('reuse', 'db-new', '10.6.1.1', { serviceAccount: 'new' });
  await waitFor('a change after the new Pod', () => epsOf(reg, host).join() !== '10.6.1.1:8080 Healthy - -', { timeoutMs: 15_000 });
  t.same(epsOf(reg, host), ['10.6.1.1:8080 Healthy db-new sa=new'], 'the new Pod with the same IP');
});

t.test('conditions from the controller manager: ready, not ready, terminating; locality from the Node', async (t) => {
  await ns('conds');
  const { reg } = await registryOver(t, 'conds');
  await kube.api.create('/api/v1/nodes', node('conds-node', { 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'z1' }));
  await createSvc('conds', 'api', { selector: { app: 'api' } });
  await createPod('conds', 'api-1', '10.6.2.1', { labels: { app: 'api' }, nodeName: 'conds-node' });
  await createPod('conds', 'api-2', '10.6.2.2', { labels: { app: 'api' }, nodeName: 'conds-node', ready: false });
  const host = 'api.conds.svc.cluster.local';
  const health = () =>
    reg
      .endpoints(host)
      .map((e) => `${e.address} ${e.healthStatus} ${e.locality}`)
      .sort()
      .join();
  await waitFor('both endpoints', () => reg.endpoints(host).length === 2, { timeoutMs: 30_000 });
  await waitFor('ready and not ready', () => health() === '10.6.2.1 Healthy r1/z1/,10.6.2.2 UnHealthy r1/z1/', { timeoutMs: 30_000 }).catch(
    () => undefined,
  );
  t.equal(health(), '10.6.2.1 Healthy r1/z1/,10.6.2.2 UnHealthy r1/z1/', "ready and not ready, with the Node's locality");
  // Deleting a Pod that has a Node waits for a kubelet that never comes: it stays terminating.
  await kube.api.delete('/api/v1/namespaces/conds/pods/api-1');
  await waitFor('terminating', () => health().startsWith('10.6.2.1 Terminating'), { timeoutMs: 30_000 }).catch(() => undefined);
  t.equal(health(), '10.6.2.1 Terminating r1/z1/,10.6.2.2 UnHealthy r1/z1/', 'the deleted Pod terminating');
  await kube.api.merge('/api/v1/nodes/conds-node', { metadata: { labels: { 'topology.istio.io/subzone': 's9' } } });
  await waitFor('the Node label reached the endpoints', () => reg.endpoints(host).every((e) => e.locality === 'r1/z1/s9'), {
    timeoutMs: 15_000,
  }).catch(() => undefined);
  t.same(
    reg.endpoints(host).map((e) => e.locality),
    ['r1/z1/s9', 'r1/z1/s9'],
    'the Node label reached the endpoints',
  );
  await kube.api.delete('/api/v1/namespaces/conds/pods/api-1', '?gracePeriodSeconds=0');
});
