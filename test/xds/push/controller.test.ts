// The push controller (src/xds/push/controller.ts) against a recording ADS server, fed by a real config store
// and service registries in the daemon's order (registries subscribe to the store before the controller).
// Expected pushes are Istio's: a config event is a full push naming the config with reason `config`
// (bootstrap/server.go configHandler); Services, EndpointSlices and Pods come only through the registry —
// endpoints as incremental EDS with reason `endpoint` (xds/eds.go EDSUpdate), services as a full push with
// reason `service` (serviceHandler); a headless service's endpoints add a full push naming it as DNSName
// (HTTP ports only) or ServiceEntry, reason `headlessendpoint` (kube/controller/endpointslice.go); Secrets
// push with reason `secret` and no new push context. pilot_inbound_updates counts config events, EDS
// updates per hostname, and svc / svcdelete per service event (xds/discovery.go, xds/eds.go).
import t from 'tap';
import type { Config } from '../../../src/config/types';
import type { PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { PushController } from '../../../src/xds/push/controller';
import { inboundUpdates, pushContextInitTime } from '../../../src/xds/server/metrics';
import type { PushRequest } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, ListStore } from '../../discovery/fixtures';

interface Recorded {
  full: boolean;
  configsUpdated: string[];
  edsUpdates: string[];
  reasons: Record<string, number>;
  unchangedTypes?: string[];
  immediate?: boolean;
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

/** A controller over a store holding `configs`, with the recording server and prefetch calls. */
function fixture(configs: Config[] = []) {
  const store = new ListStore(configs);
  const registry = buildRegistries(store, ['Orchestrator'], { domain: 'cluster.local' });
  const pushes: Recorded[] = [];
  const prefetched: Array<{ policies: string[]; push: PushContext }> = [];
  const server = {
    pushAll(req: PushRequest<PushContext>, options?: { immediate?: boolean }) {
      pushes.push({
        full: req.full,
        configsUpdated: [...req.configsUpdated].sort(),
        edsUpdates: [...req.edsUpdates].sort(),
        reasons: Object.fromEntries(req.reasons),
        ...(req.unchangedTypes ? { unchangedTypes: [...req.unchangedTypes].sort() } : {}),
        ...(options?.immediate ? { immediate: true } : {}),
        push: req.push,
      });
      return 2;
    },
  };
  const c = new PushController({
    server,
    store,
    registry,
    options: {},
    prefetchJwks: (policies, push) => prefetched.push({ policies: policies.map((p) => p.meta.name), push }),
  });
  store.subscribe((e) => c.onConfig(e));
  registry.subscribe((e) => c.onRegistry(e));
  return { c, store, pushes, prefetched, without: (r: Recorded) => ({ ...r, push: undefined }) };
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

t.test('a config change rebuilds the push context and pushes it in full, naming the config', async (t) => {
  const f = fixture([cfg('DestinationRule', 'apps', 'reviews', { host: 'reviews' } as never)]);
  const first = f.c.current();
  const before = await inbound();
  f.store.apply(cfg('DestinationRule', 'apps', 'reviews', { host: 'reviews', trafficPolicy: { tls: { mode: 'ISTIO_MUTUAL' } } } as never));
  t.not(f.c.current(), first, 'a new push context');
  t.same(f.pushes.map(f.without), [
    { full: true, configsUpdated: ['DestinationRule/apps/reviews'], edsUpdates: [], reasons: { config: 1 }, unchangedTypes: [], push: undefined },
  ]);
  t.equal(f.pushes[0]!.push, f.c.current(), 'the push carries the new context');
  t.same(grew(before, await inbound()), { config: 1 });
});

t.test('a config event batch counts each event and pushes once', async (t) => {
  const f = fixture();
  const before = await inbound();
  f.store.apply(
    cfg('Gateway', 'apps', 'gw', { selector: { istio: 'ingressgateway' }, servers: [] } as never),
    cfg('Sidecar', 'apps', 'default', {} as never),
  );
  t.same(
    f.pushes.map((p) => [p.configsUpdated, p.reasons]),
    [[['Gateway/apps/gw', 'Sidecar/apps/default'], { config: 2 }]],
  );
  t.same(grew(before, await inbound()), { config: 2 });
});

t.test('an edit of VirtualService HTTP routes leaves clusters and listeners unchanged; a tcp route edit only clusters', async (t) => {
  const f = fixture([vs({ http: [{ route: [{ destination: { host: 'reviews' } }] }] })]);
  f.store.apply(vs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }] }));
  t.same(f.pushes[0]!.unchangedTypes, [TYPE_URL.cluster, TYPE_URL.listener].sort());
  f.store.apply(
    vs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }], tcp: [{ route: [{ destination: { host: 'db' } }] }] }),
  );
  t.same(f.pushes[1]!.unchangedTypes, [TYPE_URL.cluster]);
});

t.test('registry-only kinds push through the registry: endpoints as incremental EDS, services in full', async (t) => {
  const f = fixture([service('reviews', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 9080 }] })]);
  const host = 'reviews.apps.svc.cluster.local';
  let before = await inbound();
  const pushContext = f.c.current();
  f.store.apply(slice('reviews', '10.1.0.5', { name: 'http', port: 9080 }));
  t.same(f.pushes.map(f.without), [{ full: false, configsUpdated: [], edsUpdates: [host], reasons: { endpoint: 1 }, push: undefined }]);
  t.not(f.c.current(), pushContext, 'the push context carries the new endpoints');
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
  t.same(f.pushes.map(f.without), [{ full: true, configsUpdated: [], edsUpdates: [], reasons: { service: 1 }, push: undefined }]);
  t.same(grew(before, await inbound()), { svc: 1 });

  f.pushes.length = 0;
  before = await inbound();
  f.store.remove('Service', 'apps', 'reviews');
  t.same(
    f.pushes.map((p) => p.reasons),
    [{ service: 1 }],
  );
  t.same(grew(before, await inbound()), { svcdelete: 1 });
});

t.test('a headless service: EDS, then a full push naming it as ServiceEntry (a TCP port) or DNSName (HTTP only)', async (t) => {
  const f = fixture([
    service('db', { clusterIP: 'None', ports: [{ name: 'tcp', port: 5432 }] }),
    service('web', { clusterIP: 'None', ports: [{ name: 'http', port: 80 }] }),
  ]);
  f.store.apply(slice('db', '10.1.0.7', { name: 'tcp', port: 5432 }));
  t.same(
    f.pushes.map((p) => [p.full, p.configsUpdated, p.edsUpdates, p.reasons]),
    [
      [false, [], ['db.apps.svc.cluster.local'], { endpoint: 1 }],
      [true, ['ServiceEntry/apps/db.apps.svc.cluster.local'], [], { headlessendpoint: 1 }],
    ],
  );
  f.pushes.length = 0;
  f.store.apply(slice('web', '10.1.0.8', { name: 'http', port: 80 }));
  t.same(f.pushes[1] && [f.pushes[1].configsUpdated, f.pushes[1].reasons], [['DNSName/apps/web.apps.svc.cluster.local'], { headlessendpoint: 1 }]);
});

t.test('Secrets push in full naming them, on the same push context', async (t) => {
  const f = fixture();
  const pushContext = f.c.current();
  const before = await inbound();
  f.store.apply(cfg('Secret', 'apps', 'cert', {} as never));
  t.same(f.pushes.map(f.without), [{ full: true, configsUpdated: ['Secret/apps/cert'], edsUpdates: [], reasons: { secret: 1 }, push: undefined }]);
  t.equal(f.c.current(), pushContext, 'no rebuild');
  t.same(grew(before, await inbound()), { config: 1 });

  f.pushes.length = 0;
  f.c.onSecret(['Secret/other/*']);
  t.same(
    f.pushes.map((p) => [p.configsUpdated, p.reasons]),
    [[['Secret/other/*'], { secret: 1 }]],
  );

  f.pushes.length = 0;
  f.store.apply(cfg('Secret', 'apps', 'cert', { type: 'Opaque' } as never), cfg('Sidecar', 'apps', 'default', {} as never));
  t.same(
    f.pushes.map((p) => p.reasons),
    [{ config: 2 }],
    'beside another kind, a config push',
  );
  t.not(f.c.current(), pushContext);
});

t.test('synced, new keys and debug pushes', async (t) => {
  const f = fixture();
  f.c.onSynced();
  f.c.onKeysChanged();
  t.equal(f.c.onDebug(), 2, 'the debug push answers how many proxies it goes to');
  t.same(
    f.pushes.map((p) => [p.full, p.reasons, p.immediate ?? false]),
    [
      [true, { global: 1 }, false],
      [true, { unknown: 1 }, false],
      [true, { debug: 1 }, true],
    ],
  );
});

t.test('JWKS are prefetched once per rebuilt push context, with its RequestAuthentications', async (t) => {
  const f = fixture([jwt, service('reviews', { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 9080 }] })]);
  const inits = await initCount();
  t.same(
    f.prefetched.map((p) => p.policies),
    [['jwt']],
    'the first push context',
  );
  f.store.apply(cfg('Sidecar', 'apps', 'default', {} as never)); // rebuild
  f.store.apply(cfg('Secret', 'apps', 'cert', {} as never)); // no rebuild
  f.store.apply(slice('reviews', '10.1.0.5', { name: 'http', port: 9080 })); // endpoints: no rebuild
  f.store.apply(service('ratings', { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 9080 }] })); // rebuild
  f.c.onSynced(); // rebuild
  f.c.onKeysChanged(); // rebuild
  t.equal(f.prefetched.length, 5);
  t.equal((await initCount()) - inits, 4, 'pilot_pushcontext_init_seconds observes each rebuild');
  for (const p of f.prefetched.slice(1))
    t.ok(
      f.pushes.some((r) => r.push === p.push),
      'the prefetched context is the one pushed',
    );
});
