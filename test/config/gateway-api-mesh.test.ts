// HTTPRoute/GRPCRoute attached to a Service or ServiceEntry (the GAMMA mesh profile), manifests → internal config
// and status, as tables. Expected values follow Istio 1.26's pilot/pkg/config/kube/gateway (route_collections.go:
// one VirtualService per route namespace, parentRef port and host, named after that key with `/` as `~`, bound to
// `mesh`; conversion.go: augmentPortMatch, referenceAllowed's "parent service: %q not found", buildDestination with
// enforceRefGrant false for mesh parents; conditions.go: createRouteStatus). Istio's own mesh and serviceentry
// golden files run in gateway-api-golden.test.ts; these tables cover what they do not.
import t from 'tap';
import { parseDocuments } from '../../src/config/parse';
import type { Config, Kind } from '../../src/config/types';
import { gatewayApiOptions, translateGatewayApi, type GatewayApiOutput } from '../../src/config/gateway-api';

const OPTS = gatewayApiOptions({ controllerName: 'mesh.io/gateway-controller', defaultClassName: 'mesh', alpha: false, domain: 'cluster.local' });

const BASE = `
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: shop}
spec: {ports: [{name: http, port: 8080}, {name: http-alt, port: 9090}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo-v2, namespace: shop}
spec: {ports: [{name: http, port: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: other, namespace: elsewhere}
spec: {ports: [{name: http, port: 8080}]}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ext, namespace: shop}
spec: {hosts: [api.example.com, "*.example.org"], ports: [{number: 80, name: http, protocol: HTTP}], resolution: DNS}
`;

function translate(yaml: string): GatewayApiOutput {
  const cs = parseDocuments(`${BASE}---\n${yaml}`, 'test.yaml').configs;
  const of = <K extends Kind>(k: K) => cs.filter((c): c is Config<K> => c.kind === k);
  return translateGatewayApi(
    {
      gatewayClasses: of('GatewayClass'),
      gateways: of('KubernetesGateway'),
      httpRoutes: of('HTTPRoute'),
      grpcRoutes: of('GRPCRoute'),
      referenceGrants: of('ReferenceGrant'),
      services: of('Service'),
      serviceEntries: of('ServiceEntry'),
      namespaces: of('Namespace'),
      secrets: of('Secret'),
    },
    OPTS,
  );
}

const route = (name: string, ns: string, parentRefs: string, rules: string, more = '') => `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ${name}, namespace: ${ns}${more}}
spec:
  parentRefs: ${parentRefs}
  rules: ${rules}
`;

const toEcho = `[{backendRefs: [{name: echo, port: 8080}]}]`;

/** name → {namespace, hosts, gateways, http, parents annotation} of every VirtualService. */
function virtualServices(out: GatewayApiOutput): Record<string, unknown> {
  return Object.fromEntries(
    out.virtualServices.map((v) => [
      v.meta.name,
      {
        namespace: v.meta.namespace,
        hosts: v.spec.hosts,
        gateways: v.spec.gateways,
        http: JSON.parse(JSON.stringify(v.spec.http)),
        parents: v.meta.annotations['internal.mesh.io/parents'],
        semantics: v.meta.annotations['internal.mesh.io/route-semantics'],
      },
    ]),
  );
}

/** Each parent's conditions of one route, as `type=status reason: message`. */
function parentStatus(
  out: GatewayApiOutput,
  ns: string,
  name: string,
  kind = 'HTTPRoute',
): Array<{ ref: unknown; controller: string; conds: string[] }> {
  const st = out.status.routes.get(`${kind}/${ns}/${name}`);
  return (st?.parents ?? []).map((p) => ({
    ref: p.parentRef,
    controller: p.controllerName,
    conds: p.conditions.map((c) => `${c.type}=${c.status} ${c.reason}: ${c.message}`),
  }));
}

const OK = ['Accepted=True Accepted: Route was valid', 'ResolvedRefs=True ResolvedRefs: All references resolved'];
const echoHost = 'echo.shop.svc.cluster.local';
const echoDest = { destination: { host: echoHost, port: { number: 8080 } } };

t.test('a producer route: one VirtualService for the Service host, bound to mesh, route hostnames ignored', async (t) => {
  const out = translate(
    route('split', 'shop', `[{group: "", kind: Service, name: echo}]`, toEcho, '').replace('spec:\n', 'spec:\n  hostnames: [ignored.example.com]\n'),
  );
  t.same(virtualServices(out), {
    [`shop~${echoHost}`]: {
      namespace: 'shop',
      hosts: [echoHost],
      gateways: ['mesh'],
      http: [{ name: 'shop.split.0', route: [echoDest] }],
      parents: 'HTTPRoute/split.shop',
      semantics: 'gateway',
    },
  });
  t.same(out.gateways, [], 'no internal Gateway for a mesh parent');
  t.same(parentStatus(out, 'shop', 'split'), [
    { ref: { group: '', kind: 'Service', name: 'echo' }, controller: 'mesh.io/gateway-controller', conds: OK },
  ]);
});

t.test('parentRef port: every match (or a new lone one) asks for the port, and the port joins the key', async (t) => {
  const out = translate(
    route(
      'ported',
      'shop',
      `[{group: "", kind: Service, name: echo, port: 9090}]`,
      `[{matches: [{path: {type: PathPrefix, value: /v2}}, {headers: [{name: x-v, value: "2"}]}], backendRefs: [{name: echo-v2, port: 8080}]}, {backendRefs: [{name: echo, port: 8080}]}]`,
    ),
  );
  const v2 = { destination: { host: 'echo-v2.shop.svc.cluster.local', port: { number: 8080 } } };
  t.same(virtualServices(out), {
    [`shop~9090~${echoHost}`]: {
      namespace: 'shop',
      hosts: [echoHost],
      gateways: ['mesh'],
      // Gateway API precedence: the prefix match, then the header match, then the rule without a match
      http: [
        { name: 'shop.ported.0', match: [{ uri: { prefix: '/v2' }, port: 9090 }], route: [v2] },
        { name: 'shop.ported.0', match: [{ uri: { prefix: '/' }, headers: { 'x-v': { exact: '2' } }, port: 9090 }], route: [v2] },
        { name: 'shop.ported.1', match: [{ port: 9090 }], route: [echoDest] },
      ],
      parents: 'HTTPRoute/ported.shop',
      semantics: 'gateway',
    },
  });
});

t.test('routes of one namespace for one service merge, oldest first among equals, parents listed', async (t) => {
  const out = translate(
    route(
      'b-newer',
      'shop',
      `[{group: "", kind: Service, name: echo}]`,
      `[{matches: [{path: {type: Exact, value: /x}}], backendRefs: [{name: echo-v2, port: 8080}]}]`,
      ', creationTimestamp: "2024-01-02T00:00:00Z"',
    ) +
      '---' +
      route('a-older', 'shop', `[{group: "", kind: Service, name: echo}]`, toEcho, ', creationTimestamp: "2024-01-01T00:00:00Z"'),
  );
  const vs = virtualServices(out)[`shop~${echoHost}`] as { http: Array<{ name: string }>; parents: string };
  t.same(
    vs.http.map((r) => r.name),
    ['shop.b-newer.0', 'shop.a-older.0'],
    'the exact match before the rule with none',
  );
  t.equal(vs.parents, 'HTTPRoute/a-older.shop,HTTPRoute/b-newer.shop');
});

t.test('a consumer route: the VirtualService lives in the route namespace, keyed by it', async (t) => {
  const out = translate(
    route(
      'mine',
      'client',
      `[{group: "", kind: Service, name: echo, namespace: shop}]`,
      `[{backendRefs: [{name: echo, namespace: shop, port: 8080}]}]`,
    ),
  );
  t.same(Object.keys(virtualServices(out)), [`client~${echoHost}`]);
  t.equal(out.virtualServices[0]!.meta.namespace, 'client');
  t.same(parentStatus(out, 'client', 'mine')[0]!.conds, OK, 'a cross-namespace backend needs no ReferenceGrant on a mesh parent');
});

t.test('one route on a Gateway and a Service: ReferenceGrant enforced on the Gateway parent only', async (t) => {
  const gw = `
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: client}
spec:
  gatewayClassName: mesh
  listeners: [{name: http, port: 80, protocol: HTTP}]
---`;
  const out = translate(
    gw +
      route(
        'dual',
        'client',
        `[{name: gw}, {group: "", kind: Service, name: echo, namespace: shop}]`,
        `[{backendRefs: [{name: echo, namespace: shop, port: 8080}]}]`,
      ),
  );
  const st = parentStatus(out, 'client', 'dual');
  // createRouteStatus orders parents by parentRefString, descending
  t.same(
    st.map((p) => p.ref),
    [{ name: 'gw' }, { group: '', kind: 'Service', name: 'echo', namespace: 'shop' }],
  );
  t.same(st[0]!.conds, [
    'Accepted=True Accepted: Route was valid',
    'ResolvedRefs=False RefNotPermitted: backendRef echo/shop not accessible to a HTTPRoute in namespace "client" (missing a ReferenceGrant?)',
  ]);
  t.same(st[1]!.conds, OK);
  const mesh = out.virtualServices.find((v) => v.spec.gateways?.includes('mesh'));
  t.same(mesh?.spec.http?.[0]?.route, [echoDest], 'the mesh copy routes to the backend');
  t.equal(out.status.gateways.get('KubernetesGateway/client/gw')?.listeners[0]?.attachedRoutes, 1, 'only the Gateway parent counts as attached');
});

t.test('a missing Service or ServiceEntry parent: NoMatchingParent, nothing served', async (t) => {
  const out = translate(
    route('lost', 'shop', `[{group: "", kind: Service, name: nope}, {group: networking.istio.io, kind: ServiceEntry, name: gone}]`, toEcho),
  );
  t.same(out.virtualServices, []);
  t.same(parentStatus(out, 'shop', 'lost'), [
    {
      ref: { group: 'networking.istio.io', kind: 'ServiceEntry', name: 'gone' },
      controller: 'mesh.io/gateway-controller',
      conds: ['Accepted=False NoMatchingParent: parent service entry: "gone" not found', 'ResolvedRefs=True ResolvedRefs: All references resolved'],
    },
    {
      ref: { group: '', kind: 'Service', name: 'nope' },
      controller: 'mesh.io/gateway-controller',
      conds: ['Accepted=False NoMatchingParent: parent service: "nope" not found', 'ResolvedRefs=True ResolvedRefs: All references resolved'],
    },
  ]);
});

t.test('a ServiceEntry parent: one VirtualService per host of the entry', async (t) => {
  const out = translate(
    route(
      'egress',
      'shop',
      `[{group: networking.istio.io, kind: ServiceEntry, name: ext}]`,
      `[{backendRefs: [{group: networking.istio.io, kind: Hostname, name: api.example.com, port: 80}]}]`,
    ),
  );
  t.same(
    out.virtualServices.map((v) => [v.meta.name, v.spec.hosts]),
    [
      ['shop~api.example.com', ['api.example.com']],
      ['shop~*.example.org', ['*.example.org']],
    ],
  );
});

t.test('a backend error on a mesh parent: ResolvedRefs False with the reason, the route still served', async (t) => {
  const out = translate(route('half', 'shop', `[{group: "", kind: Service, name: echo}]`, `[{backendRefs: [{name: missing, port: 8080}]}]`));
  t.same(parentStatus(out, 'shop', 'half')[0]!.conds, [
    'Accepted=True Accepted: Route was valid',
    'ResolvedRefs=False BackendNotFound: backend(missing.shop.svc.cluster.local) not found',
  ]);
  t.equal(out.virtualServices.length, 1);
});

t.test('a GRPCRoute on a Service: its gRPC matches, bound to mesh', async (t) => {
  const out = translate(`
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc, namespace: shop}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, port: 8080}]
  rules: [{matches: [{method: {service: echo.Echo, method: Hello}}], backendRefs: [{name: echo-v2, port: 8080}]}]
`);
  t.same(virtualServices(out), {
    [`shop~8080~${echoHost}`]: {
      namespace: 'shop',
      hosts: [echoHost],
      gateways: ['mesh'],
      http: [
        {
          name: 'shop.grpc.0',
          match: [{ uri: { exact: '/echo.Echo/Hello' }, port: 8080 }],
          route: [{ destination: { host: 'echo-v2.shop.svc.cluster.local', port: { number: 8080 } } }],
        },
      ],
      parents: 'GRPCRoute/grpc.shop',
      semantics: 'gateway',
    },
  });
  t.same(parentStatus(out, 'shop', 'grpc', 'GRPCRoute')[0]!.conds, OK);
});

t.test('parent references of other kinds are not ours: no status, nothing served', async (t) => {
  const out = translate(route('foreign', 'shop', `[{group: example.com, kind: Mesh, name: x}]`, toEcho));
  t.same(out.virtualServices, []);
  t.notOk(out.status.routes.has('HTTPRoute/shop/foreign'));
});
