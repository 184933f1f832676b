// Which sidecars obey an HTTPRoute attached to a Service (GAMMA), and against which VirtualServices, as a table over
// the sidecar RouteConfiguration each caller gets. Expected values follow Istio 1.26: a route in the service's
// namespace (producer) applies to every caller, one in another namespace (consumer) only to callers in its own
// namespace (route.go buildSidecarVirtualHostsForVirtualService); SelectVirtualServices puts Gateway API routes of
// the caller's namespace first within each exportTo group (private, exported, public), and the first
// VirtualService to name a host claims it (httproute.go: later duplicate domains dropped), so otherwise the oldest
// wins; a parentRef port narrows the route to that port (augmentPortMatch).
import t from 'tap';
import { GatewayApiConfigStore, gatewayApiOptions } from '../../../src/config/gateway-api';
import type { Config } from '../../../src/config/types';
import { initPushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { buildSidecarRouteConfiguration } from '../../../src/xds/gen/rds';
import { cfg, ListStore, proxy } from '../../discovery/fixtures';

const OPTS = gatewayApiOptions({ controllerName: 'mesh.io/gateway-controller', defaultClassName: 'mesh', alpha: false, domain: 'cluster.local' });
const HOST = 'echo.shop.svc.cluster.local';

const service = (ns: string, name: string, ip: string) =>
  cfg('Service', ns, name, {
    clusterIP: ip,
    ports: [
      { name: 'http', port: 8080, protocol: 'TCP' },
      { name: 'http-alt', port: 9090, protocol: 'TCP' },
    ],
  });

/** An HTTPRoute on Service shop/echo (port optional) whose one rule sets `x-route: <name>` on the response. */
const httpRoute = (ns: string, name: string, port?: number) =>
  cfg('HTTPRoute', ns, name, {
    parentRefs: [{ group: '', kind: 'Service', name: 'echo', namespace: 'shop', ...(port ? { port } : {}) }],
    rules: [
      {
        filters: [{ type: 'ResponseHeaderModifier', responseHeaderModifier: { set: [{ name: 'x-route', value: name }] } }],
        backendRefs: [{ name: 'echo', namespace: 'shop', port: 8080 }],
      },
    ],
  } as never);

const virtualService = (ns: string, name: string, exportTo?: string[]) =>
  cfg('VirtualService', ns, name, {
    hosts: [HOST],
    ...(exportTo ? { exportTo } : {}),
    http: [{ name: `vs-${name}`, route: [{ destination: { host: HOST } }] }],
  });

/** The names of the routes a sidecar in `ns` gets for the echo host on `port`; [] when the host has none. */
function routesSeen(configs: Config[], ns: string, port = 8080): string[] {
  const store = new GatewayApiConfigStore(new ListStore(configs), OPTS);
  const push = initPushContext(store, buildRegistries(store, ['Orchestrator']));
  const caller = proxy(`sidecar~10.9.0.1~caller.${ns}~${ns}.svc.cluster.local`, { NAMESPACE: ns });
  const rc = buildSidecarRouteConfiguration(caller, push, String(port));
  const vh = rc.virtualHosts.find((v) => v.domains.includes(HOST));
  return vh ? vh.routes.map((r) => r.name) : [];
}

const services = [service('shop', 'echo', '10.96.0.10')];
const producer = httpRoute('shop', 'producer');
const consumer = httpRoute('client', 'consumer');

t.test('a producer route applies to every caller', async (t) => {
  for (const ns of ['shop', 'client', 'other']) t.same(routesSeen([...services, producer], ns), ['shop.producer.0'], `caller in ${ns}`);
});

t.test('a consumer route applies to callers in its namespace only, before the producer route', async (t) => {
  const configs = [...services, producer, consumer];
  t.same(routesSeen(configs, 'client'), ['client.consumer.0'], 'the consumer route wins for its own namespace');
  t.same(routesSeen(configs, 'other'), ['shop.producer.0']);
  t.same(routesSeen(configs, 'shop'), ['shop.producer.0']);
  t.same(routesSeen([...services, consumer], 'other'), ['default'], 'no route for others: the default route');
});

t.test('against a public VirtualService for the same host: the oldest wins, but a route of the caller namespace first', async (t) => {
  // cfg stamps creation times in call order: the VirtualService is older than the route made after it
  const older = virtualService('team', 'older');
  const route = httpRoute('shop', 'producer');
  const configs = [...services, older, route];
  t.same(routesSeen(configs, 'other'), ['vs-older'], 'elsewhere the older VirtualService claims the host');
  t.same(routesSeen(configs, 'shop'), ['shop.producer.0'], "in the route's namespace the Gateway API route comes first");
  const newer = virtualService('team', 'newer');
  t.same(routesSeen([...services, route, newer], 'other'), ['shop.producer.0'], 'an older route claims the host over a newer VirtualService');
});

t.test('a VirtualService private to the caller namespace comes before its Gateway API routes', async (t) => {
  const configs = [...services, httpRoute('client', 'consumer2'), virtualService('client', 'private', ['.'])];
  t.same(routesSeen(configs, 'client'), ['vs-private']);
  t.same(routesSeen(configs, 'other'), ['default'], 'neither applies elsewhere');
});

t.test('a parentRef port narrows the route to that port', async (t) => {
  const configs = [...services, httpRoute('shop', 'ported', 9090)];
  t.same(routesSeen(configs, 'other', 9090), ['shop.ported.0']);
  t.same(routesSeen(configs, 'other', 8080), ['default'], 'another port of the service keeps its default route');
});
