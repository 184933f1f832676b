// HTTPRoute attached to a Service (the Gateway API's GAMMA mesh profile) obeyed by captured callers' sidecars, on
// both data planes: the differential harness for sidecars (test/helpers/differential-mesh.ts) with every sidecar our
// engine, then every sidecar the real Envoy, compared field by field but for the README's listed differences.
// Two Services from files (no cluster): `echo` in namespace b (pod B) and `echo-v2` in namespace c (pod C), both
// selecting the pods' WorkloadEntries. Step `producer`: an HTTPRoute in b on Service echo — a header match to
// echo-v2 (another namespace: a mesh route needs no ReferenceGrant), Exact paths /v1 and /v2 (Gateway API
// v1.3.0's MeshTrafficSplit), a URLRewrite with a RequestHeaderModifier, a 50/50 weighted split, a response header
// on the rest (MeshFrontend: a call to B's pod IP is not routed by it). Step `consumer`: an HTTPRoute in a on the
// same Service (MeshConsumerRoute): A's calls now follow it alone, C's still follow the producer route.
// Expected behaviour is the Gateway API's (the conformance tests' expectations) and Envoy's.
import t, { type Test } from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import type { Observation } from '../../helpers/differential';
import {
  ADDR,
  allOn,
  expectListed,
  expectObserved,
  type MeshCall,
  type MeshRun,
  type MeshScenario,
  runMeshScenario,
} from '../../helpers/differential-mesh';
import { meshPodsUnavailable } from '../../../scripts/lib/mesh-pods.mjs';
import { knownDifferences } from './known';

const skip = meshPodsUnavailable({ openssl: true }) || envoyMissing();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
t.setTimeout(300_000);

const ECHO_VIP = '10.89.9.20';
const ECHO_V2_VIP = '10.89.9.21';

const SERVICES = `apiVersion: v1
kind: Service
metadata: {name: echo, namespace: b}
spec:
  clusterIP: ${ECHO_VIP}
  selector: {app: b}
  ports: [{name: http, port: 8080, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: echo-v2, namespace: c}
spec:
  clusterIP: ${ECHO_V2_VIP}
  selector: {app: c}
  ports: [{name: http, port: 8080, targetPort: 8080}]
`;

const PRODUCER = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: echo, namespace: b}
spec:
  parentRefs: [{group: "", kind: Service, name: echo}]
  rules:
  - matches: [{headers: [{name: x-version, value: v2}]}]
    backendRefs: [{name: echo-v2, namespace: c, port: 8080}]
  - matches: [{path: {type: Exact, value: /v1}}]
    backendRefs: [{name: echo, port: 8080}]
  - matches: [{path: {type: Exact, value: /v2}}]
    backendRefs: [{name: echo-v2, namespace: c, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters:
    - type: URLRewrite
      urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-added, value: one}], remove: [x-drop]}
    backendRefs: [{name: echo, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs: [{name: echo, port: 8080, weight: 50}, {name: echo-v2, namespace: c, port: 8080, weight: 50}]
  - filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: x-header-set, value: producer}]}}]
    backendRefs: [{name: echo, port: 8080}]
`;

// Gateway API v1.3.0 conformance tests/mesh-consumer-route.yaml, in the caller's namespace a
const CONSUMER = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: mesh-echo-add-header, namespace: a}
spec:
  parentRefs: [{group: "", kind: Service, name: echo, namespace: b}]
  rules:
  - filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: X-Header-Set, value: set}]}}]
    backendRefs: [{name: echo, namespace: b, port: 8080}]
`;

const HOST = 'echo.b.svc.cluster.local';
const toEcho = (name: string, more: Partial<MeshCall> = {}): MeshCall => ({ name, from: 'a', to: ECHO_VIP, port: 8080, host: HOST, ...more });
const server = (o: Observation | undefined) => (o?.['app'] as { server?: string } | undefined)?.server;
const header = (o: Observation, h: string) => (o['headers'] as Record<string, string> | undefined)?.[h];
/** 50/50 over 24 calls: each backend is seen but with probability 2^-23 (about 1 in 8 million). */
const SPLIT_CALLS = 24;
const splits = Array.from({ length: SPLIT_CALLS }, (_, i) => toEcho(`split-${i}`, { path: '/split' }));

const SCENARIO: MeshScenario = {
  name: 'gateway-api-mesh',
  config: { 'services.yaml': SERVICES },
  steps: [
    {
      name: 'producer',
      files: { 'producer.yaml': PRODUCER },
      until: [
        { call: toEcho('producer-ready', { headers: { 'x-version': 'v2' } }), ok: (o) => server(o) === 'c' },
        { call: toEcho('producer-ready-c', { from: 'c', path: '/old' }), ok: (o) => (o['app'] as { path?: string } | undefined)?.path === '/new' },
      ],
      calls: [
        toEcho('header-v2', { headers: { 'x-version': 'v2' } }),
        toEcho('default'),
        toEcho('exact-v1', { path: '/v1' }),
        toEcho('exact-v2', { path: '/v2' }),
        toEcho('rewrite', { path: '/old/x?y=1', headers: { 'x-drop': 'me' } }),
        ...splits,
        { name: 'pod-ip', from: 'a', to: ADDR.pod('b'), port: 8080 },
      ],
    },
    {
      name: 'consumer',
      files: { 'consumer.yaml': CONSUMER },
      until: [{ call: toEcho('consumer-ready'), ok: (o) => header(o, 'x-header-set') === 'set' }],
      calls: [
        toEcho('consumer-a'),
        toEcho('consumer-a-header-v2', { headers: { 'x-version': 'v2' } }),
        toEcho('consumer-c', { from: 'c' }),
        toEcho('consumer-c-rewrite', { from: 'c', path: '/old/x' }),
      ],
    },
  ],
};

/** The split calls' servers as one observation (which backend answers a call is random; the set is not). */
function withSplitSummary(obs: Record<string, Observation>): Record<string, Observation> {
  const out = { ...obs };
  const seen = new Set<string>();
  for (const c of splits) {
    seen.add(String(server(out[c.name]) ?? JSON.stringify(out[c.name])));
    delete out[c.name];
  }
  out['split'] = { servers: [...seen].sort() };
  return out;
}

t.test('an HTTPRoute on a Service: engine sidecars and Envoy sidecars obey it alike', { skip }, async (t) => {
  const runs: Partial<Record<'engine' | 'envoy', MeshRun>> = {};
  for (const plane of ['engine', 'envoy'] as const) {
    await t.test(`gateway-api-mesh on ${plane}`, async (t: Test) => {
      const r = await runMeshScenario(t, SCENARIO, allOn(plane));
      t.same(r.nacks, [], 'no config rejected');
      runs[plane] = { ...r, observations: withSplitSummary(r.observations) };
    });
  }
  t.ok(runs.engine && runs.envoy, 'both data planes ran');
  if (runs.engine && runs.envoy) expectListed(t, SCENARIO.name, runs.engine.observations, runs.envoy.observations, knownDifferences());
  if (!runs.envoy) return;
  expectObserved(t, runs.envoy.observations, {
    'header-v2': { status: 200, app: { server: 'c' } },
    default: { status: 200, app: { server: 'b' }, headers: { 'x-header-set': 'producer' } },
    // MeshTrafficSplit
    'exact-v1': { status: 200, app: { server: 'b' } },
    'exact-v2': { status: 200, app: { server: 'c' } },
    rewrite: { status: 200, app: { server: 'b', path: '/new/x?y=1', headers: { 'x-added': 'one' } } },
    split: { servers: ['b', 'c'] },
    // MeshFrontend: the route is the Service's, not the pod's
    'pod-ip': { status: 200, app: { server: 'b' } },
    // MeshConsumerRoute: the consumer namespace's route alone for A, the producer's for C
    'consumer-a': { status: 200, app: { server: 'b' }, headers: { 'x-header-set': 'set' } },
    'consumer-a-header-v2': { status: 200, app: { server: 'b' }, headers: { 'x-header-set': 'set' } },
    'consumer-c': { status: 200, app: { server: 'b' }, headers: { 'x-header-set': 'producer' } },
    'consumer-c-rewrite': { status: 200, app: { server: 'b', path: '/new/x' } },
  });
  const o = runs.envoy.observations;
  t.notOk(header(o['pod-ip']!, 'x-header-set'), 'pod-ip: no header of the route');
  t.notOk((o['rewrite']!['app'] as { headers: Record<string, string> }).headers['x-drop'], 'rewrite: x-drop removed');
});
