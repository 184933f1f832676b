// The differential harness's sidecar protocol scenario (issue 27, item 3): HTTP/2 and gRPC between sidecars with
// capture and auto-mTLS (test/helpers/differential-mesh.ts), and time-outs, retries and fault injection at the
// caller's outbound (a VirtualService A's sidecar applies). The Service port's name gives its protocol as in
// Istio (protocol selection: a `grpc` port, and an `http2` port of a second service on the same pod port); over
// it: gRPC unary, an error status in the trailers, a trailers-only answer, a bidirectional stream answered message
// by message (a proxy that buffered the request would stall it), a plain HTTP/2 request and a POST with a body,
// and a plaintext HTTP/2 client in the world (PERMISSIVE). Then a VirtualService on B: a route time-out on
// HTTP/1.1 and on gRPC (Envoy answers a gRPC caller's time-out as gRPC: grpc-status 14), a per-try time-out with
// retries, retries on 5xx that recover and that run out, a fault abort by HTTP status and by gRPC status, and a
// fixed delay. Run with every sidecar our engine, then every sidecar the real Envoy, then A and C on the engine
// and B on Envoy (the mixed pair speaks h2 over mTLS on the wire): each compared with the all-Envoy run. Expected
// behaviour is Envoy's (router, fault filter, gRPC local replies); what differs is fixed or listed in the README's
// table (known.ts). Config shapes are Istio's (ServiceEntry ports, VirtualService http timeout/retries/fault).
import t, { type Test } from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import {
  ADDR,
  allOn,
  expectListed,
  expectObserved,
  hostOf,
  type H2Exchange,
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
// each run starts a mesh of three pods and waits for every step's config
t.setTimeout(900_000);

/** A second service on B's pod port 7070, its port an `http2` one (the registry's B service names its 7070 `grpc`). */
const H2_VIP = '10.89.9.22';
const H2_HOST = 'b-h2.b.svc.cluster.local';
const H2_SERVICE = `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b-h2, namespace: b}
spec:
  hosts: [${H2_HOST}]
  addresses: [${H2_VIP}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 7070, name: http2, protocol: HTTP2}]
  workloadSelector: {labels: {app: b}}
`;

const VIRTUAL_SERVICE = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b, namespace: b}
spec:
  hosts: [b.b.svc.cluster.local]
  http:
  - match: [{headers: {x-test: {exact: timeout}}}]
    timeout: 1s
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - match: [{headers: {x-test: {exact: per-try}}}]
    timeout: 5s
    retries: {attempts: 2, perTryTimeout: 0.3s, retryOn: 5xx}
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - match: [{headers: {x-test: {exact: retry}}}]
    retries: {attempts: 2, retryOn: 5xx}
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - match: [{headers: {x-test: {exact: abort}}}]
    fault: {abort: {httpStatus: 418, percentage: {value: 100}}}
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - match: [{headers: {x-test: {exact: grpc-abort}}}]
    fault: {abort: {grpcStatus: UNAVAILABLE, percentage: {value: 100}}}
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - match: [{headers: {x-test: {exact: delay}}}]
    fault: {delay: {fixedDelay: 0.2s, percentage: {value: 100}}}
    timeout: 5s
    route: [{destination: {host: b.b.svc.cluster.local}}]
  - route: [{destination: {host: b.b.svc.cluster.local}}]
    retries: {attempts: 0}
`;

const b = ADDR.vip('b');
const AUTHORITY = `${hostOf('b')}:7070`;
const toB = (name: string, headers: Record<string, string> = {}): MeshCall => ({ name, from: 'a', to: b, port: 8080, host: hostOf('b'), headers });
const h2 = (name: string, x: H2Exchange, more: Partial<MeshCall> = {}): MeshCall => ({
  name,
  from: 'a',
  kind: 'h2',
  to: b,
  port: 7070,
  h2: { authority: AUTHORITY, ...x },
  ...more,
});
const grpc = (name: string, method: string, headers: Record<string, string> = {}, messages = ['ping']) =>
  h2(name, { path: `/mesh.test.Echo/${method}`, grpc: messages, headers });

const SCENARIO: MeshScenario = {
  name: 'mesh-protocols',
  config: { 'h2.yaml': H2_SERVICE },
  steps: [
    {
      name: 'h2',
      until: [
        { call: grpc('ready', 'Echo'), ok: (o) => (o['trailers'] as Record<string, unknown> | undefined)?.['grpc-status'] === '0' },
        { call: h2('ready-h2', { path: '/ready', authority: `${H2_HOST}:7070` }, { to: H2_VIP }), ok: (o) => o['status'] === 200 },
      ],
      calls: [
        grpc('grpc-unary', 'Echo'),
        grpc('grpc-error', 'Fail'),
        grpc('grpc-trailers-only', 'Deny'),
        h2('grpc-stream', { path: '/mesh.test.Echo/Stream', grpc: ['one', 'two', 'three'], stream: true }),
        h2('grpc-by-name', { path: '/mesh.test.Echo/Echo', grpc: ['by name'] }, { to: hostOf('b') }),
        h2('h2-get', { path: '/h2/get?x=1', headers: { 'x-custom': 'h2' } }),
        h2('h2-post', { path: '/h2/post', method: 'POST', body: 'hello over h2', headers: { 'content-type': 'text/plain' } }),
        h2('http2-port', { path: '/http2', authority: `${H2_HOST}:7070` }, { to: H2_VIP }),
        h2('http2-port-grpc', { path: '/mesh.test.Echo/Echo', authority: `${H2_HOST}:7070`, grpc: ['on http2'] }, { to: H2_VIP }),
        h2('plaintext-h2', { path: '/plain' }, { from: 'world', to: ADDR.pod('b') }),
      ],
    },
    {
      name: 'outbound',
      files: { 'vs.yaml': VIRTUAL_SERVICE },
      until: [{ call: toB('vs-ready', { 'x-test': 'abort' }), ok: (o) => o['status'] === 418 }],
      calls: [
        toB('timeout', { 'x-test': 'timeout', 'x-echo-delay-ms': '3000' }),
        toB('in-time', { 'x-test': 'timeout', 'x-echo-delay-ms': '10' }),
        grpc('grpc-timeout', 'Echo', { 'x-test': 'timeout', 'x-echo-delay-ms': '3000' }),
        toB('per-try-timeout', { 'x-test': 'per-try', 'x-echo-delay-ms': '3000' }),
        toB('retry-ok', { 'x-test': 'retry', 'x-echo-fail': '2', 'x-echo-key': 'retry-ok' }),
        toB('retry-exhausted', { 'x-test': 'retry', 'x-echo-fail': '9', 'x-echo-key': 'retry-exhausted' }),
        toB('no-retry', { 'x-echo-fail': '1', 'x-echo-key': 'no-retry' }),
        toB('abort', { 'x-test': 'abort' }),
        grpc('grpc-abort-http', 'Echo', { 'x-test': 'abort' }),
        grpc('grpc-abort', 'Echo', { 'x-test': 'grpc-abort' }),
        toB('delay', { 'x-test': 'delay' }),
        grpc('grpc-delay', 'Echo', { 'x-test': 'delay' }),
      ],
    },
  ],
};

const fromA = /;URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a$/;
const grpcOk = (message: string) => ({ status: 200, trailers: { 'grpc-status': '0' }, messages: [message] });
/**
 * Envoy's run, as its docs say: gRPC trailers passed through, a trailers-only answer's status among the headers,
 * XFCC on HTTP/2 over mTLS, the router's 504 `upstream request timeout` (as grpc-status 14 UNAVAILABLE for a gRPC
 * caller: Envoy's local replies map HTTP 504 to UNAVAILABLE), retries, the fault filter's abort and delay.
 */
const EXPECTED: Record<string, object> = {
  'grpc-unary': grpcOk('b: ping'),
  'grpc-error': { status: 200, trailers: { 'grpc-status': '5', 'grpc-message': 'b has no ping' }, messages: [] },
  'grpc-trailers-only': { status: 200, headers: { 'grpc-status': '7', 'grpc-message': 'denied' }, messages: [] },
  'grpc-stream': { status: 200, trailers: { 'grpc-status': '0' }, messages: ['b: one', 'b: two', 'b: three'] },
  'grpc-by-name': grpcOk('b: by name'),
  'h2-get': { status: 200, app: { server: 'b', path: '/h2/get?x=1', host: AUTHORITY, xfcc: fromA, headers: { 'x-custom': 'h2' } } },
  'h2-post': { status: 200, app: { server: 'b', method: 'POST', xfcc: fromA } },
  'http2-port': { status: 200, app: { server: 'b', host: `${H2_HOST}:7070`, xfcc: fromA } },
  'http2-port-grpc': grpcOk('b: on http2'),
  'plaintext-h2': { status: 200, app: { server: 'b', xfcc: null } },
  timeout: { status: 504, body: 'upstream request timeout' },
  'in-time': { status: 200, app: { server: 'b' } },
  'grpc-timeout': { status: 200, headers: { 'grpc-status': '14', 'grpc-message': 'upstream request timeout' } },
  'per-try-timeout': { status: 504 },
  'retry-ok': { status: 200, app: { server: 'b' } },
  'retry-exhausted': { status: 503 },
  'no-retry': { status: 503 },
  abort: { status: 418, body: 'fault filter abort' },
  'grpc-abort': { status: 200, headers: { 'grpc-status': '14' } },
  delay: { status: 200, app: { server: 'b' } },
  'grpc-delay': grpcOk('b: ping'),
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

t.test('sidecar protocols: engine pair and Envoy pair observe the same', { skip }, async (t) => {
  const engine = await run(t, allOn('engine'));
  const envoy = await run(t, allOn('envoy'));
  t.ok(engine && envoy, 'both runs observed');
  if (engine && envoy) expectListed(t, SCENARIO.name, engine.observations, envoy.observations, knownDifferences());
  if (envoy) expectObserved(t, envoy.observations, EXPECTED);
});

// the caller on our engine, the called pod on Envoy: h2 over mTLS between the two, against the all-Envoy run
t.test('sidecar protocols: a=engine b=envoy c=engine observe what the Envoy pair does', { skip }, async (t) => {
  const planes = { a: 'engine', b: 'envoy', c: 'engine' } as const;
  const mixed = await run(t, planes);
  const envoy = await run(t, allOn('envoy'));
  t.ok(mixed && envoy, 'both runs observed');
  if (mixed && envoy) expectListed(t, 'mesh-protocols-engine-to-envoy', mixed.observations, envoy.observations, knownDifferences());
});
