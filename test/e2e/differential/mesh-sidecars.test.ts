// The differential harness's sidecar scenario (issue 27, item 3): pod A → pod B through both sidecars with
// capture (test/helpers/differential-mesh.ts), run with every sidecar our engine, then every sidecar the real
// Envoy, compared field by field; then the mixed pairs (A and C on one data plane, B on the other) against the
// all-Envoy run, which shows the two speak the same wire protocol (auto-mTLS, ALPN, XFCC, RBAC on the peer's
// principal). Steps, in order: original destination (service VIP, name through DNS capture, B's pod IP), TCP on a
// non-HTTP port, passthrough to an address no registry names, PERMISSIVE (a plaintext client in the world is
// served); a VirtualService at A's outbound (header routing to C, rewrite and header operations, retries); an
// AuthorizationPolicy on B allowing only A's principal, then one denying A's principal on a path; STRICT (the
// plaintext client refused, A still served). Expected behaviour is Envoy's; what differs is fixed or listed in
// the README's table (known.ts).
import t, { type Test } from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import type { Observation } from '../../helpers/differential';
import {
  ADDR,
  allOn,
  expectListed,
  expectObserved,
  hostOf,
  type MeshCall,
  type MeshRun,
  type MeshScenario,
  type Planes,
  planesName,
  runMeshScenario,
} from '../../helpers/differential-mesh';
import { meshPodsUnavailable } from '../../../scripts/lib/mesh-pods.mjs';
import { knownDifferences } from './known';

const skip = meshPodsUnavailable({ openssl: true }) || envoyMissing();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
// each run starts a mesh of three pods (discovery, three agents, Envoy or not) and waits for every step's config
t.setTimeout(1_500_000);

const peerAuth = (mode: string) => `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: b}
spec:
  mtls: {mode: ${mode}}
`;

const VIRTUAL_SERVICE = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: b}
spec:
  hosts: [b.b.svc.cluster.local]
  http:
  - match: [{headers: {x-route: {exact: c}}}]
    route: [{destination: {host: c.c.svc.cluster.local}}]
  - match: [{uri: {prefix: /old}}]
    rewrite: {uri: /new}
    headers:
      request: {set: {x-added: one}, remove: [x-drop]}
      response: {set: {x-resp: two}}
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - route: [{destination: {host: b.b.svc.cluster.local}}]
    retries: {attempts: 3, retryOn: 5xx}
    timeout: 5s
`;

const ALLOW_ONLY_A = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-principal, namespace: b}
spec:
  selector: {matchLabels: {app: b}}
  action: ALLOW
  rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/a]}}]}]
`;

const DENY_A_ADMIN = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: by-principal, namespace: b}
spec:
  selector: {matchLabels: {app: b}}
  action: DENY
  rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/a]}}], to: [{operation: {paths: [/admin*]}}]}]
`;

const b = ADDR.vip('b');
const toB = (name: string, more: Partial<MeshCall> = {}): MeshCall => ({ name, from: 'a', to: b, port: 8080, host: hostOf('b'), ...more });
const status = (want: number) => (o: Observation) => o['status'] === want;

const SCENARIO: MeshScenario = {
  name: 'mesh-sidecars',
  config: { 'peer.yaml': peerAuth('PERMISSIVE') },
  external: true,
  steps: [
    {
      name: 'permissive',
      until: [{ call: toB('ready'), ok: status(200) }],
      calls: [
        toB('vip'),
        { name: 'by-name', from: 'a', to: hostOf('b'), port: 8080 },
        { name: 'pod-ip', from: 'a', to: ADDR.pod('b'), port: 8080 },
        toB('default-retry', { headers: { 'x-echo-fail': '1', 'x-echo-key': 'default-retry' } }),
        toB('status-404', { path: '/status/404' }),
        toB('post', { method: 'POST', path: '/post?q=1' }),
        { name: 'tcp', from: 'a', kind: 'tcp', to: b, port: 9000 },
        { name: 'tcp-pod-ip', from: 'a', kind: 'tcp', to: ADDR.pod('b'), port: 9000 },
        { name: 'plaintext-permissive', from: 'world', to: ADDR.pod('b'), port: 8080 },
        { name: 'plaintext-tcp-permissive', from: 'world', kind: 'tcp', to: ADDR.pod('b'), port: 9000 },
        { name: 'passthrough-http', from: 'a', to: ADDR.external, port: 8080 },
        { name: 'passthrough-tcp', from: 'a', kind: 'tcp', to: ADDR.external, port: 7000 },
      ],
    },
    {
      name: 'virtual-service',
      files: { 'vs.yaml': VIRTUAL_SERVICE },
      until: [{ call: toB('vs-ready', { headers: { 'x-route': 'c' } }), ok: (o) => (o['app'] as { server?: string } | undefined)?.server === 'c' }],
      calls: [
        toB('vs-header-route', { headers: { 'x-route': 'c' } }),
        { name: 'vs-by-name', from: 'a', to: hostOf('b'), port: 8080, headers: { 'x-route': 'c' } },
        toB('vs-rewrite', { path: '/old/x?y=1', headers: { 'x-drop': 'me' } }),
        toB('vs-retry-ok', { headers: { 'x-echo-fail': '2', 'x-echo-key': 'vs-retry-ok' } }),
        toB('vs-retry-exhausted', { headers: { 'x-echo-fail': '9', 'x-echo-key': 'vs-retry-exhausted' } }),
      ],
    },
    {
      name: 'allow-principal',
      files: { 'vs.yaml': null, 'authz.yaml': ALLOW_ONLY_A },
      until: [
        { call: toB('allow-ready', { from: 'c' }), ok: status(403) },
        { call: toB('allow-ready-world', { from: 'world', to: ADDR.pod('b') }), ok: status(403) },
      ],
      calls: [
        toB('allow-a'),
        toB('allow-c', { from: 'c' }),
        { name: 'allow-a-tcp', from: 'a', kind: 'tcp', to: b, port: 9000 },
        { name: 'allow-c-tcp', from: 'c', kind: 'tcp', to: b, port: 9000 },
        { name: 'allow-plaintext', from: 'world', to: ADDR.pod('b'), port: 8080 },
      ],
    },
    {
      name: 'deny-principal',
      files: { 'authz.yaml': DENY_A_ADMIN },
      until: [
        { call: toB('deny-ready', { path: '/admin/x' }), ok: status(403) },
        { call: toB('deny-ready-c', { from: 'c', path: '/admin/x' }), ok: status(200) },
      ],
      calls: [
        toB('deny-a-admin', { path: '/admin/x' }),
        toB('deny-a-other', { path: '/other' }),
        toB('deny-c-admin', { from: 'c', path: '/admin/x' }),
      ],
    },
    {
      name: 'strict',
      files: { 'authz.yaml': null, 'peer.yaml': peerAuth('STRICT') },
      until: [{ call: { name: 'strict-ready', from: 'world', to: ADDR.pod('b'), port: 8080 }, ok: (o) => 'error' in o }],
      calls: [
        { name: 'strict-plaintext', from: 'world', to: ADDR.pod('b'), port: 8080 },
        { name: 'strict-plaintext-tcp', from: 'world', kind: 'tcp', to: ADDR.pod('b'), port: 9000 },
        toB('strict-a'),
        { name: 'strict-a-tcp', from: 'a', kind: 'tcp', to: b, port: 9000 },
        { name: 'strict-tls-san', from: 'world', kind: 'tls-san', to: ADDR.pod('b'), port: 8080 },
      ],
    },
  ],
};

const fromA = /;URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a$/;
/** Envoy's run, as its docs say: XFCC By/Hash/Subject/URI (APPEND_FORWARD), RBAC's 403 text, the router's retries. */
const EXPECTED: Record<string, object> = {
  vip: { status: 200, app: { server: 'b', host: hostOf('b'), xfcc: fromA } },
  // a pod IP matches no service's virtual host on A's 0.0.0.0_8080: allow_any, PassthroughCluster, plaintext
  'pod-ip': { status: 200, app: { server: 'b', xfcc: null } },
  'default-retry': { status: 200, app: { server: 'b' } },
  tcp: { line: 'b echo ping' },
  'plaintext-permissive': { status: 200, app: { server: 'b', xfcc: null } },
  'passthrough-http': { status: 200, app: { server: 'external', xfcc: null } },
  'passthrough-tcp': { line: 'external echo ping' },
  'vs-header-route': { status: 200, app: { server: 'c', xfcc: fromA } },
  'vs-rewrite': { status: 200, headers: { 'x-resp': 'two' }, app: { path: '/new/x?y=1', headers: { 'x-added': 'one' } } },
  'vs-retry-ok': { status: 200, app: { server: 'b' } },
  'vs-retry-exhausted': { status: 503 },
  'allow-a': { status: 200 },
  'allow-c': { status: 403, body: 'RBAC: access denied' },
  'allow-c-tcp': { closed: true },
  'deny-a-admin': { status: 403 },
  'deny-a-other': { status: 200 },
  'deny-c-admin': { status: 200 },
  'strict-plaintext': { error: /\w/ },
  'strict-a': { status: 200, app: { xfcc: fromA } },
  'strict-tls-san': { san: 'URI:spiffe://cluster.local/ns/b/sa/b' },
};

const runs = new Map<string, MeshRun>();
async function run(t: Test, planes: Planes): Promise<MeshRun | undefined> {
  const key = planesName(planes);
  if (!runs.has(key)) {
    await t.test(`${SCENARIO.name} with ${key}`, async (t) => {
      const r = await runMeshScenario(t, SCENARIO, planes);
      t.same(r.nacks, [], 'no config rejected');
      runs.set(key, r);
    });
  }
  return runs.get(key);
}

t.test('sidecars: engine pair and Envoy pair observe the same', { skip }, async (t) => {
  const engine = await run(t, allOn('engine'));
  const envoy = await run(t, allOn('envoy'));
  if (engine && envoy) expectListed(t, SCENARIO.name, engine.observations, envoy.observations, knownDifferences());
  if (envoy) expectObserved(t, envoy.observations, EXPECTED);
});

// A and C on one data plane, B on the other, against the all-Envoy run: the engine's column is the mixed run's
for (const [name, planes] of [
  ['mesh-engine-to-envoy', { a: 'engine', b: 'envoy', c: 'engine' }],
  ['mesh-envoy-to-engine', { a: 'envoy', b: 'engine', c: 'envoy' }],
] as const) {
  t.test(`sidecars: ${planesName(planes)} observe what the Envoy pair does`, { skip }, async (t) => {
    const mixed = await run(t, planes);
    const envoy = await run(t, allOn('envoy'));
    if (mixed && envoy) expectListed(t, name, mixed.observations, envoy.observations, knownDifferences());
  });
}
