// `meshctl x metrics` as istioctl 1.26's (istioctl/pkg/metrics/metrics.go): its PromQL, its table, and the
// figures a real Prometheus gives for known traffic. The traffic is an exporter whose counters grow at fixed
// rates (each sample stamped with the exporter's clock); the expected figures are worked out here from those
// rates, by Prometheus's histogram_quantile rule (linear within the bucket holding the rank), not taken from
// meshctl's output. rate() divides by the whole window, so the window asked for (-d 5s) is one the scraped
// samples already cover; its extrapolation at the window's edges depends on when the scrapes fell, so request
// rates are compared within 3 %; the quantiles are ratios of rates and come out exact.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { headerLine, latencyText, metricsLine, workloadQueries } from '../../src/meshctl/metrics';
import { run, program } from '../helpers/programs';
import { freePort } from '../helpers/ports';
import { prometheusUnavailable, startPrometheus } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

t.test("istioctl's queries, written out from its format strings", async (t) => {
  const q = workloadQueries('productpage-v1.foo', 60_000);
  const sel = 'destination_workload=~"productpage-v1.*", destination_workload_namespace=~"foo.*",reporter="destination"';
  t.equal(q.totalRps, `sum(rate(istio_requests_total{${sel}}[1m0s]))`);
  t.equal(q.errorRps, `sum(rate(istio_requests_total{${sel},response_code=~"[45][0-9]{2}"}[1m0s]))`);
  t.equal(q.p50, `histogram_quantile(0.500000, sum(rate(istio_request_duration_milliseconds_bucket{${sel}}[1m0s])) by (le))`);
  t.equal(q.p90, `histogram_quantile(0.900000, sum(rate(istio_request_duration_milliseconds_bucket{${sel}}[1m0s])) by (le))`);
  t.equal(q.p99, `histogram_quantile(0.990000, sum(rate(istio_request_duration_milliseconds_bucket{${sel}}[1m0s])) by (le))`);
  const bare = workloadQueries('reviews', 150_000);
  t.equal(
    bare.totalRps,
    'sum(rate(istio_requests_total{destination_workload=~"reviews.*", destination_workload_namespace=~".*",reporter="destination"}[2m30s]))',
  );
});

t.test("istioctl's table: right-aligned cells of at least 13, the workload in 40", async (t) => {
  t.equal(headerLine(), '                                  WORKLOAD    TOTAL RPS    ERROR RPS  P50 LATENCY  P90 LATENCY  P99 LATENCY\n');
  t.equal(
    metricsLine({ workload: 'b.b', totalRps: 10, errorRps: 1, p50: 8.75, p90: 37.5, p99: 1234.9 }),
    '                                       b.b       10.000        1.000          8ms         37ms       1.234s\n',
  );
  // Go: time.Duration(NaN) * time.Millisecond is 0
  t.equal(latencyText(NaN), '0s');
  t.equal(latencyText(0), '0s');
  t.equal(latencyText(61_500), '1m1.5s');
});

// Request rates (per second) of the fed series; the histogram's buckets are cumulative rates.
const OK_RPS = 9;
const ERR_RPS = 1;
const BUCKETS: Array<[string, number]> = [
  ['5', 2],
  ['10', 6],
  ['25', 8],
  ['50', 10],
  ['+Inf', 10],
];

/** The exposition at `nowMs`, counters at rate × seconds since `t0`, each sample stamped `nowMs`. */
function exposition(t0: number, nowMs: number): string {
  const s = (nowMs - t0) / 1000;
  const dest = 'reporter="destination",destination_workload="b",destination_workload_namespace="b"';
  const lines = [
    '# TYPE istio_requests_total counter',
    `istio_requests_total{${dest},response_code="200"} ${OK_RPS * s} ${nowMs}`,
    `istio_requests_total{${dest},response_code="503"} ${ERR_RPS * s} ${nowMs}`,
    // the client side's report of the same requests, and another workload: neither may count
    `istio_requests_total{reporter="source",destination_workload="b",destination_workload_namespace="b",response_code="503"} ${50 * s} ${nowMs}`,
    `istio_requests_total{reporter="destination",destination_workload="reviews",destination_workload_namespace="b",response_code="500"} ${70 * s} ${nowMs}`,
    '# TYPE istio_request_duration_milliseconds histogram',
    ...BUCKETS.map(([le, r]) => `istio_request_duration_milliseconds_bucket{${dest},response_code="200",le="${le}"} ${r * s} ${nowMs}`),
    `istio_request_duration_milliseconds_sum{${dest},response_code="200"} ${150 * s} ${nowMs}`,
    `istio_request_duration_milliseconds_count{${dest},response_code="200"} ${10 * s} ${nowMs}`,
  ];
  return lines.join('\n') + '\n';
}

/** histogram_quantile's rule: the bucket holding rank q×total, linear from its lower bound. */
function quantile(q: number): number {
  const total = BUCKETS[BUCKETS.length - 1]![1];
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, cum] of BUCKETS) {
    if (cum >= rank) return lower + ((Number(le) - lower) * (rank - below)) / (cum - below);
    lower = Number(le);
    below = cum;
  }
  return NaN;
}

t.test('against a real Prometheus: the figures the fed rates imply', { skip: prometheusUnavailable(), timeout: 120_000 }, async (t) => {
  const t0 = Date.now() - 1000;
  let scrapes = 0;
  const exporter = http.createServer((_req, res) => {
    scrapes++;
    res.writeHead(200, { 'Content-Type': 'text/plain; version=0.0.4' });
    res.end(exposition(t0, Date.now()));
  });
  await new Promise<void>((r) => exporter.listen(0, '127.0.0.1', r));
  t.teardown(() => exporter.close());
  const target = `127.0.0.1:${(exporter.address() as AddressInfo).port}`;
  const prom = await startPrometheus(t, {
    dir: tempDir(t),
    port: await freePort(),
    targets: [{ targets: [target], labels: { __metrics_path__: '/metrics' } }],
  });
  await waitFor('eight scrapes of the exporter', () => scrapes >= 8, { timeoutMs: 30_000, intervalMs: 200 });

  const expected = {
    total: (OK_RPS + ERR_RPS).toFixed(3),
    error: ERR_RPS.toFixed(3),
    p50: `${Math.trunc(quantile(0.5))}ms`,
    p90: `${Math.trunc(quantile(0.9))}ms`,
    p99: `${Math.trunc(quantile(0.99))}ms`,
  };
  t.same(expected, { total: '10.000', error: '1.000', p50: '8ms', p90: '37ms', p99: '48ms' }, 'worked by hand: 5+5·3/4, 25+25·1/2, 25+25·1.9/2');

  const meshctl = program('meshctl');
  const check = (row: string, workload: string) => {
    const [w, total, error, ...latencies] = row.trim().split(/\s+/);
    t.equal(w, workload);
    t.ok(Math.abs(Number(total) - OK_RPS - ERR_RPS) < 0.03 * (OK_RPS + ERR_RPS), `total RPS ${total} ≈ ${expected.total}`);
    t.ok(Math.abs(Number(error) - ERR_RPS) < 0.03 * ERR_RPS, `error RPS ${error} ≈ ${expected.error}`);
    t.match(`${total} ${error}`, /^\d+\.\d{3} \d+\.\d{3}$/, 'three decimals');
    t.same(latencies, [expected.p50, expected.p90, expected.p99], 'p50, p90, p99');
  };
  const r = await run(meshctl, ['x', 'metrics', 'b.b', 'nothing-here', '-d', '5s'], { MESH_PROMETHEUS_URL: prom.url });
  t.equal(r.code, 0, r.stderr);
  const rows = r.stdout.split('\n');
  t.equal(rows[0], headerLine().trimEnd());
  check(rows[1]!, 'b.b');
  t.same(rows[2]!.trim().split(/\s+/), ['nothing-here', '0.000', '0.000', '0s', '0s', '0s'], 'no series: zeros, as istioctl prints');
  t.equal(rows.length, 4, 'header, two rows, final newline');

  const short = await run(meshctl, ['experimental', 'm', 'b', '-d', '5s'], { MESH_PROMETHEUS_URL: prom.url });
  t.equal(short.code, 0, short.stderr);
  check(short.stdout.split('\n')[1]!, 'b');

  const down = await run(meshctl, ['x', 'metrics', 'b.b'], { MESH_PROMETHEUS_URL: `http://127.0.0.1:${await freePort()}` });
  t.equal(down.code, 1);
  t.match(
    down.stderr,
    /could not build metrics for workload 'b\.b': error retrieving some metrics: 5 errors occurred:\n\t\* query\(\) failure for 'sum\(rate\(istio_requests_total/,
  );
});
