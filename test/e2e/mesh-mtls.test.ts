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
// Workload certificates are issued by our CA (src/ca) in the test and mounted as files (FILE_MOUNTED_CERTS).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { CertificateAuthority } from '../../src/ca/authority';
import { createCsrPem } from '../../src/ca/pkix/csr';
import { generateKeyPair } from '../../src/ca/pkix/keys';
import { generateRoot, selfSignedBundle } from '../../src/ca/selfsigned';
import { DIST, built } from '../helpers/binary';
import { createNetns, httpGetIn, must, netnsUnavailable, sh } from '../helpers/netns';
import { REPO } from '../helpers/spec';
import { tempDir, waitFor } from '../agent/helpers';

const POD = path.join(REPO, 'test/e2e/fixtures/mesh-pod.mjs');
const APP_UID = 4321;
const PROXY_UID = 1337;
const CHILD_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
const VIP = '10.89.9.10';
const PODS = { a: 1, b: 2, c: 3 } as const;
type PodName = keyof typeof PODS;
const podIp = (p: PodName) => `10.89.${PODS[p]}.2`;
const spiffe = (p: PodName) => `spiffe://cluster.local/ns/${p}/sa/${p}`;

const skip =
  netnsUnavailable() ||
  (spawnSync('iptables', ['--version']).status !== 0 ? 'iptables is not installed' : false) ||
  (spawnSync('setpriv', ['--version']).status !== 0 ? 'setpriv (util-linux) is not installed' : false) ||
  (spawnSync('openssl', ['version']).status !== 0 ? 'openssl is not installed' : false);

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

/** Starts a program in a namespace and waits for a line matching `ready`; killed in teardown. */
async function startIn(t: Test, ns: string, argv: string[], o: { ready: RegExp; env?: NodeJS.ProcessEnv; cwd?: string; what: string; timeoutMs?: number }): Promise<{ child: ChildProcess; out: () => string }> {
  const child = spawn('ip', ['netns', 'exec', ns, ...argv], { env: o.env ?? CHILD_ENV, cwd: o.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await exited;
  });
  await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`${o.what} exited ${child.exitCode}:\n${out}`);
      return o.ready.test(out);
    },
    o.timeoutMs ?? 30_000,
    () => `${o.what} did not start:\n${out}`,
  );
  return { child, out: () => out };
}

/** A plain client in a namespace (as the app's user when it is a pod), as parsed JSON. */
function call(ns: string, asApp: boolean, ...args: string[]): Record<string, unknown> {
  const user = asApp ? ['setpriv', `--reuid=${APP_UID}`, `--regid=${APP_UID}`, '--clear-groups'] : [];
  const r = must(['ip', 'netns', 'exec', ns, ...user, process.execPath, POD, ...args]);
  return JSON.parse(r.trim()) as Record<string, unknown>;
}
const bodyOf = (r: Record<string, unknown>) => (typeof r['body'] === 'string' && r['body'].startsWith('{') ? (JSON.parse(r['body']) as Record<string, unknown>) : {});

t.test('a mesh of three captured pods: mTLS, XFCC, PeerAuthentication, AuthorizationPolicy', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-mtls-e2e-');
  fs.chmodSync(dir, 0o755);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG);
  fs.writeFileSync(path.join(configDir, 'peer.yaml'), peerAuth('PERMISSIVE'));

  // identities from our CA
  const root = await generateRoot({ ttlMs: 24 * 3_600_000, org: 'cluster.local', rsaKeySize: 2048 });
  const ca = new CertificateAuthority(selfSignedBundle(root, 'test'), { defaultCertTtlMs: 3_600_000, maxCertTtlMs: 24 * 3_600_000 });
  const certs: Record<string, { cert: string; key: string }> = {};
  for (const p of Object.keys(PODS) as PodName[]) {
    const pair = await generateKeyPair({ kind: 'ec', curve: 'P256' });
    certs[p] = { cert: ca.sign(createCsrPem({ privateKey: pair.privateKey, sans: { uris: [spiffe(p)] }, org: '' }), { subjectIds: [spiffe(p)], ttlSeconds: 0 }), key: pair.privateKeyPem };
  }

  const world = createNetns(t, 'mesh-world');
  must(['ip', 'netns', 'exec', world, 'sysctl', '-qw', 'net.ipv4.ip_forward=1']);
  const pods = {} as Record<PodName, string>;
  for (const p of Object.keys(PODS) as PodName[]) {
    const ns = createNetns(t, `mesh-${p}`);
    pods[p] = ns;
    const i = PODS[p];
    must(['ip', '-n', world, 'link', 'add', `veth-${p}`, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', ns]);
    must(['ip', '-n', world, 'addr', 'add', `10.89.${i}.1/24`, 'dev', `veth-${p}`]);
    must(['ip', '-n', ns, 'addr', 'add', `${podIp(p)}/24`, 'dev', 'eth0']);
    must(['ip', '-n', world, 'link', 'set', `veth-${p}`, 'up']);
    must(['ip', '-n', ns, 'link', 'set', 'eth0', 'up']);
    must(['ip', '-n', ns, 'route', 'add', 'default', 'via', `10.89.${i}.1`]);
  }

  const discovery = await startIn(
    t,
    world,
    [
      path.join(DIST, 'pilot-discovery'), 'discovery',
      '--configDir', configDir,
      '--grpcAddr', '0.0.0.0:15010',
      '--httpAddr', '127.0.0.1:18080',
      '--monitoringAddr', '127.0.0.1:15014',
      '--httpsAddr', '127.0.0.1:15017',
      '--secureGRPCAddr', '127.0.0.1:15012',
      '--ctrlz_address', '127.0.0.1', '--ctrlz_port', '9876',
      '--shutdownDuration', '1s',
    ],
    { ready: /listening on .*:15010/, what: 'pilot-discovery', env: { ...CHILD_ENV, HOME: dir, PILOT_DEBOUNCE_AFTER: '10ms' } },
  );

  const agents = {} as Record<PodName, { out: () => string }>;
  for (const p of Object.keys(PODS) as PodName[]) {
    const ns = pods[p];
    const ipt = sh(['ip', 'netns', 'exec', ns, path.join(DIST, 'pilot-agent'), 'mesh-iptables', '-p', '15001', '-z', '15006', '-u', String(PROXY_UID), '-m', 'REDIRECT', '-i', '*', '-x', '', '-b', '*', '-d', '15090,15021,15020']);
    t.equal(ipt.code, 0, `mesh-iptables in ${p}: ${ipt.stderr}`);
    await startIn(t, ns, ['setpriv', `--reuid=${APP_UID}`, `--regid=${APP_UID}`, '--clear-groups', process.execPath, POD, 'app', p], { ready: /listening/, what: `app ${p}` });
    const home = path.join(dir, `proxy-${p}`);
    fs.mkdirSync(path.join(home, 'etc', 'certs'), { recursive: true });
    fs.writeFileSync(path.join(home, 'etc/certs/cert-chain.pem'), certs[p]!.cert);
    fs.writeFileSync(path.join(home, 'etc/certs/key.pem'), certs[p]!.key);
    fs.writeFileSync(path.join(home, 'etc/certs/root-cert.pem'), root.certPem);
    fs.writeFileSync(path.join(home, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 10.89.${PODS[p]}.1:15010\n  controlPlaneAuthPolicy: NONE\n`);
    sh(['chown', '-R', `${PROXY_UID}:${PROXY_UID}`, home]);
    agents[p] = await startIn(
      t,
      ns,
      ['setpriv', `--reuid=${PROXY_UID}`, `--regid=${PROXY_UID}`, '--clear-groups', path.join(DIST, 'pilot-agent'), 'proxy', 'sidecar', '--meshConfig', 'mesh.yaml'],
      {
        ready: /./,
        what: `pilot-agent ${p}`,
        cwd: home,
        env: {
          ...CHILD_ENV,
          HOME: home,
          POD_NAME: `${p}-1`,
          POD_NAMESPACE: p,
          SERVICE_ACCOUNT: p,
          INSTANCE_IP: podIp(p),
          FILE_MOUNTED_CERTS: 'true',
          MESH_METAJSON_LABELS: JSON.stringify({ app: p, 'security.istio.io/tlsMode': 'istio' }),
          PROXY_CONFIG: JSON.stringify({ binaryPath: path.join(home, 'no-envoy-here'), terminationDrainDuration: '1s', proxyStatsMatcher: { inclusionRegexps: ['.*'] } }),
        },
      },
    );
  }
  for (const p of Object.keys(PODS) as PodName[]) {
    await waitFor(() => httpGetIn(pods[p], 'http://127.0.0.1:15021/healthz/ready').status === 200, 60_000, () => `sidecar ${p} not ready:\n${agents[p].out()}\n--- discovery:\n${discovery.out()}`);
  }
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
    const r = sh(['ip', 'netns', 'exec', world, 'openssl', 's_client', '-connect', `${podIp('b')}:8080`, '-alpn', 'istio-http/1.1', '-cert', path.join(files, 'a.crt'), '-key', path.join(files, 'a.key')], { input: '' });
    const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(r.stdout)?.[0];
    t.ok(pem, `s_client printed the server certificate: ${r.stdout.slice(0, 400)} ${r.stderr.slice(0, 400)}`);
    if (pem) t.equal(new crypto.X509Certificate(pem).subjectAltName, `URI:${spiffe('b')}`);
  });

  await t.test('PERMISSIVE serves plaintext, STRICT refuses it', async (t) => {
    const plain = call(world, false, 'http', podIp('b'), '8080');
    t.equal(plain['status'], 200, JSON.stringify(plain));
    t.has(bodyOf(plain), { server: 'b', xfcc: null }, 'no client certificate, no XFCC');
    fs.writeFileSync(path.join(configDir, 'peer.yaml'), peerAuth('STRICT'));
    await waitFor(() => 'error' in call(world, false, 'http', podIp('b'), '8080'), 30_000, () => 'plaintext still served under STRICT');
    t.match(call(world, false, 'http', podIp('b'), '8080'), { error: /ECONNRESET|socket hang up|EPIPE/ }, 'STRICT: the plaintext connection is closed');
    t.equal(call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'], 200, 'A still gets through with mTLS');
    t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' });
  });

  await t.test('an AuthorizationPolicy allowing only A: C gets 403 on HTTP and a closed TCP connection', async (t) => {
    fs.writeFileSync(path.join(configDir, 'authz.yaml'), ALLOW_ONLY_A);
    await waitFor(() => call(pods.c, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'] === 403, 30_000, () => 'C still allowed');
    const c = call(pods.c, true, 'http', VIP, '8080', 'b.b.svc.cluster.local');
    t.same(c, { status: 403, body: 'RBAC: access denied' });
    t.same(call(pods.c, true, 'tcp', VIP, '9000'), { closed: true }, 'the network RBAC filter closes the TCP connection');
    t.equal(call(pods.a, true, 'http', VIP, '8080', 'b.b.svc.cluster.local')['status'], 200, 'A is allowed');
    t.same(call(pods.a, true, 'tcp', VIP, '9000'), { line: 'b echo ping' });
  });
});
