// Issue 11's "done means" for mTLS between sidecars, with the built binary: three pod network namespaces
// (A, B, C), each captured by `pilot-agent mesh-iptables` and running an agent + engine as uid 1337 and an
// app as another user; pilot-discovery in a fourth namespace that routes between them:
//
//   pod A 10.89.1.2 ─┐
//   pod B 10.89.2.2 ─┼─ world 10.89.{1,2,3}.1 (forwarding): pilot-discovery :15010
//   pod C 10.89.3.2 ─┘
//
// B's service b.b.svc.cluster.local has the VIP 10.89.9.10, which exists nowhere: A's plain client reaches
// B's app only through capture, auto-mTLS (tlsMode-istio endpoint), B's inbound chains and policies.
// Workload certificates are issued by our CA (src/ca) for A and C and by openssl for B, under one root, and
// mounted as files (FILE_MOUNTED_CERTS). The whole scenario runs with our engine in every sidecar, then with the
// real Envoy (no config rejected).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { CertificateAuthority } from '../../src/ca/authority';
import { createCsrPem } from '../../src/ca/pkix/csr';
import { generateKeyPair } from '../../src/ca/pkix/keys';
import { generateRoot, selfSignedBundle } from '../../src/ca/selfsigned';
import { DIST, built } from '../helpers/binary';
import {
  callIn as call,
  capture,
  createNetns,
  linkPod,
  meshPodsUnavailable,
  opensslIdentities,
  sh,
  startApp,
  startDiscovery,
  startSidecar,
  waitSidecarReady,
} from '../../scripts/lib/mesh-pods.mjs';
import { tempDir } from '../helpers/temp';
import { DATA_PLANES, dataPlaneMissing, envoyPath } from '../helpers/envoy';
import { waitFor } from '../helpers/wait';
const VIP = '10.89.9.10';
const PODS = { a: 1, b: 2, c: 3 } as const;
type PodName = keyof typeof PODS;
const podIp = (p: PodName) => `10.89.${PODS[p]}.2`;
const spiffe = (p: PodName) => `spiffe://cluster.local/ns/${p}/sa/${p}`;

const skip = meshPodsUnavailable({ openssl: true });

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
  workload('c'),
].join('---\n');

const peerAuth = (mode: string) => `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: b}
spec:
  mtls: {mode: ${mode}}
`;

const ALLOW_ONLY_A = `apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-a, namespace: b}
spec:
  selector: {matchLabels: {app: b}}
  action: ALLOW
  rules: [{from: [{source: {principals: [cluster.local/ns/a/sa/a]}}]}]
`;

const bodyOf = (r: Record<string, unknown>) =>
  typeof r['body'] === 'string' && r['body'].startsWith('{') ? (JSON.parse(r['body']) as Record<string, unknown>) : {};

for (const plane of DATA_PLANES) {
  t.test(
    `a mesh of three captured pods on ${plane}: mTLS, XFCC, PeerAuthentication, AuthorizationPolicy`,
    { skip: skip || dataPlaneMissing(plane) },
    async (t) => {
      const dir = tempDir(t, 'mesh-mtls-e2e-');
      fs.chmodSync(dir, 0o755);
      const configDir = path.join(dir, 'config');
      fs.mkdirSync(configDir);
      fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG);
      fs.writeFileSync(path.join(configDir, 'peer.yaml'), peerAuth('PERMISSIVE'));

      // identities from our CA for A and C; B's from openssl under the same root, so that a CA bug the engine also
      // accepts cannot cancel out: every call to or from B crosses the two issuers
      const root = await generateRoot({ ttlMs: 24 * 3_600_000, org: 'cluster.local', rsaKeySize: 2048 });
      const ca = new CertificateAuthority(selfSignedBundle(root, 'test'), { defaultCertTtlMs: 3_600_000, maxCertTtlMs: 24 * 3_600_000 });
      const certs: Record<string, { cert: string; key: string }> = {};
      for (const p of ['a', 'c'] as const) {
        const pair = await generateKeyPair({ kind: 'ec', curve: 'P256' });
        certs[p] = {
          cert: ca.sign(createCsrPem({ privateKey: pair.privateKey, sans: { uris: [spiffe(p)] }, org: '' }), {
            subjectIds: [spiffe(p)],
            ttlSeconds: 0,
          }),
          key: pair.privateKeyPem,
        };
      }
      certs['b'] = opensslIdentities(path.join(dir, 'openssl'), [spiffe('b')], { cert: root.certPem, key: root.keyPem }).certs[spiffe('b')]!;

      const world = createNetns(t, 'mesh-world');
      const pods = {} as Record<PodName, string>;
      for (const p of Object.keys(PODS) as PodName[]) {
        pods[p] = createNetns(t, `mesh-${p}`);
        linkPod(world, pods[p], { hostIf: `veth-${p}`, hostIp: `10.89.${PODS[p]}.1`, podIp: podIp(p) });
      }

      const discovery = await startDiscovery(t, { ns: world, dist: DIST, configDir, grpcAddr: '0.0.0.0:15010', home: dir });

      const agents = {} as Record<PodName, { out: () => string }>;
      for (const p of Object.keys(PODS) as PodName[]) {
        const ns = pods[p];
        const ipt = capture(ns, DIST);
        t.equal(ipt.code, 0, `mesh-iptables in ${p}: ${ipt.stderr}`);
        await startApp(t, ns, p);
        agents[p] = await startSidecar(t, {
          ns,
          dist: DIST,
          home: path.join(dir, `proxy-${p}`),
          discoveryAddress: `10.89.${PODS[p]}.1:15010`,
          pod: { name: `${p}-1`, namespace: p, serviceAccount: p, ip: podIp(p), labels: { app: p, 'security.istio.io/tlsMode': 'istio' } },
          certs: { ...certs[p]!, root: root.certPem },
          allStats: true,
          binaryPath: plane === 'envoy' ? envoyPath() : undefined,
        });
      }
      for (const p of Object.keys(PODS) as PodName[]) {
        await waitSidecarReady(pods[p], 60_000, () => `sidecar ${p} not ready:\n${agents[p].out()}\n--- discovery:\n${discovery.out()}`);
      }
      t.match(agents.a.out(), plane === 'envoy' ? /using Envoy at / : /using the built-in proxy engine/, `the sidecars run ${plane}`);
      const hashA = crypto.createHash('sha256').update(new crypto.X509Certificate(certs['a']!.cert).raw).digest('hex');

      await t.test("A calls B by name and by VIP: mTLS crosses, B's app sees XFCC naming A", async (t) => {
        const byName = call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local');
        t.equal(byName['status'], 200, JSON.stringify(byName));
        t.has(bodyOf(byName), { server: 'b', xfcc: `By=${spiffe('b')};Hash=${hashA};Subject="";URI=${spiffe('a')}` });
        const byIp = call(pods.a, true, 'http', VIP, '8080');
        t.equal(byIp['status'], 200, JSON.stringify(byIp));
        t.has(bodyOf(byIp), { server: 'b', xfcc: `By=${spiffe('b')};Hash=${hashA};Subject="";URI=${spiffe('a')}` });
      });

      await t.test('raw TCP through the mesh', async (t) => {
        t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' });
      });

      // `istio-http/1.1` selects B's mTLS HTTP chain (Istio matches it on application protocols), whose
      // context offers h2/http/1.1: the handshake completes without ALPN, as with Envoy
      await t.test("openssl s_client to B's pod IP shows B's SPIFFE identity", async (t) => {
        const files = path.join(dir, 'client-a');
        fs.mkdirSync(files);
        fs.writeFileSync(path.join(files, 'a.crt'), certs['a']!.cert);
        fs.writeFileSync(path.join(files, 'a.key'), certs['a']!.key);
        const r = sh(
          [
            'ip',
            'netns',
            'exec',
            world,
            'openssl',
            's_client',
            '-connect',
            `${podIp('b')}:8080`,
            '-alpn',
            'istio-http/1.1',
            '-cert',
            path.join(files, 'a.crt'),
            '-key',
            path.join(files, 'a.key'),
          ],
          { input: '' },
        );
        const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(r.stdout)?.[0];
        t.ok(pem, `s_client printed the server certificate: ${r.stdout.slice(0, 400)} ${r.stderr.slice(0, 400)}`);
        if (pem) t.equal(new crypto.X509Certificate(pem).subjectAltName, `URI:${spiffe('b')}`);
      });

      await t.test('PERMISSIVE serves plaintext, STRICT refuses it', async (t) => {
        const plain = call(world, false, 'http', podIp('b'), '8080');
        t.equal(plain['status'], 200, JSON.stringify(plain));
        t.has(bodyOf(plain), { server: 'b', xfcc: null }, 'no client certificate, no XFCC');
        fs.writeFileSync(path.join(configDir, 'peer.yaml'), peerAuth('STRICT'));
        await waitFor(
          () => 'plaintext still served under STRICT',
          () => 'error' in call(world, false, 'http', podIp('b'), '8080'),
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        t.match(
          call(world, false, 'http', podIp('b'), '8080'),
          { error: /ECONNRESET|socket hang up|EPIPE/ },
          'STRICT: the plaintext connection is closed',
        );
        t.equal(call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'], 200, 'A still gets through with mTLS');
        t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' });
      });

      await t.test('an AuthorizationPolicy allowing only A: C gets 403 on HTTP and a closed TCP connection', async (t) => {
        fs.writeFileSync(path.join(configDir, 'authz.yaml'), ALLOW_ONLY_A);
        await waitFor(
          () => 'C still allowed',
          () => call(pods.c, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'] === 403,
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        const c = call(pods.c, true, 'http', VIP, '8080', 'b.b.svc.cluster.local');
        t.same(c, { status: 403, body: 'RBAC: access denied' });
        t.same(call(pods.c, true, 'tcp', VIP, '9000'), { closed: true }, 'the network RBAC filter closes the TCP connection');
        t.equal(call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'], 200, 'A is allowed');
        t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' });
      });

      t.notMatch(discovery.out(), /ACK ERROR/, 'no proxy rejected a config');
      for (const p of Object.keys(PODS) as PodName[])
        t.notMatch(agents[p].out(), /gRPC config for \S+ rejected/, `${p}: its proxy rejected no config`);
    },
  );
}
