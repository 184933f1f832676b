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

function labels(tags: Array<[string, string]>, extra?: [string, string]): string {
  const all = extra ? [...tags, extra] : tags;
  if (all.length === 0) return '';
  return `{${all.map(([k, v]) => `${sanitizePromName(k)}="${labelValue(v)}"`).join(',')}}`;
}

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
    if (t) return { n: sanitizePromName(t.name), tags: t.tags };
    const e = tags.extract(flat);
    return { n: `envoy_${sanitizePromName(e.name)}`, tags: e.tags };
  };
  const scalar = (s: Counter | Gauge, type: string) => {
    const e = nameOf(s.name);
    const n = e.n;
    add(n, type, `${n}${labels(e.tags)} ${s.value}`);
  };
  for (const c of selected(store.allCounters(), q)) scalar(c, 'counter');
  for (const g of selected(store.allGauges(), q)) scalar(g, 'gauge');
  for (const h of selected(store.allHistograms(), q)) {
    const e = nameOf(h.name);
    const n = e.n;
    const cum = h.cumulative();
    const lines: string[] = [];
    h.bounds.forEach((b, i) => lines.push(`${n}_bucket${labels(e.tags, ['le', fmt(b)])} ${cum[i]}`));
    lines.push(`${n}_bucket${labels(e.tags, ['le', '+Inf'])} ${h.count}`);
    lines.push(`${n}_sum${labels(e.tags)} ${fmt(h.sum)}`);
    lines.push(`${n}_count${labels(e.tags)} ${h.count}`);
    for (const l of lines) add(n, 'histogram', l);
  }
  let out = '';
  const order = { counter: 0, gauge: 1, histogram: 2 } as Record<string, number>;
  const names = [...families.keys()].sort((a, b) => order[families.get(a)!.type]! - order[families.get(b)!.type]! || (a < b ? -1 : a > b ? 1 : 0));
  for (const n of names) {
    const f = families.get(n)!;
    out += `# TYPE ${n} ${f.type}\n`;
    for (const l of f.lines) out += `${l}\n`;
  }
  return out;
}
