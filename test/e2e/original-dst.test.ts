// Transparent capture end to end with the built binary (issue 11, item 1): a pod network namespace
// with `pilot-agent mesh-iptables` REDIRECT rules and a sidecar (`pilot-agent proxy sidecar`, uid 1337
// as Istio runs it), discovery and the outside servers in a second namespace:
//
//   pod 10.88.0.2 ── veth ── world 10.88.0.1: pilot-discovery, servers a b h2 echo tls outside
//
// The ServiceEntry addresses (10.88.1.0/24) exist nowhere: a plain client in the pod that reaches the
// right server through one of them was captured and routed by the connection's original destination.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { DIST, built } from '../helpers/binary';
import {
  APP_UID,
  asUser,
  capture,
  createNetns,
  httpGetIn,
  linkPod,
  meshPodsUnavailable,
  must,
  opensslIdentities,
  startDiscovery,
  startIn,
  startSidecar,
  waitSidecarReady,
} from '../../scripts/lib/mesh-pods.mjs';
import { REPO } from '../helpers/spec';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';
import { EC_P256_KEY } from '../helpers/openssl';

const WORLD = path.join(REPO, 'test/e2e/fixtures/capture-world.mjs');

const skip = meshPodsUnavailable({ openssl: true });

if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const se = (
  name: string,
  o: { hosts?: string[]; address: string; port: number; protocol: string; target: number; endpoint: string },
) => `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: demo}
spec:
  hosts: [${(o.hosts ?? [`${name}.demo.svc.cluster.local`]).join(', ')}]
  addresses: [${o.address}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: ${o.port}, name: p-${o.port}, protocol: ${o.protocol}}]
  endpoints: [{address: ${o.endpoint}, ports: {p-${o.port}: ${o.target}}}]
`;

const CONFIG = [
  se('a', { address: '10.88.1.10', port: 80, protocol: 'HTTP', target: 8081, endpoint: '10.88.0.1' }),
  se('b', { address: '10.88.1.11', port: 80, protocol: 'HTTP', target: 8082, endpoint: '10.88.0.1' }),
  se('echo', { address: '10.88.1.12', port: 9000, protocol: 'TCP', target: 9001, endpoint: '10.88.0.1' }),
  se('h2', { address: '10.88.1.13', port: 80, protocol: 'HTTP2', target: 8083, endpoint: '10.88.0.1' }),
  se('grpc', { address: '10.88.1.15', port: 7000, protocol: 'GRPC', target: 8083, endpoint: '10.88.0.1' }),
  se('secure', { hosts: ['secure.example.com'], address: '10.88.1.14', port: 443, protocol: 'TLS', target: 8443, endpoint: '10.88.0.1' }),
  // the pod's own service: its inbound chains come from here
  `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: app, namespace: demo}
spec:
  hosts: [app.demo.svc.cluster.local]
  addresses: [10.88.1.20]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8080, name: http, protocol: HTTP}, {number: 9090, name: tcp, protocol: TCP}]
  endpoints: [{address: 10.88.0.2, labels: {app: app}}]
`,
  // This test is about capture, not mTLS: its agent talks plaintext to discovery and gets no workload
  // certificate, and mesh mTLS (the PERMISSIVE default) would make the inbound chains and auto-mTLS
  // clusters wait for one, as Envoy waits for SDS secrets. Mesh-wide DISABLE keeps everything plaintext.
  `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: DISABLE}
`,
].join('---\n');

const REGISTRY_ONLY = `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: demo}
spec:
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
`;

/** One call from a plain client in the pod, as the application's user. */
function client(pod: string, mode: string, host: string, port: number, sni = ''): Record<string, unknown> {
  const r = must(['ip', 'netns', 'exec', pod, ...asUser(APP_UID, [process.execPath, WORLD, 'client', mode, host, String(port), sni])]);
  return JSON.parse(r.trim()) as Record<string, unknown>;
}

/** One call from the world namespace into the pod (inbound). */
function clientFrom(ns: string, mode: string, host: string, port: number): Record<string, unknown> {
  const r = must(['ip', 'netns', 'exec', ns, process.execPath, WORLD, 'client', mode, host, String(port)]);
  return JSON.parse(r.trim()) as Record<string, unknown>;
}

const bodyOf = (r: Record<string, unknown>) => (typeof r['body'] === 'string' ? (JSON.parse(r['body']) as Record<string, unknown>) : {});

/** A counter of the sidecar's engine, from its admin API (Envoy's /stats text). */
function stat(pod: string, name: string): number {
  const r = httpGetIn(pod, 'http://localhost:15000/stats');
  const line = r.body.split('\n').find((l) => l.startsWith(`${name}: `));
  if (!line)
    throw new Error(
      `no stat ${name} in /stats (${r.status}): ${r.body
        .split('\n')
        .filter((l) => /outbound|inbound|Passthrough/.test(l))
        .slice(0, 40)
        .join('\n')}`,
    );
  return Number(line.slice(name.length + 2));
}

t.test('a captured pod: every connection goes where it was addressed', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-capture-');
  fs.chmodSync(dir, 0o755);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG);
  must([
    'openssl',
    'req',
    '-x509',
    ...EC_P256_KEY,
    '-keyout',
    path.join(dir, 'tls.key'),
    '-out',
    path.join(dir, 'tls.crt'),
    '-days',
    '2',
    '-subj',
    '/CN=secure-backend',
  ]);

  const world = createNetns(t, 'mesh-world');
  const pod = createNetns(t, 'mesh-pod');
  linkPod(world, pod, { hostIf: 'eth0', hostIp: '10.88.0.1', podIp: '10.88.0.2' });

  await startIn(t, world, [process.execPath, WORLD, 'world', '10.88.0.1', path.join(dir, 'tls.crt'), path.join(dir, 'tls.key')], {
    ready: /listening/,
    what: 'the world servers',
  });
  const discovery = await startDiscovery(t, { ns: world, dist: DIST, configDir, grpcAddr: '10.88.0.1:15010', home: dir });

  // Istio's injected init container: `istio-iptables -p 15001 -z 15006 -u 1337 -m REDIRECT -i '*' -b '*' -d 15090,15021,15020`
  const ipt = capture(pod, DIST);
  t.equal(ipt.code, 0, `mesh-iptables: ${ipt.stderr}`);

  await startIn(t, pod, asUser(APP_UID, [process.execPath, WORLD, 'app']), { ready: /listening/, what: 'the pod app' });

  // the workload certificate (mounted files, FILE_MOUNTED_CERTS): MESH_INTERNAL services' clusters carry
  // auto-mTLS transport sockets whose SDS secrets must arrive before the sidecar is ready, as in Istio
  // (issued by openssl, not our CA: the engine must load a certificate made elsewhere)
  const id = 'spiffe://cluster.local/ns/demo/sa/default';
  const issued = opensslIdentities(path.join(dir, 'identity'), [id]);
  const { cert, key } = issued.certs[id]!;
  const agent = await startSidecar(t, {
    ns: pod,
    dist: DIST,
    home: path.join(dir, 'proxy'),
    discoveryAddress: '10.88.0.1:15010',
    pod: { name: 'app-0', namespace: 'demo', ip: '10.88.0.2', labels: { app: 'app' } },
    certs: { cert, key, root: issued.root },
    allStats: true,
  });
  await waitSidecarReady(pod, 60_000, () => `sidecar not ready:\n${agent.out()}\n--- discovery:\n${discovery.out()}`);
  t.notMatch(agent.out(), /SO_ORIGINAL_DST cannot be read/, 'the built executable carries the addon');

  t.test('outbound HTTP by service IP reaches the service of that IP', async (t) => {
    const a = client(pod, 'http', '10.88.1.10', 80);
    t.equal(a['status'], 200, JSON.stringify(a));
    t.has(bodyOf(a), { server: 'a', path: '/hello', host: '10.88.1.10' });
    const b = client(pod, 'http', '10.88.1.11', 80);
    t.has(bodyOf(b), { server: 'b' }, 'the other IP on the same port: the other service');
    t.ok(stat(pod, 'cluster.outbound|80||a.demo.svc.cluster.local.upstream_rq_total') >= 1, "through the service's cluster");
  });

  t.test('HTTP/2 (prior knowledge) by service IP', async (t) => {
    const r = client(pod, 'h2', '10.88.1.13', 80);
    t.equal(r['status'], 200, JSON.stringify(r));
    t.has(bodyOf(r), { server: 'h2', path: '/over-h2', version: '2.0' });
  });

  t.test('gRPC by service IP: message and trailers', async (t) => {
    const r = client(pod, 'grpc', '10.88.1.15', 7000);
    t.same(r, { status: 200, message: 'grpc /demo.Echo/Say', grpcStatus: '0', grpcMessage: 'served-by-h2' });
    t.ok(stat(pod, 'cluster.outbound|7000||grpc.demo.svc.cluster.local.upstream_rq_total') >= 1);
  });

  t.test('opaque server-first TCP through the <VIP>_<port> listener', async (t) => {
    const r = client(pod, 'tcp', '10.88.1.12', 9000);
    t.same(r['lines'], ['echo peer=10.88.0.2', 'echo echo ping'], JSON.stringify(r));
    t.ok(stat(pod, 'cluster.outbound|9000||echo.demo.svc.cluster.local.upstream_cx_total') >= 1);
  });

  t.test('TLS passes through untouched to the service of that IP', async (t) => {
    const r = client(pod, 'tls', '10.88.1.14', 443, 'secure.example.com');
    t.same(r, { cn: 'secure-backend', line: 'secure secure.example.com' });
  });

  t.test('inbound: the chain of the port the caller dialled', async (t) => {
    const h = clientFrom(world, 'http', '10.88.0.2', 8080);
    t.equal(h['status'], 200, JSON.stringify(h));
    t.has(bodyOf(h), { server: 'pod-http', peer: '127.0.0.6' }, "the app sees the sidecar's inbound source address");
    t.ok(stat(pod, 'http.inbound_0.0.0.0_8080.downstream_rq_total') >= 1, 'served by the 0.0.0.0_8080 chain of virtualInbound');
    // client-first: under the default PERMISSIVE mode Istio inspects inbound bytes (no server-first TCP)
    const tcp = clientFrom(world, 'tcp-client-first', '10.88.0.2', 9090);
    t.same(tcp['lines'], ['pod-tcp peer=127.0.0.6', 'pod-tcp echo ping'], JSON.stringify(tcp));
    t.ok(stat(pod, 'tcp.inbound|9090||.downstream_cx_total') >= 1, 'served by the 0.0.0.0_9090 chain');
    const other = clientFrom(world, 'tcp-client-first', '10.88.0.2', 7777);
    t.same(other['lines'], ['pod-undeclared peer=127.0.0.6', 'pod-undeclared echo ping'], JSON.stringify(other));
    t.ok(
      stat(pod, 'cluster.InboundPassthroughCluster.upstream_cx_total') >= 1,
      'a port no service declares: the passthrough chain (prefix 0.0.0.0/0)',
    );
  });

  t.test('ALLOW_ANY: destinations outside the registry pass through', async (t) => {
    const tcp = client(pod, 'http', '10.88.0.1', 7070);
    t.has(bodyOf(tcp), { server: 'outside' }, 'a port no listener serves: virtualOutbound passthrough');
    const http80 = client(pod, 'http', '10.88.0.1', 80);
    t.has(bodyOf(http80), { server: 'outside-80' }, 'an unknown host on an HTTP service port: the allow_any route');
    t.ok(stat(pod, 'cluster.PassthroughCluster.upstream_cx_total') >= 2);
  });

  t.test('REGISTRY_ONLY: destinations outside the registry are blocked, services still work', async (t) => {
    fs.writeFileSync(path.join(configDir, 'sidecar.yaml'), REGISTRY_ONLY);
    await waitFor(
      () => 'still passed through',
      () => 'error' in client(pod, 'http', '10.88.0.1', 7070),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    t.match(client(pod, 'http', '10.88.0.1', 7070), { error: /ECONNRESET|socket hang up/ }, 'virtualOutbound black-holes it');
    t.equal(client(pod, 'http', '10.88.0.1', 80)['status'], 502, 'the block_all route answers 502');
    t.has(bodyOf(client(pod, 'http', '10.88.1.10', 80)), { server: 'a' }, 'registered services are unaffected');
  });
});
