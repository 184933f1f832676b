// Issue 26's "done means" end to end, with the built binary and the daemon generating every piece of telemetry
// config: a gateway (`pilot-agent proxy router`, its own pod and workload certificate, a Gateway + VirtualService
// routing to A) → sidecar A (its app calls B, passing the trace headers on as Istio asks applications to) →
// sidecar B, with mTLS on both hops; a Zipkin v2 collector and a real Prometheus (Debian's) in the world
// namespace. Expected values are Istio's, never read back from our output:
// - metrics: istio.io "Istio Standard Metrics" and istio/proxy testdata/metric/{client,server}_request_total
//   (a gateway reports as `source`; the client side takes source_principal/destination_principal from the upstream
//   TLS connection's local/peer certificates, istio_stats.cc; connection_security_policy is `unknown` there);
// - traces: one trace through gateway (server + upstream client span: istiod sets spawn_upstream_span for
//   gateways, PILOT_SPAWN_UPSTREAM_SPAN_FOR_GATEWAY), A (server, client) and B (server), parents chained,
//   istiod's route decorators `<host>:<port>/*` as names, buildServiceTags' istio.* tags;
// - access logs: Istio's EnvoyTextLogFormat (pilot/pkg/model/telemetry_logging.go) for accessLogFile /dev/stdout,
//   then a Telemetry accessLogging filter (CEL) applied without restart;
// - a Telemetry tagOverrides removal visible in the next scrape, without restart;
// - `meshctl x metrics` (istioctl's five queries) against the Prometheus in the world namespace.
// Differs on purpose from a cluster: the registry is ServiceEntry/WorkloadEntry (a ServiceEntry's service is
// named by its host), the collector is a ServiceEntry with a static endpoint.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { meshAddr, meshPodsUnavailable, sh, spiffeOf, startIn, startMesh, type Mesh } from '../../scripts/lib/mesh-pods.mjs';
import { istioPeerLabels, parseQueryResult, prometheusUnavailable, queryPath, seriesOf, startPrometheus, type Sample } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';

const skip = meshPodsUnavailable({ openssl: true }) || prometheusUnavailable();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

// pods in startMesh order: gw is pod 1 (10.89.1.2), a pod 2, b pod 3 (VIPs 10.89.9.12, .13)
const GW = 1;
const A = 2;
const B = 3;
const pod = (name: string, gateway = false) => ({
  name,
  gateway,
  labels: {
    version: 'v1',
    'service.mesh.io/canonical-name': name,
    'service.mesh.io/canonical-revision': 'v1',
    ...(gateway ? { istio: 'ingressgateway' } : {}),
  },
  // what the injector sets: the workload name, the cluster id, the mesh id (Istio's default: the trust domain)
  env: { MESH_META_WORKLOAD_NAME: `${name}-v1`, MESH_META_CLUSTER_ID: 'Orchestrator', MESH_META_MESH_ID: 'cluster.local' },
});

const ZIPKIN_HOST = 'zipkin.mesh-system.svc.cluster.local';
const ZIPKIN_ADDR = meshAddr.gateway(GW); // the world's side of the gateway pod's link
const MESH_CONFIG = `defaultProviders:
  metrics: [prometheus]
  tracing: [zipkin]
accessLogFile: /dev/stdout
extensionProviders:
- name: zipkin
  zipkin: {service: ${ZIPKIN_HOST}, port: 9411}
`;

const CONFIG = {
  'gateway.yaml': `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: gw}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ['*']
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: to-a, namespace: gw}
spec:
  hosts: ['*']
  gateways: [ingress]
  http:
  - route:
    - destination: {host: a.a.svc.cluster.local, port: {number: 8080}}
`,
  'zipkin.yaml': `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: zipkin, namespace: mesh-system}
spec:
  hosts: [${ZIPKIN_HOST}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 9411, name: http, protocol: HTTP}]
  endpoints: [{address: ${ZIPKIN_ADDR}}]
`,
};

/** The root-namespace Telemetry: 100 % sampling, plus whatever a step adds. */
const telemetry = (extra = '') => `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: mesh-system}
spec:
  tracing:
  - randomSamplingPercentage: 100
${extra}`;
const REMOVE_PROTOCOL = `  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - tagOverrides:
        request_protocol: {operation: REMOVE}
`;
const ERRORS_ONLY = `  accessLogging:
  - providers: [{name: envoy}]
    filter: {expression: "response.code >= 400"}
`;

const peer = istioPeerLabels;

/** Istio's label set for one hop `from` → `to` (service `to`.`to`.svc.cluster.local) as `reporter` reports it. */
function hop(reporter: 'source' | 'destination', from: string, to: string, code = '200'): Record<string, string> {
  return {
    reporter,
    ...peer('source', from),
    source_principal: spiffeOf(from),
    ...peer('destination', to),
    destination_principal: spiffeOf(to),
    destination_service: `${to}.${to}.svc.cluster.local`,
    destination_service_name: `${to}.${to}.svc.cluster.local`,
    destination_service_namespace: to,
    request_protocol: 'http',
    response_code: code,
    grpc_response_status: '',
    response_flags: '-',
    connection_security_policy: reporter === 'destination' ? 'mutual_tls' : 'unknown',
  };
}

/** Zipkin v2 span as the collector receives it. */
interface ZSpan {
  traceId: string;
  id: string;
  parentId?: string;
  kind?: string;
  name?: string;
  localEndpoint?: { serviceName?: string };
  tags?: Record<string, string>;
}

/** A Zipkin v2 collector in `ns` (POST /api/v2/spans, JSON array, 202 as Zipkin answers); prints each batch. */
const COLLECTOR = `require('node:http').createServer((req, res) => {
  let b = '';
  req.on('data', (d) => (b += d));
  req.on('end', () => {
    if (req.method === 'POST' && req.url === '/api/v2/spans') { process.stdout.write(JSON.stringify(JSON.parse(b)) + '\\n'); res.writeHead(202); }
    else res.writeHead(404);
    res.end();
  });
}).listen(9411, process.argv[1], () => process.stdout.write('listening\\n'));`;

/** Sequential GETs from `ns` (not captured) with node's fetch; each {status, body}. */
function getsIn(ns: string, urls: string[]): Array<{ status: number; body: string }> {
  const script = `(async () => { const out = []; for (const u of ${JSON.stringify(urls)}) { try { const r = await fetch(u); out.push({ status: r.status, body: await r.text() }); } catch (e) { out.push({ status: 0, body: String(e) }); } } process.stdout.write(JSON.stringify(out)); })()`;
  const r = sh(['ip', 'netns', 'exec', ns, process.execPath, '-e', script], { timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Array<{ status: number; body: string }>;
}

const GATEWAY_URL = `http://${meshAddr.pod(GW)}:8080`;
const OK_PATH = '/call/b.b.svc.cluster.local/hello';
const NOT_FOUND_PATH = '/call/b.b.svc.cluster.local/status/404';

/** Istio's default TEXT access log line (EnvoyTextLogFormat), one named group per command operator. */
const ISTIO_TEXT_LINE = new RegExp(
  [
    String.raw`^\[(?<start_time>[^\]]+)\]`,
    String.raw`"(?<method>\S+) (?<path>\S+) (?<protocol>[^"]+)"`,
    String.raw`(?<response_code>\d+)`,
    String.raw`(?<response_flags>\S+)`,
    String.raw`(?<response_code_details>\S+)`,
    String.raw`(?<connection_termination_details>\S+)`,
    String.raw`"(?<upstream_transport_failure_reason>[^"]*)"`,
    String.raw`(?<bytes_received>\d+)`,
    String.raw`(?<bytes_sent>\d+)`,
    String.raw`(?<duration>\d+)`,
    String.raw`(?<upstream_service_time>\S+)`,
    String.raw`"(?<x_forwarded_for>[^"]*)"`,
    String.raw`"(?<user_agent>[^"]*)"`,
    String.raw`"(?<request_id>[^"]*)"`,
    String.raw`"(?<authority>[^"]*)"`,
    String.raw`"(?<upstream_host>[^"]*)"`,
    String.raw`(?<upstream_cluster>\S+)`,
    String.raw`(?<upstream_local_address>\S+)`,
    String.raw`(?<downstream_local_address>\S+)`,
    String.raw`(?<downstream_remote_address>\S+)`,
    String.raw`(?<requested_server_name>\S+)`,
    String.raw`(?<route_name>\S+)$`,
  ].join(' '),
);

/** The access log lines (Istio's text format) in a proxy's output log, parsed. */
function accessLines(mesh: Mesh, name: string): Array<Record<string, string>> {
  const text = fs.readFileSync(path.join(mesh.logs, `sidecar-${name}.log`), 'utf8');
  return text
    .split('\n')
    .map((l) => ISTIO_TEXT_LINE.exec(l)?.groups)
    .filter((g): g is Record<string, string> => g !== undefined)
    .map((g) => ({ ...g }));
}

/** With INTEG_DEBUG=<dir>: what a failing step needs to be read afterwards (config dumps, proxy logs). */
function keep(mesh: Mesh, what: string): void {
  const out = process.env['INTEG_DEBUG'];
  if (!out) return;
  fs.mkdirSync(out, { recursive: true });
  for (const name of ['gw', 'a', 'b'])
    fs.writeFileSync(path.join(out, `${what}-${name}-config_dump.json`), getsIn(mesh.ns[name]!, ['http://127.0.0.1:15000/config_dump'])[0]!.body);
  fs.cpSync(mesh.logs, path.join(out, `${what}-logs`), { recursive: true });
}

const port = (addr: string) => /^(\d+\.\d+\.\d+\.\d+):(\d+)$/.exec(addr);

t.test('gateway → A → B with mTLS: Istio metrics, traces and access logs, Telemetry changes without restart', { skip }, async (t) => {
  const dir = tempDir(t, 'telemetry-gateway-');
  fs.chmodSync(dir, 0o755);
  const mesh = await startMesh(t, {
    dist: DIST,
    dir,
    pods: [pod('gw', true), pod('a'), pod('b')],
    prefix: 'tgw',
    meshConfig: MESH_CONFIG,
    config: { ...CONFIG, 'telemetry.yaml': telemetry() },
  });
  const setTelemetry = (extra: string) => fs.writeFileSync(path.join(mesh.configDir, 'telemetry.yaml'), telemetry(extra));
  const collector = await startIn(t, mesh.world, [process.execPath, '-e', COLLECTOR, ZIPKIN_ADDR], { ready: /listening/, what: 'zipkin collector' });
  const spans = (): ZSpan[] =>
    collector
      .out()
      .split('\n')
      .filter((l) => l.startsWith('['))
      .flatMap((l) => JSON.parse(l) as ZSpan[]);

  const promDir = path.join(dir, 'prometheus');
  fs.mkdirSync(promDir);
  const listen = meshAddr.gateway(A);
  const prom = await startPrometheus(t, {
    dir: promDir,
    port: 9090,
    host: listen,
    netns: mesh.world,
    targets: [{ targets: [GW, A, B].map((i) => `${meshAddr.pod(i)}:15020`) }],
  });
  const query = (q: string): Sample[] => {
    const r = getsIn(mesh.world, [`http://${listen}:9090${queryPath(q)}`])[0]!;
    return r.status === 200 ? parseQueryResult(q, r.body) : [];
  };
  const scrape = (i: number) => getsIn(mesh.world, [`http://${meshAddr.pod(i)}:15020/stats/prometheus`])[0]!.body;

  // the gateway's route to A may land a moment after its readiness: wait for the first answer through it
  await waitForValue(
    () => `the gateway does not reach A:\n${JSON.stringify(getsIn(mesh.world, [GATEWAY_URL + OK_PATH]))}\n${mesh.sidecars['gw']!.out().slice(-2000)}`,
    () => (getsIn(mesh.world, [`${GATEWAY_URL}/call/b.b.svc.cluster.local/warm-up`])[0]!.status === 200 ? true : undefined),
    { timeoutMs: 30_000, intervalMs: 300 },
  );
  // the warm-up request counts like any other: 1 + CALLS requests of 200 so far
  const CALLS = 3;
  const replies = getsIn(
    mesh.world,
    Array.from({ length: CALLS }, () => GATEWAY_URL + OK_PATH),
  );
  t.same(
    replies.map((r) => r.status),
    Array(CALLS).fill(200),
    'gateway → A → B answers',
  );
  t.match(
    JSON.parse(replies[0]!.body),
    { server: 'b', path: '/hello', xfcc: /By=spiffe:\/\/cluster\.local\/ns\/b\/sa\/b;.*URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a/ },
    'B saw A by mTLS',
  );
  let sent200 = 1 + CALLS;
  let sent404 = 0;

  const findSeries = (i: number, want: Record<string, string>) =>
    waitForValue(
      () =>
        `no istio_requests_total ${JSON.stringify({ reporter: want['reporter'], source_workload: want['source_workload'] })} on pod ${i}:\n${scrape(i).slice(0, 3000)}`,
      () =>
        seriesOf(scrape(i), 'istio_requests_total').find(
          (s) =>
            s.labels['reporter'] === want['reporter'] &&
            s.labels['source_workload'] === want['source_workload'] &&
            s.labels['response_code'] === '200',
        ),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
  const HOPS = [
    [GW, hop('source', 'gw', 'a'), 'the gateway, reporter=source, as its own workload'],
    [A, hop('destination', 'gw', 'a'), "A's inbound, reporter=destination, the gateway as peer"],
    [A, hop('source', 'a', 'b'), "A's outbound, reporter=source"],
    [B, hop('destination', 'a', 'b'), "B's inbound, reporter=destination"],
  ] as const;
  const principals = ['source_principal', 'destination_principal'];
  const without = (l: Record<string, string>, keys: string[]) => Object.fromEntries(Object.entries(l).filter(([k]) => !keys.includes(k)));

  await t.test('metrics: each proxy reports the label set Istio gives for its hop', async (t) => {
    for (const [i, want, what] of HOPS) {
      const got = await findSeries(i, want);
      // the client side's principals have a subtest of their own below
      const skipKeys = want['reporter'] === 'source' ? principals : [];
      t.same(without(got.labels, skipKeys), without(want, skipKeys), what);
      t.equal(got.value, sent200, `${what}: one count per request`);
    }
    t.equal(
      seriesOf(scrape(GW), 'istio_requests_total').filter((s) => s.labels['reporter'] === 'destination').length,
      0,
      'a gateway never reports as destination',
    );
  });

  await t.test('metrics: the client side names both ends by the upstream TLS certificates (istio_stats.cc: local and peer URI SAN)', async (t) => {
    for (const [i, want, what] of HOPS.filter(([, w]) => w['reporter'] === 'source')) {
      const got = await findSeries(i, want);
      t.same(
        { source_principal: got.labels['source_principal'], destination_principal: got.labels['destination_principal'] },
        { source_principal: want['source_principal'], destination_principal: want['destination_principal'] },
        `${what}: got ${got.labels['source_principal']} → ${got.labels['destination_principal']}`,
      );
    }
  });

  await t.test('traces: one trace per request across gateway, A and B, parents chained, Istio tags', async (t) => {
    // Istio 1.26's gateway makes one span per request (PILOT_SPAWN_UPSTREAM_SPAN_FOR_GATEWAY came in 1.26 off;
    // 1.28 turned it on): its listener is OUTBOUND, so a CLIENT span; then A's SERVER and CLIENT spans, B's SERVER
    const trace = await waitForValue(
      () => `no complete trace at the collector:\n${collector.out().slice(-3000)}`,
      () => {
        const byTrace = new Map<string, ZSpan[]>();
        for (const s of spans()) byTrace.set(s.traceId, [...(byTrace.get(s.traceId) ?? []), s]);
        return [...byTrace.values()].find((ss) => ss.length >= 4 && ss.some((s) => s.tags?.['http.url']?.endsWith(OK_PATH)));
      },
      { timeoutMs: 20_000, intervalMs: 300 },
    );
    await new Promise((res) => setTimeout(res, 1000));
    const all = spans().filter((s) => s.traceId === trace[0]!.traceId);
    t.equal(all.length, 4, 'four spans, one trace id');
    const service = (s: ZSpan) => s.localEndpoint?.serviceName;
    const one = (svc: string, kind: string) => all.find((s) => service(s) === svc && s.kind === kind);
    const gwClient = one('gw.gw', 'CLIENT');
    const aServer = one('a.a', 'SERVER');
    const aClient = one('a.a', 'CLIENT');
    const bServer = one('b.b', 'SERVER');
    t.ok(gwClient && aServer && aClient && bServer, `kinds and services: ${JSON.stringify(all.map((s) => [service(s), s.kind]))}`);
    if (!(gwClient && aServer && aClient && bServer)) return;
    t.equal(gwClient.parentId, undefined, 'the gateway starts the trace');
    t.equal(aServer.parentId, gwClient.id, "A's server span under the gateway's span");
    t.equal(aClient.parentId, aServer.id, "A's client span under its server span (the app passed the context on)");
    t.equal(bServer.parentId, aClient.id, "B's server span under A's client span");
    t.same(
      [gwClient, aServer, aClient, bServer].map((s) => s.name),
      ['a.a.svc.cluster.local:8080/*', 'a.a.svc.cluster.local:8080/*', 'b.b.svc.cluster.local:8080/*', 'b.b.svc.cluster.local:8080/*'],
      "istiod's route decorators name the spans",
    );
    t.equal(new Set(all.map((s) => s.tags?.['guid:x-request-id'])).size, 1, 'one x-request-id across the chain');
    for (const [s, name] of [
      [gwClient, 'gw'],
      [aServer, 'a'],
      [aClient, 'a'],
      [bServer, 'b'],
    ] as const) {
      t.has(
        s.tags,
        {
          'istio.canonical_service': name,
          'istio.canonical_revision': 'v1',
          'istio.namespace': name,
          'istio.mesh_id': 'cluster.local',
          'istio.cluster_id': 'Orchestrator',
          component: 'proxy',
          'http.method': 'GET',
          'http.protocol': 'HTTP/1.1',
          'http.status_code': '200',
          response_flags: '-',
        },
        `${name} ${s.kind}: Istio's and Envoy's tags`,
      );
    }
    t.has(gwClient.tags, { upstream_cluster: 'outbound|8080||a.a.svc.cluster.local', 'http.url': `${GATEWAY_URL}${OK_PATH}` });
    t.has(aServer.tags, { upstream_cluster: 'inbound|8080||' });
    t.has(aClient.tags, { upstream_cluster: 'outbound|8080||b.b.svc.cluster.local', 'http.url': 'http://b.b.svc.cluster.local/hello' });
    t.has(bServer.tags, { upstream_cluster: 'inbound|8080||' });
  });

  await t.test("access logs: each proxy's line for the request, field by field in Istio's default format", async (t) => {
    const last = async (name: string, n: number) =>
      waitForValue(
        () =>
          `fewer than ${n} access log lines for ${OK_PATH} from ${name}:\n${fs.readFileSync(path.join(mesh.logs, `sidecar-${name}.log`), 'utf8').slice(-3000)}`,
        () => {
          const ls = accessLines(mesh, name).filter((l) => l['path'] === OK_PATH || l['path'] === '/hello');
          return ls.length >= n ? ls : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 200 },
      );
    const gw = (await last('gw', CALLS)).filter((l) => l['path'] === OK_PATH);
    const a = await last('a', 2 * CALLS);
    const b = await last('b', CALLS);
    t.equal(gw.length, CALLS, 'the gateway: one line per request');
    t.equal(b.length, CALLS, 'B: one line per request');
    const aIn = a.filter((l) => l['path'] === OK_PATH);
    const aOut = a.filter((l) => l['path'] === '/hello');
    t.equal(aIn.length, CALLS, "A's inbound: one line per request");
    t.equal(aOut.length, CALLS, "A's outbound: one line per request");
    const g = gw.at(-1)!;
    const ain = aIn.at(-1)!;
    const aout = aOut.at(-1)!;
    const bin = b.at(-1)!;
    const common = {
      method: 'GET',
      protocol: 'HTTP/1.1',
      response_code: '200',
      response_flags: '-',
      response_code_details: 'via_upstream',
      connection_termination_details: '-',
      upstream_transport_failure_reason: '-',
      bytes_received: '0',
    };
    t.match(
      g,
      {
        ...common,
        path: OK_PATH,
        user_agent: 'node',
        authority: `${meshAddr.pod(GW)}:8080`,
        upstream_host: `${meshAddr.pod(A)}:8080`,
        upstream_cluster: 'outbound|8080||a.a.svc.cluster.local',
        downstream_local_address: `${meshAddr.pod(GW)}:8080`,
        requested_server_name: '-',
      },
      'the gateway',
    );
    t.match(port(g['downstream_remote_address']!)?.[1], meshAddr.gateway(GW), 'the gateway: the client is the world');
    t.match(port(g['upstream_local_address']!)?.[1], meshAddr.pod(GW), 'the gateway: its own address upstream');
    t.match(
      ain,
      {
        ...common,
        path: OK_PATH,
        user_agent: 'node',
        authority: `${meshAddr.pod(GW)}:8080`,
        upstream_host: `${meshAddr.pod(A)}:8080`,
        upstream_cluster: 'inbound|8080||',
        downstream_local_address: `${meshAddr.pod(A)}:8080`,
        requested_server_name: 'outbound_.8080_._.a.a.svc.cluster.local',
        route_name: 'default',
      },
      "A's inbound",
    );
    t.match(port(ain['upstream_local_address']!)?.[1], '127.0.0.6', "A's inbound: Istio's inbound passthrough source 127.0.0.6");
    t.match(port(ain['downstream_remote_address']!)?.[1], meshAddr.pod(GW), "A's inbound: the gateway is the peer");
    t.match(
      aout,
      {
        ...common,
        path: '/hello',
        user_agent: '-',
        authority: 'b.b.svc.cluster.local',
        upstream_host: `${meshAddr.pod(B)}:8080`,
        upstream_cluster: 'outbound|8080||b.b.svc.cluster.local',
        downstream_local_address: `${meshAddr.vip(B)}:8080`,
        requested_server_name: '-',
        route_name: 'default',
      },
      "A's outbound (the app resolved B's VIP through the agent's DNS proxy)",
    );
    t.match(port(aout['upstream_local_address']!)?.[1], meshAddr.pod(A));
    t.match(
      bin,
      {
        ...common,
        path: '/hello',
        user_agent: '-',
        authority: 'b.b.svc.cluster.local',
        upstream_host: `${meshAddr.pod(B)}:8080`,
        upstream_cluster: 'inbound|8080||',
        downstream_local_address: `${meshAddr.pod(B)}:8080`,
        requested_server_name: 'outbound_.8080_._.b.b.svc.cluster.local',
        route_name: 'default',
      },
      "B's inbound",
    );
    t.match(port(bin['downstream_remote_address']!)?.[1], meshAddr.pod(A), "B's inbound: A is the peer");
    t.equal(new Set([g, ain, aout, bin].map((l) => l['request_id'])).size, 1, 'one x-request-id on the four lines');
    // Envoy's uuid request-id extension: a v4 UUID whose version digit carries the trace decision, '9' sampled
    t.match(g['request_id'], /^[0-9a-f]{8}-[0-9a-f]{4}-9[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a UUID, sampled');
    t.equal(Number(bin['bytes_sent']), Buffer.byteLength(replies.at(-1)!.body), "B's bytes_sent is the body A passed on");
  });

  await t.test('a Telemetry tagOverrides removal shows in the next scrape, without restart', async (t) => {
    setTelemetry(REMOVE_PROTOCOL);
    // the push lands a moment later: send until B reports a series without request_protocol
    const got = await waitForValue(
      () => `B still reports request_protocol:\n${scrape(B).slice(0, 3000)}`,
      () => {
        t.equal(getsIn(mesh.world, [GATEWAY_URL + OK_PATH])[0]!.status, 200);
        sent200++;
        return seriesOf(scrape(B), 'istio_requests_total').find(
          (s) => s.labels['reporter'] === 'destination' && s.labels['request_protocol'] === undefined,
        );
      },
      { timeoutMs: 15_000, intervalMs: 500 },
    );
    const { request_protocol: _gone, ...rest } = hop('destination', 'a', 'b');
    t.same(got.labels, rest, 'the same labels less request_protocol');
    t.ok(
      seriesOf(scrape(B), 'istio_requests_total').some((s) => s.labels['request_protocol'] === 'http'),
      'the series made before the change stay',
    );
    t.equal(mesh.sidecars['b']!.child.exitCode, null, 'the sidecar was not restarted');
  });

  await t.test('a Telemetry accessLogging filter (CEL) applies without restart: a 200 no longer logs, a 404 does', async (t) => {
    setTelemetry(REMOVE_PROTOCOL + ERRORS_ONLY);
    const pushed = (i: number) =>
      getsIn(mesh.ns[['', 'gw', 'a', 'b'][i]!]!, ['http://127.0.0.1:15000/config_dump'])[0]!.body.includes('response.code >= 400');
    await waitForValue(
      () => 'the CEL filter did not reach every proxy',
      () => ([GW, A, B].every(pushed) ? true : undefined),
      { timeoutMs: 15_000, intervalMs: 300 },
    );
    // Connections opened before the change finish on the config they were accepted with: Envoy drains the
    // changed filter chains (Istio runs it with --drain-strategy immediate: the next HTTP/1.1 response on such a
    // connection closes it), and each worker (--concurrency 2) pools its own upstream connections, so the first
    // few 200s may still be logged by the old config. Once they are retired, a 200 logs nowhere.
    const lineCount = () => Object.fromEntries(['gw', 'a', 'b'].map((n) => [n, accessLines(mesh, n).length]));
    let retired = false;
    for (let i = 0; i < 8 && !retired; i++) {
      const before = lineCount();
      t.equal(getsIn(mesh.world, [GATEWAY_URL + OK_PATH])[0]!.status, 200);
      sent200++;
      // the lines travel through the agent's output
      await new Promise((res) => setTimeout(res, 700));
      const after = lineCount();
      retired = ['gw', 'a', 'b'].every((n) => after[n] === before[n]);
      if (!retired)
        t.comment(
          `200 number ${i + 1} still logged (a late line of an earlier request, or a connection of the old config): ${JSON.stringify({ before, after })}`,
        );
    }
    t.ok(retired, 'a 200 no longer logs on any proxy');
    const before = lineCount();
    t.equal(getsIn(mesh.world, [GATEWAY_URL + NOT_FOUND_PATH])[0]!.status, 404);
    sent404++;
    for (const [name, n] of [
      ['gw', 1],
      ['a', 2],
      ['b', 1],
    ] as const) {
      const fresh = await waitForValue(
        () => `${name} logged no 404`,
        () => {
          const ls = accessLines(mesh, name).slice(before[name]);
          return ls.length >= n ? ls : undefined;
        },
        { timeoutMs: 10_000, intervalMs: 200 },
      );
      await new Promise((res) => setTimeout(res, 300));
      t.same(
        accessLines(mesh, name)
          .slice(before[name])
          .map((l) => [l['response_code'], l['path']])
          .sort(),
        Array(n)
          .fill(0)
          .map((_, k) => ['404', name === 'a' && k === 0 ? '/status/404' : name === 'b' ? '/status/404' : NOT_FOUND_PATH])
          .sort(),
        `${name}: the 404 logged (${fresh.length} line(s))`,
      );
    }
    keep(mesh, 'access-log-filter');
  });

  await t.test('meshctl x metrics b-v1.b prints the rates of the requests sent', async (t) => {
    // every series B reports must be known to Prometheus before the burst (rate() counts only increases
    // between samples it has), then K requests of 200 and E of 404, then enough scrapes after them
    const seen = 'count(istio_requests_total{reporter="destination",destination_workload="b-v1",response_code="404"})';
    await waitForValue(
      () => `${seen}: no answer\n${prom.out().slice(-1500)}`,
      () => query(seen)[0]?.value,
      { timeoutMs: 20_000, intervalMs: 500 },
    );
    await new Promise((res) => setTimeout(res, 4000));
    const t0 = Date.now();
    const K = 20;
    const E = 5;
    const burst = getsIn(mesh.world, [...Array(K).fill(GATEWAY_URL + OK_PATH), ...Array(E).fill(GATEWAY_URL + NOT_FOUND_PATH)]);
    t.same(
      burst.map((x) => x.status),
      [...Array(K).fill(200), ...Array(E).fill(404)],
    );
    sent200 += K;
    sent404 += E;
    // Prometheus has every request B served (the counts sent, read back through PromQL) before meshctl asks
    const all = 'sum(istio_requests_total{reporter="destination",destination_workload="b-v1"})';
    await waitForValue(
      () => `${all} never reached ${sent200 + sent404}: ${JSON.stringify(query(all))}`,
      () => (query(all)[0]?.value === sent200 + sent404 ? true : undefined),
      { timeoutMs: 20_000, intervalMs: 250 },
    );
    const errors = 'sum(istio_requests_total{reporter="destination",destination_workload="b-v1",response_code="404"})';
    t.equal(query(errors)[0]?.value, sent404, errors);
    await new Promise((res) => setTimeout(res, 1500));
    // the window opens 1-2 s before the burst (after the earlier requests' last scrape), so its first sample
    // precedes every burst request and its last follows them all
    const windowS = Math.ceil((Date.now() - t0) / 1000) + 1;
    const r = sh(['ip', 'netns', 'exec', mesh.world, path.join(DIST, 'meshctl'), 'x', 'metrics', 'b-v1.b', '-d', `${windowS}s`], {
      env: { PATH: process.env['PATH'] ?? '', MESH_PROMETHEUS_URL: `http://${listen}:9090` },
    });
    t.equal(r.code, 0, r.stderr);
    t.comment(r.stdout);
    const lines = r.stdout.trimEnd().split('\n');
    t.match(lines[0], /^\s+WORKLOAD\s+TOTAL RPS\s+ERROR RPS\s+P50 LATENCY\s+P90 LATENCY\s+P99 LATENCY$/);
    const cells = lines[1]!.trim().split(/\s+/);
    t.equal(cells[0], 'b-v1.b');
    // rate() = the increase between the first and last samples in the window, extrapolated to the window's
    // edges (samples every 1 s), over the window: K+E requests within the window give (K+E)/w … (K+E)/(w-2),
    // the extrapolation adding up to one scrape interval at either edge
    const rps = Number(cells[1]);
    const eps = Number(cells[2]);
    t.ok(rps >= (K + E) / windowS - 0.0005 && rps <= (K + E) / (windowS - 2.5) + 0.0005, `TOTAL RPS ${rps} for ${K + E} requests in ${windowS}s`);
    t.ok(eps >= E / windowS - 0.0005 && eps <= E / (windowS - 2.5) + 0.0005, `ERROR RPS ${eps} for ${E} 404s in ${windowS}s`);
    for (const c of cells.slice(3)) t.match(c, /^(\d+ms|\d+(\.\d+)?s|0s)$/, 'a latency as Go prints a Duration');
  });
});
