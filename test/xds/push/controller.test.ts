// The push controller (src/xds/push/controller.ts) against a real ADS server's push path (debouncer, dispatch;
// no connections) whose dispatched pushes are recorded, fed by a real config store and service registries in
// the daemon's order (registries subscribe to the store before the controller). Expected pushes are Istio's:
// a config event is a full push naming the config with reason `config` (bootstrap/server.go configHandler);
// Services, EndpointSlices and Pods come only through the registry — endpoints as incremental EDS with reason
// `endpoint` (xds/eds.go EDSUpdate), services as a full push with reason `service` (serviceHandler); a headless
// service's endpoints add a full push naming it as DNSName (HTTP ports only) or ServiceEntry, reason
// `headlessendpoint` (kube/controller/endpointslice.go); Secrets push with reason `secret` and no new push
// context. pilot_inbound_updates counts config events, EDS updates per hostname, and svc / svcdelete per
// service event (xds/discovery.go, xds/eds.go). The push context is built once per dispatched push, after the
// debounce (xds/discovery.go Push → initPushContext), observed by pilot_pushcontext_init_seconds.
import t from 'tap';
import type { Config } from '../../../src/config/types';
import type { PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { PushController } from '../../../src/xds/push/controller';
import { AdsServer } from '../../../src/xds/server';
import { inboundUpdates, pushContextInitTime } from '../../../src/xds/server/metrics';
import type { PushRequest } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, ListStore } from '../../discovery/fixtures';
import { waitFor } from '../../helpers/wait';

interface Recorded {
  full: boolean;
  configsUpdated: string[];
  edsUpdates: string[];
  reasons: Record<string, number>;
  unchangedTypes?: string[];
  push: PushContext;
}

const vs = (spec: Record<string, unknown>) => cfg('VirtualService', 'apps', 'reviews', { hosts: ['reviews'], ...spec } as never);
const service = (name: string, spec: Record<string, unknown>) => cfg('Service', 'apps', name, spec as never);
const slice = (svc: string, ip: string, port: { name: string; port: number }) =>
  cfg(
    'EndpointSlice',
    'apps',
    `${svc}-abc`,
    { addressType: 'IPv4', ports: [port], endpoints: [{ addresses: [ip], conditions: { ready: true } }] } as never,
    {
      labels: { 'kubernetes.io/service-name': svc },
    },
  );
const jwt = cfg('RequestAuthentication', 'apps', 'jwt', {
  jwtRules: [{ issuer: 'https://issuer.example', jwksUri: 'https://issuer.example/jwks' }],
} as never);

/** Quiet period of the fixture's debouncer (PILOT_DEBOUNCE_AFTER), ms. */
const DEBOUNCE_MS = 30;

/**
 * A controller over a store holding `configs`, pushing through a real ADS server (no connections) whose
 * dispatched pushes are recorded as the controller prepared them; EDS is not debounced (PILOT_ENABLE_EDS_DEBOUNCE
 * off), so endpoint pushes are recorded at once.
 */
function fixture(configs: Config[] = []) {
  const store = new ListStore(configs);
  const registry = buildRegistries(store, ['Orchestrator'], { domain: 'cluster.local' });
  const pushes: Recorded[] = [];
  const prefetched: Array<{ policies: string[]; push: PushContext }> = [];
  const ads = new AdsServer<PushContext>({
    generators: {},
    parseNode: () => {
      throw new Error('no streams in this test');
    },
    pushContext: () => c.current(),
    settings: { debounceAfterMs: DEBOUNCE_MS, debounceMaxMs: 1000, enableEdsDebounce: false },
  });
  const record = (req: PushRequest<PushContext>) =>
    pushes.push({
      full: req.full,
      configsUpdated: [...req.configsUpdated].sort(),
      edsUpdates: [...req.edsUpdates].sort(),
      reasons: Object.fromEntries(req.reasons),
      ...(req.unchangedTypes ? { unchangedTypes: [...req.unchangedTypes].sort() } : {}),
      push: req.push,
    });
  const server = {
    pushAll: (req: PushRequest<PushContext>, options?: { immediate?: boolean }) => (ads.pushAll(req, options), 2),
    onDispatch: (prepare: (req: PushRequest<PushContext>) => PushRequest<PushContext>) =>
      ads.onDispatch((req) => {
        const out = prepare(req);
        record(out);
        return out;
      }),
  };
  const c: PushController = new PushController({
    server,
    store,
    registry,
    options: {},
    prefetchJwks: (policies, push) => prefetched.push({ policies: policies.map((p) => p.meta.name), push }),
  });
  store.subscribe((e) => c.onConfig(e));
  registry.subscribe((e) => c.onRegistry(e));
  /** Waits until the debouncer dispatched what it holds. */
  const settled = () => waitFor('debounced pushes dispatched', () => ads.stats().debouncing === 0, { intervalMs: 5 });
  return { c, store, pushes, prefetched, settled, without: (r: Recorded) => ({ ...r, push: undefined }) };
}

async function inbound(): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of (await inboundUpdates.get()).values) out[String(v.labels.type)] = v.value;
  return out;
}

/** How `after` grew over `before`, per label, leaving out what did not. */
function grew(before: Record<string, number>, after: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(after).flatMap(([k, v]) => (v !== (before[k] ?? 0) ? [[k, v - (before[k] ?? 0)]] : [])));
}

const initCount = async (): Promise<number> => (await pushContextInitTime.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;

t.test('a config change is pushed in full after the debounce, naming the config, with the context built for it', async (t) => {
  const f = fixture([cfg('DestinationRule', 'apps', 'reviews', { host: 'reviews' } as never)]);
  const first = f.c.current();
  const before = await inbound();
  const inits = await initCount();
  f.store.apply(cfg('DestinationRule', 'apps', 'reviews', { host: 'reviews', trafficPolicy: { tls: { mode: 'ISTIO_MUTUAL' } } } as never));
  t.equal(await initCount(), inits, 'the event is only recorded: no build before the debounce');
  t.same(f.pushes, [], 'nothing dispatched yet');
  await f.settled();
  t.same(f.pushes.map(f.without), [
    { full: true, configsUpdated: ['DestinationRule/apps/reviews'], edsUpdates: [], reasons: { config: 1 }, push: undefined },
  ]);
  t.not(f.pushes[0]!.push, first, 'a new push context');
  t.equal(f.pushes[0]!.push, f.c.current(), 'the push carries the current context');
  t.equal((await initCount()) - inits, 1, 'built once, at dispatch');
  t.same(grew(before, await inbound()), { config: 1 });
});

t.test('N config events inside one debounce window are one push and one build of the push context', async (t) => {
  const f = fixture();
  const inits = await initCount();
  const before = await inbound();
  const n = 8;
  for (let i = 0; i < n; i++) {
    f.store.apply(cfg('VirtualService', 'apps', `vs${i}`, { hosts: [`h${i}`], http: [{ route: [{ destination: { host: `h${i}` } }] }] } as never));
    await new Promise((r) => setTimeout(r, DEBOUNCE_MS / 4));
  }
  await f.settled();
  t.equal(f.pushes.length, 1, 'one push');
  t.same(f.pushes[0]!.reasons, { config: n });
  t.equal(f.pushes[0]!.configsUpdated.length, n, 'naming every config');
  t.equal((await initCount()) - inits, 1, 'pilot_pushcontext_init_seconds observed one build');
  t.equal(f.pushes[0]!.push.virtualServices().length, n, 'the one build holds every change');
  t.same(grew(before, await inbound()), { config: n }, 'each event still counted as an inbound update');
});

t.test('a config event batch counts each event and pushes once', async (t) => {
  const f = fixture();
  const before = await inbound();
  f.store.apply(
    cfg('Gateway', 'apps', 'gw', { selector: { istio: 'ingressgateway' }, servers: [] } as never),
    cfg('Sidecar', 'apps', 'default', {} as never),
  );
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.configsUpdated, p.reasons]),
    [[['Gateway/apps/gw', 'Sidecar/apps/default'], { config: 2 }]],
  );
  t.same(grew(before, await inbound()), { config: 2 });
});

t.test('an edit of VirtualService HTTP routes leaves clusters and listeners unchanged; a tcp route edit only clusters', async (t) => {
  const f = fixture([vs({ http: [{ route: [{ destination: { host: 'reviews' } }] }] })]);
  f.store.apply(vs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }] }));
  await f.settled();
  t.same(f.pushes[0]!.unchangedTypes, [TYPE_URL.cluster, TYPE_URL.listener].sort());
  f.store.apply(
    vs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }], tcp: [{ route: [{ destination: { host: 'db' } }] }] }),
  );
  await f.settled();
  t.same(f.pushes[1]!.unchangedTypes, [TYPE_URL.cluster]);
});

t.test('a context built early for a new connection: the push compares every build since the last dispatch', async (t) => {
  const http = { http: [{ route: [{ destination: { host: 'reviews' } }] }] };
  const f = fixture([vs(http)]);
  const inits = await initCount();
  f.store.apply(vs({ ...http, tcp: [{ route: [{ destination: { host: 'db' } }] }] }));
  const early = f.c.current(); // a proxy connecting now is served the tcp route
  t.equal(early.virtualServices()[0]!.spec.tcp?.length, 1, 'built on demand with the waiting change');
  f.store.apply(vs(http)); // reverted before the push: the context equals the one before both edits for listeners
  await f.settled();
  t.equal(f.pushes.length, 1);
  t.same(f.pushes[0]!.unchangedTypes, [TYPE_URL.cluster], 'listeners changed for the proxy served the early context');
  t.not(f.pushes[0]!.push, early, 'the push carries the context with both edits');
  t.equal((await initCount()) - inits, 2, 'the early build and the one at dispatch');
});

t.test('registry-only kinds push through the registry: endpoints as incremental EDS, services in full', async (t) => {
  const f = fixture([service('reviews', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 9080 }] })]);
  const host = 'reviews.apps.svc.cluster.local';
  let before = await inbound();
  const pushContext = f.c.current();
  f.store.apply(slice('reviews', '10.1.0.5', { name: 'http', port: 9080 }));
  t.same(f.pushes.map(f.without), [{ full: false, configsUpdated: [], edsUpdates: [host], reasons: { endpoint: 1 }, push: undefined }]);
  t.not(f.c.current(), pushContext, 'the push context carries the new endpoints');
  t.equal(f.pushes[0]!.push, f.c.current(), 'updated in place, not rebuilt');
  t.same(grew(before, await inbound()), { eds: 1 }, 'no config update for the EndpointSlice itself');

  f.pushes.length = 0;
  before = await inbound();
  f.store.apply(
    service('reviews', {
      clusterIP: '10.96.0.10',
      ports: [
        { name: 'http', port: 9080 },
        { name: 'grpc', port: 9090 },
      ],
    }),
  );
  await f.settled();
  t.same(f.pushes.map(f.without), [
    { full: true, configsUpdated: [`ServiceEntry/apps/${host}`], edsUpdates: [], reasons: { service: 1 }, push: undefined },
  ]);
  t.same(
    f.pushes[0]!.push.servicesByHostname(host)[0]!.ports.map((p) => p.port),
    [9080, 9090],
    'the context built at dispatch has the new port',
  );
  t.same(grew(before, await inbound()), { svc: 1 });

  f.pushes.length = 0;
  before = await inbound();
  f.store.remove('Service', 'apps', 'reviews');
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.configsUpdated, p.reasons]),
    [[[`ServiceEntry/apps/${host}`], { service: 1 }]],
    'a deleted service is named with the namespace the last context had it in',
  );
  t.same(f.pushes[0]!.push.servicesByHostname(host), []);
  t.same(grew(before, await inbound()), { svcdelete: 1 });
});

t.test('a headless service: EDS, then a full push naming it as ServiceEntry (a TCP port) or DNSName (HTTP only)', async (t) => {
  const f = fixture([
    service('db', { clusterIP: 'None', ports: [{ name: 'tcp', port: 5432 }] }),
    service('web', { clusterIP: 'None', ports: [{ name: 'http', port: 80 }] }),
  ]);
  f.store.apply(slice('db', '10.1.0.7', { name: 'tcp', port: 5432 }));
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.full, p.configsUpdated, p.edsUpdates, p.reasons]),
    [
      [false, [], ['db.apps.svc.cluster.local'], { endpoint: 1 }],
      [true, ['ServiceEntry/apps/db.apps.svc.cluster.local'], [], { headlessendpoint: 1 }],
    ],
  );
  f.pushes.length = 0;
  f.store.apply(slice('web', '10.1.0.8', { name: 'http', port: 80 }));
  await f.settled();
  t.same(f.pushes[1] && [f.pushes[1].configsUpdated, f.pushes[1].reasons], [['DNSName/apps/web.apps.svc.cluster.local'], { headlessendpoint: 1 }]);
});

t.test('ServiceEntries and WorkloadEntries push through their registry as Istio does (no config push of their own)', async (t) => {
  const se = (resolution: string, ports: Array<{ number: number; name: string; protocol: string }>) =>
    cfg('ServiceEntry', 'apps', `db-${resolution.toLowerCase()}`, {
      hosts: [`db-${resolution.toLowerCase()}.example.com`],
      location: 'MESH_INTERNAL',
      resolution,
      ports,
      workloadSelector: { labels: { app: `db-${resolution.toLowerCase()}` } },
    } as never);
  const we = (resolution: string, address: string) =>
    cfg('WorkloadEntry', 'apps', `db-${resolution.toLowerCase()}-1`, { address, labels: { app: `db-${resolution.toLowerCase()}` } } as never);
  const tcp = [{ number: 5432, name: 'tcp', protocol: 'TCP' }];
  const f = fixture([se('STATIC', tcp), we('STATIC', '10.2.0.1'), se('DNS', tcp), we('DNS', 'db1.internal')]);
  const cases: Array<{ what: string; apply: Config; pushes: unknown[]; inbound: Record<string, number> }> = [
    {
      what: 'a WorkloadEntry of a STATIC ServiceEntry moves: incremental EDS of its host only (workloadEntryHandler → EDSUpdate)',
      apply: we('STATIC', '10.2.0.2'),
      pushes: [[false, [], ['db-static.example.com'], { endpoint: 1 }]],
      inbound: { eds: 1 },
    },
    {
      what: 'a WorkloadEntry of a DNS ServiceEntry moves: EDS, and a full push naming it (its endpoints are in its clusters)',
      apply: we('DNS', 'db2.internal'),
      pushes: [
        [false, [], ['db-dns.example.com'], { endpoint: 1 }],
        [true, ['ServiceEntry/apps/db-dns.example.com'], [], { endpoint: 1 }],
      ],
      inbound: { eds: 1 },
    },
    {
      what: 'a ServiceEntry gains a port: a full push naming its host as ServiceEntry (serviceHandler)',
      apply: se('STATIC', [...tcp, { number: 8080, name: 'http', protocol: 'HTTP' }]),
      pushes: [[true, ['ServiceEntry/apps/db-static.example.com'], [], { service: 1 }]],
      inbound: { svc: 1 },
    },
  ];
  for (const c of cases) {
    f.pushes.length = 0;
    const before = await inbound();
    f.store.apply(c.apply);
    await f.settled();
    t.same(
      f.pushes.map((p) => [p.full, p.configsUpdated, p.edsUpdates, p.reasons]),
      c.pushes,
      c.what,
    );
    t.same(grew(before, await inbound()), c.inbound, `${c.what}: inbound updates`);
  }
});

t.test('Secrets push in full naming them, on the same push context', async (t) => {
  const f = fixture();
  const pushContext = f.c.current();
  const before = await inbound();
  f.store.apply(cfg('Secret', 'apps', 'cert', {} as never));
  await f.settled();
  t.same(f.pushes.map(f.without), [{ full: true, configsUpdated: ['Secret/apps/cert'], edsUpdates: [], reasons: { secret: 1 }, push: undefined }]);
  t.equal(f.c.current(), pushContext, 'no rebuild');
  t.same(grew(before, await inbound()), { config: 1 });

  f.pushes.length = 0;
  f.c.onSecret(['Secret/other/*']);
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.configsUpdated, p.reasons]),
    [[['Secret/other/*'], { secret: 1 }]],
  );

  f.pushes.length = 0;
  f.store.apply(cfg('Secret', 'apps', 'cert', { type: 'Opaque' } as never), cfg('Sidecar', 'apps', 'default', {} as never));
  await f.settled();
  t.same(
    f.pushes.map((p) => p.reasons),
    [{ config: 2 }],
    'beside another kind, a config push',
  );
  t.not(f.c.current(), pushContext);
});

t.test('synced and new keys merge into one debounced push; a debug push goes at once with the changes built', async (t) => {
  const f = fixture();
  f.c.onSynced();
  f.c.onKeysChanged();
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.full, p.reasons]),
    [[true, { global: 1, unknown: 1 }]],
  );
  f.pushes.length = 0;
  f.store.apply(cfg('Sidecar', 'apps', 'default', {} as never));
  t.equal(f.c.onDebug(), 2, 'the debug push answers how many proxies it goes to');
  t.same(
    f.pushes.map((p) => [p.full, p.reasons]),
    [[true, { debug: 1 }]],
    'dispatched at once, before the debounced config push',
  );
  t.equal(f.pushes[0]!.push.stats().services, 0);
  t.ok(f.pushes[0]!.push.sidecarScope({ type: 'sidecar', namespace: 'apps', labels: {} } as never), 'the debug push carries the waiting change');
  await f.settled();
  t.same(
    f.pushes.map((p) => [p.reasons, p.unchangedTypes]),
    [
      [{ debug: 1 }, undefined],
      [{ config: 1 }, undefined],
    ],
    'the config push follows with nothing left to build: no type known unchanged',
  );
  t.equal(f.pushes[1]!.push, f.pushes[0]!.push, 'on the same context');
});

t.test('JWKS are prefetched once per built push context, with its RequestAuthentications', async (t) => {
  const f = fixture([jwt, service('reviews', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 9080 }] })]);
  const inits = await initCount();
  t.same(
    f.prefetched.map((p) => p.policies),
    [['jwt']],
    'the first push context',
  );
  f.store.apply(cfg('Sidecar', 'apps', 'default', {} as never)); // build
  await f.settled();
  f.store.apply(cfg('Secret', 'apps', 'cert', {} as never)); // no build
  await f.settled();
  f.store.apply(slice('reviews', '10.1.0.5', { name: 'http', port: 9080 })); // endpoints: no build
  f.store.apply(service('ratings', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 9080 }] })); // build
  await f.settled();
  f.c.onSynced(); // build
  await f.settled();
  t.equal(f.prefetched.length, 4);
  t.equal((await initCount()) - inits, 3, 'pilot_pushcontext_init_seconds observes each build');
  for (const p of f.prefetched.slice(1))
    t.ok(
      f.pushes.some((r) => r.push === p.push),
      'the prefetched context is the one pushed',
    );
});
