// Issue 26's "done means" for metrics, with the built binary: two captured pods A and B (startMesh: capture,
// workload certificates, auto-mTLS between their sidecars, built-in engine), pilot-discovery sending Istio's
// telemetry filters, and a real Prometheus (Debian's) in the world namespace scraping both pods' merged
// :15020/stats/prometheus by file service discovery. A's app calls B over HTTP, TCP and gRPC; the series each sidecar
// reports are compared with the label sets Istio's standard metrics give for the same calls (istio.io
// "Istio Standard Metrics", istio/proxy testdata/metric/*.yaml.tmpl): the destination reporter (B) names the
// peer it learnt through metadata exchange (HTTP headers; on TCP the in-band exchange over ALPN
// istio-peer-exchange), the source reporter (A) the service it called and the workload behind it.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { callIn, httpGetIn, meshAddr, meshPodsUnavailable, startMesh } from '../../scripts/lib/mesh-pods.mjs';
import {
  istioPeerLabels,
  parseQueryResult,
  prometheusUnavailable,
  queryPath,
  seriesOf,
  startPrometheus,
  type Sample,
  type Series,
} from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';

const skip = meshPodsUnavailable({ openssl: true }) || prometheusUnavailable();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

// What the injector puts in each pod: its workload (the Deployment's name), the canonical service labels it
// derives from app/version, and the cluster id.
const pod = (name: string) => ({
  name,
  labels: { version: 'v1', 'service.mesh.io/canonical-name': name, 'service.mesh.io/canonical-revision': 'v1' },
  env: { MESH_META_WORKLOAD_NAME: `${name}-v1`, MESH_META_CLUSTER_ID: 'Orchestrator' },
});

// What an installed mesh's ConfigMap holds (the chart adds the prometheus metrics provider when telemetry is on,
// as Istio's does); the daemon's own defaults, like istiod's DefaultMeshConfig, name no default provider.
const MESH_CONFIG = 'defaultProviders:\n  metrics: [prometheus]\n';

const peer = istioPeerLabels;

// The destination reporter's full label set for A → B over mTLS (Istio's standard labels, in Istio's values).
const B_REPORTS_HTTP = {
  reporter: 'destination',
  ...peer('source', 'a'),
  source_principal: 'spiffe://cluster.local/ns/a/sa/a',
  ...peer('destination', 'b'),
  destination_principal: 'spiffe://cluster.local/ns/b/sa/b',
  destination_service: 'b.b.svc.cluster.local',
  // a ServiceEntry's service is named by its host (istiod's serviceentry conversion: Attributes.Name = hostname);
  // a Kubernetes Service's would be its short name
  destination_service_name: 'b.b.svc.cluster.local',
  destination_service_namespace: 'b',
  request_protocol: 'http',
  response_code: '200',
  grpc_response_status: '',
  response_flags: '-',
  connection_security_policy: 'mutual_tls',
};

// B's side of the TCP connection: the same peers, learnt in-band (istio_stats.cc populatePeerInfo for TCP: the peer
// labels, then request_protocol tcp, response_flags, connection_security_policy; no response code).
const B_REPORTS_TCP = {
  reporter: 'destination',
  ...peer('source', 'a'),
  source_principal: 'spiffe://cluster.local/ns/a/sa/a',
  ...peer('destination', 'b'),
  destination_principal: 'spiffe://cluster.local/ns/b/sa/b',
  destination_service: 'b.b.svc.cluster.local',
  destination_service_name: 'b.b.svc.cluster.local',
  destination_service_namespace: 'b',
  request_protocol: 'tcp',
  response_flags: '-',
  connection_security_policy: 'mutual_tls',
};

// The gRPC calls A → B (port 7070, ServiceEntry protocol GRPC): request_protocol grpc, the HTTP status (200: a
// gRPC error travels in the trailers) and grpc_response_status from grpc-status (istio_stats.cc log(): is_grpc_
// from the request's content-type, Grpc::Common::getGrpcStatus of the trailers); the other labels as for HTTP.
const B_REPORTS_GRPC = (grpcStatus: string) => ({ ...B_REPORTS_HTTP, request_protocol: 'grpc', grpc_response_status: grpcStatus });
// istio_request_messages_total / istio_response_messages_total (istio.io "Istio Standard Metrics": gRPC request and
// response messages; both in Istio 1.26's default metric set): istio_stats.cc reportHelper adds them with the
// labels it has before the protocol ones, i.e. the reporter and the peers only, from grpc_stats' message counts.
const PROTOCOL_LABELS = ['request_protocol', 'response_code', 'grpc_response_status', 'response_flags', 'connection_security_policy'];
const peersOnly = (labels: Record<string, string>) => Object.fromEntries(Object.entries(labels).filter(([k]) => !PROTOCOL_LABELS.includes(k)));
/** What Prometheus adds to every scraped series (the job and the target), and the metric name. */
const scrapeLabels = (metric: Record<string, string>) =>
  Object.fromEntries(Object.entries(metric).filter(([k]) => !['__name__', 'job', 'instance'].includes(k)));
const isHttp = (s: Series, reporter: string) => s.labels['reporter'] === reporter && s.labels['request_protocol'] === 'http';

t.test('two sidecars with mTLS report Istio standard metrics, read back through a real Prometheus', { skip }, async (t) => {
  const dir = tempDir(t, 'telemetry-mesh-');
  fs.chmodSync(dir, 0o755);
  const mesh = await startMesh(t, { dist: DIST, dir, pods: [pod('a'), pod('b')], prefix: 'tel', meshConfig: MESH_CONFIG });
  const host = 'b.b.svc.cluster.local';
  const ns = (p: string) => mesh.ns[p]!;
  const CALLS = 3;
  for (let i = 0; i < CALLS; i++) t.equal(callIn(ns('a'), true, 'http', meshAddr.vip(2), '8080', host)['status'], 200, `call ${i + 1}`);
  // B's app echoes every chunk it gets: an exchange byte reaching it would show in the line
  t.same(callIn(ns('a'), true, 'tcp', meshAddr.vip(2), '9000'), { line: 'b echo ping' }, 'one TCP exchange');
  const GRPC_OK = 2;
  const GRPC_FAILED = 1;
  for (let i = 0; i < GRPC_OK; i++) {
    t.same(
      callIn(ns('a'), true, 'grpc', meshAddr.vip(2), '7070', 'Echo', `${host}:7070`),
      { status: 200, grpcStatus: '0', messages: ['b: ping'] },
      `gRPC call ${i + 1}`,
    );
  }
  for (let i = 0; i < GRPC_FAILED; i++) {
    t.same(
      callIn(ns('a'), true, 'grpc', meshAddr.vip(2), '7070', 'Fail', `${host}:7070`),
      { status: 200, grpcStatus: '5', messages: [] },
      'a failing gRPC call',
    );
  }

  const scrape = (p: 'a' | 'b') => httpGetIn(ns(p), 'http://127.0.0.1:15020/stats/prometheus') as { status: number; body: string };

  await t.test("B's sidecar, reporter=destination: the exact label set Istio gives A → B", async (t) => {
    const got = await waitForValue(
      () => `no istio_requests_total on B:\n${scrape('b').body.slice(0, 3000)}`,
      () => seriesOf(scrape('b').body, 'istio_requests_total').find((s) => isHttp(s, 'destination')),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    t.same(got.labels, B_REPORTS_HTTP);
    t.equal(got.value, CALLS);
    const text = scrape('b').body;
    t.match(text, /^# TYPE istio_requests_total counter$/m);
    t.match(text, /^# TYPE istio_request_duration_milliseconds histogram$/m);
    const count = seriesOf(text, 'istio_request_duration_milliseconds_count').find((s) => isHttp(s, 'destination'));
    t.equal(count?.value, CALLS, 'one duration observation per request');
    const buckets = seriesOf(text, 'istio_request_duration_milliseconds_bucket').filter((s) => isHttp(s, 'destination'));
    // Istio's default duration buckets (istio/proxy source/extensions/filters/http/istio_stats)
    t.same(
      buckets.map((b) => b.labels['le']),
      [
        '0.5',
        '1',
        '5',
        '10',
        '25',
        '50',
        '100',
        '250',
        '500',
        '1000',
        '2500',
        '5000',
        '10000',
        '30000',
        '60000',
        '300000',
        '600000',
        '1800000',
        '3600000',
        '+Inf',
      ],
    );
    const tcp = await waitForValue(
      () => `no closed TCP connection on B:\n${scrape('b').body.slice(0, 3000)}`,
      () => seriesOf(scrape('b').body, 'istio_tcp_connections_closed_total').find((s) => s.labels['reporter'] === 'destination'),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    t.same(tcp.labels, B_REPORTS_TCP, 'A named as the source, learnt in-band');
    t.equal(tcp.value, 1);
    const opened = seriesOf(scrape('b').body, 'istio_tcp_connections_opened_total').find((s) => s.labels['reporter'] === 'destination');
    t.same(opened?.labels, B_REPORTS_TCP);
    // `ping\n` in, `b echo ping\n` out: the exchange's own bytes are not counted
    const bytes = (m: string) => seriesOf(scrape('b').body, m).find((s) => s.labels['reporter'] === 'destination')?.value;
    t.equal(bytes('istio_tcp_received_bytes_total'), 5, 'received: the application bytes');
    t.equal(bytes('istio_tcp_sent_bytes_total'), 12, 'sent: the application bytes');
  });

  await t.test("A's sidecar, reporter=source: the service it called and the workload behind it", async (t) => {
    const got = await waitForValue(
      () => `no istio_requests_total on A:\n${scrape('a').body.slice(0, 3000)}`,
      () => seriesOf(scrape('a').body, 'istio_requests_total').find((s) => isHttp(s, 'source')),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    t.has(got.labels, {
      reporter: 'source',
      ...peer('source', 'a'),
      ...peer('destination', 'b'),
      destination_principal: 'spiffe://cluster.local/ns/b/sa/b',
      destination_service: 'b.b.svc.cluster.local',
      destination_service_name: 'b.b.svc.cluster.local',
      destination_service_namespace: 'b',
      request_protocol: 'http',
      response_code: '200',
      response_flags: '-',
      connection_security_policy: 'unknown',
    });
    t.equal(got.value, CALLS);
    // the TCP connection: B named from the exchange, app and version included (the endpoint's labels have neither)
    const tcp = await waitForValue(
      () => `no closed TCP connection on A:\n${scrape('a').body.slice(0, 3000)}`,
      () => seriesOf(scrape('a').body, 'istio_tcp_connections_closed_total').find((s) => s.labels['reporter'] === 'source'),
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    // the same peers as B names, from the other side: Istio's source reporter leaves the policy unknown
    t.same(tcp.labels, { ...B_REPORTS_TCP, reporter: 'source', connection_security_policy: 'unknown' });
  });

  await t.test('Prometheus scrapes both pods and answers PromQL over them', async (t) => {
    const promDir = path.join(dir, 'prometheus');
    fs.mkdirSync(promDir);
    const listen = meshAddr.gateway(1);
    const prom = await startPrometheus(t, {
      dir: promDir,
      port: 9090,
      host: listen,
      netns: mesh.world,
      targets: [{ targets: [`${meshAddr.pod(1)}:15020`, `${meshAddr.pod(2)}:15020`] }],
    });
    const query = (q: string): Sample[] => {
      const r = httpGetIn(mesh.world, `http://${listen}:9090${queryPath(q)}`) as { status: number; body: string };
      return r.status === 200 ? parseQueryResult(q, r.body) : [];
    };
    const q =
      'sum(istio_requests_total{reporter="destination",destination_workload="b-v1",source_workload="a-v1",request_protocol="http",response_code="200"})';
    const total = await waitForValue(
      () => `${q} has no answer:\n${prom.out().slice(-1500)}`,
      () => query(q)[0]?.value,
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    t.equal(total, CALLS);
    // A's series come from the other target, which Prometheus may scrape a moment later than B's
    const hist = 'sum(istio_request_duration_milliseconds_count{reporter="source",source_workload="a-v1",request_protocol="http"})';
    const observed = await waitForValue(
      () => `${hist} has no answer`,
      () => query(hist)[0]?.value,
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    t.equal(observed, CALLS, hist);

    // gRPC: every series of each reporter, exactly, as Prometheus stored them
    const series = (q: string) => query(q).map((s) => ({ labels: scrapeLabels(s.metric), value: s.value }));
    const byLabels = (a: { labels: Record<string, string> }, b: { labels: Record<string, string> }) =>
      JSON.stringify(a.labels) < JSON.stringify(b.labels) ? -1 : 1;
    const sorted = <T extends { labels: Record<string, string> }>(xs: T[]) =>
      xs.map((x) => ({ ...x, labels: Object.fromEntries(Object.entries(x.labels).sort(([a], [b]) => (a < b ? -1 : 1))) })).sort(byLabels);
    const A_REPORTS = (labels: Record<string, string>) => ({ ...labels, reporter: 'source', connection_security_policy: 'unknown' });
    const grpcRequests = 'istio_requests_total{request_protocol="grpc"}';
    const got = await waitForValue(
      () => `${grpcRequests}: ${JSON.stringify(series(grpcRequests))}`,
      () => {
        const s = series(grpcRequests);
        return s.length === 4 ? s : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
    t.same(
      sorted(got),
      sorted([
        { labels: B_REPORTS_GRPC('0'), value: GRPC_OK },
        { labels: B_REPORTS_GRPC('5'), value: GRPC_FAILED },
        { labels: A_REPORTS(B_REPORTS_GRPC('0')), value: GRPC_OK },
        { labels: A_REPORTS(B_REPORTS_GRPC('5')), value: GRPC_FAILED },
      ]),
      'istio_requests_total: grpc, HTTP 200, grpc_response_status 0 and 5, from both reporters',
    );
    const durations = series('istio_request_duration_milliseconds_count{request_protocol="grpc"}');
    t.same(sorted(durations), sorted(got), 'one duration observation per call, with the same labels');
    const peers = peersOnly(B_REPORTS_HTTP);
    // a call to Echo is one message each way; a call to Fail sends one and gets none
    t.same(
      sorted(series('istio_request_messages_total')),
      sorted([
        { labels: peers, value: GRPC_OK + GRPC_FAILED },
        { labels: { ...peers, reporter: 'source' }, value: GRPC_OK + GRPC_FAILED },
      ]),
      'istio_request_messages_total: the reporter and the peers only',
    );
    t.same(
      sorted(series('istio_response_messages_total')),
      sorted([
        { labels: peers, value: GRPC_OK },
        { labels: { ...peers, reporter: 'source' }, value: GRPC_OK },
      ]),
      'istio_response_messages_total',
    );
  });
});
