// The three-pod mesh demo (`npm run demo -- mesh`, scripts/lib/mesh-demo.mjs) through the differential harness
// for sidecars (test/helpers/differential-mesh.ts): the demo's own mesh (its pods, mesh-wide STRICT, B allowing
// only A, its mesh config) with every sidecar our engine, then every sidecar the real Envoy, and the requests the
// demo prints for a user to try: A → B by name and by the service IP, raw TCP, C refused by B's policy, a
// plaintext client outside the mesh refused, B's certificate as openssl sees it. Both runs must observe the same,
// but for the README's listed differences (known.ts).
import t, { type Test } from 'tap';
import { built } from '../../helpers/binary';
import { envoyMissing } from '../../helpers/envoy';
import {
  ADDR,
  allOn,
  expectListed,
  expectObserved,
  hostOf,
  type MeshRun,
  type MeshScenario,
  type Pod,
  runMeshScenario,
} from '../../helpers/differential-mesh';
import { meshPodsUnavailable } from '../../../scripts/lib/mesh-pods.mjs';
import { meshDemoMesh } from '../../../scripts/lib/mesh-demo.mjs';
import { knownDifferences } from './known';

const skip = meshPodsUnavailable({ openssl: true }) || envoyMissing();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
// each run starts a mesh of three pods (discovery, three agents, Envoy or not) and waits for every step's config
t.setTimeout(600_000);

const demo = meshDemoMesh();
const SCENARIO: MeshScenario = {
  name: 'mesh-demo',
  pods: Object.fromEntries(demo.pods.map((p) => [p.name as Pod, { env: p.env }])),
  config: demo.config,
  meshConfig: demo.meshConfig,
  steps: [
    {
      name: 'demo',
      until: [{ call: { name: 'ready', from: 'a', to: hostOf('b'), port: 8080 }, ok: (o) => o['status'] === 200 }],
      calls: [
        // as the printed curl commands send them: by name, and by the service IP (Host: the address)
        { name: 'a-by-name', from: 'a', to: hostOf('b'), port: 8080 },
        { name: 'a-by-vip', from: 'a', to: ADDR.vip('b'), port: 8080 },
        { name: 'a-tcp', from: 'a', kind: 'tcp', to: ADDR.vip('b'), port: 9000 },
        { name: 'c-by-name', from: 'c', to: hostOf('b'), port: 8080 },
        { name: 'c-tcp', from: 'c', kind: 'tcp', to: ADDR.vip('b'), port: 9000 },
        { name: 'world-plaintext', from: 'world', to: ADDR.pod('b'), port: 8080 },
        { name: 'world-tls', from: 'world', kind: 'tls-san', to: ADDR.pod('b'), port: 8080 },
        // B calls A back: A's inbound under STRICT with no policy of its own
        { name: 'b-to-a', from: 'b', to: hostOf('a'), port: 8080 },
      ],
    },
  ],
};

t.test('the mesh demo: engine sidecars and Envoy sidecars observe the same', { skip }, async (t) => {
  const runs: Partial<Record<'engine' | 'envoy', MeshRun>> = {};
  for (const plane of ['engine', 'envoy'] as const) {
    await t.test(`mesh-demo on ${plane}`, async (t: Test) => {
      const r = await runMeshScenario(t, SCENARIO, allOn(plane));
      t.same(r.nacks, [], 'no config rejected');
      runs[plane] = r;
    });
  }
  if (runs.engine && runs.envoy) expectListed(t, SCENARIO.name, runs.engine.observations, runs.envoy.observations, knownDifferences());
  // what the demo's printed comments promise
  if (runs.envoy) {
    expectObserved(t, runs.envoy.observations, {
      'a-by-name': { status: 200, app: { server: 'b', xfcc: /;URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a$/ } },
      'a-by-vip': { status: 200, app: { server: 'b' } },
      'a-tcp': { line: 'b echo ping' },
      'c-by-name': { status: 403, body: 'RBAC: access denied' },
      'world-plaintext': { error: /\w/ },
      'world-tls': { san: 'URI:spiffe://cluster.local/ns/b/sa/b' },
      'b-to-a': { status: 200, app: { server: 'a' } },
    });
  }
});
