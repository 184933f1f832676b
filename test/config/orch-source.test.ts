// The orchestrator ConfigStore against the API server double, for the faults a real API server does
// not produce on demand: a watch the server ends, bookmarks after history moved on, 410 Gone (as an
// event and as HTTP), failing lists and their backoff, close() during the initial sync. Everything
// else is shown against the real API server in orch-source-kube.test.ts.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { loadClientNode } from '../../src/config/orch/client';
import type { OrchConfigStore, OrchConfigStoreOptions } from '../../src/config/orch/source';
import type * as SourceModule from '../../src/config/orch/source';
import type { ConfigEvent } from '../../src/config/store';
import type { Config, Kind } from '../../src/config/types';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { registry } from '../../src/lib/metrics';
import { FakeApiServer, type FakeApiServerOptions, type KubeObject, meshCrds } from '../helpers/apiserver';
import { waitFor } from '../helpers/wait';

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
  return h
    .events()
    .filter((e) => e.config.kind === kind && e.config.meta.name === name)
    .map((e) => e.type);
}

/** Writes a marker Service and waits for its event: everything the server sent before it has been handled. */
async function barrier(h: Harness, ns = 'default'): Promise<void> {
  const name = `barrier-${h.api.resourceVersion}`;
  h.api.create(svc(name, ns));
  await waitFor(`barrier ${name}`, () => h.store.get('Service', ns, name) !== undefined, { timeoutMs: 15_000, intervalMs: 10 });
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
  t.test('a watch the server ends is resumed from the last resourceVersion, without a relist', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    h.api.create(svc('a'));
    await waitFor('a', () => !!h.store.get('Service', 'default', 'a'), { timeoutMs: 15_000, intervalMs: 10 });
    const lastSeen = Number(h.api.get('v1', 'Service', 'default', 'a')!.metadata.resourceVersion);
    const from = h.api.requests.length;
    h.api.closeWatches();
    h.api.create(svc('b'));
    await waitFor('b after the stream ended', () => !!h.store.get('Service', 'default', 'b'), { timeoutMs: 15_000, intervalMs: 10 });
    const after = h.api.requests.slice(from).filter((r) => r.path === '/api/v1/services');
    t.same(
      after.filter((r) => !r.watch),
      [],
      'no relist',
    );
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
    await waitFor('pods', () => h.store.list('Pod').length === 10, { timeoutMs: 15_000, intervalMs: 10 });
    // The bookmark precedes the end of the stream on the same connection, so it is read first.
    h.api.sendBookmarks();
    const from = h.api.requests.length;
    h.api.closeWatches();
    h.api.create(svc('late'));
    await waitFor('service after reconnect', () => !!h.store.get('Service', 'default', 'late'), { timeoutMs: 15_000, intervalMs: 10 });
    t.same(
      h.api.requests.slice(from).filter((r) => r.path === '/api/v1/services' && !r.watch),
      [],
      'resumed from the bookmark: no 410, no relist',
    );
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
      await waitFor('initial events', () => h.events().length >= 4, { timeoutMs: 15_000, intervalMs: 10 });
      h.api.holdWatches();
      h.api.closeWatches();
      h.api.delete('v1', 'Service', 'default', 'a');
      h.api.patch('v1', 'Service', 'default', 'b', { metadata: { labels: { changed: 'yes' } } });
      h.api.create(svc('d'));
      h.api.delete('networking.istio.io/v1', 'VirtualService', 'default', 'gone-vs');
      h.api.compact();
      const from = h.api.requests.length;
      h.api.releaseWatches();
      await waitFor('services converge', () => names(h.store.list('Service')).join() === 'default/b,default/c,default/d', {
        timeoutMs: 15_000,
        intervalMs: 10,
      });
      await waitFor('VirtualService removed', () => h.store.get('VirtualService', 'default', 'gone-vs') === undefined, {
        timeoutMs: 15_000,
        intervalMs: 10,
      });
      t.equal(h.store.get('Service', 'default', 'b')!.meta.labels.changed, 'yes');
      t.ok(
        h.api.requests.slice(from).some((r) => r.path === '/api/v1/services' && !r.watch),
        'relisted',
      );
      t.same(eventsFor(h, 'Service', 'a'), ['add', 'delete']);
      t.same(eventsFor(h, 'Service', 'b'), ['add', 'update']);
      t.same(eventsFor(h, 'Service', 'c'), ['add'], 'unchanged objects make no event');
      t.same(eventsFor(h, 'Service', 'd'), ['add']);
      // and it keeps watching afterwards
      h.api.create(svc('e'));
      await waitFor('watching after the relist', () => !!h.store.get('Service', 'default', 'e'), { timeoutMs: 15_000, intervalMs: 10 });
    });
  }

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

  t.test('close() stops every watch and rejects pending whenSynced', async (t) => {
    const h = await harness(t);
    await h.store.whenSynced();
    await waitFor('watches open (five collections and the CRDs)', () => h.api.openWatches().length >= 6, { timeoutMs: 15_000, intervalMs: 10 });
    await h.store.close();
    await waitFor('watches closed', () => h.api.openWatches().length === 0, { timeoutMs: 15_000, intervalMs: 10 });
    h.api.failRequests(/^\/api\/v1\/pods$/, 500, 1000, 'GET'); // pods never list: it cannot sync
    const s2 = await mod.startOrchConfigStore({ orchconfig: h.orchconfig, qps: -1, burst: 0, backoff: { initialMs: 20, maxMs: 50 } });
    const pending = s2.whenSynced();
    await s2.close();
    await t.rejects(pending, /closed before it synced/);
  });
}
