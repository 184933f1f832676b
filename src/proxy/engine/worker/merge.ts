// One /stats for every engine worker, with Envoy's semantics: in Envoy all workers bump the same stat
// objects, so traffic counters and gauges (downstream_cx_total, upstream_rq_active…) are the sum of what
// each worker did, while config stats are the main thread's alone (LDS/CDS update_*, membership_*,
// version, server.*: Envoy marks those gauges NeverImport). Our workers apply the same xDS as the main
// thread, so their copies of config stats are dropped here rather than counted N times. Envoy's
// per-worker listener stats (`listener.<address>.worker_<N>.downstream_cx_total|active`) are derived from
// each worker's own listener stats.
import { Histogram, isNullStat, StatsStore, type TaggedName } from '../../stats/store';

/** What a worker thread sends of its stats store. */
export interface StatsSnapshot {
  counters: Array<[name: string, value: number, used: boolean]>;
  gauges: Array<[name: string, value: number, used: boolean]>;
  histograms: Array<[name: string, bounds: number[], counts: number[], sum: number, count: number]>;
  /** Names and tags of the stats made with explicit tags (Istio's standard metrics). */
  tagged?: Array<[flat: string, tagged: TaggedName]>;
}

export type MergeMode = 'sum' | 'main' | 'max';

const MAIN_PREFIX = /^(server|listener_manager|cluster_manager|control_plane|runtime|sds|workers)\./;
const MAIN_SUFFIX =
  /\.(update_attempt|update_success|update_failure|update_rejected|update_empty|update_no_rebuild|update_time|version|version_text|config_reload|config_reload_time_ms|init_fetch_timeout|membership_(healthy|total|degraded|excluded|change)|max_host_weight|remaining_(rq|cx|pending|retries))$/;

/** How a stat of the main thread and the workers becomes one value. */
export function mergeMode(name: string): MergeMode {
  // active connections of the whole server are the workers' connections
  if (name === 'server.total_connections') return 'sum';
  if (MAIN_PREFIX.test(name) || MAIN_SUFFIX.test(name)) return 'main';
  // a circuit breaker is open when any worker's is
  if (/\.circuit_breakers\.[^.]+\.(cx|rq|rq_pending|rq_retry|cx_pool)_open$/.test(name)) return 'max';
  return 'sum';
}

const PER_WORKER = /^listener\.(.+)\.(downstream_cx_total|downstream_cx_active)$/;

/** A stats store's contents as a worker sends them (only what stats_matcher lets through is rendered anyway). */
export function snapshotOf(store: StatsStore): StatsSnapshot {
  return {
    counters: store.allCounters().map((c) => [c.name, c.value, c.used]),
    gauges: store.allGauges().map((g) => [g.name, g.value, g.used]),
    histograms: store.allHistograms().map((h) => [h.name, [...h.bounds], [...h.counts], h.sum, h.count]),
    tagged: [...store.tagged],
  };
}

/**
 * The merged view: `sources[0]` is the main thread (worker 0: it serves traffic too), the rest the worker
 * threads by id. A new store, rendered by the admin API exactly as a single thread's.
 */
export function mergeStats(main: StatsStore, sources: ReadonlyArray<StatsSnapshot | undefined>): StatsStore {
  // the snapshots hold shown stats only; the matcher still decides the per-worker listener stats derived here
  const out = new StatsStore(main.visible);
  const add = (kind: 'counter' | 'gauge', name: string, value: number, used: boolean, fromMain: boolean) => {
    const mode = mergeMode(name);
    if (mode === 'main' && !fromMain) return;
    const s = kind === 'counter' ? out.counter(name) : out.gauge(name);
    if (mode === 'max') s.value = fromMain ? value : Math.max(s.value, value);
    else s.value += value;
    s.used ||= used;
  };
  const perWorker = (kind: 'counter' | 'gauge', id: number, name: string, value: number, used: boolean) => {
    const m = PER_WORKER.exec(name);
    if (!m) return;
    const s = kind === 'counter' ? out.counter(`listener.${m[1]}.worker_${id}.${m[2]}`) : out.gauge(`listener.${m[1]}.worker_${id}.${m[2]}`);
    s.value = value;
    s.used ||= used;
  };
  const addHistogram = (name: string, bounds: readonly number[], counts: readonly number[], sum: number, count: number) => {
    const h = out.histogram(name);
    if (isNullStat(h)) return;
    if (h.bounds.length !== bounds.length || h.bounds.some((b, i) => b !== bounds[i])) {
      if (h.count > 0) return;
      // a histogram with its own bounds: replace the default-bounded one just made
      Object.assign(h, new Histogram(name, bounds));
    }
    for (let i = 0; i < counts.length; i++) h.counts[i] = (h.counts[i] ?? 0) + counts[i]!;
    h.sum += sum;
    h.count += count;
    h.used ||= count > 0;
  };
  const mainSnap = snapshotOf(main);
  const all: Array<[number, StatsSnapshot]> = [[0, mainSnap]];
  sources.forEach((s, i) => {
    if (s) all.push([i + 1, s]);
  });
  for (const [id, snap] of all) {
    const fromMain = id === 0;
    for (const [flat, tg] of snap.tagged ?? []) out.tagged.set(flat, tg);
    for (const [n, v, u] of snap.counters) {
      add('counter', n, v, u, fromMain);
      perWorker('counter', id, n, v, u);
    }
    for (const [n, v, u] of snap.gauges) {
      add('gauge', n, v, u, fromMain);
      perWorker('gauge', id, n, v, u);
    }
    for (const [n, b, c, sum, count] of snap.histograms) addHistogram(n, b, c, sum, count);
  }
  return out;
}
