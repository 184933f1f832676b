// The agent's DNS proxy end to end with the built binary (issue 11, item 5): a pod network namespace whose
// resolv.conf names a resolver the test runs (10.77.0.53, the pod's "cluster DNS"), `pilot-agent
// mesh-iptables --redirect-dns` capture rules, discovery serving Services and ServiceEntries from --configDir,
// and a sidecar (uid 1337) with MESH_META_DNS_CAPTURE=true. Names of the mesh are answered by the agent from
// the name table; everything else reaches the test's resolver through the agent.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { DIST, built } from '../helpers/binary';
import { APP_UID, asUser, capture, createNetns, httpGetIn, meshPodsUnavailable, must, sh, startDiscovery, startIn, startSidecar, waitFor, waitSidecarReady } from '../../scripts/lib/mesh-pods.mjs';
import { REPO } from '../helpers/spec';
import { metricValue, tempDir } from '../agent/helpers';

const UPSTREAM = path.join(REPO, 'test/e2e/fixtures/dns-upstream.mjs');

const skip = meshPodsUnavailable();

if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

// This test is about DNS, not mTLS: its agent talks plaintext to discovery and gets no workload certificate,
// and mesh mTLS (the PERMISSIVE default) would make the sidecar wait for one. Mesh-wide DISABLE.
const PLAINTEXT = `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: DISABLE}
`;

const CONFIG = `apiVersion: v1
kind: Service
metadata: {name: reviews, namespace: default}
spec:
  clusterIP: 10.96.0.20
  ports: [{name: http, port: 9080}]
  selector: {app: reviews}
---
apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: other}
spec:
  clusterIP: 10.96.0.30
  ports: [{name: http, port: 9080}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  ports: [{name: tcp, port: 5432}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-abc, namespace: default, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
endpoints:
- addresses: [10.244.0.11]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: db-0, namespace: default}
- addresses: [10.244.0.12]
  conditions: {ready: true}
- addresses: [10.244.0.13]
  conditions: {ready: THIRD_READY}
ports: [{name: tcp, port: 5432}]
---
apiVersion: v1
kind: Pod
metadata: {name: db-0, namespace: default, labels: {app: db}}
spec:
  hostname: db-0
  subdomain: db
  serviceAccountName: db
status:
  podIP: 10.244.0.11
  phase: Running
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: partner, namespace: default}
spec:
  hosts: [api.partner.test]
  addresses: [240.240.0.7]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{number: 443, name: tls, protocol: TLS}]
`;

const DETAILS = `apiVersion: v1
kind: Service
metadata: {name: details, namespace: default}
spec:
  clusterIP: 10.96.0.40
  ports: [{name: http, port: 9080}]
`;

/** node's resolver (c-ares, no search list) asking `server` for A records, in the pod. */
function resolve4In(ns: string, server: string, names: string[]): Record<string, string[] | string> {
  const script = `const { Resolver } = require('node:dns').promises; const r = new Resolver({ timeout: 3000, tries: 1 }); r.setServers([${JSON.stringify(server)}]);
(async () => { const out = {}; for (const n of ${JSON.stringify(names)}) { try { out[n] = (await r.resolve4(n)).sort(); } catch (e) { out[n] = e.code; } } process.stdout.write(JSON.stringify(out)); })();`;
  return JSON.parse(must(['ip', 'netns', 'exec', ns, process.execPath, '-e', script])) as Record<string, string[] | string>;
}

/** getaddrinfo as the application's user: glibc, the pod's resolv.conf and its search list, no DNS settings of ours. */
function lookupAsApp(ns: string, names: string[]): Record<string, string[] | string> {
  const script = `const dns = require('node:dns').promises;
(async () => { const out = {}; for (const n of ${JSON.stringify(names)}) { try { out[n] = (await dns.lookup(n, { family: 4, all: true })).map((a) => a.address).sort(); } catch (e) { out[n] = e.code; } } process.stdout.write(JSON.stringify(out)); })();`;
  return JSON.parse(must(['ip', 'netns', 'exec', ns, ...asUser(APP_UID, [process.execPath, '-e', script])])) as Record<string, string[] | string>;
}

t.test('a pod with DNS capture resolves mesh names through its agent', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-dns-e2e-');
  fs.chmodSync(dir, 0o755);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG.replace('THIRD_READY', 'false'));
  fs.writeFileSync(path.join(configDir, 'plaintext.yaml'), PLAINTEXT);

  // `ip netns exec` mounts /etc/netns/<ns>/resolv.conf over /etc/resolv.conf: the pod's resolver settings
  const pod = createNetns(t, 'mesh-dns', { resolvConf: 'nameserver 10.77.0.53\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n' });
  // the pod's address and its resolver's, both local to the namespace
  must(['ip', '-n', pod, 'addr', 'add', '10.77.0.2/32', 'dev', 'lo']);
  must(['ip', '-n', pod, 'addr', 'add', '10.77.0.53/32', 'dev', 'lo']);

  const upstream = await startIn(t, pod, [process.execPath, UPSTREAM, '10.77.0.53', '53', JSON.stringify({ 'www.outside.test.': '203.0.113.9' })], { ready: /listening/, what: 'the upstream resolver' });
  const asked = (name: string) => upstream.out().split('\n').filter((l) => l.startsWith('query ') && l.split(' ')[2] === name).length;

  const discovery = await startDiscovery(t, { ns: pod, dist: DIST, configDir, grpcAddr: '127.0.0.1:15010', home: dir });

  // Istio's init container with DNS capture: `istio-iptables … --redirect-dns` (ISTIO_META_DNS_CAPTURE=true)
  const ipt = capture(pod, DIST, { dns: true });
  t.equal(ipt.code, 0, `mesh-iptables: ${ipt.stderr}`);
  t.match(sh(['ip', 'netns', 'exec', pod, 'iptables-save', '-t', 'nat']).stdout, /-d 10\.77\.0\.53\/32 .*-j REDIRECT --to-ports 15053/, 'queries to the resolv.conf server go to 15053');

  const agent = await startSidecar(t, {
    ns: pod,
    dist: DIST,
    home: path.join(dir, 'proxy'),
    discoveryAddress: '127.0.0.1:15010',
    pod: { name: 'productpage-0', namespace: 'default', ip: '10.77.0.2' },
    env: { MESH_META_DNS_CAPTURE: 'true' },
  });
  await waitSidecarReady(pod, 60_000, () => `sidecar not ready:\n${agent.out()}\n--- discovery:\n${discovery.out()}`);
  // The readiness probe runs synchronously (in the pod's namespace): the agent's last lines may still be in
  // the pipe when it returns.
  for (const proto of ['udp', 'tcp']) {
    const line = new RegExp(`Starting local ${proto} DNS server on 127\\.0\\.0\\.1:15053`);
    await waitFor(() => line.test(agent.out()), 10_000, () => `no ${line} in the agent's output:\n${agent.out()}`);
    t.match(agent.out(), line);
  }
  const metrics = () => httpGetIn(pod, 'http://127.0.0.1:15020/stats/prometheus').body;
  const before = metrics();

  t.test('the agent on 127.0.0.1:15053 answers the mesh names', async (t) => {
    const r = resolve4In(pod, '127.0.0.1:15053', [
      'reviews',
      'reviews.default',
      'reviews.default.svc',
      'reviews.default.svc.cluster.local',
      'ratings.other',
      'ratings.other.svc.cluster.local',
      'db.default.svc.cluster.local',
      'db-0.db.default.svc.cluster.local',
      'db-0.db',
      'api.partner.test',
      'www.outside.test',
      'ratings',
      'nothing.example',
    ]);
    t.same(r, {
      reviews: ['10.96.0.20'],
      'reviews.default': ['10.96.0.20'],
      'reviews.default.svc': ['10.96.0.20'],
      'reviews.default.svc.cluster.local': ['10.96.0.20'],
      'ratings.other': ['10.96.0.30'],
      'ratings.other.svc.cluster.local': ['10.96.0.30'],
      // headless: the ready endpoints
      'db.default.svc.cluster.local': ['10.244.0.11', '10.244.0.12'],
      // a pod with a subdomain: `<hostname>.<subdomain>`, with the short forms of the proxy's namespace
      'db-0.db.default.svc.cluster.local': ['10.244.0.11'],
      'db-0.db': ['10.244.0.11'],
      'api.partner.test': ['240.240.0.7'],
      // not the mesh's: from the test's resolver, through the agent
      'www.outside.test': ['203.0.113.9'],
      // a short name of another namespace is not the mesh's either
      ratings: 'ENOTFOUND',
      'nothing.example': 'ENOTFOUND',
    });
    // the resolver's output arrives once the event loop runs again (the query above ran synchronously)
    await waitFor(() => asked('nothing.example.') > 0, 10_000, () => `upstream output: ${upstream.out()}`);
    t.equal(asked('reviews.'), 0, 'mesh names never reach the upstream resolver');
    t.equal(asked('reviews.default.svc.cluster.local.'), 0);
    t.equal(asked('www.outside.test.'), 1, 'the external name was forwarded once');
    t.equal(asked('nothing.example.'), 1);
  });

  t.test('the TCP server answers too', async (t) => {
    const script = `const net = require('node:net'); const q = Buffer.from('abcd010000010000000000000772657669657773000001' + '0001', 'hex');
const c = net.connect(15053, '127.0.0.1', () => { const l = Buffer.alloc(2); l.writeUInt16BE(q.length); c.write(Buffer.concat([l, q])); });
let b = Buffer.alloc(0); c.on('data', (d) => { b = Buffer.concat([b, d]); if (b.length >= 2 + b.readUInt16BE(0)) { process.stdout.write(b.subarray(2).toString('hex')); c.destroy(); } });`;
    const hex = must(['ip', 'netns', 'exec', pod, process.execPath, '-e', script]);
    // id abcd, QR AA RD, one question, one answer; the A record names `reviews.` by pointer and holds 10.96.0.20
    t.equal(hex.slice(0, 24), 'abcd85000001000100000000');
    t.match(hex, /c00c00010001[0-9a-f]{8}00040a600014$/);
  });

  t.test("the application's own resolver (glibc, search list) is captured to the agent", async (t) => {
    const upstreamBefore = upstream.out().split('\n').length;
    const r = lookupAsApp(pod, ['reviews', 'reviews.default', 'api.partner.test', 'www.outside.test', 'db']);
    t.same(r, { reviews: ['10.96.0.20'], 'reviews.default': ['10.96.0.20'], 'api.partner.test': ['240.240.0.7'], 'www.outside.test': ['203.0.113.9'], db: ['10.244.0.11', '10.244.0.12'] });
    const lines = () => upstream.out().split('\n').slice(upstreamBefore - 1).filter((l) => l.startsWith('query '));
    await waitFor(() => lines().some((l) => l.includes(' www.outside.test. ')), 10_000, () => `upstream output: ${upstream.out()}`);
    const seen = lines();
    t.notOk(seen.some((l) => l.includes('reviews')), `the resolver saw no mesh name: ${seen.join('; ')}`);
    // glibc asks `api.partner.test.default.svc.cluster.local` first (ndots:5): the agent answers it with a CNAME
    // to the ServiceEntry host and its address, so the search walk ends there
    t.notOk(seen.some((l) => l.includes('api.partner.test')), 'a ServiceEntry host never left the pod, expansions included');
    // a name the mesh does not know walks the search list through the agent to the resolver, then goes as is
    t.ok(seen.some((l) => l.includes(' www.outside.test.default.svc.cluster.local. ')), 'search expansions of unknown names are forwarded');
    t.ok(seen.some((l) => l.includes(' www.outside.test. ')), 'the real external name was forwarded');
  });

  t.test('dns_* metrics on the agent', async (t) => {
    const after = metrics();
    const d = (n: string) => (metricValue(after, n) ?? 0) - (metricValue(before, n) ?? 0);
    t.ok(d('dns_requests_total') >= 15, `dns_requests_total +${d('dns_requests_total')}`);
    t.ok(d('dns_upstream_requests_total') >= 5, `dns_upstream_requests_total +${d('dns_upstream_requests_total')}`);
    t.ok(d('dns_upstream_requests_total') < d('dns_requests_total'), 'local answers are not forwarded');
    t.equal(d('dns_upstream_failures_total'), 0);
    t.equal(metricValue(after, 'dns_upstream_request_duration_seconds_count'), metricValue(after, 'dns_upstream_requests_total'), 'every forward timed');
  });

  t.test('headless endpoint changes are pushed to the agent', async (t) => {
    fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG.replace('THIRD_READY', 'true'));
    const want = JSON.stringify({ 'db.default.svc.cluster.local': ['10.244.0.11', '10.244.0.12', '10.244.0.13'] });
    await waitFor(() => JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['db.default.svc.cluster.local'])) === want, 30_000, () => `db: ${JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['db.default.svc.cluster.local']))}`);
    t.pass('the endpoint that became ready is answered');
  });

  t.test('a new Service is pushed to the agent', async (t) => {
    fs.writeFileSync(path.join(configDir, 'details.yaml'), DETAILS);
    await waitFor(() => JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['details'])) === '{"details":["10.96.0.40"]}', 30_000, () => `details not resolved: ${JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['details']))}`);
    t.pass('details resolves after the push');
  });
});
