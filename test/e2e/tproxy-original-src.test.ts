// TPROXY source preservation (Istio's `sidecar.istio.io/interceptionMode: TPROXY`) with the built binary, in
// network namespaces the test makes: pod B's inbound is captured with TPROXY (`mesh-iptables -m TPROXY`, which
// also installs `ip rule fwmark 1337 lookup 133` + `local default dev lo table 133`), its sidecar runs as Istio's
// injector runs it in that mode (uid 0, group 1337) with INTERCEPTION_MODE=TPROXY, so discovery gives its
// virtualInbound the original_src listener filter (mark 1337). Pod A is a REDIRECT-mode pod as usual.
//
//   pod A 10.89.1.2 ─┐
//   pod B 10.89.2.2 ─┴─ world 10.89.{1,2}.1 (forwarding, plain clients): pilot-discovery :15010
//
// (scripts/lib/mesh-pods.mjs startMesh: the topology of `npm run demo -- mesh` and scripts/bench/mesh.mjs.)
// B's app must see each caller's own address as its peer, where REDIRECT mode shows it 127.0.0.6 (the inbound
// cluster's bind address): A's pod IP for A's mTLS calls (HTTP through the router, TCP through tcp_proxy), the
// world's address for a plaintext client there (PERMISSIVE). Calls from A and the world alternate, so an
// upstream connection kept alive for one caller and reused for the other would show the wrong peer.
import fs from 'node:fs';
import t from 'tap';
import { DIST, built } from '../helpers/binary';
import { callIn as call, meshAddr, meshPodsUnavailable, sh, startMesh } from '../../scripts/lib/mesh-pods.mjs';
import { tempDir } from '../helpers/temp';

const PODS = { a: 1, b: 2 } as const;
type PodName = keyof typeof PODS;
const podIp = (p: PodName) => meshAddr.pod(PODS[p]);
const gatewayIp = (p: PodName) => meshAddr.gateway(PODS[p]);
const VIP = meshAddr.vip(PODS.b);

const skip = meshPodsUnavailable({ openssl: true });

if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const bodyOf = (r: Record<string, unknown>) =>
  typeof r['body'] === 'string' && r['body'].startsWith('{') ? (JSON.parse(r['body']) as Record<string, unknown>) : {};

t.test("TPROXY: B's app sees its callers' own addresses, and its replies reach them", { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-tproxy-e2e-');
  fs.chmodSync(dir, 0o755);
  const mesh = await startMesh(t, { dist: DIST, dir, pods: [{ name: 'a' }, { name: 'b', tproxy: true }], prefix: 'mesh-tp' });
  const pods = mesh.ns as Record<PodName, string>;
  const world = mesh.world;
  const agents = mesh.sidecars as Record<PodName, { out: () => string }>;

  await t.test("mesh-iptables -m TPROXY set up Istio's policy routing for the replies", async (t) => {
    t.match(sh(['ip', '-n', pods.b, 'rule', 'show']).stdout, /fwmark 0x539 lookup 133/);
    t.match(sh(['ip', '-n', pods.b, 'route', 'show', 'table', '133']).stdout, /local default dev lo/);
  });

  // (the dump once corrupted the engine's own workload key: the TLS contexts built after it failed)
  await t.test('virtualInbound of B carries original_src (mark 1337), and the engine applies it', async (t) => {
    const dump = sh([
      'ip',
      'netns',
      'exec',
      pods.b,
      process.execPath,
      '-e',
      "fetch('http://127.0.0.1:15000/config_dump').then(async (r) => process.stdout.write(await r.text()))",
    ]);
    t.match(dump.stdout, /"name": ?"envoy\.filters\.listener\.original_src"[^}]*"mark": ?1337/s);
    t.notMatch(agents.b.out(), /original_src \(mark 1337\) cannot be applied/, 'no fallback warning');
  });

  await t.test('HTTP: alternating callers each see themselves as the peer', async (t) => {
    const callers: Array<[string, () => Record<string, unknown>, string]> = [
      ['pod A over mTLS', () => call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local'), podIp('a')],
      ['a plaintext client in the world', () => call(world, false, 'http', podIp('b'), '8080'), gatewayIp('b')],
    ];
    for (const round of [1, 2]) {
      for (const [who, make, ip] of callers) {
        const r = make();
        t.equal(r['status'], 200, `${who}, round ${round}: ${JSON.stringify(r)}`);
        t.has(bodyOf(r), { server: 'b', peer: ip }, `${who}, round ${round}: B's app sees ${ip}`);
      }
    }
  });

  await t.test('TCP (tcp_proxy): the peer is pod A', async (t) => {
    t.same(call(pods.a, true, 'tcp', VIP, '9000', 'peer'), { line: `b peer ${podIp('a')}` });
    t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' }, 'and data flows both ways');
  });
});
