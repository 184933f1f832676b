// The pieces of the agent's merged /stats/prometheus that are decisions rather than I/O, after Istio 1.26's
// pilot/cmd/pilot-agent/status/server.go (NewServer's ISTIO_PROMETHEUS_ANNOTATIONS handling,
// negotiateMetricsFormat, getHeaderTimeout, applyHeaders). The injector (src/inject) moves a pod's
// `prometheus.io/scrape|port|path` annotations into MESH_METRICS_ANNOTATIONS (the specification's name for
// ISTIO_PROMETHEUS_ANNOTATIONS) and points the annotations at 15020; the status server then scrapes the
// application at `http://localhost:<port><path>` and appends it last.
// On purpose: Istio's name ISTIO_PROMETHEUS_ANNOTATIONS is read too, after MESH_METRICS_ANNOTATIONS, as the
// agent reads ISTIO_META_* beside MESH_META_*; a pod Istio's injector wrote keeps its application metrics.

/** The application scrape target the injector recorded (Istio's PrometheusScrapeConfiguration). */
export interface AppScrapeConfig {
  port: string;
  path: string;
}

/** The variables that may carry the annotations, the specification's name first. */
export const SCRAPE_ANNOTATION_VARS = ['MESH_METRICS_ANNOTATIONS', 'ISTIO_PROMETHEUS_ANNOTATIONS'] as const;

/**
 * The application target from the variable's JSON (`{"scrape":"true","path":"/m","port":"8080"}`), undefined
 * when `scrape` is "false"; Istio's defaults `/metrics` and port 80. Throws (the agent does not start) on
 * malformed JSON and on the status port itself, which would make each scrape call itself.
 */
export function parseAppScrapeConfig(name: string, raw: string, statusPort: number): AppScrapeConfig | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw new Error(`failed to unmarshal ${name}: ${(e as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new Error(`failed to unmarshal ${name}: not a JSON object`);
  }
  const o = parsed as Record<string, unknown>;
  for (const k of ['scrape', 'path', 'port']) {
    if (o[k] !== undefined && typeof o[k] !== 'string') throw new Error(`failed to unmarshal ${name}: ${k} is not a string`);
  }
  if (o['scrape'] === 'false') return undefined;
  const cfg = { path: (o['path'] as string) || '/metrics', port: (o['port'] as string) || '80' };
  if (cfg.port === String(statusPort)) {
    throw new Error(
      'invalid prometheus scrape configuration: application port is the same as agent port, which may lead to a recursive loop. ' +
        `Ensure pod does not have prometheus.io/port=${statusPort} label, or that injection is not happening multiple times`,
    );
  }
  return cfg;
}

/** Istio's appMetricsURL for a sidecar: always plain HTTP to localhost. */
export function appMetricsUrl(cfg: AppScrapeConfig): string {
  return `http://localhost:${cfg.port}${cfg.path.startsWith('/') ? '' : '/'}${cfg.path}`;
}

export const FMT_TEXT = 'text/plain; version=0.0.4; charset=utf-8';
export const FMT_OPENMETRICS_0_0_1 = 'application/openmetrics-text; version=0.0.1; charset=utf-8';
export const FMT_OPENMETRICS_1_0_0 = 'application/openmetrics-text; version=1.0.0; charset=utf-8';

/**
 * The merged answer's Content-Type from the application's: OpenMetrics 1.0.0 or 0.0.1 (also when no version is
 * given) when the application answered OpenMetrics, the 0.0.4 text format otherwise (and when it did not answer).
 */
export function negotiateMetricsFormat(contentType: string | undefined): string {
  const m = /^\s*([^;\s]+)\s*(?:;(.*))?$/.exec(contentType ?? '');
  if (!m || m[1]!.toLowerCase() !== 'application/openmetrics-text') return FMT_TEXT;
  const params = new Map<string, string>();
  for (const p of (m[2] ?? '').split(';')) {
    const eq = p.indexOf('=');
    if (eq < 0) continue;
    params.set(
      p.slice(0, eq).trim().toLowerCase(),
      p
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1'),
    );
  }
  const v = params.get('version') ?? '';
  if (v === '1.0.0') return FMT_OPENMETRICS_1_0_0;
  if (v === '0.0.1' || v === '') return FMT_OPENMETRICS_0_0_1;
  return FMT_TEXT;
}

/** The scrape headers passed on to the proxy and the application (Istio's applyHeaders list). */
export function scrapeHeaders(from: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const h of ['accept', 'user-agent', 'x-prometheus-scrape-timeout-seconds']) {
    const v = from[h];
    const s = Array.isArray(v) ? v[0] : v;
    if (s) out[h] = s;
  }
  return out;
}

/** X-Prometheus-Scrape-Timeout-Seconds (`1.5`) in milliseconds; undefined when absent or not a number. */
export function scrapeTimeoutMs(header: string | undefined): number | undefined {
  if (header === undefined || header.trim() === '') return undefined;
  const s = Number(header);
  return Number.isFinite(s) && s > 0 ? s * 1000 : undefined;
}
