// `meshctl x metrics <workload>[.<namespace>]...` after istioctl 1.26's istioctl/pkg/metrics/metrics.go: per
// workload, five instant queries of server-side (reporter="destination") standard metrics over --duration —
// requests per second, 4xx/5xx per second, and p50/p90/p99 of istio_request_duration_milliseconds — printed
// in istioctl's right-aligned table (Go tabwriter, min width 13, padding 2, AlignRight).
// Where Prometheus is (prometheus-address.ts): istioctl always port-forwards to the cluster's Prometheus pod;
// we also run with no cluster (MESH_PROMETHEUS_URL, else Prometheus's own default localhost:9090).
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { formatDurationMs, formatDurationNs } from '../lib/duration';
import { findPrometheus } from './prometheus-address';

const REQ_TOTAL = 'istio_requests_total';
const REQ_DURATION = 'istio_request_duration_milliseconds';

/** The label matchers istioctl puts in every query: prefix matches on the workload and its namespace. */
function selector(workload: string, namespace: string, extra = ''): string {
  return `destination_workload=~"${workload}.*", destination_workload_namespace=~"${namespace}.*",reporter="destination"${extra}`;
}

export interface WorkloadQueries {
  totalRps: string;
  errorRps: string;
  p50: string;
  p90: string;
  p99: string;
}

/** istioctl's five queries for `<name>[.<namespace>]` over `durationMs` (written as Go prints a Duration). */
export function workloadQueries(arg: string, durationMs: number): WorkloadQueries {
  const [name = '', ns = ''] = arg.split('.');
  const window = formatDurationMs(durationMs);
  const latency = (q: number) => `histogram_quantile(${q.toFixed(6)}, sum(rate(${REQ_DURATION}_bucket{${selector(name, ns)}}[${window}])) by (le))`;
  return {
    totalRps: `sum(rate(${REQ_TOTAL}{${selector(name, ns)}}[${window}]))`,
    errorRps: `sum(rate(${REQ_TOTAL}{${selector(name, ns, ',response_code=~"[45][0-9]{2}"')}}[${window}]))`,
    p50: latency(0.5),
    p90: latency(0.9),
    p99: latency(0.99),
  };
}

/**
 * A latency in milliseconds as istioctl prints it: `time.Duration(val) * time.Millisecond`, whole milliseconds
 * (truncated) in Go's Duration format; NaN (a histogram with no requests) comes out as 0s, as it does there.
 */
export function latencyText(ms: number): string {
  if (!Number.isFinite(ms)) return '0s';
  return formatDurationNs(BigInt(Math.trunc(ms)) * 1_000_000n);
}

/** One line of Go's tabwriter with AlignRight, min width 13 and padding 2, each cell ended by a tab. */
function alignedRow(cells: readonly string[]): string {
  return cells.map((c) => c.padStart(Math.max(13, [...c].length + 2))).join('') + '\n';
}

export function headerLine(): string {
  return alignedRow(['WORKLOAD'.padStart(40), 'TOTAL RPS', 'ERROR RPS', 'P50 LATENCY', 'P90 LATENCY', 'P99 LATENCY']);
}

export interface WorkloadMetrics {
  workload: string;
  totalRps: number;
  errorRps: number;
  p50: number;
  p90: number;
  p99: number;
}

export function metricsLine(m: WorkloadMetrics): string {
  return alignedRow([
    m.workload.padStart(40),
    m.totalRps.toFixed(3),
    m.errorRps.toFixed(3),
    latencyText(m.p50),
    latencyText(m.p90),
    latencyText(m.p99),
  ]);
}

/** One instant query at `now` (POST as client_golang sends it); the first sample's value, 0 for an empty vector. */
async function vectorValue(address: string, query: string, now: number): Promise<number> {
  const url = `${address.replace(/\/$/, '')}/api/v1/query`;
  let body: { status?: string; errorType?: string; error?: string; data?: { resultType?: string; result?: Array<{ value: [number, string] }> } };
  try {
    const r = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ query, time: String(now) }).toString(),
      signal: AbortSignal.timeout(30_000),
    });
    body = (await r.json()) as typeof body;
  } catch (e) {
    const cause = (e as { cause?: Error }).cause?.message ?? (e as Error).message;
    throw new Error(`query() failure for '${query}': Post "${url}": ${cause}`);
  }
  if (body.status !== 'success') throw new Error(`query() failure for '${query}': ${body.errorType}: ${body.error}`);
  if (body.data?.resultType !== 'vector') throw new Error('bad metric value type returned for query');
  const first = body.data.result?.[0];
  return first ? Number(first.value[1]) : 0;
}

/** hashicorp/go-multierror's text, which istioctl's message carries. */
function multiError(errors: readonly Error[]): string {
  if (errors.length === 1) return `1 error occurred:\n\t* ${errors[0]!.message}\n\n`;
  return `${errors.length} errors occurred:\n\t${errors.map((e) => `* ${e.message}`).join('\n\t')}\n\n`;
}

export async function workloadMetrics(address: string, workload: string, durationMs: number, now = Date.now() / 1000): Promise<WorkloadMetrics> {
  const q = workloadQueries(workload, durationMs);
  const errors: Error[] = [];
  const value = async (query: string) => {
    try {
      return await vectorValue(address, query, now);
    } catch (e) {
      errors.push(e as Error);
      return 0;
    }
  };
  const m: WorkloadMetrics = { workload, totalRps: 0, errorRps: 0, p50: 0, p90: 0, p99: 0 };
  // in istioctl's order, so that the errors are listed as it lists them
  m.totalRps = await value(q.totalRps);
  m.errorRps = await value(q.errorRps);
  m.p50 = await value(q.p50);
  m.p90 = await value(q.p90);
  m.p99 = await value(q.p99);
  if (errors.length) throw new Error(`error retrieving some metrics: ${multiError(errors)}`);
  return m;
}

export const run: Handler = async (ctx: RunContext) => {
  if (ctx.args.length < 1) throw new CommandError('metrics requires workload name');
  const durationMs = (ctx.flags['duration'] as number | undefined) ?? 60_000;
  const address = await findPrometheus(ctx);
  ctx.stdout.write(headerLine());
  for (const workload of ctx.args) {
    let m: WorkloadMetrics;
    try {
      m = await workloadMetrics(address, workload, durationMs);
    } catch (e) {
      throw new CommandError(`could not build metrics for workload '${workload}': ${(e as Error).message}`);
    }
    ctx.stdout.write(metricsLine(m));
  }
  return 0;
};
