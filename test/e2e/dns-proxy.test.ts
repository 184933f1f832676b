// The agent's DNS proxy end to end with the built binary (issue 11, item 5): a pod network namespace whose
// resolv.conf names a resolver the test runs (10.77.0.53, the pod's "cluster DNS"), `pilot-agent
// mesh-iptables --redirect-dns` capture rules, discovery serving Services and ServiceEntries from --configDir,
// and a sidecar (uid 1337) with MESH_META_DNS_CAPTURE=true. Names of the mesh are answered by the agent from
// the name table; everything else reaches the test's resolver through the agent.
// Issue 31: a resolver the pod cannot reach, a resolver sending broken answers, and malformed queries get
// SERVFAIL/FORMERR/NOTIMP or nothing, as Istio's proxy gives them, and the agent keeps answering.
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { DIST, built } from '../helpers/binary';
import {
  APP_UID,
  asUser,
  capture,
  createNetns,
  httpGetIn,
  meshPodsUnavailable,
  must,
  sh,
  startDiscovery,
  startIn,
  startSidecar,
  waitSidecarReady,
} from '../../scripts/lib/mesh-pods.mjs';
import { REPO } from '../helpers/spec';
import { metricValue } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

const UPSTREAM = path.join(REPO, 'test/e2e/fixtures/dns-upstream.mjs');
const CLIENT = path.join(REPO, 'test/e2e/fixtures/dns-client.mjs');

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

interface DnsPod {
  pod: string;
  configDir: string;
  agent: { child: import('node:child_process').ChildProcess; out: () => string };
  metrics: () => string;
}

/**
 * A pod network namespace with `resolvConf`, pilot-discovery serving `config`, the capture rules with
 * `--redirect-dns` and a ready sidecar with MESH_META_DNS_CAPTURE=true (and `env`). `prepare` runs before
 * discovery starts (addresses, the pod's resolver).
 */
async function dnsPod(
  t: Test,
  prefix: string,
  resolvConf: string,
  config: string,
  prepare: (pod: string) => Promise<void> | void = () => undefined,
  env: Record<string, string> = {},
): Promise<DnsPod> {
  const dir = tempDir(t, `${prefix}-`);
  fs.chmodSync(dir, 0o755);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'services.yaml'), config);
  fs.writeFileSync(path.join(configDir, 'plaintext.yaml'), PLAINTEXT);

  // `ip netns exec` mounts /etc/netns/<ns>/resolv.conf over /etc/resolv.conf: the pod's resolver settings
  const pod = createNetns(t, prefix, { resolvConf });
  must(['ip', '-n', pod, 'addr', 'add', '10.77.0.2/32', 'dev', 'lo']);
  await prepare(pod);

  const discovery = await startDiscovery(t, { ns: pod, dist: DIST, configDir, grpcAddr: '127.0.0.1:15010', home: dir });

  // Istio's init container with DNS capture: `istio-iptables … --redirect-dns` (ISTIO_META_DNS_CAPTURE=true)
  const ipt = capture(pod, DIST, { dns: true });
  t.equal(ipt.code, 0, `mesh-iptables: ${ipt.stderr}`);

  const agent = await startSidecar(t, {
    ns: pod,
    dist: DIST,
    home: path.join(dir, 'proxy'),
    discoveryAddress: '127.0.0.1:15010',
    pod: { name: 'productpage-0', namespace: 'default', ip: '10.77.0.2' },
    env: { MESH_META_DNS_CAPTURE: 'true', ...env },
  });
  await waitSidecarReady(pod, 60_000, () => `sidecar not ready:\n${agent.out()}\n--- discovery:\n${discovery.out()}`);
  // The readiness probe runs synchronously (in the pod's namespace): the agent's last lines may still be in
  // the pipe when it returns.
  for (const proto of ['udp', 'tcp']) {
    const line = new RegExp(`Starting local ${proto} DNS server on 127\\.0\\.0\\.1:15053`);
    await waitFor(
      () => `no ${line} in the agent's output:\n${agent.out()}`,
      () => line.test(agent.out()),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    t.match(agent.out(), line);
  }
  return { pod, configDir, agent, metrics: () => httpGetIn(pod, 'http://127.0.0.1:15020/stats/prometheus').body };
}

t.test('a pod with DNS capture resolves mesh names through its agent', { skip }, async (t) => {
  let upstream!: { out: () => string };
  // the pod's resolver, local to the namespace
  const { pod, configDir, metrics } = await dnsPod(
    t,
    'mesh-dns',
    'nameserver 10.77.0.53\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n',
    CONFIG.replace('THIRD_READY', 'false'),
    async (pod) => {
      must(['ip', '-n', pod, 'addr', 'add', '10.77.0.53/32', 'dev', 'lo']);
      upstream = await startIn(t, pod, [process.execPath, UPSTREAM, '10.77.0.53', '53', JSON.stringify({ 'www.outside.test.': '203.0.113.9' })], {
        ready: /listening/,
        what: 'the upstream resolver',
      });
    },
  );
  const asked = (name: string) =>
    upstream
      .out()
      .split('\n')
      .filter((l) => l.startsWith('query ') && l.split(' ')[2] === name).length;
  t.match(
    sh(['ip', 'netns', 'exec', pod, 'iptables-save', '-t', 'nat']).stdout,
    /-d 10\.77\.0\.53\/32 .*-j REDIRECT --to-ports 15053/,
    'queries to the resolv.conf server go to 15053',
  );
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
    await waitFor(
      () => `upstream output: ${upstream.out()}`,
      () => asked('nothing.example.') > 0,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
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
    t.same(r, {
      reviews: ['10.96.0.20'],
      'reviews.default': ['10.96.0.20'],
      'api.partner.test': ['240.240.0.7'],
      'www.outside.test': ['203.0.113.9'],
      db: ['10.244.0.11', '10.244.0.12'],
    });
    const lines = () =>
      upstream
        .out()
        .split('\n')
        .slice(upstreamBefore - 1)
        .filter((l) => l.startsWith('query '));
    await waitFor(
      () => `upstream output: ${upstream.out()}`,
      () => lines().some((l) => l.includes(' www.outside.test. ')),
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const seen = lines();
    t.notOk(
      seen.some((l) => l.includes('reviews')),
      `the resolver saw no mesh name: ${seen.join('; ')}`,
    );
    // glibc asks `api.partner.test.default.svc.cluster.local` first (ndots:5): the agent answers it with a CNAME
    // to the ServiceEntry host and its address, so the search walk ends there
    t.notOk(
      seen.some((l) => l.includes('api.partner.test')),
      'a ServiceEntry host never left the pod, expansions included',
    );
    // a name the mesh does not know walks the search list through the agent to the resolver, then goes as is
    t.ok(
      seen.some((l) => l.includes(' www.outside.test.default.svc.cluster.local. ')),
      'search expansions of unknown names are forwarded',
    );
    t.ok(
      seen.some((l) => l.includes(' www.outside.test. ')),
      'the real external name was forwarded',
    );
  });

  t.test('dns_* metrics on the agent', async (t) => {
    const after = metrics();
    const d = (n: string) => (metricValue(after, n) ?? 0) - (metricValue(before, n) ?? 0);
    t.ok(d('dns_requests_total') >= 15, `dns_requests_total +${d('dns_requests_total')}`);
    t.ok(d('dns_upstream_requests_total') >= 5, `dns_upstream_requests_total +${d('dns_upstream_requests_total')}`);
    t.ok(d('dns_upstream_requests_total') < d('dns_requests_total'), 'local answers are not forwarded');
    t.equal(d('dns_upstream_failures_total'), 0);
    t.equal(
      metricValue(after, 'dns_upstream_request_duration_seconds_count'),
      metricValue(after, 'dns_upstream_requests_total'),
      'every forward timed',
    );
  });

  t.test('headless endpoint changes are pushed to the agent', async (t) => {
    fs.writeFileSync(path.join(configDir, 'services.yaml'), CONFIG.replace('THIRD_READY', 'true'));
    const want = JSON.stringify({ 'db.default.svc.cluster.local': ['10.244.0.11', '10.244.0.12', '10.244.0.13'] });
    await waitFor(
      () => `db: ${JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['db.default.svc.cluster.local']))}`,
      () => JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['db.default.svc.cluster.local'])) === want,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    t.pass('the endpoint that became ready is answered');
  });

  t.test('a new Service is pushed to the agent', async (t) => {
    fs.writeFileSync(path.join(configDir, 'details.yaml'), DETAILS);
    await waitFor(
      () => `details not resolved: ${JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['details']))}`,
      () => JSON.stringify(resolve4In(pod, '127.0.0.1:15053', ['details'])) === '{"details":["10.96.0.40"]}',
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    t.pass('details resolves after the push');
  });
});

interface Answer {
  rcode?: string;
  tc?: boolean;
  answers?: number;
  id?: number;
  error?: string;
}

/** One query to the agent (127.0.0.1:15053) from inside the pod, by the test's own client. */
function askIn(pod: string, proto: 'udp' | 'tcp', name: string, type = 1): Answer {
  return JSON.parse(must(['ip', 'netns', 'exec', pod, process.execPath, CLIENT, 'ask', proto, '127.0.0.1', '15053', name, String(type)])) as Answer;
}

const SERVFAIL: Answer = { rcode: 'SERVFAIL', tc: false, answers: 0, id: 0x1f2e };

/** The agent's process runs, its readiness answers 200 and its DNS proxy still answers a mesh name. */
async function alive(t: Test, p: DnsPod, why: string): Promise<void> {
  // the checks below run synchronously: give the child's exit, if any, a turn of the event loop to be seen
  await new Promise((r) => setTimeout(r, 200));
  if (!t.equal(p.agent.child.exitCode, null, `${why}: the agent runs`)) t.comment(p.agent.out().slice(-3000));
  t.equal(httpGetIn(p.pod, 'http://127.0.0.1:15021/healthz/ready').status, 200, `${why}: :15021 ready`);
  t.same(resolve4In(p.pod, '127.0.0.1:15053', ['reviews']), { reviews: ['10.96.0.20'] }, `${why}: a mesh name is answered`);
}

// Issue 31: a namespace with loopback only, whose resolv.conf names a resolver it has no route to (TEST-NET-1).
// Sending there fails at once (ENETUNREACH): the path that killed the agent. Istio answers SERVFAIL.
t.test('an unreachable resolver: SERVFAIL to the client, and the agent lives', { skip }, async (t) => {
  // the settings: capture and the DNS server asked for outright
  const p = await dnsPod(t, 'mesh-dnsdown', 'nameserver 192.0.2.53\n', CONFIG.replace('THIRD_READY', 'false'), undefined, {
    MESH_META_ENABLE_DNS_SERVER: 'true',
  });
  t.match(sh(['ip', 'netns', 'exec', p.pod, 'ip', 'route', 'get', '192.0.2.53']).stderr, /unreachable/, 'no route to the resolver');
  const before = p.metrics();
  t.same(askIn(p.pod, 'udp', 'upstream-only.example.org.'), SERVFAIL, 'UDP: SERVFAIL');
  t.same(askIn(p.pod, 'tcp', 'upstream-only.example.org.'), SERVFAIL, 'TCP: SERVFAIL');
  await alive(t, p, 'after the failed forwards');
  const d = (n: string) => (metricValue(p.metrics(), n) ?? 0) - (metricValue(before, n) ?? 0);
  t.equal(d('dns_upstream_failures_total'), 2, 'both counted as upstream failures');

  t.test('malformed queries get the answers miekg/dns gives them, and the agent lives', async (t) => {
    const r = JSON.parse(
      must(['ip', 'netns', 'exec', p.pod, process.execPath, CLIENT, 'fuzz', '127.0.0.1', '15053', '31', '600'], { timeoutMs: 120_000 }),
    ) as { verdicts: Record<string, string>; sent: number; answered: number };
    const both = (name: string, v: string) => ({ [`udp ${name}`]: v, [`tcp ${name}`]: v });
    t.same(r.verdicts, {
      // no header: nothing to answer (miekg/dns: "let client hang, they are sending crap")
      ...both('empty', 'none'),
      ...both('one byte', 'none'),
      ...both('eleven bytes', 'none'),
      ...both('response', 'none'),
      ...both('opcode UPDATE', 'NOTIMP'),
      ...both('opcode 15', 'NOTIMP'),
      // DefaultMsgAcceptFunc: exactly one question, at most 1 answer, 1 authority, 2 additional records
      ...both('no question', 'FORMERR'),
      ...both('two questions', 'FORMERR'),
      ...both('question count beyond the message', 'FORMERR'),
      ...both('three additional records', 'FORMERR'),
      // miekg/dns reads a bare header as a message with no question; Istio answers that SERVFAIL
      ...both('header only', 'SERVFAIL'),
      ...both('name without its end', 'FORMERR'),
      ...both('pointer to itself', 'FORMERR'),
      ...both('pointer past the end', 'FORMERR'),
      ...both('extended label type', 'FORMERR'),
      ...both('name over 255 bytes', 'FORMERR'),
      ...both('additional record cut short', 'FORMERR'),
      ...both('OPT record with rdlength past the end', 'FORMERR'),
      // a valid name: forwarded, and the resolver is unreachable
      ...both('label bytes of every kind', 'SERVFAIL'),
      'tcp zero length': 'none',
      'tcp length past the data': 'none',
      'tcp pipelined': '1:SERVFAIL,19793:FORMERR,3:NOTIMP',
    });
    t.ok(r.answered > 0 && r.sent > 600, `mutations sent ${r.sent}, answered ${r.answered}`);
    await alive(t, p, 'after the malformed queries');
    t.same(askIn(p.pod, 'udp', 'upstream-only.example.org.'), SERVFAIL, 'still SERVFAIL for the unreachable resolver');
  });

  // A UDP source port of 0 cannot be answered (nothing listens there) and node's send() throws on it.
  t.test(
    'a query from source port 0 gets no answer and the agent lives',
    { skip: sh(['python3', '-c', '0']).code !== 0 ? 'python3 (for a raw socket) missing' : false },
    async (t) => {
      const script = `import socket, struct
q = bytes.fromhex('0a0b01000001000000000000') + b'\\x07reviews\\x00' + bytes.fromhex('00010001')
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
s.sendto(struct.pack('!HHHH', 0, 15053, 8 + len(q), 0) + q, ('127.0.0.1', 0))`;
      must(['ip', 'netns', 'exec', p.pod, 'python3', '-c', script]);
      await new Promise((r) => setTimeout(r, 500));
      await alive(t, p, 'after a query from port 0');
    },
  );
});

// Answers a resolver breaks in every way a client reads them (miekg/dns's Exchange fails on them, and Istio's
// proxy then answers SERVFAIL), plus one that is well formed and too big for UDP.
t.test('broken answers from the resolver: SERVFAIL to the client, and the agent lives', { skip }, async (t) => {
  const faults = ['short', 'empty', 'cut', 'loop', 'badlabel', 'rdlength', 'otherid', 'random', 'big', 'bigbad'];
  let upstream!: { out: () => string };
  const p = await dnsPod(t, 'mesh-dnsbad', 'nameserver 10.77.0.53\n', CONFIG.replace('THIRD_READY', 'false'), async (pod) => {
    must(['ip', '-n', pod, 'addr', 'add', '10.77.0.53/32', 'dev', 'lo']);
    const names = Object.fromEntries([['good.example.', '203.0.113.9'], ...faults.map((f) => [`${f}.broken.example.`, `!${f}`])]);
    upstream = await startIn(t, pod, [process.execPath, UPSTREAM, '10.77.0.53', '53', JSON.stringify(names)], {
      ready: /listening/,
      what: 'the upstream resolver',
    });
  });
  for (const proto of ['udp', 'tcp'] as const) {
    for (const f of faults.filter((x) => x !== 'big')) t.same(askIn(p.pod, proto, `${f}.broken.example.`), SERVFAIL, `${proto} ${f}: SERVFAIL`);
  }
  // Istio's UDP client reads at most the query's payload size and fails on the rest (SERVFAIL); this proxy reads
  // the whole answer and cuts it to 512 bytes with TC set, so the client retries over TCP and gets all of it
  const big = askIn(p.pod, 'udp', 'big.broken.example.');
  t.ok(big.rcode === 'NOERROR' && big.tc === true && big.answers! > 0 && big.answers! < 64, `udp big: truncated ${JSON.stringify(big)}`);
  t.same(askIn(p.pod, 'tcp', 'big.broken.example.'), { rcode: 'NOERROR', tc: false, answers: 64, id: 0x1f2e }, 'tcp big: whole');
  t.same(askIn(p.pod, 'udp', 'good.example.'), { rcode: 'NOERROR', tc: false, answers: 1, id: 0x1f2e }, 'a good answer still passes');
  // the resolver's output arrives once the event loop runs again (the queries above ran synchronously)
  await waitFor(
    () => `upstream output: ${upstream.out()}`,
    () => upstream.out().includes('query tcp bigbad.broken.example. 1'),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.pass('the broken answers came from the resolver');
  await alive(t, p, 'after the broken answers');
});
