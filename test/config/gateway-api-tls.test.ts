// TLSRoute and TCPRoute translation (src/config/gateway-api/tls-routes.ts) beyond Istio's golden files
// (gateway-api-golden.test.ts runs tls, tcp and reference-policy-tcp): PILOT_ENABLE_ALPHA_GATEWAY_API off ignores
// them, as Istio; the conformance suite's TLSRoute manifests give the status its tests expect; zero weights and a
// Terminate TLS listener with a TCPRoute give Istio's shapes (conversion.go convertTLSRoute/convertTCPRoute,
// buildListener). Expected values are Istio's and the Gateway API spec's, written out by hand.
import t from 'tap';
import { parseDocuments } from '../../src/config/parse';
import type { Config, Kind } from '../../src/config/types';
import { gatewayApiOptions, translateGatewayApi } from '../../src/config/gateway-api';
import { makeServerCert } from '../helpers/agent';
import { tempDir } from '../helpers/temp';
import fs from 'node:fs';

const opts = (alpha: boolean) =>
  gatewayApiOptions({ controllerName: 'mesh.io/gateway-controller', defaultClassName: 'mesh', alpha, domain: 'cluster.local' });

const dir = tempDir(t, 'mesh-gw-tls-');
const pair = makeServerCert(dir, 'abc.example.com');
const b64 = (f: string) => fs.readFileSync(f).toString('base64');

const BASE = `
apiVersion: v1
kind: Service
metadata: {name: tls-backend, namespace: infra}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: tls-backend, namespace: app}
spec: {ports: [{port: 443}]}
---
apiVersion: v1
kind: Service
metadata: {name: tcp-backend, namespace: infra}
spec: {ports: [{port: 9000}]}
---
apiVersion: v1
kind: Secret
metadata: {name: cert, namespace: infra}
data: {tls.crt: ${b64(pair.cert)}, tls.key: ${b64(pair.key)}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: infra}
spec:
  gatewayClassName: mesh
  listeners:
  - name: passthrough
    port: 443
    protocol: TLS
    hostname: "*.example.com"
    allowedRoutes: {namespaces: {from: Same}, kinds: [{kind: TLSRoute}]}
    tls: {mode: Passthrough}
  - name: terminate
    port: 8443
    protocol: TLS
    hostname: "abc.example.com"
    tls: {mode: Terminate, certificateRefs: [{name: cert}]}
  - name: tcp
    port: 9000
    protocol: TCP
`;

function translate(yaml: string, alpha = true) {
  const r = parseDocuments(BASE + '---\n' + yaml, 'test.yaml');
  if ((r.errors ?? []).length > 0) throw new Error(`the manifests do not parse: ${JSON.stringify(r.errors)}`);
  const of = <K extends Kind>(k: K) => r.configs.filter((c): c is Config<K> => c.kind === k);
  return translateGatewayApi(
    {
      gatewayClasses: [],
      gateways: of('KubernetesGateway'),
      httpRoutes: of('HTTPRoute'),
      grpcRoutes: of('GRPCRoute'),
      referenceGrants: of('ReferenceGrant'),
      services: of('Service'),
      serviceEntries: [],
      namespaces: [],
      secrets: of('Secret'),
      tlsRoutes: of('TLSRoute'),
      tcpRoutes: of('TCPRoute'),
    },
    opts(alpha),
  );
}

const ROUTES = `
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: same, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: passthrough}]
  hostnames: [abc.example.com]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: cross, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: passthrough}]
  hostnames: [def.example.com]
  rules: [{backendRefs: [{name: tls-backend, namespace: app, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: tcp, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: tcp}]
  rules: [{backendRefs: [{name: tcp-backend, port: 9000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: terminated, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: terminate}]
  rules: [{backendRefs: [{name: tcp-backend, port: 9000, weight: 0}]}]
`;

const cond = (cs: readonly { type: string; status: string; reason: string }[], type: string) => {
  const c = cs.find((x) => x.type === type);
  return c ? `${c.status}/${c.reason}` : 'missing';
};

t.test('flag off: TLS and TCP listeners not accepted, routes ignored (Istio: no TLSRoute/TCPRoute collections)', async (t) => {
  const out = translate(ROUTES, false);
  t.same(out.virtualServices, [], 'no VirtualService');
  t.same(out.gateways, [], 'no internal Gateway: every listener is TLS or TCP');
  t.same([...out.status.routes.keys()], [], 'no route status written');
  const gw = out.status.gateways.get('KubernetesGateway/infra/gw')!;
  t.same(
    gw.listeners.map((l) => [l.name, cond(l.conditions, 'Accepted'), l.attachedRoutes]),
    [
      ['passthrough', 'False/UnsupportedProtocol', 0],
      ['terminate', 'False/UnsupportedProtocol', 0],
      ['tcp', 'False/UnsupportedProtocol', 0],
    ],
  );
  t.match(cond(gw.listeners[0]!.conditions, 'Accepted'), 'False');
  t.equal(
    gw.listeners[0]!.conditions.find((c) => c.type === 'Accepted')!.message,
    'protocol "TLS" is supported, but only when PILOT_ENABLE_ALPHA_GATEWAY_API=true is configured',
  );
});

t.test('flag on: listeners, route status and attachedRoutes', async (t) => {
  const out = translate(ROUTES);
  const gw = out.status.gateways.get('KubernetesGateway/infra/gw')!;
  t.same(
    gw.listeners.map((l) => [
      l.name,
      cond(l.conditions, 'Accepted'),
      cond(l.conditions, 'ResolvedRefs'),
      l.supportedKinds.map((k) => k.kind),
      l.attachedRoutes,
    ]),
    [
      // TLSRouteSimpleSameNamespace/TLSRouteInvalidReferenceGrant: both routes attach (an unresolved backend does not
      // detach a route)
      ['passthrough', 'True/Accepted', 'True/ResolvedRefs', ['TLSRoute'], 2],
      // a Terminate TLS listener carries TCPRoutes (Istio generateSupportedKinds)
      ['terminate', 'True/Accepted', 'True/ResolvedRefs', ['TCPRoute'], 1],
      ['tcp', 'True/Accepted', 'True/ResolvedRefs', ['TCPRoute'], 1],
    ],
  );
  const route = (k: string) => out.status.routes.get(k)!.parents[0]!.conditions;
  t.equal(cond(route('TLSRoute/infra/same'), 'Accepted'), 'True/Accepted');
  t.equal(cond(route('TLSRoute/infra/same'), 'ResolvedRefs'), 'True/ResolvedRefs');
  // TLSRouteInvalidReferenceGrant: Accepted, ResolvedRefs False RefNotPermitted
  t.equal(cond(route('TLSRoute/infra/cross'), 'Accepted'), 'True/Accepted');
  t.equal(cond(route('TLSRoute/infra/cross'), 'ResolvedRefs'), 'False/RefNotPermitted');
  t.equal(
    route('TLSRoute/infra/cross').find((c) => c.type === 'ResolvedRefs')!.message,
    'backendRef tls-backend/app not accessible to a TLSRoute in namespace "infra" (missing a ReferenceGrant?)',
  );
  t.equal(out.status.routes.get('TLSRoute/infra/same')!.parents[0]!.controllerName, 'mesh.io/gateway-controller');
});

t.test('flag on: internal Gateways and VirtualServices', async (t) => {
  const out = translate(ROUTES);
  const servers = Object.fromEntries(out.gateways.map((g) => [g.meta.name, g.spec.servers[0]]));
  t.same(servers['gw-mesh-autogenerated-k8s-gateway-passthrough'], {
    port: { number: 443, protocol: 'TLS', name: 'default' },
    hosts: ['infra/*.example.com'],
    tls: { mode: 'PASSTHROUGH' },
  });
  t.same(servers['gw-mesh-autogenerated-k8s-gateway-terminate'], {
    port: { number: 8443, protocol: 'TLS', name: 'default' },
    hosts: ['infra/abc.example.com'],
    tls: { mode: 'SIMPLE', credentialName: 'kubernetes-gateway://infra/cert' },
  });
  const vs = Object.fromEntries(out.virtualServices.map((v) => [v.meta.name, v.spec]));
  t.same(vs['same-tls-0-mesh-autogenerated-k8s-gateway'], {
    hosts: ['abc.example.com'],
    gateways: ['infra/gw-mesh-autogenerated-k8s-gateway-passthrough'],
    tls: [
      {
        match: [{ sniHosts: ['abc.example.com'] }],
        route: [{ destination: { host: 'tls-backend.infra.svc.cluster.local', port: { number: 443 } } }],
      },
    ],
  });
  // the refused backend stays, with no host: the connection finds no upstream (Istio buildTCPDestination)
  t.same(vs['cross-tls-0-mesh-autogenerated-k8s-gateway']!.tls![0]!.route, [{ destination: { host: '' } }]);
  t.same(vs['tcp-tcp-0-mesh-autogenerated-k8s-gateway'], {
    hosts: ['*'],
    gateways: ['infra/gw-mesh-autogenerated-k8s-gateway-tcp'],
    tcp: [{ route: [{ destination: { host: 'tcp-backend.infra.svc.cluster.local', port: { number: 9000 } } }] }],
  });
  // every backend weighs 0: Istio's unreachable destination ("The spec requires us to reject connections")
  t.same(vs['terminated-tcp-0-mesh-autogenerated-k8s-gateway']!.tcp, [
    { route: [{ destination: { host: 'internal.cluster.local', subset: 'zero-weight', port: { number: 65535 } }, weight: 0 }] },
  ]);
});

t.test('a TLSRoute on an HTTP listener is not allowed; an HTTPRoute on a TLS listener neither', async (t) => {
  const out = translate(`
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: infra}
spec:
  gatewayClassName: mesh
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {name: wrong, namespace: infra}
spec:
  parentRefs: [{name: web}]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-on-tls, namespace: infra}
spec:
  parentRefs: [{name: gw, sectionName: passthrough}]
  rules: [{backendRefs: [{name: tls-backend, port: 443}]}]
`);
  const c = out.status.routes.get('TLSRoute/infra/wrong')!.parents[0]!.conditions.find((x) => x.type === 'Accepted')!;
  t.same([c.status, c.reason, c.message], ['False', 'NotAllowedByListeners', 'kind gateway.networking.k8s.io/v1alpha2/TLSRoute is not allowed']);
  const h = out.status.routes.get('HTTPRoute/infra/web-on-tls')!.parents[0]!.conditions.find((x) => x.type === 'Accepted')!;
  t.same([h.status, h.reason], ['False', 'NotAllowedByListeners']);
  t.notOk(
    out.virtualServices.some((v) => v.meta.name.startsWith('wrong-')),
    'no VirtualService for the refused TLSRoute',
  );
});
