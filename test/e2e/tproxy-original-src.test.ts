// TPROXY source preservation (Istio's `sidecar.istio.io/interceptionMode: TPROXY`) with the built binary, in
// network namespaces the test makes: pod B's inbound is captured with TPROXY (`mesh-iptables -m TPROXY`, which
// also installs `ip rule fwmark 1337 lookup 133` + `local default dev lo table 133`), its sidecar runs as Istio's
// injector runs it in that mode (uid 0, group 1337) with INTERCEPTION_MODE=TPROXY, so discovery gives its
// virtualInbound the original_src listener filter (mark 1337). Pod A is a REDIRECT-mode pod as usual.
//
//   pod A 10.88.1.2 ─┐
//   pod B 10.88.2.2 ─┴─ world 10.88.{1,2}.1 (forwarding, plain clients): pilot-discovery :15010
//
// B's app must see each caller's own address as its peer, where REDIRECT mode shows it 127.0.0.6 (the inbound
// cluster's bind address): A's pod IP for A's mTLS calls (HTTP through the router, TCP through tcp_proxy), the
// world's address for a plaintext client there (PERMISSIVE). Calls from A and the world alternate, so an
// upstream connection kept alive for one caller and reused for the other would show the wrong peer.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CertificateAuthority } from '../../src/ca/authority';
import { createCsrPem } from '../../src/ca/pkix/csr';
import { generateKeyPair } from '../../src/ca/pkix/keys';
import { generateRoot, selfSignedBundle } from '../../src/ca/selfsigned';
import { DIST, built } from '../helpers/binary';
import { callIn as call, capture, createNetns, linkPod, meshPodsUnavailable, sh, startApp, startDiscovery, startSidecar, waitSidecarReady } from '../../scripts/lib/mesh-pods.mjs';
import { tempDir } from '../agent/helpers';

const VIP = '10.88.9.10';
const PODS = { a: 1, b: 2 } as const;
type PodName = keyof typeof PODS;
const podIp = (p: PodName) => `10.88.${PODS[p]}.2`;
const gatewayIp = (p: PodName) => `10.88.${PODS[p]}.1`;
const spiffe = (p: PodName) => `spiffe://cluster.local/ns/${p}/sa/${p}`;

const skip = meshPodsUnavailable();

if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const workload = (p: PodName) => `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ${p}-1, namespace: ${p}}
spec:
  address: ${podIp(p)}
  serviceAccount: ${p}
  labels: {app: ${p}, security.istio.io/tlsMode: istio}
`;

const CONFIG = [
  `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: b, namespace: b}
spec:
  hosts: [b.b.svc.cluster.local]
  addresses: [${VIP}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9000, name: tcp, protocol: TCP}]
  workloadSelector: {labels: {app: b}}
`,
  workload('a'),
  workload('b'),
].join('---\n');

const bodyOf = (r: Record<string, unknown>) => (typeof r['body'] === 'string' && r['body'].startsWith('{') ? (JSON.parse(r['body']) as Record<string, unknown>) : {});

t.test("TPROXY: B's app sees its callers' own addresses, and its replies reach them", { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-tproxy-e2e-');
  fs.chmodSync(dir, 0o755);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG);

  const root = await generateRoot({ ttlMs: 24 * 3_600_000, org: 'cluster.local', rsaKeySize: 2048 });
  const ca = new CertificateAuthority(selfSignedBundle(root, 'test'), { defaultCertTtlMs: 3_600_000, maxCertTtlMs: 24 * 3_600_000 });
  const certs: Record<string, { cert: string; key: string }> = {};
  for (const p of Object.keys(PODS) as PodName[]) {
    const pair = await generateKeyPair({ kind: 'ec', curve: 'P256' });
    certs[p] = { cert: ca.sign(createCsrPem({ privateKey: pair.privateKey, sans: { uris: [spiffe(p)] }, org: '' }), { subjectIds: [spiffe(p)], ttlSeconds: 0 }), key: pair.privateKeyPem };
  }

  const world = createNetns(t, 'mesh-world');
  const pods = {} as Record<PodName, string>;
  for (const p of Object.keys(PODS) as PodName[]) {
    pods[p] = createNetns(t, `mesh-${p}`);
    linkPod(world, pods[p], { hostIf: `veth-${p}`, hostIp: gatewayIp(p), podIp: podIp(p) });
  }
  const discovery = await startDiscovery(t, { ns: world, dist: DIST, configDir, grpcAddr: '0.0.0.0:15010', home: dir });

  const agents = {} as Record<PodName, { out: () => string }>;
  for (const p of Object.keys(PODS) as PodName[]) {
    const tproxy = p === 'b';
    const ipt = capture(pods[p], DIST, { tproxy });
    t.equal(ipt.code, 0, `mesh-iptables ${tproxy ? '-m TPROXY ' : ''}in ${p}: ${ipt.stderr}`);
    await startApp(t, pods[p], p);
    agents[p] = await startSidecar(t, {
      ns: pods[p],
      dist: DIST,
      home: path.join(dir, `proxy-${p}`),
      discoveryAddress: `${gatewayIp(p)}:15010`,
      pod: { name: `${p}-1`, namespace: p, serviceAccount: p, ip: podIp(p), labels: { app: p, 'security.istio.io/tlsMode': 'istio' } },
      certs: { ...certs[p]!, root: root.certPem },
      tproxy,
    });
  }
  for (const p of Object.keys(PODS) as PodName[]) {
    await waitSidecarReady(pods[p], 60_000, () => `sidecar ${p} not ready:\n${agents[p].out()}\n--- discovery:\n${discovery.out()}`);
  }

  await t.test("mesh-iptables -m TPROXY set up Istio's policy routing for the replies", async (t) => {
    t.match(sh(['ip', '-n', pods.b, 'rule', 'show']).stdout, /fwmark 0x539 lookup 133/);
    t.match(sh(['ip', '-n', pods.b, 'route', 'show', 'table', '133']).stdout, /local default dev lo/);
  });

  // (the dump once corrupted the engine's own workload key: the TLS contexts built after it failed)
  await t.test("virtualInbound of B carries original_src (mark 1337), and the engine applies it", async (t) => {
    const dump = sh(['ip', 'netns', 'exec', pods.b, process.execPath, '-e', "fetch('http://127.0.0.1:15000/config_dump').then(async (r) => process.stdout.write(await r.text()))"]);
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
