// GatewayApiConfigStore (src/config/gateway-api/store.ts) across edits: an edit of one route translates that
// route again and hands out every other VirtualService as the same object (identity-keyed caches stay warm, the
// push is for one VirtualService), while a change of what a conversion reads (here a ServiceEntry a backendRef
// names) converts the routes again (its status no longer says the backend is missing).
import t from 'tap';
import type { GatewayApiConfigStore } from '../../src/config/gateway-api/store';
import type { ConfigEvent } from '../../src/config/store';
import { cfg, gatewayApiStore, ListStore } from '../discovery/fixtures';

const host = (i: number) => `svc-${i}.apps.svc.cluster.local`;
const serviceEntry = (i: number) =>
  cfg('ServiceEntry', 'apps', `svc-${i}`, { hosts: [host(i)], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] } as never);
const CREATED = '2026-01-01T00:00:00Z';
const route = (i: number, value = '0') =>
  cfg(
    'HTTPRoute',
    'apps',
    `r-${i}`,
    {
      parentRefs: [{ name: 'web', namespace: 'mesh-system' }],
      hostnames: [`r-${i}.example`],
      rules: [
        {
          filters: [{ type: 'RequestHeaderModifier', requestHeaderModifier: { set: [{ name: 'x-edit', value }] } }],
          backendRefs: [{ group: 'networking.istio.io', kind: 'Hostname', name: host(i), port: 80 }],
        },
      ],
    } as never,
    { created: CREATED },
  );
const gateway = cfg('KubernetesGateway', 'mesh-system', 'web', {
  gatewayClassName: 'mesh',
  listeners: [{ name: 'http', port: 8080, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } }],
} as never);

function open(configs: Parameters<ListStore['apply']>) {
  const inner = new ListStore(configs);
  return { inner, ...gatewayApiStore(inner) };
}

const names = (events: readonly ConfigEvent[]) => events.map((e) => `${e.type} ${e.config.kind}/${e.config.meta.name}`).sort();
const vsFor = (store: GatewayApiConfigStore, i: number) => store.list('VirtualService').find((v) => v.spec.hosts?.includes(`r-${i}.example`));
const headerSet = (store: GatewayApiConfigStore, i: number) => JSON.stringify(vsFor(store, i)?.spec.http?.[0]?.headers ?? null);

t.test('an edit of one route: one VirtualService updated, the others the same objects', async (t) => {
  const { inner, store, events } = open([gateway, serviceEntry(0), serviceEntry(1), serviceEntry(2), route(0), route(1), route(2)]);
  const before = store.list('VirtualService');
  t.equal(before.length, 3, 'a VirtualService per route');
  inner.apply(route(1, '7'));
  t.same(names(events), ['update HTTPRoute/r-1', `update VirtualService/${vsFor(store, 1)!.meta.name}`]);
  t.match(headerSet(store, 1), /"x-edit":"7"/, 'the edited route carries the edit');
  for (const i of [0, 2])
    t.equal(
      vsFor(store, i),
      before.find((v) => v.spec.hosts?.includes(`r-${i}.example`)),
      `route ${i}: the same object`,
    );
  events.length = 0;
  inner.apply(route(1, '7'));
  t.same(names(events), ['update HTTPRoute/r-1'], 'an edit that changes nothing translated: no VirtualService event');
});

t.test('a ServiceEntry a route names appears: the routes are converted again', async (t) => {
  const { inner, store, events } = open([gateway, serviceEntry(0), route(0), route(1)]);
  const status = () => JSON.stringify(store.status().routes.get('HTTPRoute/apps/r-1'));
  t.match(status(), /BackendNotFound/, 'route 1 names a backend that does not exist');
  inner.apply(serviceEntry(1));
  // the status comes from the route's conversion: a conversion kept from before would still say BackendNotFound
  t.notMatch(status(), /BackendNotFound/, 'found once its ServiceEntry exists');
  t.match(status(), /ResolvedRefs/, 'the route has its status');
  t.ok(events.length > 0, 'the ServiceEntry is passed on');
});
