// Load assignments shared between kinds of proxy (generators.ts packedLoadAssignment): one push builds a
// cluster name's assignment once per service, subset labels and name, whatever the proxy. The table checks
// the key: proxies that resolve a name to the same service and labels share one Resource, and proxies that
// differ in what matters — the DestinationRule their namespace sees (Istio: the proxy's namespace's rule
// before the service's namespace's), which of two same-host ServiceEntries they see (exportTo) — get their
// own, with the endpoints Istio would give them.
import t from 'tap';
import { fromBinary } from '@bufbuild/protobuf';
import type { Config } from '../../../src/config/types';
import { ClusterLoadAssignmentSchema } from '../../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import type { Proxy } from '../../../src/discovery/model';
import { edsGenerator } from '../../../src/xds/gen/generators';
import type { Resource } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, proxy } from '../../discovery/fixtures';
import { fullPush, pushOf } from './helpers';
import { initPushContext, type PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { XdsCache } from '../../../src/discovery/push/xds-cache';
import { ListStore } from '../../discovery/fixtures';

const se = (ns: string, host: string, extra: Record<string, unknown> = {}): Config =>
  cfg('ServiceEntry', ns, host.split('.')[0]!, {
    hosts: [host],
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
    workloadSelector: { labels: { app: host.split('.')[0]! } },
    ...extra,
  } as never);
const we = (ns: string, name: string, address: string, labels: Record<string, string>): Config =>
  cfg('WorkloadEntry', ns, name, { address, labels } as never);
const dr = (ns: string, v1: string): Config =>
  cfg('DestinationRule', ns, 'reviews', {
    host: 'reviews.apps.svc.cluster.local',
    subsets: [{ name: 'v1', labels: { version: v1 } }],
  } as never);

const REVIEWS = 'reviews.apps.svc.cluster.local';
const LOCAL = 'local.example.com';
const configs: Config[] = [
  se('apps', REVIEWS),
  we('apps', 'r1', '10.1.0.1', { app: 'reviews', version: 'v1' }),
  we('apps', 'r2', '10.1.0.2', { app: 'reviews', version: 'v2' }),
  dr('apps', 'v1'),
  // the web namespace's own rule for the host names v1 differently: web's proxies use it
  dr('web', 'v2'),
  // one hostname, two namespace-private ServiceEntries: each namespace sees its own endpoints
  se('apps', LOCAL, { exportTo: ['.'], workloadSelector: { labels: { app: 'local' } } }),
  we('apps', 'la', '10.1.0.9', { app: 'local' }),
  se('web', LOCAL, { exportTo: ['.'], workloadSelector: { labels: { app: 'local' } } }),
  we('web', 'lw', '10.2.0.9', { app: 'local' }),
];

const sidecar = (ip: string, ns: string, app: string): Proxy =>
  proxy(`sidecar~${ip}~${app}-1.${ns}~${ns}.svc.cluster.local`, { NAMESPACE: ns, LABELS: { app, version: 'v1' } });
const P = {
  apps1: sidecar('10.1.0.50', 'apps', 'a'),
  apps2: sidecar('10.1.0.51', 'apps', 'b'),
  web: sidecar('10.2.0.50', 'web', 'w'),
  gateway: proxy('router~10.0.0.1~gw-1.mesh-system~mesh-system.svc.cluster.local', { NAMESPACE: 'mesh-system', LABELS: { istio: 'ingressgateway' } }),
};

const V1 = `outbound|9080|v1|${REVIEWS}`;
const ALL = `outbound|9080||${REVIEWS}`;
const LOCAL_ALL = `outbound|9080||${LOCAL}`;
const UNDEFINED_SUBSET = `outbound|9080|v9|${REVIEWS}`;
const NAMES = [V1, ALL, LOCAL_ALL, UNDEFINED_SUBSET];

const push = pushOf(configs);
const req = fullPush(push);
const eds = (p: Proxy): Map<string, Resource> =>
  new Map(
    edsGenerator.generate(p, { typeUrl: TYPE_URL.endpoint, resourceNames: new Set(NAMES), wildcard: false }, req).resources.map((r) => [r.name, r]),
  );
const out = Object.fromEntries(Object.entries(P).map(([k, p]) => [k, eds(p)])) as Record<keyof typeof P, Map<string, Resource>>;

/** The endpoint addresses of a packed load assignment, sorted. */
function addresses(r: Resource | undefined): string[] {
  const cla = fromBinary(ClusterLoadAssignmentSchema, r!.resource.value);
  const ips: string[] = [];
  for (const l of cla.endpoints)
    for (const e of l.lbEndpoints) {
      const ep = e.hostIdentifier.case === 'endpoint' ? e.hostIdentifier.value : undefined;
      const a = ep?.address?.address;
      if (a?.case === 'socketAddress') ips.push(a.value.address);
    }
  return ips.sort();
}

const cases: Array<{ name: string; a: keyof typeof P; b: keyof typeof P; cluster: string; shared: boolean; ipsA: string[]; ipsB: string[] }> = [
  { name: 'two sidecars of one namespace', a: 'apps1', b: 'apps2', cluster: V1, shared: true, ipsA: ['10.1.0.1'], ipsB: ['10.1.0.1'] },
  {
    name: "a gateway (no rule of its own: the service namespace's) and an apps sidecar",
    a: 'gateway',
    b: 'apps1',
    cluster: V1,
    shared: true,
    ipsA: ['10.1.0.1'],
    ipsB: ['10.1.0.1'],
  },
  { name: "web's own rule gives its v1 other labels", a: 'apps1', b: 'web', cluster: V1, shared: false, ipsA: ['10.1.0.1'], ipsB: ['10.1.0.2'] },
  {
    name: 'no subset: every kind shares the assignment',
    a: 'apps1',
    b: 'web',
    cluster: ALL,
    shared: true,
    ipsA: ['10.1.0.1', '10.1.0.2'],
    ipsB: ['10.1.0.1', '10.1.0.2'],
  },
  {
    name: 'one hostname, a namespace-private entry each',
    a: 'apps1',
    b: 'web',
    cluster: LOCAL_ALL,
    shared: false,
    ipsA: ['10.1.0.9'],
    ipsB: ['10.2.0.9'],
  },
  { name: 'a subset no rule defines: empty for everyone', a: 'apps1', b: 'web', cluster: UNDEFINED_SUBSET, shared: true, ipsA: [], ipsB: [] },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const ra = out[c.a].get(c.cluster);
    const rb = out[c.b].get(c.cluster);
    t.ok(ra && rb, 'both get an answer for the name');
    t.equal(ra === rb, c.shared, c.shared ? 'one Resource' : 'their own Resources');
    t.same(addresses(ra), c.ipsA, `${c.a}'s endpoints`);
    t.same(addresses(rb), c.ipsB, `${c.b}'s endpoints`);
  });
}

t.test('a later push builds its own assignments (a push entry, not kept across config changes)', async (t) => {
  const next = pushOf([...configs, we('apps', 'r3', '10.1.0.3', { app: 'reviews', version: 'v1' })]);
  const r = edsGenerator
    .generate(P.apps1, { typeUrl: TYPE_URL.endpoint, resourceNames: new Set([V1]), wildcard: false }, fullPush(next))
    .resources.find((x) => x.name === V1);
  t.same(addresses(r), ['10.1.0.1', '10.1.0.3']);
  t.same(addresses(out.apps1.get(V1)), ['10.1.0.1'], 'the earlier push still gives its own');
});

t.test('across pushes: an assignment is packed again only when its service, endpoints or subset labels changed', async (t) => {
  for (const cacheOn of [true, false]) {
    const store = new ListStore(configs);
    const registry = buildRegistries(store, []);
    let push: PushContext = initPushContext(store, registry, {}, new XdsCache({ enabled: cacheOn }));
    let services = false;
    // the push controller's bookkeeping: endpoint-only events update the snapshot in place
    registry.subscribe((ev) => (ev.endpointsOnly ? (push = push.withRegistryUpdates(registry, ev.hostnames)) : (services = true)));
    const get = (p: PushContext) =>
      new Map(
        edsGenerator
          .generate(P.apps1, { typeUrl: TYPE_URL.endpoint, resourceNames: new Set(NAMES), wildcard: false }, fullPush(p))
          .resources.map((r) => [r.name, r]),
      );
    const steps: Array<{ what: string; change: () => void; kinds: string[]; repacked: string[]; ips?: [string, string[]] }> = [
      {
        what: 'a DestinationRule edit that keeps the subset labels',
        change: () =>
          store.apply({
            ...dr('apps', 'v1'),
            spec: { ...dr('apps', 'v1').spec, trafficPolicy: { connectionPool: { tcp: { maxConnections: 7 } } } },
          } as never),
        kinds: ['DestinationRule'],
        repacked: [],
      },
      {
        what: "a DestinationRule's subset labels",
        change: () => store.apply(dr('apps', 'v2')),
        kinds: ['DestinationRule'],
        repacked: [V1],
        ips: [V1, ['10.1.0.2']],
      },
      {
        what: 'a WorkloadEntry of the other service moves',
        change: () => store.apply(we('apps', 'la', '10.1.0.8', { app: 'local' })),
        kinds: [],
        repacked: [LOCAL_ALL],
      },
      {
        what: "a WorkloadEntry of the rule's service moves",
        change: () => store.apply(we('apps', 'r2', '10.1.0.7', { app: 'reviews', version: 'v2' })),
        kinds: [],
        repacked: [V1, ALL],
        ips: [ALL, ['10.1.0.1', '10.1.0.7']],
      },
    ];
    let before = get(push);
    for (const s of steps) {
      s.change();
      push = initPushContext(store, registry, {}, undefined, { prev: push, changes: { kinds: new Set(s.kinds as never), services } });
      services = false;
      const after = get(push);
      const repacked = NAMES.filter((n) => after.get(n) !== before.get(n)).sort();
      // the empty assignment of an unknown subset is one push's (its name alone is its content)
      const expected = cacheOn ? [...s.repacked, UNDEFINED_SUBSET].sort() : [...NAMES].sort();
      t.same(repacked, expected, `cache ${cacheOn ? 'on' : 'off'}, ${s.what}: packed again`);
      if (s.ips) t.same(addresses(after.get(s.ips[0])), s.ips[1], `${s.what}: the new endpoints`);
      before = after;
    }
  }
});

t.test('a reused empty assignment is still reported in the push status (edsNoInstances)', async (t) => {
  const store = new ListStore([...configs, we('apps', 'r1', '10.1.0.1', { app: 'reviews', version: 'v3' })]);
  const registry = buildRegistries(store, []);
  const first = initPushContext(store, registry);
  const next = initPushContext(store, registry, {}, undefined, { prev: first, changes: { kinds: new Set(['VirtualService']), services: false } });
  const v1 = (p: PushContext) =>
    edsGenerator.generate(P.apps1, { typeUrl: TYPE_URL.endpoint, resourceNames: new Set([V1]), wildcard: false }, fullPush(p)).resources[0];
  const a = v1(first);
  const b = v1(next);
  t.equal(a, b, 'reused');
  t.same(addresses(b), [], 'no endpoint has version v1');
  for (const p of [first, next]) t.match(JSON.stringify(p.status.toJSON()), V1, `push ${p.pushVersion} reports ${V1} without instances`);
});
