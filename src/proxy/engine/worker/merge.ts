// One /stats for every engine worker, with Envoy's semantics: in Envoy all workers bump the same stat
// objects, so traffic counters and gauges (downstream_cx_total, upstream_rq_active…) are the sum of what
// each worker did, while config stats are the main thread's alone (LDS/CDS update_*, membership_*,
// version, server.*: Envoy marks those gauges NeverImport). Our workers apply the same xDS as the main
// thread, so their copies of config stats are dropped here rather than counted N times. Envoy's
// per-worker listener stats (`listener.<address>.worker_<N>.downstream_cx_total|active`) are derived from
// each worker's own listener stats.
import { Histogram, isNullStat, StatsStore, type Counter, type Gauge, type TaggedName } from '../../stats/store';

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

/**
 * A stats store's contents as a worker sends them (only what stats_matcher lets through is rendered anyway).
 * With `sent`, the names and tags of tagged stats go once: the main thread's merged view keeps them (each
 * Istio series carries some twenty labels; sending them on every scrape cost more than the values).
 */
export function snapshotOf(store: StatsStore, sent?: WeakSet<TaggedName>): StatsSnapshot {
  const tagged: Array<[string, TaggedName]> = [];
  for (const [flat, tg] of store.tagged) {
    if (sent?.has(tg)) continue;
    sent?.add(tg);
    tagged.push([flat, tg]);
  }
  return {
    counters: store.allCounters().map((c) => [c.name, c.value, c.used]),
    gauges: store.allGauges().map((g) => [g.name, g.value, g.used]),
    histograms: store.allHistograms().map((h) => [h.name, [...h.bounds], [...h.counts], h.sum, h.count]),
    tagged,
  };
}

type Stat = Counter | Gauge | Histogram;

/**
 * The merged view, kept from scrape to scrape so that what the Prometheus rendering works out per stat (family,
 * label text, order; src/proxy/stats/prom-index.ts) is worked out once: each merge zeroes the kept stats, adds
 * every thread's values, and drops the stats no thread has any more.
 */
export class StatsMerger {
  private out: StatsStore | undefined;

  /** `sources[0]` is the first worker thread; the main thread (worker 0: it serves traffic too) comes from `main`. */
  merge(main: StatsStore, sources: ReadonlyArray<StatsSnapshot | undefined>): StatsStore {
    // the snapshots hold shown stats only; the matcher still decides the per-worker listener stats derived here
    const out = (this.out ??= new StatsStore(main.visible));
    const kept: Array<Map<string, Stat>> = [new Map(), new Map(), new Map()];
    for (const c of out.allCounters()) kept[0]!.set(c.name, c);
    for (const g of out.allGauges()) kept[1]!.set(g.name, g);
    for (const h of out.allHistograms()) kept[2]!.set(h.name, h);
    for (const m of kept.slice(0, 2)) {
      for (const s of m.values() as IterableIterator<Counter | Gauge>) {
        s.value = 0;
        s.used = false;
      }
    }
    for (const h of kept[2]!.values() as IterableIterator<Histogram>) {
      h.counts.fill(0);
      h.sum = 0;
      h.count = 0;
      h.used = false;
    }
    for (const [flat, tg] of main.tagged) if (!out.tagged.has(flat)) out.tagged.set(flat, tg);
    for (const s of sources) for (const [flat, tg] of s?.tagged ?? []) out.tagged.set(flat, tg);
    const seen = (kind: 0 | 1 | 2, name: string) => kept[kind]!.delete(name);
    const add = (kind: 0 | 1, name: string, value: number, used: boolean, fromMain: boolean) => {
      const mode = mergeMode(name);
      if (mode === 'main' && !fromMain) return;
      const s = kind === 0 ? out.counter(name) : out.gauge(name);
      seen(kind, name);
      if (mode === 'max') s.value = fromMain ? value : Math.max(s.value, value);
      else s.value += value;
      s.used ||= used;
    };
    const perWorker = (kind: 0 | 1, id: number, name: string, value: number, used: boolean) => {
      const m = PER_WORKER.exec(name);
      if (!m) return;
      const n = `listener.${m[1]}.worker_${id}.${m[2]}`;
      const s = kind === 0 ? out.counter(n) : out.gauge(n);
      seen(kind, n);
      s.value = value;
      s.used ||= used;
    };
    const addHistogram = (name: string, bounds: readonly number[], counts: readonly number[], sum: number, count: number) => {
      const h = out.histogram(name);
      if (isNullStat(h)) return;
      seen(2, name);
      if (h.bounds.length !== bounds.length || h.bounds.some((b, i) => b !== bounds[i])) {
        if (h.count > 0) return;
        // a histogram with its own bounds: the default-bounded one just made takes them (same object: the
        // Prometheus index refers to it)
        Object.assign(h, new Histogram(name, bounds));
      }
      for (let i = 0; i < counts.length; i++) h.counts[i] = (h.counts[i] ?? 0) + counts[i]!;
      h.sum += sum;
      h.count += count;
      h.used ||= count > 0;
    };
    for (const c of main.allCounters()) {
      add(0, c.name, c.value, c.used, true);
      perWorker(0, 0, c.name, c.value, c.used);
    }
    for (const g of main.allGauges()) {
      add(1, g.name, g.value, g.used, true);
      perWorker(1, 0, g.name, g.value, g.used);
    }
    for (const h of main.allHistograms()) addHistogram(h.name, h.bounds, h.counts, h.sum, h.count);
    sources.forEach((snap, i) => {
      if (!snap) return;
      for (const [n, v, u] of snap.counters) {
        add(0, n, v, u, false);
        perWorker(0, i + 1, n, v, u);
      }
      for (const [n, v, u] of snap.gauges) {
        add(1, n, v, u, false);
        perWorker(1, i + 1, n, v, u);
      }
      for (const [n, b, c, sum, count] of snap.histograms) addHistogram(n, b, c, sum, count);
    });
    // a thread that did not answer may still have what the others lack: drop only on a full answer
    if (sources.every((s) => s !== undefined)) {
      kept.forEach((m, kind) => {
        for (const name of m.keys()) out.delete(kind as 0 | 1 | 2, name);
      });
    }
    return out;
  }
}

/** One merge into a new store (tests; the admin server keeps a StatsMerger). */
export function mergeStats(main: StatsStore, sources: ReadonlyArray<StatsSnapshot | undefined>): StatsStore {
  return new StatsMerger().merge(main, sources);
}
