// Envoy's admin renderings of the stats store: `/stats` text (`name: value`), `?format=json`, and
// `/stats/prometheus` with tag extraction (`envoy_cluster_upstream_rq_total{envoy_cluster_name="x"}`).
import type { Counter, Gauge, Histogram, StatsStore } from './store';
import { sanitizePromName, type TagProducer } from './tags';

export const QUANTILES = [0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1];

export interface StatsQuery {
  usedOnly: boolean;
  /** RE2 partial match on the stat name (`?filter=`). */
  filter: ((name: string) => boolean) | undefined;
}

function selected<T extends { name: string; used: boolean }>(xs: T[], q: StatsQuery): T[] {
  return xs
    .filter((x) => (!q.usedOnly || x.used) && (!q.filter || q.filter(x.name)))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

function fmt(n: number): string {
  if (Number.isInteger(n)) return String(n);
  return String(Math.round(n * 1000) / 1000);
}

function quantileText(h: Histogram): string {
  if (h.count === 0) return 'No recorded values';
  return QUANTILES.map((q) => {
    const v = h.quantile(q);
    const s = v === undefined ? 'nan' : fmt(v);
    return `P${fmt(q * 100)}(${s},${s})`;
  }).join(' ');
}

export function renderStatsText(store: StatsStore, q: StatsQuery): string {
  const scalars: Array<Counter | Gauge> = selected([...store.allCounters(), ...store.allGauges()], q);
  let out = '';
  for (const s of scalars) out += `${s.name}: ${s.value}\n`;
  for (const h of selected(store.allHistograms(), q)) out += `${h.name}: ${quantileText(h)}\n`;
  return out;
}

export function renderStatsJson(store: StatsStore, q: StatsQuery): string {
  const stats: unknown[] = selected([...store.allCounters(), ...store.allGauges()], q).map((s) => ({ name: s.name, value: s.value }));
  const hs = selected(store.allHistograms(), q);
  if (hs.length > 0) {
    stats.push({
      histograms: {
        supported_quantiles: QUANTILES.map((x) => x * 100),
        computed_quantiles: hs.map((h) => ({
          name: h.name,
          values: QUANTILES.map((x) => {
            const v = h.quantile(x);
            return { interval: v ?? null, cumulative: v ?? null };
          }),
        })),
      },
    });
  }
  return `${JSON.stringify({ stats }, null, 2)}\n`;
}

function labelValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

/** `k="v",…` without braces. */
function labelText(tags: ReadonlyArray<readonly [string, string]>): string {
  let s = '';
  for (const [k, v] of tags) s += `${s ? ',' : ''}${sanitizePromName(k)}="${labelValue(v)}"`;
  return s;
}

/**
 * Label text by tag list: the tags of a stat made with explicit tags (Istio's series, four stats per label set)
 * and of an extracted name are the same array from scrape to scrape, so each is rendered once.
 */
const labelTexts = new WeakMap<object, string>();
function cachedLabels(tags: ReadonlyArray<readonly [string, string]>): string {
  let s = labelTexts.get(tags);
  if (s === undefined) labelTexts.set(tags, (s = labelText(tags)));
  return s;
}

const braces = (l: string) => (l ? `{${l}}` : '');

export function renderPrometheus(store: StatsStore, tags: TagProducer, q: StatsQuery): string {
  type Family = { type: string; lines: string[] };
  const families = new Map<string, Family>();
  const add = (name: string, type: string, line: string) => {
    let f = families.get(name);
    if (!f) families.set(name, (f = { type, lines: [] }));
    f.lines.push(line);
  };
  // stats made with explicit tags keep their given name (Envoy strips a custom stat namespace such as
  // Istio's `istiocustom` and adds no `envoy_` prefix to them)
  const nameOf = (flat: string) => {
    const t = store.tagged.get(flat);
    if (t) return { n: sanitizePromName(t.name), labels: cachedLabels(t.tags) };
    const e = tags.extract(flat);
    return { n: `envoy_${sanitizePromName(e.name)}`, labels: cachedLabels(e.tags) };
  };
  const scalar = (s: Counter | Gauge, type: string) => {
    const e = nameOf(s.name);
    add(e.n, type, `${e.n}${braces(e.labels)} ${s.value}`);
  };
  for (const c of selected(store.allCounters(), q)) scalar(c, 'counter');
  for (const g of selected(store.allGauges(), q)) scalar(g, 'gauge');
  const les = new Map<readonly number[], string[]>();
  for (const h of selected(store.allHistograms(), q)) {
    const e = nameOf(h.name);
    const n = e.n;
    const sep = e.labels ? `${e.labels},` : '';
    let le = les.get(h.bounds);
    if (!le) les.set(h.bounds, (le = h.bounds.map((b) => `le="${fmt(b)}"`)));
    const cum = h.cumulative();
    for (let i = 0; i < le.length; i++) add(n, 'histogram', `${n}_bucket{${sep}${le[i]}} ${cum[i]}`);
    add(n, 'histogram', `${n}_bucket{${sep}le="+Inf"} ${h.count}`);
    add(n, 'histogram', `${n}_sum${braces(e.labels)} ${fmt(h.sum)}`);
    add(n, 'histogram', `${n}_count${braces(e.labels)} ${h.count}`);
  }
  const order = { counter: 0, gauge: 1, histogram: 2 } as Record<string, number>;
  const names = [...families.keys()].sort((a, b) => order[families.get(a)!.type]! - order[families.get(b)!.type]! || (a < b ? -1 : a > b ? 1 : 0));
  const parts: string[] = [];
  for (const n of names) {
    const f = families.get(n)!;
    parts.push(`# TYPE ${n} ${f.type}\n`, f.lines.join('\n'), '\n');
  }
  return parts.join('');
}
