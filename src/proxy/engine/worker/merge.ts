// One /stats for every engine worker, with Envoy's semantics: in Envoy all workers bump the same stat
// objects, so traffic counters and gauges (downstream_cx_total, upstream_rq_active…) are the sum of what
// each worker did, while config stats are the main thread's alone (LDS/CDS update_*, membership_*,
// version, server.*: Envoy marks those gauges NeverImport). Our workers apply the same xDS as the main
// thread, so their copies of config stats are dropped here rather than counted N times. Envoy's
// per-worker listener stats (`listener.<address>.worker_<N>.downstream_cx_total|active`) are derived from
// each worker's own listener stats.
import { Histogram, isNullStat, StatsStore, type Counter, type Gauge, type TaggedName } from '../../stats/store';

/** What a worker thread sends of its stats store: every stat (`snapshotOf` without a record of what was sent), or `changes`. */
export interface StatsSnapshot {
  counters: Array<[name: string, value: number, used: boolean]>;
  gauges: Array<[name: string, value: number, used: boolean]>;
  histograms: Array<[name: string, bounds: number[], counts: number[], sum: number, count: number]>;
  /** Names and tags of the stats made with explicit tags (Istio's standard metrics). */
  tagged?: Array<[flat: string, tagged: TaggedName]>;
  /** What changed since the thread's last answer (the lists above are then empty). */
  changes?: StatsChanges;
}

/**
 * A thread's stats as changes: each stat gets an id the first time it is sent (with its name, bounds and tags),
 * then only its values when they changed; `removed` are ids of stats gone. `reset`: the receiver forgets what it
 * kept of this thread first (a new record on the thread's side: a restarted thread, or a lost answer).
 */
export interface StatsChanges {
  reset: boolean;
  added: Array<[id: number, kind: 0 | 1 | 2, name: string, bounds: number[] | null, tagged: TaggedName | null]>;
  removed: number[];
  /** `id, value, used (1 or 0)` of each counter or gauge whose value changed, flat. */
  scalars: number[];
  histograms: Array<[id: number, counts: number[], sum: number, count: number]>;
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

type Stat = Counter | Gauge | Histogram;

/** What a thread last sent of one stat. */
interface SentStat {
  id: number;
  value: number;
  sum: number;
  used: boolean;
  round: number;
}
interface SentRecord {
  ids: Map<Stat, SentStat>;
  next: number;
  round: number;
}
/** The sending side's records, by the set a thread keeps of what the main thread has (a new set: a new record). */
const records = new WeakMap<object, SentRecord>();

/**
 * A stats store's contents as a worker sends them (only what stats_matcher lets through is rendered anyway).
 * With `sent` (kept by the thread, replaced when the main thread asks for everything again), only what changed
 * since the last answer: each Istio series carries some twenty labels in a name of some 900 bytes, and a sidecar
 * with a thousand services has thousands of them, most unchanged from one scrape to the next.
 */
export function snapshotOf(store: StatsStore, sent?: WeakSet<TaggedName>): StatsSnapshot {
  if (!sent) {
    return {
      counters: store.allCounters().map((c) => [c.name, c.value, c.used]),
      gauges: store.allGauges().map((g) => [g.name, g.value, g.used]),
      histograms: store.allHistograms().map((h) => [h.name, [...h.bounds], [...h.counts], h.sum, h.count]),
      tagged: [...store.tagged],
    };
  }
  let rec = records.get(sent);
  const reset = !rec;
  if (!rec) records.set(sent, (rec = { ids: new Map(), next: 0, round: 0 }));
  const round = ++rec.round;
  const c: StatsChanges = { reset, added: [], removed: [], scalars: [], histograms: [] };
  const seen = (kind: 0 | 1 | 2, stat: Stat): SentStat => {
    let e = rec.ids.get(stat);
    if (!e) {
      e = { id: rec.next++, value: Number.NaN, sum: Number.NaN, used: false, round };
      rec.ids.set(stat, e);
      c.added.push([e.id, kind, stat.name, kind === 2 ? [...(stat as Histogram).bounds] : null, store.tagged.get(stat.name) ?? null]);
    }
    e.round = round;
    return e;
  };
  for (const [kind, list] of [
    [0, store.allCounters()],
    [1, store.allGauges()],
  ] as const) {
    for (const s of list) {
      const e = seen(kind, s);
      if (e.value === s.value && e.used === s.used) continue;
      e.value = s.value;
      e.used = s.used;
      c.scalars.push(e.id, s.value, s.used ? 1 : 0);
    }
  }
  for (const h of store.allHistograms()) {
    const e = seen(2, h);
    if (e.value === h.count && e.sum === h.sum && e.used === h.used) continue;
    e.value = h.count;
    e.sum = h.sum;
    e.used = h.used;
    c.histograms.push([e.id, [...h.counts], h.sum, h.count]);
  }
  for (const [stat, e] of rec.ids) {
    if (e.round === round) continue;
    c.removed.push(e.id);
    rec.ids.delete(stat);
  }
  return { counters: [], gauges: [], histograms: [], changes: c };
}

/** A snapshot of every stat as changes from nothing. */
function changesOf(snap: StatsSnapshot): StatsChanges {
  if (snap.changes) return snap.changes;
  const tagged = new Map(snap.tagged ?? []);
  const c: StatsChanges = { reset: true, added: [], removed: [], scalars: [], histograms: [] };
  let id = 0;
  for (const [kind, list] of [
    [0, snap.counters],
    [1, snap.gauges],
  ] as const) {
    for (const [name, value, used] of list) {
      c.added.push([id, kind, name, null, tagged.get(name) ?? null]);
      c.scalars.push(id++, value, used ? 1 : 0);
    }
  }
  for (const [name, bounds, counts, sum, count] of snap.histograms) {
    c.added.push([id, 2, name, bounds, tagged.get(name) ?? null]);
    c.histograms.push([id++, counts, sum, count]);
  }
  return c;
}

/** One stat of the merged view, with how threads' values become its value. */
interface Merged {
  kind: 0 | 1 | 2;
  stat: Stat;
  mode: MergeMode;
  /** The merge round that last gave it a value: a stat no thread has any more is dropped. */
  live: number;
}

/** What the merger keeps of one thread's stat: its last values and the merged stats it counts in. */
interface ThreadStat {
  kind: 0 | 1 | 2;
  /** Undefined for a config stat (mode `main`): the main thread's value alone counts. */
  into: Merged | undefined;
  /** Envoy's `listener.<address>.worker_<N>.…` stat derived from this one. */
  perWorker: Merged | undefined;
  value: number;
  used: boolean;
  counts: number[] | undefined;
  sum: number;
}

/**
 * The merged view, kept from scrape to scrape so that what the Prometheus rendering works out per stat (family,
 * label text, order, the rendered lines of an unchanged series; src/proxy/stats/prom-index.ts, render.ts) is
 * worked out once. The workers send what changed (snapshotOf); the merger keeps each worker's last values (a
 * worker that did not answer in time counts with them, so counters never go back) and the main thread's stats
 * by object, so a round works out a stat's name, mode and tags only when the stat is new: it zeroes the merged
 * stats, adds every thread's values, and drops the stats no thread has any more.
 */
export class StatsMerger {
  private out: StatsStore | undefined;
  private readonly merged = new Map<string, Merged>();
  private readonly mains = new Map<Stat, { into: Merged | undefined; perWorker: Merged | undefined; round: number }>();
  private readonly threads: Array<Map<number, ThreadStat>> = [];
  private round = 0;

  /** `sources[0]` is the first worker thread; the main thread (worker 0: it serves traffic too) comes from `main`. */
  merge(main: StatsStore, sources: ReadonlyArray<StatsSnapshot | undefined>): StatsStore {
    // the snapshots hold shown stats only; the matcher still decides the per-worker listener stats derived here
    const out = (this.out ??= new StatsStore(main.visible));
    const round = ++this.round;
    sources.forEach((snap, i) => {
      if (snap) this.apply(out, i, changesOf(snap));
    });
    for (const m of this.merged.values()) {
      const s = m.stat;
      s.used = false;
      if (m.kind !== 2) (s as Counter | Gauge).value = 0;
      else {
        const h = s as Histogram;
        h.counts.fill(0);
        h.sum = 0;
        h.count = 0;
      }
    }
    for (const [kind, list] of [
      [0, main.allCounters()],
      [1, main.allGauges()],
      [2, main.allHistograms()],
    ] as const) {
      for (const s of list) {
        let m = this.mains.get(s);
        if (!m) {
          const into = this.mergedOf(out, kind, s.name, kind === 2 ? (s as Histogram).bounds : null, main.tagged.get(s.name) ?? null);
          m = { into, perWorker: kind === 2 ? undefined : this.perWorkerOf(out, kind, 0, s.name), round };
          this.mains.set(s, m);
        }
        m.round = round;
        if (kind === 2) {
          const h = s as Histogram;
          addHistogram(m.into, round, h.counts, h.sum, h.count);
        } else {
          const v = (s as Counter | Gauge).value;
          addValue(m.into, round, v, s.used, true);
          addValue(m.perWorker, round, v, s.used, true);
        }
      }
    }
    for (const [s, m] of this.mains) if (m.round !== round) this.mains.delete(s);
    for (const view of this.threads) {
      for (const t of view?.values() ?? []) {
        if (t.kind === 2) addHistogram(t.into, round, t.counts!, t.sum, t.value);
        else {
          addValue(t.into, round, t.value, t.used, false);
          addValue(t.perWorker, round, t.value, t.used, false);
        }
      }
    }
    for (const [name, m] of this.merged) {
      if (m.live === round) continue;
      this.merged.delete(name);
      out.delete(m.kind, name);
    }
    return out;
  }

  /** One worker's changes into what the merger keeps of it. */
  private apply(out: StatsStore, i: number, c: StatsChanges): void {
    if (c.reset || !this.threads[i]) this.threads[i] = new Map();
    const view = this.threads[i]!;
    for (const [id, kind, name, bounds, tagged] of c.added) {
      const into = mergeMode(name) === 'main' ? undefined : this.mergedOf(out, kind, name, bounds, tagged);
      const perWorker = kind === 2 ? undefined : this.perWorkerOf(out, kind, i + 1, name);
      view.set(id, { kind, into, perWorker, value: 0, used: false, counts: kind === 2 ? [] : undefined, sum: 0 });
    }
    for (const id of c.removed) view.delete(id);
    const v = c.scalars;
    for (let k = 0; k + 2 < v.length; k += 3) {
      const t = view.get(v[k]!);
      if (!t) continue;
      t.value = v[k + 1]!;
      t.used = v[k + 2] === 1;
    }
    for (const [id, counts, sum, count] of c.histograms) {
      const t = view.get(id);
      if (!t) continue;
      t.counts = counts;
      t.sum = sum;
      t.value = count;
    }
  }

  /** The merged stat of that name, made (with its mode, bounds and tags) when new; undefined when stats_matcher rejects it. */
  private mergedOf(out: StatsStore, kind: 0 | 1 | 2, name: string, bounds: readonly number[] | null, tagged: TaggedName | null): Merged | undefined {
    let m = this.merged.get(name);
    if (m) return m;
    const stat = kind === 0 ? out.counter(name) : kind === 1 ? out.gauge(name) : out.histogram(name);
    if (isNullStat(stat)) return undefined;
    if (tagged) out.tagged.set(name, tagged);
    const h = stat as Histogram;
    if (kind === 2 && bounds && (h.bounds.length !== bounds.length || h.bounds.some((b, j) => b !== bounds[j]))) {
      // a histogram with its own bounds: the default-bounded one just made takes them (same object: the
      // Prometheus index refers to it)
      Object.assign(h, new Histogram(name, bounds));
    }
    m = { kind, stat, mode: mergeMode(name), live: 0 };
    this.merged.set(name, m);
    return m;
  }

  private perWorkerOf(out: StatsStore, kind: 0 | 1, id: number, name: string): Merged | undefined {
    const p = PER_WORKER.exec(name);
    return p ? this.mergedOf(out, kind, `listener.${p[1]}.worker_${id}.${p[2]}`, null, null) : undefined;
  }
}

function addValue(m: Merged | undefined, round: number, value: number, used: boolean, fromMain: boolean): void {
  if (!m) return;
  const s = m.stat as Counter | Gauge;
  if (m.mode === 'main' && !fromMain) return;
  m.live = round;
  if (m.mode === 'max') s.value = fromMain ? value : Math.max(s.value, value);
  else s.value += value;
  s.used ||= used;
}

function addHistogram(m: Merged | undefined, round: number, counts: readonly number[], sum: number, count: number): void {
  if (!m) return;
  const h = m.stat as Histogram;
  m.live = round;
  // a thread's histogram with other bounds than the merged one's (made by another thread first) is left out
  if (counts.length !== h.counts.length) return;
  for (let i = 0; i < counts.length; i++) h.counts[i]! += counts[i]!;
  h.sum += sum;
  h.count += count;
  h.used ||= count > 0;
}

/** One merge into a new store (tests; the admin server keeps a StatsMerger). */
export function mergeStats(main: StatsStore, sources: ReadonlyArray<StatsSnapshot | undefined>): StatsStore {
  return new StatsMerger().merge(main, sources);
}
