// What /stats/prometheus needs of a stats store, worked out once per stat instead of once per scrape: each
// stat's Prometheus family (Envoy's tag-extracted name, `envoy_`-prefixed unless made with explicit tags as
// Istio's `istiocustom` series are) and its label text `k="v",…` as bytes, and the families in name order with
// their stats in stat-name order. Envoy's admin (source/server/admin/prometheus_stats.cc, grouped by
// tag-extracted name, each group sorted by stat name) sorts on every scrape; here the order is kept and only
// what changed since the last scrape is sorted again.
// The store records the stats it makes after the index exists (`StatsStore.indexed`); the index takes them in
// at the next scrape, so the request path only pushes a reference.
import type { Counter, Gauge, Histogram, StatKind, StatsIndex, StatsStore } from './store';
import { sanitizePromName, type TagProducer } from './tags';

export const COUNTER: StatKind = 0;
export const GAUGE: StatKind = 1;
export const HISTOGRAM: StatKind = 2;

export interface Series {
  stat: Counter | Gauge | Histogram;
  /** `k="v",…` (no braces), empty when the stat has no labels. */
  labels: Buffer;
  /**
   * The series' lines as last rendered (render.ts), and what they were rendered from: a counter's or gauge's
   * value, a histogram's count, sum and bounds. A scrape that finds them unchanged sends these bytes again.
   */
  lines?: Buffer;
  value?: number;
  sum?: number;
  bounds?: readonly number[];
}

export interface Family {
  name: string;
  /** `<name>` as bytes, and the openings of its lines. */
  bytes: { plain: Buffer; open: Buffer; bucket: Buffer; sum: Buffer; sumOpen: Buffer; count: Buffer; countOpen: Buffer };
  /** Series by kind (counters, gauges, histograms); each sorted by stat name when `sorted[kind]`. */
  series: [Series[], Series[], Series[]];
  sorted: [boolean, boolean, boolean];
  /** By kind: every series' lines in order as one piece, and the list (and its length) they were made from. */
  kept: [KeptLines | undefined, KeptLines | undefined, KeptLines | undefined];
}

export interface KeptLines {
  bytes: Buffer;
  list: Series[];
  length: number;
}

function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** `k="v",…` without braces. */
export function labelText(tags: ReadonlyArray<readonly [string, string]>): string {
  let s = '';
  for (const [k, v] of tags) s += `${s ? ',' : ''}${sanitizePromName(k)}="${labelValue(v)}"`;
  return s;
}

const byName = (a: Series, b: Series) => (a.stat.name < b.stat.name ? -1 : a.stat.name > b.stat.name ? 1 : 0);

export class PromIndex implements StatsIndex {
  readonly families = new Map<string, Family>();
  /** Family names in order; undefined when a family was added since. */
  private ordered: Family[] | undefined;
  /** Label bytes by tag list: Istio's four metrics of one label set share one list, so one text. */
  private readonly labelBytes = new WeakMap<object, Buffer>();

  constructor(
    readonly tags: TagProducer,
    store: StatsStore,
  ) {
    for (const c of store.allCounters()) this.add(store, COUNTER, c);
    for (const g of store.allGauges()) this.add(store, GAUGE, g);
    for (const h of store.allHistograms()) this.add(store, HISTOGRAM, h);
  }

  add(store: StatsStore, kind: StatKind, stat: Counter | Gauge | Histogram): void {
    const t = store.tagged.get(stat.name);
    let name: string;
    let tags: ReadonlyArray<readonly [string, string]>;
    if (t) {
      // stats made with explicit tags keep their given name (Envoy strips a custom stat namespace such as
      // Istio's `istiocustom` and adds no `envoy_` prefix to them)
      name = sanitizePromName(t.name);
      tags = t.tags;
    } else {
      const e = this.tags.extract(stat.name);
      name = `envoy_${sanitizePromName(e.name)}`;
      tags = e.tags;
    }
    let labels = this.labelBytes.get(tags);
    if (!labels) this.labelBytes.set(tags, (labels = Buffer.from(labelText(tags))));
    let f = this.families.get(name);
    if (!f) {
      const b = (s: string) => Buffer.from(s);
      f = {
        name,
        bytes: {
          plain: b(`${name} `),
          open: b(`${name}{`),
          bucket: b(`${name}_bucket{`),
          sum: b(`${name}_sum `),
          sumOpen: b(`${name}_sum{`),
          count: b(`${name}_count `),
          countOpen: b(`${name}_count{`),
        },
        series: [[], [], []],
        sorted: [true, true, true],
        kept: [undefined, undefined, undefined],
      };
      this.families.set(name, f);
      this.ordered = undefined;
    }
    const list = f.series[kind];
    const last = list[list.length - 1];
    if (last && last.stat.name > stat.name) f.sorted[kind] = false;
    list.push({ stat, labels });
  }

  /** Forgets one stat (a merged store's stat that no thread has any more). */
  remove(kind: StatKind, stat: Counter | Gauge | Histogram): void {
    for (const f of this.families.values()) {
      const list = f.series[kind];
      const i = list.findIndex((s) => s.stat === stat);
      if (i < 0) continue;
      f.series[kind] = list.filter((_, j) => j !== i);
      this.dropIfEmpty(f);
      return;
    }
  }

  /** Forgets every stat under a removed scope. Lists are replaced, not edited: a scrape may be iterating them. */
  removePrefix(prefix: string): void {
    for (const f of [...this.families.values()]) {
      for (const k of [COUNTER, GAUGE, HISTOGRAM]) {
        const list = f.series[k];
        if (list.some((s) => s.stat.name.startsWith(prefix))) f.series[k] = list.filter((s) => !s.stat.name.startsWith(prefix));
      }
      this.dropIfEmpty(f);
    }
  }

  private dropIfEmpty(f: Family): void {
    if (f.series.some((l) => l.length > 0)) return;
    this.families.delete(f.name);
    this.ordered = undefined;
  }

  /** Families by name, each series list sorted by stat name (sorting only what changed). */
  inOrder(): Family[] {
    for (const f of this.families.values()) {
      for (const k of [COUNTER, GAUGE, HISTOGRAM]) {
        if (f.sorted[k]) continue;
        f.series[k] = f.series[k].slice().sort(byName);
        f.sorted[k] = true;
      }
    }
    this.ordered ??= [...this.families.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return this.ordered;
  }
}

/** The store's index for this tag producer, brought up to date with the stats made since the last call. */
export function promIndexOf(store: StatsStore, tags: TagProducer): PromIndex {
  let ix = store.promIndex as PromIndex | undefined;
  if (!ix || ix.tags !== tags) {
    ix = new PromIndex(tags, store);
    store.promIndex = ix;
    store.fresh = [];
    return ix;
  }
  const fresh = store.fresh ?? [];
  store.fresh = [];
  for (const [kind, stat] of fresh) ix.add(store, kind, stat);
  return ix;
}
