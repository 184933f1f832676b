// Types a VirtualService edit leaves unchanged (src/xds/gen/unchanged.ts): what it claims unchanged must be
// what the generators give — the same names and bytes for sidecars, gateways and proxyless gRPC clients —
// and what it does not claim must be because the edit can change it (tcp/tls routes, hosts, order).
import t from 'tap';
import { initPushContext, type PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import type { Config } from '../../../src/config/types';
import type { Proxy } from '../../../src/discovery/model';
import { generatorsFor } from '../../../src/xds/gen';
import { typesUnchanged } from '../../../src/xds/gen/unchanged';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, gatewayApiStore, ListStore, proxy } from '../../discovery/fixtures';
import { fullPush } from './helpers';

const CREATED = '2026-01-01T00:00:00Z';
const se = (name: string, port: number, protocol: string, address: string) =>
  cfg('ServiceEntry', 'apps', name, {
    hosts: [`${name}.apps.svc.cluster.local`],
    addresses: [address],
    location: 'MESH_INTERNAL',
    resolution: 'STATIC',
    ports: [{ number: port, name: protocol.toLowerCase(), protocol }],
    endpoints: [
      { address: `10.1.9.${address.slice(-1)}`, labels: { version: 'v1' } },
      { address: `10.1.8.${address.slice(-1)}`, labels: { version: 'v2' } },
    ],
  } as never);

const reviewsVs = (spec: Record<string, unknown>) =>
  cfg('VirtualService', 'apps', 'reviews', { hosts: ['reviews'], gateways: ['mesh-system/gw', 'mesh'], ...spec } as never, { created: CREATED });
const dbVs = (spec: Record<string, unknown>) =>
  cfg('VirtualService', 'apps', 'db', { hosts: ['db'], gateways: ['mesh-system/gw', 'mesh'], ...spec } as never, { created: '2026-01-01T00:00:01Z' });

const base: Config[] = [
  se('reviews', 9080, 'HTTP', '10.96.0.1'),
  se('ratings', 9080, 'HTTP', '10.96.0.2'),
  se('db', 5432, 'TCP', '10.96.0.3'),
  se('db2', 5432, 'TCP', '10.96.0.4'),
  cfg('DestinationRule', 'apps', 'ratings', {
    host: 'ratings',
    subsets: [
      { name: 'v1', labels: { version: 'v1' } },
      { name: 'v2', labels: { version: 'v2' } },
    ],
  } as never),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [
      { port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] },
      { port: { number: 31400, name: 'tcp', protocol: 'TCP' }, hosts: ['*'] },
    ],
  } as never),
  reviewsVs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }] }),
  dbVs({ tcp: [{ route: [{ destination: { host: 'db', port: { number: 5432 } } }] }] }),
];

const proxies = (): Proxy[] => [
  proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews' } }),
  proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { NAMESPACE: 'mesh-system', LABELS: { istio: 'ingressgateway' } }),
  proxy('sidecar~10.1.0.2~g1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', GENERATOR: 'grpc' }),
];

const GRPC_NAMES: Record<string, string[]> = {
  [TYPE_URL.cluster]: [],
  [TYPE_URL.listener]: ['reviews.apps.svc.cluster.local:9080', 'db.apps.svc.cluster.local:5432'],
};

/** name → bytes (hex) of a type for a proxy. */
function generated(p: Proxy, push: PushContext, typeUrl: string): Map<string, string> {
  const names = p.proxyless ? GRPC_NAMES[typeUrl]! : [];
  const w = { typeUrl, resourceNames: new Set(names), wildcard: names.length === 0 };
  const out = generatorsFor(p)[typeUrl]!.generate(p, w, fullPush(push, 0)).resources;
  return new Map(out.map((r) => [r.name, Buffer.from(r.resource.value).toString('hex')]));
}

/** The push contexts before and after applying `edit` to one store (services stay the registry's). */
function edited(edit: Config[], remove?: [string, string]): { prev: PushContext; next: PushContext; keys: Set<string> } {
  const store = new ListStore(base);
  const registry = buildRegistries(store, []);
  const prev = initPushContext(store, registry);
  if (remove) store.remove('VirtualService', remove[0], remove[1]);
  if (edit.length > 0) store.apply(...edit);
  const next = initPushContext(store, registry);
  const keys = new Set([
    ...edit.map((c) => `${c.kind}/${c.meta.namespace}/${c.meta.name}`),
    ...(remove ? [`VirtualService/${remove.join('/')}`] : []),
  ]);
  return { prev, next, keys };
}

function sameFor(t: { same: (a: unknown, b: unknown, m: string) => unknown }, prev: PushContext, next: PushContext, typeUrl: string): void {
  for (const p of proxies())
    t.same(
      generated(p, next, typeUrl),
      generated(p, prev, typeUrl),
      `${p.type}${p.proxyless ? ' (gRPC)' : ''}: ${typeUrl.split('.').pop()} unchanged`,
    );
}

t.test('an edit of HTTP routes leaves clusters and listeners as they were', async (t) => {
  const { prev, next, keys } = edited([
    reviewsVs({
      http: [
        { match: [{ headers: { end: { exact: 'x' } } }], route: [{ destination: { host: 'ratings', subset: 'v2' } }], retries: { attempts: 2 } },
        {
          route: [
            { destination: { host: 'reviews' }, weight: 70 },
            { destination: { host: 'ratings', subset: 'v1' }, weight: 30 },
          ],
          timeout: '9s',
        },
      ],
    }),
  ]);
  t.same([...typesUnchanged(prev, next, keys)].sort(), [TYPE_URL.cluster, TYPE_URL.listener].sort());
  sameFor(t, prev, next, TYPE_URL.cluster);
  sameFor(t, prev, next, TYPE_URL.listener);
  // the routes did change: RDS is not among the unchanged
  const sidecar = proxies()[0]!;
  const w = { typeUrl: TYPE_URL.route, resourceNames: new Set(['9080']), wildcard: false };
  const rds = (push: PushContext) =>
    Buffer.from(generatorsFor(sidecar)[TYPE_URL.route]!.generate(sidecar, w, fullPush(push, 0)).resources[0]!.resource.value).toString('hex');
  t.not(rds(next), rds(prev), 'the route configuration changed');
});

t.test('an edit of a tcp route changes listeners: only clusters are unchanged', async (t) => {
  const { prev, next, keys } = edited([dbVs({ tcp: [{ route: [{ destination: { host: 'db2', port: { number: 5432 } } }] }] })]);
  t.same([...typesUnchanged(prev, next, keys)], [TYPE_URL.cluster]);
  sameFor(t, prev, next, TYPE_URL.cluster);
  const [sidecar, gateway] = proxies();
  t.notSame(generated(sidecar!, next, TYPE_URL.listener), generated(sidecar!, prev, TYPE_URL.listener), 'the sidecar listener for db changed');
  t.notSame(generated(gateway!, next, TYPE_URL.listener), generated(gateway!, prev, TYPE_URL.listener), 'the gateway tcp chain changed');
});

t.test('hosts, gateways and exportTo decide listeners; adding or deleting a VirtualService changes the list', async (t) => {
  for (const [what, edit, remove] of [
    ['hosts', [reviewsVs({ hosts: ['reviews', 'ratings'], http: [{ route: [{ destination: { host: 'reviews' } }] }] })], undefined],
    ['gateways', [reviewsVs({ gateways: ['mesh'], http: [{ route: [{ destination: { host: 'reviews' } }] }] })], undefined],
    ['exportTo', [reviewsVs({ exportTo: ['.'], http: [{ route: [{ destination: { host: 'reviews' } }] }] })], undefined],
    [
      'added',
      [cfg('VirtualService', 'apps', 'ratings', { hosts: ['ratings'], http: [{ route: [{ destination: { host: 'ratings' } }] }] } as never)],
      undefined,
    ],
    ['deleted', [], ['apps', 'db']],
  ] as const) {
    const { prev, next, keys } = edited([...edit], remove ? [...remove] : undefined);
    t.same([...typesUnchanged(prev, next, keys)], [TYPE_URL.cluster], `${what}: clusters only`);
    sameFor(t, prev, next, TYPE_URL.cluster);
  }
});

t.test('any other kind, or no list of changes, leaves nothing known unchanged', async (t) => {
  const dr = cfg('DestinationRule', 'apps', 'ratings', { host: 'ratings', subsets: [{ name: 'v1', labels: { version: 'v1' } }] } as never);
  const { prev, next, keys } = edited([dr, reviewsVs({ http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '4s' }] })]);
  t.same([...typesUnchanged(prev, next, keys)], [], 'a DestinationRule beside the VirtualService');
  t.same([...typesUnchanged(prev, next, new Set())], [], 'unknown changes');
  t.same([...typesUnchanged(prev, prev, keys)], [], 'the same push context');
});

t.test('an HTTPRoute edit is judged by the VirtualService translated from it: clusters and listeners unchanged', async (t) => {
  const gateway = cfg('KubernetesGateway', 'mesh-system', 'web', {
    gatewayClassName: 'mesh',
    listeners: [{ name: 'http', port: 8080, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }],
  } as never);
  const route = (timeout: string) =>
    cfg('HTTPRoute', 'apps', 'reviews', {
      parentRefs: [{ name: 'web', namespace: 'mesh-system' }],
      hostnames: ['reviews.example'],
      rules: [
        {
          backendRefs: [{ group: 'networking.istio.io', kind: 'Hostname', name: 'reviews.apps.svc.cluster.local', port: 9080 }],
          timeouts: { request: timeout },
        },
      ],
    } as never);
  const inner = new ListStore([...base, gateway, route('3s')]);
  const { store, events } = gatewayApiStore(inner);
  const registry = buildRegistries(store, []);
  const prev = initPushContext(store, registry);
  t.ok(
    prev.virtualServices().some((v) => v.hosts.includes('reviews.example')),
    'the HTTPRoute is served as a VirtualService',
  );
  inner.apply(route('9s'));
  const next = initPushContext(store, registry);
  const keys = new Set(events.map((e) => `${e.config.kind}/${e.config.meta.namespace}/${e.config.meta.name}`));
  t.same([...keys].map((k) => k.split('/')[0]).sort(), ['HTTPRoute', 'VirtualService'], 'the push names the HTTPRoute and its VirtualService');
  t.same([...typesUnchanged(prev, next, keys)].sort(), [TYPE_URL.cluster, TYPE_URL.listener].sort());
  const router = proxy('router~10.0.0.9~web.mesh-system~mesh-system.svc.cluster.local', {
    NAMESPACE: 'mesh-system',
    LABELS: { 'gateway.networking.k8s.io/gateway-name': 'web' },
  });
  for (const p of [...proxies(), router])
    for (const typeUrl of [TYPE_URL.cluster, TYPE_URL.listener])
      t.same(generated(p, next, typeUrl), generated(p, prev, typeUrl), `${p.type} ${p.id}: ${typeUrl.split('.').pop()} unchanged`);
  t.ok(generated(router, next, TYPE_URL.listener).size > 0, 'the router has the Gateway’s listener');
  const other = new Set([...keys, 'KubernetesGateway/mesh-system/web']);
  t.same([...typesUnchanged(prev, next, other)], [], 'a Gateway API Gateway beside it: nothing known unchanged');
});
