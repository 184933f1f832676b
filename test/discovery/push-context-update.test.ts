// PushContext.update (Istio's PushContext.updateContext, pilot/pkg/model/push_context.go): a snapshot updated
// from the previous one by the kinds that changed must equal a snapshot built from scratch, for every change set
// of the table. Each case applies its change to a store fed to real registries, recording what changed as the
// push controller does (the kinds of the config events; a registry event that is not endpoints-only marks the
// services; an endpoints-only one updates the previous snapshot in place first), then compares everything the
// generators read of both snapshots, asked with the same proxies after the previous snapshot's memos were used.
import t from 'tap';
import type { Config, Kind } from '../../src/config/types';
import { initPushContext, PushContext, type PushChanges } from '../../src/discovery/push-context';
import type { Proxy } from '../../src/discovery/model';
import { buildRegistries } from '../../src/discovery/registry';
import { cfg, ListStore, proxy } from './fixtures';

const REVIEWS = 'reviews.apps.svc.cluster.local';
const RATINGS = 'ratings.apps.svc.cluster.local';

const serviceEntry = (name: string, host: string, ports = [{ number: 9080, name: 'http', protocol: 'HTTP' }]) =>
  cfg('ServiceEntry', 'apps', name, {
    hosts: [host],
    ports,
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    endpoints: [
      { address: '10.1.0.1', labels: { version: 'v1' } },
      { address: '10.1.0.2', labels: { version: 'v2' } },
    ],
  } as never);
const service = (name: string, ports = [{ name: 'http', port: 9080 }]) => cfg('Service', 'apps', name, { clusterIP: '10.96.0.20', ports } as never);
const slice = (svc: string, ips: string[]) =>
  cfg(
    'EndpointSlice',
    'apps',
    `${svc}-abc`,
    {
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 9080 }],
      endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
    } as never,
    { labels: { 'kubernetes.io/service-name': svc } },
  );
const vs = (name: string, spec: Record<string, unknown>) => cfg('VirtualService', 'apps', name, spec as never);
const meshVs = (timeout: string) =>
  vs('reviews', {
    hosts: ['reviews'],
    http: [
      { match: [{ sourceLabels: { app: 'productpage' } }], route: [{ destination: { host: 'reviews', subset: 'v2' } }], timeout },
      { route: [{ destination: { host: 'reviews', subset: 'v1' } }] },
    ],
  });
const frontVs = vs('front', { hosts: ['front.example.com'], gateways: ['gw'], http: [{ route: [{ destination: { host: 'reviews' } }] }] });
const dr = (subsets: string[]) =>
  cfg('DestinationRule', 'apps', 'reviews', { host: 'reviews', subsets: subsets.map((v) => ({ name: v, labels: { version: v } })) } as never);
const gateway = (port: number) =>
  cfg('Gateway', 'apps', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [{ port: { number: port, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
  } as never);
const sidecar = (ns: string) => cfg('Sidecar', ns, 'default', { egress: [{ hosts: ['./*'] }] } as never);
const requestAuthn = (issuer: string) =>
  cfg('RequestAuthentication', 'apps', 'jwt', { selector: { matchLabels: { app: 'productpage' } }, jwtRules: [{ issuer }] } as never);
const peerAuthn = (ns: string, mode: string) => cfg('PeerAuthentication', ns, 'default', { mtls: { mode } } as never);
const authz = cfg('AuthorizationPolicy', 'apps', 'deny-all', { selector: { matchLabels: { app: 'reviews' } } } as never);
const telemetry = (sampling: number) => cfg('Telemetry', 'apps', 'default', { tracing: [{ randomSamplingPercentage: sampling }] } as never);

const vmEntry = cfg('ServiceEntry', 'apps', 'details-vm', {
  hosts: ['details.example.com'],
  ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
  location: 'MESH_INTERNAL',
  resolution: 'STATIC',
  workloadSelector: { labels: { app: 'details-vm' } },
} as never);
const workloadEntry = (address: string, app = 'details-vm') =>
  cfg('WorkloadEntry', 'apps', 'details-vm-1', { address, labels: { app, 'security.istio.io/tlsMode': 'istio' } } as never);

const BASE: Config[] = [
  vmEntry,
  workloadEntry('10.3.0.1'),
  serviceEntry('reviews', REVIEWS),
  service('productpage'),
  slice('productpage', ['10.1.0.9']),
  meshVs('1s'),
  frontVs,
  dr(['v1', 'v2']),
  gateway(80),
  sidecar('apps'),
  requestAuthn('https://a.example'),
  peerAuthn('mesh-system', 'STRICT'),
  peerAuthn('apps', 'PERMISSIVE'),
  telemetry(10),
];

/** The same proxies ask both snapshots: memos kept per proxy are then shared where update() shares them. */
const PROXIES: readonly Proxy[] = [
  proxy('sidecar~10.1.0.9~pp-1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'productpage', version: 'v1' } }),
  proxy('sidecar~10.1.0.1~reviews-1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews', version: 'v1' } }),
  proxy('sidecar~10.2.0.1~client.other~other.svc.cluster.local', { NAMESPACE: 'other', LABELS: { app: 'client' } }),
  proxy('router~10.1.0.50~gw-1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { istio: 'ingressgateway' } }),
];

const names = (list: readonly Config[]) => list.map((c) => `${c.meta.namespace}/${c.meta.name}`);

/** Everything the generators read of a snapshot, for these proxies. */
function view(push: PushContext) {
  return {
    services: push.allServices(),
    endpoints: push.allServices().map((s) => push.allEndpoints(s)),
    virtualServices: push.virtualServices(),
    meshBound: push.virtualServicesForGateway('apps', 'mesh'),
    gatewayBound: push.virtualServicesForGateway('apps', 'apps/gw'),
    destinationRules: push.allDestinationRules(),
    gateways: names(push.gateways()),
    mtls: ['apps', 'other', 'mesh-system'].map((ns) => push.namespaceMutualTlsMode(ns)),
    stats: push.stats(),
    proxies: PROXIES.map((p) => ({
      sharedKey: push.sharedKey(p),
      scope: push.sidecarScope(p),
      destinationRule: push.destinationRule(p, REVIEWS) ?? null,
      ratings: push.serviceForHostname(p, RATINGS) ?? null,
      requestAuthentications: names(push.requestAuthentications(p)),
      authorizationPolicies: names(push.authorizationPolicies(p)),
      peerAuthentication: push.mergedPeerAuthentication(p),
      targets: push.serviceTargets(p),
      telemetry: push.telemetry.keyOf(p),
      gateway: p.type === 'router' ? push.mergedGateway(p) : null,
    })),
    status: push.status.toJSON(),
  };
}

/** The base snapshot (its memos used), then `change` applied and recorded as the push controller records it. */
function scenario(change: (store: ListStore) => void) {
  const store = new ListStore(BASE);
  const registry = buildRegistries(store, ['Orchestrator'], { domain: 'cluster.local' });
  let prev = initPushContext(store, registry);
  view(prev);
  const kinds = new Set<Kind>();
  let services = false;
  store.subscribe((events) => events.forEach((e) => kinds.add(e.config.kind)));
  registry.subscribe((ev) => {
    if (!ev.endpointsOnly) services = true;
    else prev = prev.withRegistryUpdates(registry, ev.hostnames);
  });
  change(store);
  return { store, registry, prev, changes: { kinds, services } satisfies PushChanges };
}

const CASES: Array<[string, (s: ListStore) => void]> = [
  ['nothing', () => {}],
  ['a VirtualService HTTP route edit', (s) => s.apply(meshVs('3s'))],
  ['a VirtualService added on a gateway', (s) => s.apply(vs('front2', { hosts: ['b.example.com'], gateways: ['gw'], http: [] }))],
  ['a VirtualService deleted', (s) => s.remove('VirtualService', 'apps', 'reviews')],
  ['a DestinationRule subset removed', (s) => s.apply(dr(['v1']))],
  [
    'a DestinationRule added with a workload selector',
    (s) =>
      s.apply(cfg('DestinationRule', 'apps', 'ratings', { host: 'ratings', workloadSelector: { matchLabels: { app: 'productpage' } } } as never)),
  ],
  [
    'a duplicate subset (status)',
    (s) => s.apply(cfg('DestinationRule', 'apps', 'reviews-2', { host: 'reviews', subsets: [{ name: 'v1', labels: { version: 'v1' } }] } as never)),
  ],
  ['a Gateway port edit', (s) => s.apply(gateway(8080))],
  ['a Sidecar added', (s) => s.apply(sidecar('other'))],
  ['a Sidecar deleted', (s) => s.remove('Sidecar', 'apps', 'default')],
  ['a RequestAuthentication edit', (s) => s.apply(requestAuthn('https://b.example'))],
  ['a PeerAuthentication mode edit', (s) => s.apply(peerAuthn('apps', 'STRICT'))],
  ['an AuthorizationPolicy added', (s) => s.apply(authz)],
  ['a Telemetry edit', (s) => s.apply(telemetry(50))],
  ['an EnvoyFilter added (read elsewhere)', (s) => s.apply(cfg('EnvoyFilter', 'apps', 'ef', {} as never))],
  ['a ServiceEntry added', (s) => s.apply(serviceEntry('ratings', RATINGS))],
  ['a ServiceEntry port edit', (s) => s.apply(serviceEntry('reviews', REVIEWS, [{ number: 9081, name: 'http', protocol: 'HTTP' }]))],
  ['a Service added', (s) => s.apply(service('details'))],
  ['a WorkloadEntry moved (endpoints only)', (s) => s.apply(workloadEntry('10.3.0.2'))],
  ['a WorkloadEntry relabelled out of its ServiceEntry', (s) => s.apply(workloadEntry('10.3.0.1', 'other'))],
  ['a WorkloadEntry deleted', (s) => s.remove('WorkloadEntry', 'apps', 'details-vm-1')],
  ['endpoints only (EndpointSlice)', (s) => s.apply(slice('productpage', ['10.1.0.9', '10.1.0.10']))],
  ['VirtualService, DestinationRule and Sidecar together', (s) => s.apply(meshVs('5s'), dr(['v2']), sidecar('other'))],
  ['a Service and a VirtualService', (s) => (s.apply(service('details')), s.apply(meshVs('7s')))],
  ['endpoints, then a PeerAuthentication', (s) => (s.apply(slice('productpage', ['10.1.0.11'])), s.apply(peerAuthn('apps', 'DISABLE')))],
];

t.test('an updated snapshot equals one built from scratch, for each change set', async (t) => {
  for (const [name, change] of CASES) {
    const { store, registry, prev, changes } = scenario(change);
    const updated = initPushContext(store, registry, {}, undefined, { prev, changes });
    const scratch = initPushContext(store, registry);
    t.same(view(updated), view(scratch), name);
    t.ok(updated.pushVersion > prev.pushVersion, `${name}: a new push version`);
  }
});

t.test('what no changed kind feeds is taken from the previous snapshot', async (t) => {
  const vsEdit = scenario((s) => s.apply(meshVs('3s')));
  const next = PushContext.update(vsEdit.prev, vsEdit.store, vsEdit.registry, vsEdit.changes);
  t.equal(next.allServices(), vsEdit.prev.allServices(), 'services kept');
  t.equal(next.telemetry, vsEdit.prev.telemetry, 'telemetry kept');
  t.not(next.virtualServices(), vsEdit.prev.virtualServices(), 'VirtualServices re-indexed');
  const before = vsEdit.prev.sidecarScope(PROXIES[2]!);
  const after0 = next.sidecarScope(PROXIES[2]!);
  t.equal(after0.services, before.services, "a sidecar scope's services kept: only its VirtualServices re-scoped");
  t.not(after0.virtualServices, before.virtualServices);
  const seEdit = scenario((s) => s.apply(serviceEntry('ratings', RATINGS)));
  const after = PushContext.update(seEdit.prev, seEdit.store, seEdit.registry, seEdit.changes);
  t.not(after.allServices(), seEdit.prev.allServices(), 'a ServiceEntry re-reads the services');
  t.equal(after.virtualServices(), seEdit.prev.virtualServices(), 'and keeps the VirtualServices');
});

t.test('the comparison sees a part left stale: an update told of the wrong kind differs', async (t) => {
  for (const [name, change, told] of [
    ['a VirtualService edit told as a Gateway', (s: ListStore) => s.apply(meshVs('3s')), 'Gateway'],
    ['a Sidecar told as a VirtualService', (s: ListStore) => s.apply(sidecar('other')), 'VirtualService'],
    ['a PeerAuthentication told as an AuthorizationPolicy', (s: ListStore) => s.apply(peerAuthn('apps', 'STRICT')), 'AuthorizationPolicy'],
  ] as const) {
    const { store, registry, prev } = scenario(change);
    const wrong = PushContext.update(prev, store, registry, { kinds: new Set<Kind>([told]), services: false });
    t.notSame(view(wrong), view(initPushContext(store, registry)), name);
  }
});

/** mulberry32: a small seeded generator, so a failing sequence can be replayed from its seed. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('random edit sequences: each snapshot updated from the last updated one equals a build from scratch', async (t) => {
  // The changes are recorded as the push controller records them (decisions.ts: registry-only kinds come
  // through the registries' events, the others as config kinds), and each step's snapshot is updated from
  // the previous step's updated snapshot, so errors would accumulate along a sequence.
  const { changedKinds, configEventsToPush } = await import('../../src/xds/push/decisions');
  const changes = CASES.filter(([name]) => name !== 'nothing');
  for (let seed = 1; seed <= 30; seed++) {
    const random = seeded(seed);
    const store = new ListStore(BASE);
    const registry = buildRegistries(store, ['Orchestrator'], { domain: 'cluster.local' });
    let current = initPushContext(store, registry);
    view(current);
    let pending: { kinds: Set<Kind>; services: boolean } = { kinds: new Set(), services: false };
    store.subscribe((events) => changedKinds(configEventsToPush(events)).forEach((k) => pending.kinds.add(k)));
    registry.subscribe((ev) => {
      if (!ev.endpointsOnly) pending.services = true;
      else current = current.withRegistryUpdates(registry, ev.hostnames);
    });
    const steps: string[] = [];
    for (let step = 0; step < 6; step++) {
      // one to three changes merged into one push (a debounce window)
      const n = 1 + Math.floor(random() * 3);
      for (let i = 0; i < n; i++) {
        const [name, change] = changes[Math.floor(random() * changes.length)]!;
        steps.push(name);
        change(store);
      }
      current = initPushContext(store, registry, {}, undefined, { prev: current, changes: pending });
      pending = { kinds: new Set(), services: false };
      t.same(view(current), view(initPushContext(store, registry)), `seed ${seed}, push ${step + 1}: after ${steps.join(' → ')}`);
    }
  }
});
