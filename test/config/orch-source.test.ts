// The orchestrator ConfigStore against the API server double, through a real client configuration
// file: initial sync, watch events for registry objects and mesh CRDs of both API groups, rejection
// of invalid configs, watch resumption, 410 → relist, namespace scoping, missing CRD groups,
// request throttling and retry backoff.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadClientNode } from '../../src/config/orch/client';
import { localityString } from '../../src/config/orch/resources';
import type { OrchConfigStore, OrchConfigStoreOptions } from '../../src/config/orch/source';
import type * as SourceModule from '../../src/config/orch/source';
import type { ConfigEvent } from '../../src/config/store';
import type { Config, Kind } from '../../src/config/types';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { registry } from '../../src/lib/metrics';
import { FakeApiServer, type FakeApiServerOptions, type KubeObject, meshCrds } from '../helpers/apiserver';

const logSink = new MemorySink();
configure(parseLogOptions({}), { sinks: [logSink] });

// Where client-node cannot load, or the source's imports are missing, say so once instead of
// failing every case with the same stack. (Loaded inside a test: under tsx, a failing dynamic
// import during module evaluation kills the process instead of rejecting.)
let source: typeof SourceModule | undefined;
t.test('orchestrator ConfigStore', async (t) => {
  const problems: string[] = [];
  await loadClientNode().catch((e: Error) => problems.push(e.message));
  source = await import('../../src/config/orch/source').catch((e: Error) => {
    problems.push(`src/config/orch/source cannot be imported: ${e.message}`);
    return undefined;
  });
  if (problems.length > 0 || !source) t.fail(problems.join('\n'));
  else run(t, source);
});

// -----------------------------------------------------------------------------------------------

const ALL_GROUPS: Array<[string, string[]]> = [
  ['networking.mesh.io', ['v1']],
  ['networking.istio.io', ['v1', 'v1beta1', 'v1alpha3']],
  ['security.mesh.io', ['v1']],
  ['security.istio.io', ['v1', 'v1beta1']],
];

interface Harness {
  api: FakeApiServer;
  store: OrchConfigStore;
  batches: ConfigEvent[][];
  events: () => ConfigEvent[];
  orchconfig: string;
}

async function harness(
  t: Test,
  o: {
    api?: FakeApiServerOptions;
    groups?: Array<[string, string[]]>;
    seed?: (api: FakeApiServer) => void;
    store?: Partial<Omit<OrchConfigStoreOptions, 'client'>> & { qps?: number; burst?: number };
  } = {},
): Promise<Harness> {
  const { startOrchConfigStore } = source!;
  const api = await FakeApiServer.start(o.api);
  t.teardown(() => api.close());
  for (const [g, versions] of o.groups ?? ALL_GROUPS) api.install(...meshCrds(g, versions));
  o.seed?.(api);
  const dir = await mkdtemp(join(tmpdir(), 'orch-source-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const orchconfig = await api.writeKubeconfig(dir);
  const store = await startOrchConfigStore({
    orchconfig,
    qps: -1,
    burst: 0,
    backoff: { initialMs: 20, maxMs: 200, jitter: 0.5 },
    ...o.store,
  });
  t.teardown(() => store.close());
  const batches: ConfigEvent[][] = [];
  store.subscribe((b) => batches.push([...b]));
  return { api, store, batches, events: () => batches.flat(), orchconfig };
}

async function waitFor(cond: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function counter(name: string, labels: Record<string, string>): Promise<number> {
  const m = registry.getSingleMetric(name);
  if (!m) return 0;
  const { values } = await m.get();
  const keys = Object.keys(labels);
  const hit = values.find((x) => Object.keys(x.labels).length === keys.length && keys.every((k) => x.labels[k] === labels[k]));
  return hit?.value ?? 0;
}

function logSince(mark: number): string[] {
  const text = logSink.text.slice(mark);
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

function names(cs: readonly Config[]): string[] {
  return cs.map((c) => `${c.meta.namespace}/${c.meta.name}`).sort();
}

function eventsFor(h: Harness, kind: Kind, name: string): string[] {
  return h.events().filter((e) => e.config.kind === kind && e.config.meta.name === name).map((e) => e.type);
}

/** Writes a marker Service and waits for its event: everything the server sent before it has been handled. */
async function barrier(h: Harness, ns = 'default'): Promise<void> {
  const name = `barrier-${h.api.resourceVersion}`;
  h.api.create(svc(name, ns));
  await waitFor(() => h.store.get('Service', ns, name) !== undefined, `barrier ${name}`);
}

const svc = (name: string, ns = 'default', extra: Record<string, unknown> = {}): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: ns, labels: { app: name }, annotations: { note: 'n' } },
  spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }], clusterIP: '10.0.0.10' },
  ...extra,
});

const slice = (name: string, ip: string, ns = 'default'): KubeObject => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': 'reviews' } },
  addressType: 'IPv4',
  endpoints: [{ addresses: [ip], conditions: { ready: true }, nodeName: 'node-1', targetRef: { kind: 'Pod', name: 'reviews-1', namespace: ns } }],
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
});

const pod = (name: string, ip: string, ns = 'default'): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns, labels: { app: 'reviews' } },
  spec: {
    serviceAccountName: 'reviews',
    nodeName: 'node-1',
    containers: [{ name: 'app', image: 'reviews:1', ports: [{ containerPort: 8080 }], env: [{ name: 'A', value: 'B' }] }],
    volumes: [{ name: 'v', emptyDir: {} }],
  },
  status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: 'True' }], hostIP: '192.168.0.1' },
});

const vs = (name: string, hosts: string[], group = 'networking.istio.io/v1', ns = 'default'): KubeObject => ({
  apiVersion: group,
  kind: 'VirtualService',
  metadata: { name, namespace: ns },
  spec: { hosts, http: [{ route: [{ destination: { host: 'reviews.default.svc.cluster.local' } }] }] },
});

const dr = (name: string, host: string, group = 'networking.mesh.io/v1', ns = 'default'): KubeObject => ({
  apiVersion: group,
  kind: 'DestinationRule',
  metadata: { name, namespace: ns },
  spec: { host, subsets: [{ name: 'v1', labels: { version: 'v1' } }] },
});

const node = (name: string, labels: Record<string, string>): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, labels },
  status: { images: [{ names: ['big'], sizeBytes: 1 }] },
});

const namespace = (name: string): KubeObject => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { team: name } } });

// -----------------------------------------------------------------------------------------------

function run(t: Test, mod: typeof SourceModule): void {
  t.test('initial sync: every collection listed, objects converted as the file source does', async (t) => {
    const h = await harness(t, {
      seed: (api) => {
        api.create(namespace('default'));
        api.create(svc('reviews'));
        api.create(slice('reviews-abc', '10.1.0.5'));
        api.create(pod('reviews-1', '10.1.0.5'));
        api.create(node('node-1', { 'topology.kubernetes.io/region': 'eu-west1', 'topology.kubernetes.io/zone': 'eu-west1-b' }));
        api.create(vs('reviews-route', ['reviews']));
        api.create(dr('reviews-dr', 'reviews'));
      },
    });
    t.equal(h.store.hasSynced(), false, 'not synced before the lists are in');
    await h.store.whenSynced();
    t.equal(h.store.hasSynced(), true);

    const s = h.store.get('Service', 'default', 'reviews')!;
    t.ok(s, 'Service');
    t.equal(s.apiVersion, 'v1');
    t.same(s.meta.labels, { app: 'reviews' });
    t.same(s.meta.annotations, { note: 'n' });
    t.match(s.meta.resourceVersion, /^\d+$/);
    t.match(s.meta.creationTimestamp, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    t.match(s.meta.uid, /^[0-9a-f-]{36}$/);
    t.same(s.spec.ports, [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }]);

    const es = h.store.get('EndpointSlice', 'default', 'reviews-abc')!;
    t.equal(es.apiVersion, 'discovery.k8s.io/v1');
    t.equal(es.spec.addressType, 'IPv4');
    t.same(es.spec.endpoints[0]!.addresses, ['10.1.0.5']);
    t.equal(es.meta.labels['kubernetes.io/service-name'], 'reviews');

    const p = h.store.get('Pod', 'default', 'reviews-1')!;
    t.same(p.status, { phase: 'Running', podIP: '10.1.0.5', podIPs: [{ ip: '10.1.0.5' }], conditions: [{ type: 'Ready', status: 'True' }] });
    t.equal(p.spec.serviceAccountName, 'reviews');
    t.equal(p.spec.nodeName, 'node-1');
    t.same(p.spec.containers, [{ name: 'app', ports: [{ containerPort: 8080 }] }]);
    t.notOk('volumes' in (p.spec as object), 'pod spec keeps only what registries read');

    const n = h.store.get('Namespace', '', 'default')!;
    t.same(n.meta.labels, { team: 'default' });
    t.same(h.store.nodeLocality('node-1'), { region: 'eu-west1', zone: 'eu-west1-b', subzone: '' });
    t.equal(h.store.nodeLocality('node-2'), undefined);

    const v = h.store.get('VirtualService', 'default', 'reviews-route')!;
    t.equal(v.apiVersion, 'networking.istio.io/v1');
    t.same(v.spec.hosts, ['reviews']);
    t.equal(v.source, 'orchestrator:networking.istio.io/v1');
    const d = h.store.get('DestinationRule', 'default', 'reviews-dr')!;
    t.equal(d.apiVersion, 'networking.mesh.io/v1');
    t.equal(d.spec.subsets![0]!.name, 'v1');

    await waitFor(() => h.events().length >= 6, 'initial add events');
    t.same(
      h.events().map((e) => `${e.type} ${e.config.kind}`).sort(),
      ['add DestinationRule', 'add EndpointSlice', 'add Namespace', 'add Pod', 'add Service', 'add VirtualService'],
      'initial state arrives as add events',
    );
    t.same(h.store.list('Service').map((c) => c.meta.name), ['reviews']);
    t.same(h.store.list('Service', 'other'), []);
  });

  t.test('add, update and delete of registry objects and CRDs of both groups arrive as events', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    const regAdd = await counter('pilot_k8s_reg_events', { type: 'Services', event: 'add' });
    const cfgUpd = await counter('pilot_orch_cfg_events', { type: 'VirtualService', event: 'update' });

    const steps: Array<[Kind, string, () => void, (c: Config | undefined) => boolean]> = [
      ['Service', 'ratings', () => h.api.create(svc('ratings')), (c) => !!c],
      ['Service', 'ratings', () => h.api.patch('v1', 'Service', 'default', 'ratings', { spec: { ports: [{ port: 9080 }] } }), (c) => (c as Config<'Service'>)?.spec.ports?.[0]?.port === 9080],
      ['EndpointSlice', 'ratings-x', () => h.api.create(slice('ratings-x', '10.2.0.1')), (c) => !!c],
      ['EndpointSlice', 'ratings-x', () => h.api.patch('discovery.k8s.io/v1', 'EndpointSlice', 'default', 'ratings-x', { endpoints: [{ addresses: ['10.2.0.2'] }] }), (c) => (c as Config<'EndpointSlice'>)?.spec.endpoints[0]?.addresses[0] === '10.2.0.2'],
      ['Pod', 'ratings-1', () => h.api.create(pod('ratings-1', '10.2.0.1')), (c) => !!c],
      ['Pod', 'ratings-1', () => h.api.patch('v1', 'Pod', 'default', 'ratings-1', { status: { podIP: '10.2.0.9', phase: 'Succeeded' } }), (c) => c?.status?.podIP === '10.2.0.9'],
      ['VirtualService', 'ratings', () => h.api.create(vs('ratings', ['ratings'])), (c) => !!c],
      ['VirtualService', 'ratings', () => h.api.patch('networking.istio.io/v1', 'VirtualService', 'default', 'ratings', { spec: { hosts: ['ratings', 'ratings.example.com'] } }), (c) => (c as Config<'VirtualService'>)?.spec.hosts.length === 2],
      ['DestinationRule', 'ratings', () => h.api.create(dr('ratings', 'ratings')), (c) => !!c],
      ['DestinationRule', 'ratings', () => h.api.patch('networking.mesh.io/v1', 'DestinationRule', 'default', 'ratings', { spec: { host: 'ratings.default.svc.cluster.local' } }), (c) => (c as Config<'DestinationRule'>)?.spec.host === 'ratings.default.svc.cluster.local'],
    ];
    for (const [kind, name, act, done] of steps) {
      act();
      await waitFor(() => done(h.store.get(kind, 'default', name)), `${kind} ${name} change`);
    }
    for (const [kind, name, ns, apiVersion] of [
      ['Service', 'ratings', 'default', 'v1'],
      ['EndpointSlice', 'ratings-x', 'default', 'discovery.k8s.io/v1'],
      ['Pod', 'ratings-1', 'default', 'v1'],
      ['VirtualService', 'ratings', 'default', 'networking.istio.io/v1'],
      ['DestinationRule', 'ratings', 'default', 'networking.mesh.io/v1'],
    ] as const) {
      h.api.delete(apiVersion, kind, ns, name);
      await waitFor(() => h.store.get(kind, ns, name) === undefined, `${kind} ${name} deleted`);
      await waitFor(() => eventsFor(h, kind, name).length === 3, `${kind} ${name} events`);
      t.same(eventsFor(h, kind, name), ['add', 'update', 'delete'], `${kind}: add, update, delete`);
    }
    const upd = h.events().find((e) => e.type === 'update' && e.config.kind === 'VirtualService')!;
    t.same((upd.old as Config<'VirtualService'>).spec.hosts, ['ratings'], 'update carries the previous version');
    const del = h.events().find((e) => e.type === 'delete' && e.config.kind === 'DestinationRule')!;
    t.equal((del.config as Config<'DestinationRule'>).spec.host, 'ratings.default.svc.cluster.local', 'delete carries the last version');
    t.ok(h.batches.every((b) => b.length > 0), 'no empty batches');
    t.equal((await counter('pilot_k8s_reg_events', { type: 'Services', event: 'add' })) - regAdd, 1, 'pilot_k8s_reg_events{type=Services,event=add}');
    t.equal((await counter('pilot_orch_cfg_events', { type: 'VirtualService', event: 'update' })) - cfgUpd, 1, 'pilot_orch_cfg_events{type=VirtualService,event=update}');
    t.ok((await counter('pilot_k8s_reg_events', { type: 'EndpointSlice', event: 'delete' })) >= 1);
    t.ok((await counter('pilot_k8s_reg_events', { type: 'Pods', event: 'update' })) >= 1);
    t.ok((await counter('pilot_orch_cfg_events', { type: 'DestinationRule', event: 'delete' })) >= 1);
  });

  t.test('an invalid VirtualService is rejected, counted and logged; the previous version stays', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    h.api.create(vs('reviews', ['reviews']));
    await waitFor(() => !!h.store.get('VirtualService', 'default', 'reviews'), 'valid VirtualService');
    const rejected = () =>
      Promise.all([
        counter('pilot_total_rejected_configs', { type: 'virtualservice', name: 'default/reviews' }),
        counter('pilot_total_rejected_configs', { type: 'virtualservice', name: 'default/broken' }),
      ]);
    const before = await rejected();
    const mark = logSink.text.length;
    // Istio: "wildcard host * is not allowed for virtual services bound to the mesh gateway".
    h.api.patch('networking.istio.io/v1', 'VirtualService', 'default', 'reviews', { spec: { hosts: ['*'] } });
    h.api.create(vs('broken', ['*']));
    await barrier(h);
    t.same(h.store.get('VirtualService', 'default', 'reviews')!.spec.hosts, ['reviews'], 'the last good version serves');
    t.equal(h.store.get('VirtualService', 'default', 'broken'), undefined, 'an invalid new object is not stored');
    t.same(eventsFor(h, 'VirtualService', 'reviews'), ['add'], 'no event for the rejected update');
    const after = await rejected();
    t.same([after[0] - before[0], after[1] - before[1]], [1, 1], 'pilot_total_rejected_configs{type="virtualservice",name=<ns/name>}');
    const lines = logSince(mark).filter((l) => l.includes('rejected orchestrator:'));
    t.equal(lines.length, 2);
    t.match(
      lines.find((l) => l.includes('/reviews'))!,
      /\twarn\tvalidation\trejected orchestrator:networking\.istio\.io\/v1 VirtualService\/default\/reviews: spec\.hosts\[0\]: wildcard host \* is not allowed for virtual services bound to the mesh gateway \(the previous version stays\)$/,
    );
    t.notMatch(lines.find((l) => l.includes('/broken'))!, /previous version/);
    // Fixing it is an ordinary update from the last good version.
    h.api.patch('networking.istio.io/v1', 'VirtualService', 'default', 'reviews', { spec: { hosts: ['reviews', 'reviews.example.com'] } });
    await waitFor(() => eventsFor(h, 'VirtualService', 'reviews').length === 2, 'update after the fix');
    const fix = h.events().filter((e) => e.config.meta.name === 'reviews' && e.config.kind === 'VirtualService')[1]!;
    t.same((fix.old as Config<'VirtualService'>).spec.hosts, ['reviews']);
    // Deleting an object whose latest version was rejected removes the version that was served.
    h.api.patch('networking.istio.io/v1', 'VirtualService', 'default', 'reviews', { spec: { hosts: ['*'] } });
    h.api.delete('networking.istio.io/v1', 'VirtualService', 'default', 'reviews');
    await waitFor(() => h.store.get('VirtualService', 'default', 'reviews') === undefined, 'delete of a rejected object');
  });

  t.test('the same name in our group and Istio\'s: ours is served, Istio\'s takes over when ours goes', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    h.api.create(vs('shared', ['from-istio'], 'networking.istio.io/v1'));
    await waitFor(() => !!h.store.get('VirtualService', 'default', 'shared'), 'istio one');
    h.api.create(vs('shared', ['from-mesh'], 'networking.mesh.io/v1'));
    await waitFor(() => h.store.get('VirtualService', 'default', 'shared')?.apiVersion === 'networking.mesh.io/v1', 'mesh one wins');
    h.api.patch('networking.istio.io/v1', 'VirtualService', 'default', 'shared', { spec: { hosts: ['from-istio-2'] } });
    await barrier(h);
    t.same(h.store.get('VirtualService', 'default', 'shared')!.spec.hosts, ['from-mesh'], 'a change to the shadowed one changes nothing');
    h.api.delete('networking.mesh.io/v1', 'VirtualService', 'default', 'shared');
    await waitFor(() => h.store.get('VirtualService', 'default', 'shared')?.apiVersion === 'networking.istio.io/v1', 'istio one back');
    t.same(h.store.get('VirtualService', 'default', 'shared')!.spec.hosts, ['from-istio-2']);
    t.same(eventsFor(h, 'VirtualService', 'shared'), ['add', 'update', 'update']);
    t.equal(h.store.list('VirtualService').length, 1);
  });

  t.test('a watch the server ends is resumed from the last resourceVersion, without a relist', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    h.api.create(svc('a'));
    await waitFor(() => !!h.store.get('Service', 'default', 'a'), 'a');
    const lastSeen = Number(h.api.get('v1', 'Service', 'default', 'a')!.metadata.resourceVersion);
    const from = h.api.requests.length;
    h.api.closeWatches();
    h.api.create(svc('b'));
    await waitFor(() => !!h.store.get('Service', 'default', 'b'), 'b after the stream ended');
    const after = h.api.requests.slice(from).filter((r) => r.path === '/api/v1/services');
    t.same(after.filter((r) => !r.watch), [], 'no relist');
    const rewatch = after.find((r) => r.watch)!;
    t.ok(rewatch, 'watch re-established');
    t.ok(Number(rewatch.query.get('resourceVersion')) >= lastSeen, `resumed from ${rewatch.query.get('resourceVersion')} (last seen ${lastSeen})`);
    t.equal(rewatch.query.get('allowWatchBookmarks'), 'true', 'asks for bookmarks');
    t.match(rewatch.query.get('timeoutSeconds'), /^\d+$/);
    t.same(eventsFor(h, 'Service', 'a'), ['add']);
  });

  t.test('a bookmark keeps a quiet collection resumable after the history moved on', async (t) => {
    const h = await harness(t, { api: { historyLimit: 5 } });
    await h.store.whenSynced();
    for (let i = 0; i < 10; i++) h.api.create(pod(`p${i}`, `10.3.0.${i}`)); // pushes the services' resourceVersion out of history
    await waitFor(() => h.store.list('Pod').length === 10, 'pods');
    // The bookmark precedes the end of the stream on the same connection, so it is read first.
    h.api.sendBookmarks();
    const from = h.api.requests.length;
    h.api.closeWatches();
    h.api.create(svc('late'));
    await waitFor(() => !!h.store.get('Service', 'default', 'late'), 'service after reconnect');
    t.same(h.api.requests.slice(from).filter((r) => r.path === '/api/v1/services' && !r.watch), [], 'resumed from the bookmark: no 410, no relist');
  });

  for (const mode of ['error-event', 'http-410'] as const) {
    t.test(`410 Gone (${mode}) → relist, and the store converges, deletions in the gap included`, async (t) => {
      const h = await harness(t, {
        api: { expiredWatch: mode },
        seed: (api) => {
          for (const n of ['a', 'b', 'c']) api.create(svc(n));
          api.create(vs('gone-vs', ['x']));
        },
      });
      await h.store.whenSynced();
      await waitFor(() => h.events().length >= 4, 'initial events');
      h.api.holdWatches();
      h.api.closeWatches();
      h.api.delete('v1', 'Service', 'default', 'a');
      h.api.patch('v1', 'Service', 'default', 'b', { metadata: { labels: { changed: 'yes' } } });
      h.api.create(svc('d'));
      h.api.delete('networking.istio.io/v1', 'VirtualService', 'default', 'gone-vs');
      h.api.compact();
      const from = h.api.requests.length;
      h.api.releaseWatches();
      await waitFor(() => names(h.store.list('Service')).join() === 'default/b,default/c,default/d', 'services converge');
      await waitFor(() => h.store.get('VirtualService', 'default', 'gone-vs') === undefined, 'VirtualService removed');
      t.equal(h.store.get('Service', 'default', 'b')!.meta.labels.changed, 'yes');
      t.ok(h.api.requests.slice(from).some((r) => r.path === '/api/v1/services' && !r.watch), 'relisted');
      t.same(eventsFor(h, 'Service', 'a'), ['add', 'delete']);
      t.same(eventsFor(h, 'Service', 'b'), ['add', 'update']);
      t.same(eventsFor(h, 'Service', 'c'), ['add'], 'unchanged objects make no event');
      t.same(eventsFor(h, 'Service', 'd'), ['add']);
      // and it keeps watching afterwards
      h.api.create(svc('e'));
      await waitFor(() => !!h.store.get('Service', 'default', 'e'), 'watching after the relist');
    });
  }

  t.test('MESH_WATCH_NAMESPACE scopes every namespaced watch', async (t) => {
    const h = await harness(t, {
      store: { watchNamespace: 'ns1' },
      seed: (api) => {
        for (const ns of ['ns1', 'ns2']) {
          api.create(namespace(ns));
          api.create(svc('s', ns));
          api.create(pod('p', '10.0.0.1', ns));
          api.create(slice('e', '10.0.0.1', ns));
          api.create(vs('v', ['v'], 'networking.istio.io/v1', ns));
          api.create(dr('d', 'd', 'networking.mesh.io/v1', ns));
        }
        api.create(node('n', {}));
      },
    });
    await h.store.whenSynced();
    const seeded = { Service: 's', Pod: 'p', EndpointSlice: 'e', VirtualService: 'v', DestinationRule: 'd' } as const;
    for (const [kind, name] of Object.entries(seeded) as Array<[keyof typeof seeded, string]>) {
      t.same(names(h.store.list(kind)), [`ns1/${name}`], kind);
    }
    t.same(names(h.store.list('Namespace')), ['/ns1']);
    t.ok(h.store.nodeLocality('n'), 'nodes are cluster-wide');
    const paths = new Set(h.api.requests.filter((r) => !r.path.match(/^\/apis\/[^/]+(\/[^/]+)?$/)).map((r) => r.path));
    for (const p of paths) {
      if (p === '/api/v1/nodes' || p === '/api/v1/namespaces') continue;
      t.match(p, /\/namespaces\/ns1\//, `${p} is scoped`);
    }
    t.ok(h.api.requests.some((r) => r.path === '/api/v1/namespaces' && r.query.get('fieldSelector') === 'metadata.name=ns1'), 'namespaces narrowed');
    h.api.create(svc('late', 'ns2'));
    await barrier(h, 'ns1');
    t.equal(h.store.get('Service', 'ns2', 'late'), undefined);
  });

  t.test('a CRD group that is not installed is logged once and skipped; installing it later is picked up', async (t) => {
    const mark = logSink.text.length;
    const h = await harness(t, {
      groups: [['networking.istio.io', ['v1beta1', 'v1alpha3']]], // an older Istio: no v1
      store: { crdRecheckMs: 50 },
      seed: (api) => api.create(vs('old', ['old'], 'networking.istio.io/v1beta1')),
    });
    await h.store.whenSynced();
    t.equal(h.store.get('VirtualService', 'default', 'old')!.apiVersion, 'networking.istio.io/v1beta1', 'falls back to a served version');
    t.ok(h.api.requests.some((r) => r.path === '/apis/networking.istio.io/v1beta1/virtualservices'));
    // Let several rechecks happen, then count the messages.
    await waitFor(() => h.api.requests.filter((r) => r.path === '/apis/security.istio.io').length >= 4, 'rechecks');
    const lines = logSince(mark);
    for (const g of ['networking.mesh.io', 'security.mesh.io', 'security.istio.io']) {
      t.equal(lines.filter((l) => l.includes(`CRD group ${g} is not installed`)).length, 1, `${g} logged once`);
    }
    t.ok(h.store.missingCrds().some((m) => m.includes('security.istio.io')));
    h.api.install(...meshCrds('security.istio.io', ['v1', 'v1beta1']));
    h.api.create({
      apiVersion: 'security.istio.io/v1',
      kind: 'AuthorizationPolicy',
      metadata: { name: 'deny-all', namespace: 'default' },
      spec: {},
    });
    await waitFor(() => !!h.store.get('AuthorizationPolicy', 'default', 'deny-all'), 'AuthorizationPolicy after install');
    t.ok(logSince(mark).some((l) => /AuthorizationPolicy is now served as security\.istio\.io\/v1 authorizationpolicies/.test(l)));
    t.notOk(h.store.missingCrds().some((m) => m.includes('security.istio.io')));
  });

  t.test('a CRD uninstalled while watched: its objects go, it is looked for again', async (t) => {
    const h = await harness(t, { store: { crdRecheckMs: 50 }, seed: (api) => api.create(dr('x', 'x')) });
    await h.store.whenSynced();
    t.ok(h.store.get('DestinationRule', 'default', 'x'));
    h.api.uninstall('networking.mesh.io', 'destinationrules');
    await waitFor(() => h.store.get('DestinationRule', 'default', 'x') === undefined, 'objects of the removed CRD');
    t.ok(h.store.missingCrds().some((m) => m.includes('DestinationRule')));
    h.api.install(...meshCrds('networking.mesh.io'));
    h.api.create(dr('y', 'y'));
    await waitFor(() => !!h.store.get('DestinationRule', 'default', 'y'), 'CRD back');
  });

  t.test('--orchApiQPS/--orchApiBurst throttle the source\'s lists, watches and discovery', async (t) => {
    const qps = 10;
    const burst = 2;
    const started = performance.now();
    const h = await harness(t, { groups: [], store: { qps, burst, crdRecheckMs: 0 } });
    await h.store.whenSynced();
    await waitFor(() => h.api.openWatches().length === 5, 'the five registry watches');
    const times = h.api.requests.map((r) => r.at).filter((x) => x >= started).sort((a, b) => a - b);
    // 4 group discoveries + 5 lists + 5 watches at least.
    t.ok(times.length >= 14, `${times.length} requests`);
    for (let i = burst; i < times.length; i++) {
      const earliest = ((i + 1 - burst) / qps) * 1000;
      if (times[i]! - times[0]! < earliest - 30) t.fail(`request ${i} at +${(times[i]! - times[0]!).toFixed(0)}ms, before +${earliest}ms`);
    }
    const span = times[times.length - 1]! - times[0]!;
    t.ok(span >= ((times.length - burst) / qps) * 1000 - 30, `${times.length} requests spread over ${span.toFixed(0)}ms`);
    t.ok(h.api.requests.some((r) => r.watch), 'watches are among the throttled requests');
  });

  t.test('failed lists are retried with growing backoff until they succeed', async (t) => {
    const mark = logSink.text.length;
    const h = await harness(t, {
      api: {},
      store: { backoff: { initialMs: 40, maxMs: 2000, jitter: 0 } },
      seed: (api) => {
        api.failRequests(/^\/api\/v1\/services(\?|$)/, 500, 3, 'GET');
        api.create(svc('eventually'));
      },
    });
    await h.store.whenSynced();
    t.ok(h.store.get('Service', 'default', 'eventually'));
    const lists = h.api.requests.filter((r) => r.path === '/api/v1/services' && !r.watch).map((r) => r.at);
    t.equal(lists.length, 4, 'three failures, then success');
    const gaps = lists.slice(1).map((x, i) => x - lists[i]!);
    t.ok(gaps[0]! >= 35 && gaps[1]! >= 75 && gaps[2]! >= 155, `gaps ${gaps.map((g) => g.toFixed(0)).join(', ')}ms double`);
    t.equal(logSince(mark).filter((l) => /list\/watch \/api\/v1\/services failed: .*500.*retrying in/.test(l)).length, 3);
  });

  t.test('node topology labels feed nodeLocality, and changes are announced', async (t) => {
    const h = await harness(t, { seed: (api) => api.create(node('n1', { 'failure-domain.beta.kubernetes.io/region': 'old-region' })) });
    await h.store.whenSynced();
    t.same(h.store.nodeLocality('n1'), { region: 'old-region', zone: '', subzone: '' }, 'legacy labels are read');
    const changed: string[] = [];
    h.store.subscribeNodes((n) => changed.push(n));
    h.api.patch('v1', 'Node', undefined, 'n1', {
      metadata: { labels: { 'topology.kubernetes.io/region': 'r', 'topology.kubernetes.io/zone': 'z', 'topology.mesh.io/subzone': 's' } },
    });
    await waitFor(() => h.store.nodeLocality('n1')?.zone === 'z', 'locality update');
    t.same(h.store.nodeLocality('n1'), { region: 'r', zone: 'z', subzone: 's' });
    t.equal(localityString(h.store.nodeLocality('n1')), 'r/z/s', "Istio's region/zone/subzone");
    t.equal(localityString({ region: '', zone: '', subzone: '' }), '', 'no topology: no locality');
    h.api.delete('v1', 'Node', undefined, 'n1');
    await waitFor(() => h.store.nodeLocality('n1') === undefined, 'node gone');
    t.same(changed, ['n1', 'n1']);
  });

  t.test('close() stops every watch and rejects pending whenSynced', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    await waitFor(() => h.api.openWatches().length >= 5, 'watches open');
    await h.store.close();
    await waitFor(() => h.api.openWatches().length === 0, 'watches closed');
    h.api.failRequests(/^\/api\/v1\/pods$/, 500, 1000, 'GET'); // pods never list: it cannot sync
    const s2 = await mod.startOrchConfigStore({ orchconfig: h.orchconfig, qps: -1, burst: 0, backoff: { initialMs: 20, maxMs: 50 } });
    const pending = s2.whenSynced();
    await s2.close();
    await t.rejects(pending, /closed before it synced/);
  });
}
