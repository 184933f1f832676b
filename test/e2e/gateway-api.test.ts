// The Kubernetes Gateway API with the built programs and no cluster: the daemon reads a Gateway (class `mesh`) and
// HTTPRoutes from --configDir, and a `pilot-agent proxy router` started by hand with the pod label Istio's
// deployment controller gives a Gateway's pods (`gateway.networking.k8s.io/gateway-name: <name>`) serves them.
// The backend is a Service with an EndpointSlice on loopback, and answers with the request it saw. Expected
// behaviour is the Gateway API's (v1.3.0 spec and conformance): path prefixes match whole segments, the more
// specific match wins, header filters apply, a backend in another namespace needs a ReferenceGrant (500 without),
// and the status the leader would write is on the daemon's /debug/gateway-status.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built } from '../helpers/binary';
import { type GatewayPorts, startGateway } from '../helpers/gateway';
import { yamlDocs } from '../helpers/mesh-yaml';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** The backend as a Service (demo/echo, port 80) with its endpoint on the rig's loopback backend. */
function backendDocs(backendPort: number, ns = 'demo'): string[] {
  return [
    `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: ${ns}}
spec:
  clusterIP: 10.96.0.${ns === 'demo' ? 40 : 41}
  ports: [{name: http, port: 80, targetPort: ${backendPort}}]
`,
    `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-1, namespace: ${ns}, labels: {kubernetes.io/service-name: echo}}
addressType: IPv4
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
ports: [{name: http, port: ${backendPort}}]
`,
  ];
}

const GATEWAY = (port: number): string => `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: mesh-system, generation: 1}
spec:
  gatewayClassName: mesh
  listeners:
  - name: http
    port: ${port}
    protocol: HTTP
    allowedRoutes: {namespaces: {from: All}}
`;

const ROUTES = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: echo, namespace: demo, generation: 3}
spec:
  parentRefs: [{name: gw, namespace: mesh-system}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /app}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-route, value: app}]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {add: [{name: x-answered-by, value: gateway-api}]}
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: Exact, value: /app/exact}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-route, value: exact}]}
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /other-ns}}]
    backendRefs: [{name: echo, namespace: other, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /prefix/one}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /one}}}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /strip-prefix}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: echo, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /original-prefix}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /replacement-prefix}}}]
`;

function config(p: GatewayPorts): string {
  return yamlDocs(GATEWAY(p.gw), ROUTES, ...backendDocs(p.backend), ...backendDocs(p.backend, 'other'));
}

const GATEWAY_LABELS = JSON.stringify({ 'gateway.networking.k8s.io/gateway-name': 'gw' });

t.test('a Gateway and HTTPRoute from files, served by a router labelled with the gateway name', async (t) => {
  const rig = await startGateway(t, { config, agentEnv: { MESH_METAJSON_LABELS: GATEWAY_LABELS } });
  await waitFor('the HTTPRoute served', async () => (await rig.get('/app')).status === 200, { timeoutMs: 30_000 });

  const prefix = await rig.get('/app/x');
  t.equal(prefix.status, 200, 'PathPrefix /app matches /app/x');
  const seen = JSON.parse(prefix.body) as { path: string; headers: Record<string, string> };
  t.equal(seen.path, '/app/x', 'the path reaches the backend unchanged');
  t.equal(seen.headers['x-route'], 'app', 'RequestHeaderModifier set');
  t.equal(prefix.headers['x-answered-by'], 'gateway-api', 'ResponseHeaderModifier add');

  const exact = JSON.parse((await rig.get('/app/exact')).body) as { headers: Record<string, string> };
  t.equal(exact.headers['x-route'], 'exact', 'an Exact match wins over a PathPrefix, whatever the rule order');

  t.equal((await rig.get('/application')).status, 404, 'PathPrefix /app does not match /application (whole segments)');

  // The conformance suite's HTTPRouteRewritePath and HTTPRouteRedirectPath expectations.
  const rewritten = async (p: string) => (JSON.parse((await rig.get(p)).body) as { path: string }).path;
  t.equal(await rewritten('/prefix/one/two'), '/one/two', 'URLRewrite ReplacePrefixMatch /one');
  t.equal(await rewritten('/strip-prefix/three'), '/three', 'URLRewrite ReplacePrefixMatch / strips the prefix');
  t.equal(await rewritten('/strip-prefix'), '/', 'and keeps a / when nothing follows');
  const moved = await rig.get('/original-prefix/lemon');
  t.equal(moved.status, 302, 'RequestRedirect answers 302 by default');
  t.match(moved.headers.location ?? '', /\/replacement-prefix\/lemon$/, 'RequestRedirect ReplacePrefixMatch keeps the rest of the path');

  const cross = await rig.get('/other-ns');
  t.equal(cross.status, 500, 'a backend in another namespace without a ReferenceGrant answers 500');

  const st = (await (await fetch(`http://${rig.daemon.http}/debug/gateway-status`)).json()) as Array<{
    kind: string;
    metadata: { name: string };
    status: { parents?: Array<{ conditions: Array<{ type: string; status: string; reason: string; observedGeneration?: number }> }> };
  }>;
  const route = st.find((o) => o.kind === 'HTTPRoute' && o.metadata.name === 'echo');
  const conds = route?.status.parents?.[0]?.conditions ?? [];
  t.match(
    conds.find((c) => c.type === 'Accepted'),
    { status: 'True', reason: 'Accepted', observedGeneration: 3 },
    'route Accepted',
  );
  t.match(
    conds.find((c) => c.type === 'ResolvedRefs'),
    { status: 'False', reason: 'RefNotPermitted' },
    'route ResolvedRefs: RefNotPermitted',
  );

  // A ReferenceGrant in the backend's namespace lets the route reach it, with no restart.
  fs.writeFileSync(
    path.join(rig.configDir, 'grant.yaml'),
    `apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-demo, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: demo}]
  to: [{group: "", kind: Service}]
`,
  );
  await waitFor('the ReferenceGrant applied', async () => (await rig.get('/other-ns')).status === 200, { timeoutMs: 30_000 });
  t.pass('with a ReferenceGrant the cross-namespace backend answers');
});
