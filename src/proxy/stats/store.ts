// The engine's statistics: counters, gauges and histograms keyed by Envoy's dotted stat names
// (`cluster.<name>.upstream_rq_total`, `http.<prefix>.downstream_rq_2xx`…). Holders keep the stat
// objects, so the request path only bumps a number; names are turned into Prometheus names and tags
// only when the admin API renders them.

/** Envoy's default histogram bucket bounds (milliseconds for time histograms). */
export const DEFAULT_BUCKETS: readonly number[] = [
  0.5, 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000, 300000, 600000, 1800000, 3600000,
];

export class Counter {
  value = 0;
  used = false;
  constructor(readonly name: string) {}
  inc(n = 1): void {
    this.value += n;
    this.used = true;
  }
}

export class Gauge {
  value = 0;
  used = false;
  constructor(readonly name: string) {}
  set(v: number): void {
    this.value = v;
    this.used = true;
  }
  inc(n = 1): void {
    this.value += n;
    this.used = true;
  }
  dec(n = 1): void {
    this.value -= n;
    this.used = true;
  }
}

export class Histogram {
  readonly counts: number[];
  sum = 0;
  count = 0;
  used = false;
  constructor(
    readonly name: string,
    readonly bounds: readonly number[] = DEFAULT_BUCKETS,
  ) {
    this.counts = new Array<number>(bounds.length).fill(0);
  }
  record(v: number): void {
    this.sum += v;
    this.count++;
    this.used = true;
    const b = this.bounds;
    for (let i = 0; i < b.length; i++) {
      if (v <= b[i]!) {
        this.counts[i]!++;
        return;
      }
    }
  }
  /** Cumulative count at or below each bound. */
  cumulative(): number[] {
    let acc = 0;
    return this.counts.map((c) => (acc += c));
  }
  /** Quantile estimate by linear interpolation inside the bucket (what the text and JSON outputs show). */
  quantile(q: number): number | undefined {
    if (this.count === 0) return undefined;
    const target = q * this.count;
    let acc = 0;
    let lower = 0;
    for (let i = 0; i < this.bounds.length; i++) {
      const c = this.counts[i]!;
      const upper = this.bounds[i]!;
      if (c > 0 && acc + c >= target) return lower + ((upper - lower) * Math.max(0, target - acc)) / c;
      acc += c;
      lower = upper;
    }
    return lower;
  }
}

/**
 * Envoy's null stats: what a name the bootstrap's stats_matcher rejects gets. Writes are dropped and the
 * value stays 0, as in Envoy, so a rejected stat costs nothing per cluster or listener; one shared instance
 * per kind. A holder whose value the engine itself reads asks for a kept stat instead (see `needed`).
 */
class NullCounter extends Counter {
  constructor() {
    super('');
    frozenValue(this);
  }
  override inc(): void {}
}
class NullGauge extends Gauge {
  constructor() {
    super('');
    frozenValue(this);
  }
  override set(): void {}
  override inc(): void {}
  override dec(): void {}
}
class NullHistogram extends Histogram {
  constructor() {
    super('', []);
    frozenValue(this);
  }
  override record(): void {}
}
/** A write to a shared null stat's fields (merging copies values in) must not reach every holder of it. */
function frozenValue(s: object): void {
  for (const k of ['value', 'used', 'sum', 'count']) Object.defineProperty(s, k, { get: () => (k === 'used' ? false : 0), set: () => {} });
}
const NULL_COUNTER: Counter = new NullCounter();
const NULL_GAUGE: Gauge = new NullGauge();
const NULL_HISTOGRAM: Histogram = new NullHistogram();

/** Whether a stat is Envoy's null stat (a name stats_matcher rejected): tests and diagnostics. */
export function isNullStat(s: Counter | Gauge | Histogram): boolean {
  return s === NULL_COUNTER || s === NULL_GAUGE || s === NULL_HISTOGRAM;
}

/**
 * A stat made with explicit tags (Envoy's counterFromStatNames with a StatNameTagVector, what Istio's stats
 * filter does): its flat name joins `<name>.<tag>.<value>…`, its Prometheus name and labels are given rather
 * than extracted by the tag regexes.
 */
export interface TaggedName {
  name: string;
  tags: Array<[string, string]>;
}

/** 0 counter, 1 gauge, 2 histogram (prom-index.ts). */
export type StatKind = 0 | 1 | 2;

/** What the store tells the Prometheus index (prom-index.ts) of stats it drops. */
export interface StatsIndex {
  remove(kind: StatKind, stat: Counter | Gauge | Histogram): void;
  removePrefix(prefix: string): void;
}

export class StatsStore {
  private readonly counters = new Map<string, Counter>();
  private readonly gauges = new Map<string, Gauge>();
  private readonly histograms = new Map<string, Histogram>();
  /** Flat name → given name and tags, for stats made with explicit tags (see TaggedName). */
  readonly tagged = new Map<string, TaggedName>();
  /** The Prometheus index (prom-index.ts), made at the first scrape. */
  promIndex: StatsIndex | undefined;
  /** Stats made since the index last took them in; undefined while there is no index. */
  fresh: Array<[StatKind, Counter | Gauge | Histogram]> | undefined;

  /**
   * `visible` is the bootstrap's stats_matcher. A name it rejects is never stored: it gets the shared null
   * stat (Envoy's behaviour: not shown, value 0), or, when the engine reads the value itself (`needed`), a
   * stat of its own that counts but is neither stored nor shown (nor named: nothing renders it).
   */
  constructor(readonly visible: (name: string) => boolean = () => true) {}

  counter(name: string, needed = false): Counter {
    let c = this.counters.get(name);
    if (!c) {
      if (!this.visible(name)) return needed ? new Counter('') : NULL_COUNTER;
      c = new Counter(name);
      this.counters.set(name, c);
      this.fresh?.push([0, c]);
    }
    return c;
  }

  gauge(name: string, needed = false): Gauge {
    let g = this.gauges.get(name);
    if (!g) {
      if (!this.visible(name)) return needed ? new Gauge('') : NULL_GAUGE;
      g = new Gauge(name);
      this.gauges.set(name, g);
      this.fresh?.push([1, g]);
    }
    return g;
  }

  histogram(name: string): Histogram {
    let h = this.histograms.get(name);
    if (!h) {
      if (!this.visible(name)) return NULL_HISTOGRAM;
      h = new Histogram(name);
      this.histograms.set(name, h);
      this.fresh?.push([2, h]);
    }
    return h;
  }

  /** A counter with explicit tags (`flat` is its `/stats` name); the null counter when stats_matcher rejects it. */
  taggedCounter(flat: string, tagged: TaggedName): Counter {
    const c = this.counters.get(flat);
    if (c) return c;
    if (!this.visible(flat)) return NULL_COUNTER;
    this.tagged.set(flat, tagged);
    return this.counter(flat);
  }

  /** A histogram with explicit tags and its own bucket bounds. */
  taggedHistogram(flat: string, tagged: TaggedName, bounds: readonly number[]): Histogram {
    let h = this.histograms.get(flat);
    if (!h) {
      if (!this.visible(flat)) return NULL_HISTOGRAM;
      h = new Histogram(flat, bounds);
      this.histograms.set(flat, h);
      this.tagged.set(flat, tagged);
      this.fresh?.push([2, h]);
    }
    return h;
  }

  /** A prefix-bound view, like an Envoy stats scope. */
  scope(prefix: string): StatsScope {
    return new StatsScope(this, prefix);
  }

  /** Drops every stat under `prefix` (a removed cluster's or listener's scope). */
  removePrefix(prefix: string): void {
    for (const m of [this.counters, this.gauges, this.histograms, this.tagged] as Map<string, unknown>[]) {
      for (const k of [...m.keys()]) if (k.startsWith(prefix)) m.delete(k);
    }
    if (this.fresh) this.fresh = this.fresh.filter(([, s]) => !s.name.startsWith(prefix));
    this.promIndex?.removePrefix(prefix);
  }

  /** Drops one stat (a merged view's stat that no thread has any more). */
  delete(kind: StatKind, name: string): void {
    const m = [this.counters, this.gauges, this.histograms][kind] as Map<string, Counter | Gauge | Histogram>;
    const s = m.get(name);
    if (!s) return;
    m.delete(name);
    this.tagged.delete(name);
    if (this.fresh) this.fresh = this.fresh.filter(([, x]) => x !== s);
    this.promIndex?.remove(kind, s);
  }

  allCounters(): Counter[] {
    return [...this.counters.values()];
  }
  allGauges(): Gauge[] {
    return [...this.gauges.values()];
  }
  allHistograms(): Histogram[] {
    return [...this.histograms.values()];
  }
  /** Value of a shown counter or gauge by its full name (tests, readiness). */
  value(name: string): number | undefined {
    return this.counters.get(name)?.value ?? this.gauges.get(name)?.value;
  }
}

export class StatsScope {
  constructor(
    readonly store: StatsStore,
    readonly prefix: string,
  ) {}
  counter(name: string, needed = false): Counter {
    return this.store.counter(this.prefix + name, needed);
  }
  gauge(name: string, needed = false): Gauge {
    return this.store.gauge(this.prefix + name, needed);
  }
  histogram(name: string): Histogram {
    return this.store.histogram(this.prefix + name);
  }
  scope(prefix: string): StatsScope {
    return new StatsScope(this.store, this.prefix + prefix);
  }
}

/**
 * Per-response-code counters (`upstream_rq_200`, `upstream_rq_2xx`) created on first use and then
 * reused, so the request path does a small array lookup instead of building a name.
 */
export class ResponseCodeStats {
  private readonly byCode: Array<Counter | undefined> = [];
  private readonly byClass: Array<Counter | undefined> = [];
  constructor(
    private readonly scope: StatsScope,
    private readonly base: string,
    private readonly withCodes = true,
  ) {}
  record(code: number): void {
    const cls = Math.floor(code / 100);
    let c = this.byClass[cls];
    if (!c) c = this.byClass[cls] = this.scope.counter(`${this.base}_${cls}xx`);
    c.inc();
    if (!this.withCodes) return;
    let e = this.byCode[code];
    if (!e) e = this.byCode[code] = this.scope.counter(`${this.base}_${code}`);
    e.inc();
  }
}
