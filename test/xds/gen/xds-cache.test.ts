// The one xDS cache: its switches, LRU bound and push-context lifetime (Istio's XdsCache semantics), and the
// property that matters most — the cache never changes what is sent. The table test generates every type
// for several proxies over a sequence of pushes (edits, additions, a revert to earlier content) with the
// cache on, off, per type off and nearly full, and compares the bytes with the uncached run.
import t from 'tap';
import { toBinary } from '@bufbuild/protobuf';
import { AnySchema } from '@bufbuild/protobuf/wkt';
import type { Config } from '../../../src/config/types';
import { initPushContext } from '../../../src/discovery/push-context';
import { XdsCache, type XdsCacheSettings } from '../../../src/discovery/push/xds-cache';
import { buildRegistries } from '../../../src/discovery/registry';
import { generatorsFor } from '../../../src/xds/gen';
import type { WatchedResource } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, ListStore, proxy } from '../../discovery/fixtures';
import { fullPush } from './helpers';

// ---------------------------------------------------------------------------------------------
// the cache itself

t.test('PILOT_ENABLE_XDS_CACHE=false: every lookup builds, nothing is kept or counted (Istio DisabledCache)', async (t) => {
  const c = new XdsCache({ enabled: false });
  let builds = 0;
  for (let i = 0; i < 3; i++) c.get('cds', 'k', () => ++builds);
  for (let i = 0; i < 3; i++) c.forPush('eds', 1, 'k', () => ++builds);
  t.equal(builds, 6);
  t.same(c.stats(), { size: 0, hits: 0, misses: 0, evictedOnClear: 0, evictedOnSize: 0 });
});

t.test('PILOT_ENABLE_CDS_CACHE / PILOT_ENABLE_RDS_CACHE turn off one type and leave the others cached', async (t) => {
  for (const [off, settings] of [
    ['cds', { cds: false }],
    ['rds', { rds: false }],
  ] as const) {
    const c = new XdsCache(settings);
    const builds: Record<string, number> = {};
    for (const type of ['cds', 'eds', 'lds', 'rds', 'nds'] as const) {
      for (let i = 0; i < 3; i++) c.get(type, 'k', () => (builds[type] = (builds[type] ?? 0) + 1));
    }
    t.equal(builds[off], 3, `${off} built on every lookup`);
    for (const type of ['cds', 'eds', 'lds', 'rds', 'nds'].filter((x) => x !== off)) t.equal(builds[type], 1, `${type} built once with ${off} off`);
    t.equal(c.enabled(off), false);
  }
});

t.test('PILOT_XDS_CACHE_SIZE bounds the entries; the least recently used go first', async (t) => {
  const c = new XdsCache({ size: 2 });
  c.get('cds', 'a', () => 'A');
  c.get('cds', 'b', () => 'B');
  t.equal(
    c.get('cds', 'a', () => 'A2'),
    'A',
    'hit',
  );
  c.get('cds', 'c', () => 'C'); // b is the least recently used now
  t.equal(
    c.get('cds', 'a', () => 'A3'),
    'A',
    'a survived',
  );
  t.equal(
    c.get('cds', 'b', () => 'B2'),
    'B2',
    'b was evicted and is rebuilt',
  );
  const s = c.stats();
  t.equal(s.size, 2);
  t.equal(new XdsCache({ size: 0 }).settings.size, 20000, "Istio's newLru: 0 or less is 20000");
  t.equal(new XdsCache({ size: -5 }).settings.size, 20000);
  t.equal(s.evictedOnSize, 2, 'b for c, then c for b again');
  t.equal(s.hits, 2);
  t.equal(s.misses, 4);
});

t.test('push entries live for the newest two push contexts; older ones are cleared and never stored again', async (t) => {
  const c = new XdsCache();
  let builds = 0;
  const at = (v: number) => c.forPush('lds', v, 'same-key', () => `${v}:${++builds}`);
  t.equal(at(1), '1:1');
  t.equal(at(1), '1:1', 'shared within a push context');
  t.equal(at(2), '2:2', 'a new push context builds its own');
  t.equal(at(1), '1:1', 'the previous push context still shares (connections finishing its push)');
  c.get('cds', 'content', () => 'kept');
  t.equal(at(3), '3:3');
  t.equal(c.stats().evictedOnClear, 1, 'push 1 entries cleared when push 3 appeared');
  t.equal(at(1), '1:4', 'a superseded push context builds');
  t.equal(at(1), '1:5', '… every time: nothing is stored for it');
  t.equal(at(2), '2:2');
  t.equal(
    c.get('cds', 'content', () => 'rebuilt'),
    'kept',
    'content entries outlive push contexts',
  );
});

t.test('endpoint-only push contexts (EDS entries only) leave the other types of a full push shared', async (t) => {
  const c = new XdsCache();
  let builds = 0;
  t.equal(
    c.forPush('lds', 10, 'k', () => ++builds),
    1,
  );
  for (const v of [11, 12, 13]) c.forPush('eds', v, 'cluster', () => 0);
  t.equal(
    c.forPush('lds', 10, 'k', () => ++builds),
    1,
    'the full push still shares its listeners',
  );
  t.equal(c.stats().evictedOnClear, 1, 'only the EDS entry of push 11 was cleared');
});

// ---------------------------------------------------------------------------------------------
// output with and without the cache

const svc = (ns: string, name: string, port: number, extra: Record<string, unknown> = {}): Config =>
  cfg('ServiceEntry', ns, name, {
    hosts: [`${name}.${ns}.svc.cluster.local`],
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    ports: [{ number: port, name: 'http', protocol: 'HTTP' }],
    workloadSelector: { matchLabels: { app: name } },
    ...extra,
  } as never);
const we = (ns: string, name: string, address: string, labels: Record<string, string>): Config =>
  cfg('WorkloadEntry', ns, name, { address, labels } as never);
const vs = (weight: number): Config =>
  cfg('VirtualService', 'apps', 'reviews', {
    hosts: ['reviews.apps.svc.cluster.local', 'bookinfo.com'],
    gateways: ['mesh', 'mesh-system/gw'],
    http: [
      {
        match: [{ uri: { prefix: '/api' } }],
        route: [
          { destination: { host: 'reviews.apps.svc.cluster.local', subset: 'v1' }, weight },
          { destination: { host: 'reviews.apps.svc.cluster.local', subset: 'v2' }, weight: 100 - weight },
        ],
      },
      { route: [{ destination: { host: 'reviews.apps.svc.cluster.local' } }] },
    ],
  } as never);
const dr = (maxConnections: number): Config =>
  cfg('DestinationRule', 'apps', 'reviews', {
    host: 'reviews.apps.svc.cluster.local',
    trafficPolicy: { connectionPool: { tcp: { maxConnections } } },
    subsets: [
      { name: 'v1', labels: { version: 'v1' } },
      { name: 'v2', labels: { version: 'v2' } },
    ],
  } as never);

const base: Config[] = [
  svc('apps', 'reviews', 9080),
  svc('apps', 'ratings', 9080),
  svc('web', 'front', 8080),
  svc('ext', 'api', 443, {
    hosts: ['api.example.com'],
    location: 'MESH_EXTERNAL',
    resolution: 'DNS',
    ports: [{ number: 443, name: 'tls', protocol: 'TLS' }],
    endpoints: [{ address: 'api.example.com' }],
  }),
  we('apps', 'r1', '10.1.0.1', { app: 'reviews', version: 'v1' }),
  we('apps', 'r2', '10.1.0.2', { app: 'reviews', version: 'v2' }),
  we('apps', 'ra1', '10.1.0.3', { app: 'ratings' }),
  we('web', 'f1', '10.2.0.1', { app: 'front' }),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['bookinfo.com'] }],
  } as never),
  vs(80),
  dr(10),
];
const weightEdit = vs(50);
const newService = [svc('apps', 'details', 9080), we('apps', 'd1', '10.1.0.9', { app: 'details' })];
const ruleEdit = dr(20);
const newEndpoint = we('apps', 'r3', '10.1.0.4', { app: 'reviews', version: 'v1' });
const strictMtls = cfg('PeerAuthentication', 'apps', 'default', { mtls: { mode: 'STRICT' } } as never);
const revert = [vs(80), dr(10)];

/** Each push: what the store gets before the push context is built. */
const pushes: ReadonlyArray<(s: ListStore) => void> = [
  () => {},
  (s) => s.apply(weightEdit),
  (s) => s.apply(...newService),
  (s) => s.apply(ruleEdit),
  (s) => s.apply(newEndpoint),
  (s) => s.apply(strictMtls),
  (s) => s.apply(...revert),
  (s) => s.remove('WorkloadEntry', 'apps', 'r2'),
];

const proxies = [
  proxy('router~10.0.0.1~gw-1.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' }),
  proxy('router~10.0.0.2~gw-2.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' }),
  proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews', version: 'v1' } }),
  proxy('sidecar~10.1.0.3~ra1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'ratings' } }),
  proxy('sidecar~10.2.0.1~f1.web~web.svc.cluster.local', { NAMESPACE: 'web', LABELS: { app: 'front' } }),
  proxy('sidecar~10.2.0.7~f2.web~web.svc.cluster.local', { NAMESPACE: 'web', LABELS: { app: 'front' } }),
];

const wildcard = (typeUrl: string): WatchedResource => ({ typeUrl, resourceNames: new Set(), wildcard: true });
const named = (typeUrl: string, names: Iterable<string>): WatchedResource => ({ typeUrl, resourceNames: new Set(names), wildcard: false });
const ROUTES = ['80', '8080', '9080', '443', 'http.80'];

/** Every push's output for every proxy and type, as `proxy type name` → hex of the Any's bytes. */
function run(settings: Partial<XdsCacheSettings>): { out: Array<Map<string, string>>; cache: XdsCache } {
  const cache = new XdsCache(settings);
  const store = new ListStore(base);
  const out: Array<Map<string, string>> = [];
  for (const step of pushes) {
    step(store);
    const push = initPushContext(store, buildRegistries(store, []), {}, cache);
    const got = new Map<string, string>();
    // every proxy twice: the second round is served from what the first cached
    for (const round of [0, 1]) {
      for (const p of proxies) {
        const gens = generatorsFor(p);
        const gen = (w: WatchedResource) => gens[w.typeUrl]!.generate(p, w, fullPush(push, 0)).resources;
        const cds = gen(wildcard(TYPE_URL.cluster));
        const eds = gen(
          named(
            TYPE_URL.endpoint,
            cds.map((r) => r.name).filter((n) => n.startsWith('outbound|')),
          ),
        );
        const lds = gen(wildcard(TYPE_URL.listener));
        const rds = gen(named(TYPE_URL.route, ROUTES));
        const nds = gen(wildcard(TYPE_URL.nameTable));
        for (const [type, list] of Object.entries({ cds, eds, lds, rds, nds })) {
          for (const r of list) {
            const key = `${p.id} ${type} ${r.name}`;
            const bytes = Buffer.from(toBinary(AnySchema, r.resource)).toString('hex');
            if (round === 1) t.equal(bytes, got.get(key), `${key}: same bytes on the second ask of one push`);
            got.set(key, bytes);
          }
        }
      }
    }
    out.push(got);
  }
  return { out, cache };
}

t.test('the cache never changes the output: on, off, per type off and nearly full give the same bytes every push', async (t) => {
  const off = run({ enabled: false });
  t.equal(off.cache.stats().hits + off.cache.stats().misses, 0, 'cache off: never consulted');
  t.ok(
    off.out.every((m) => m.size > 50),
    'every push generates a full set',
  );
  const routeKeys = [...off.out[0]!.keys()].filter((k) => k.includes(' rds '));
  t.ok(
    routeKeys.some((k) => off.out[0]!.get(k) !== off.out[1]!.get(k)),
    'the VirtualService edit changes route bytes (the table exercises invalidation)',
  );
  t.ok(
    [...off.out[3]!.keys()].some((k) => k.includes(' cds ') && off.out[3]!.get(k) !== off.out[2]!.get(k)),
    'the DestinationRule edit changes cluster bytes',
  );
  const modes: Array<[string, Partial<XdsCacheSettings>]> = [
    ['on (Istio defaults)', {}],
    ['CDS cache off', { cds: false }],
    ['RDS cache off', { rds: false }],
    ['PILOT_XDS_CACHE_SIZE=7 (constant LRU evictions)', { size: 7 }],
  ];
  for (const [label, settings] of modes) {
    const on = run(settings);
    for (let i = 0; i < pushes.length; i++) {
      const want = off.out[i]!;
      const got = on.out[i]!;
      t.same([...got.keys()].sort(), [...want.keys()].sort(), `${label}, push ${i}: same resources`);
      const differing = [...want.keys()].filter((k) => got.get(k) !== want.get(k));
      t.same(differing, [], `${label}, push ${i}: byte-identical`);
    }
    const s = on.cache.stats();
    t.ok(s.hits > 0, `${label}: the cache was used (${s.hits} hits, ${s.misses} misses)`);
    if (settings.size) t.ok(s.size <= settings.size && s.evictedOnSize > 0, `${label}: bounded (${s.size} entries, ${s.evictedOnSize} evicted)`);
  }
});
