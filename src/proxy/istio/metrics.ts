// Istio's standard metrics in the stats store (istio/proxy release-1.26 istio_stats.cc: Context, MetricOverrides
// and Config): names under the custom stat namespace `istiocustom` (Prometheus shows `istio_*` with the given
// labels), Envoy's default histogram buckets (Istio's bootstrap keeps them), and the stats.PluginConfig
// `metrics` overrides: `drop`, `tags_to_remove`, and `dimensions` replacing a standard label in place or
// adding one at the end (sorted by name).
// Dimension values are CEL over Envoy's attributes (src/proxy/cel), `unknown` when evaluation fails, as in Istio.
// Differs on purpose: `definitions` (custom metrics) are refused (the caller's check).
import type { CelContext } from '../cel/evaluator';
import type { MetricConfig } from '../../gen/istio/envoy/extensions/stats/config_pb';
import { DEFAULT_BUCKETS, type Counter, type Histogram, type StatsStore } from '../stats/store';
import { STANDARD_LABELS } from './labels';

export const STAT_NAMESPACE = 'istiocustom';

/** Istio's metric short names (`metrics[].name` in stats.PluginConfig). */
export const METRIC_NAMES = [
  'requests_total',
  'request_duration_milliseconds',
  'request_bytes',
  'response_bytes',
  'request_messages_total',
  'response_messages_total',
  'tcp_connections_opened_total',
  'tcp_connections_closed_total',
  'tcp_sent_bytes_total',
  'tcp_received_bytes_total',
] as const;
export type MetricName = (typeof METRIC_NAMES)[number];
const KNOWN: ReadonlySet<string> = new Set(METRIC_NAMES);

/** A compiled dimension expression: its value for one request or connection. */
export type DimensionFn = (ctx: CelContext) => string;
/**
 * Compiles a CEL expression: undefined when it does not parse (Istio then drops the tag it would set); throws
 * ConfigError for one Envoy's builder refuses (Istio's config fails then).
 */
export type DimensionCompiler = (expr: string) => DimensionFn | undefined;

export interface MetricOverrides {
  drop: ReadonlySet<MetricName>;
  /** Per metric: standard tag → expression index, or null to remove the tag. */
  replace: ReadonlyMap<MetricName, ReadonlyMap<string, number | null>>;
  /** Per metric: tags added after the standard ones, with their expression index. */
  add: ReadonlyMap<MetricName, ReadonlyArray<readonly [string, number]>>;
  exprs: readonly DimensionFn[];
}

export const NO_OVERRIDES: MetricOverrides = { drop: new Set(), replace: new Map(), add: new Map(), exprs: [] };

const unknownValue: DimensionFn = () => 'unknown';

/** Istio's Config constructor over `metrics`, as data. */
export function compileOverrides(metrics: readonly MetricConfig[], compile: DimensionCompiler | undefined): MetricOverrides {
  if (metrics.length === 0) return NO_OVERRIDES;
  const drop = new Set<MetricName>();
  const replace = new Map<MetricName, Map<string, number | null>>();
  const add = new Map<MetricName, Array<[string, number]>>();
  const exprs: DimensionFn[] = [];
  const ids = new Map<string, number | null>();
  const exprId = (e: string): number | null => {
    let id = ids.get(e);
    if (id !== undefined) return id;
    const fn = compile ? compile(e) : unknownValue;
    if (fn) {
      exprs.push(fn);
      id = exprs.length - 1;
    } else id = null;
    ids.set(e, id);
    return id;
  };
  metrics.forEach((m) => {
    // a name that is no standard metric would be a custom definition's: Istio applies nothing to it either
    if (m.name && !KNOWN.has(m.name)) return;
    const targets: MetricName[] = m.name ? [m.name as MetricName] : [...METRIC_NAMES];
    if (m.drop) {
      if (m.name) drop.add(m.name as MetricName);
      return;
    }
    const rep = (t: MetricName) => replace.get(t) ?? (replace.set(t, new Map()), replace.get(t)!);
    for (const tag of m.tagsToRemove) {
      if (!STANDARD_LABELS.has(tag)) continue;
      for (const t of targets) rep(t).set(tag, null);
    }
    for (const tag of Object.keys(m.dimensions).sort()) {
      const id = exprId(m.dimensions[tag]!);
      if (STANDARD_LABELS.has(tag)) {
        for (const t of targets) rep(t).set(tag, id);
      } else if (id !== null) {
        for (const t of targets) (add.get(t) ?? (add.set(t, []), add.get(t)!)).push([tag, id]);
      }
    }
  });
  return { drop, replace, add, exprs };
}

/** Istio overrideTags: standard labels replaced or removed in place, added ones appended. */
export function overrideLabels(
  o: MetricOverrides,
  metric: MetricName,
  labels: ReadonlyArray<readonly [string, string]>,
  exprValues: readonly string[],
): Array<[string, string]> {
  const rep = o.replace.get(metric);
  const out: Array<[string, string]> = [];
  for (const [k, v] of labels) {
    const r = rep?.get(k);
    if (r === undefined) out.push([k, v]);
    else if (r !== null) out.push([k, exprValues[r]!]);
  }
  for (const [k, id] of o.add.get(metric) ?? []) out.push([k, exprValues[id]!]);
  return out;
}

/** Envoy's flat name of a stat made with tags: `istiocustom.istio_<metric>.<tag>.<value>…`. */
export function flatName(metric: MetricName, labels: ReadonlyArray<readonly [string, string]>): string {
  let s = `${STAT_NAMESPACE}.istio_${metric}`;
  for (const [k, v] of labels) s += `.${k}.${v}`;
  return s;
}

/** Makes the store's stats for one label set; undefined for a dropped metric. */
export class IstioStatsSink {
  constructor(
    private readonly store: StatsStore,
    readonly overrides: MetricOverrides,
  ) {}

  private labelsFor(metric: MetricName, labels: ReadonlyArray<readonly [string, string]>, exprValues: readonly string[]) {
    return this.overrides === NO_OVERRIDES ? (labels as Array<[string, string]>) : overrideLabels(this.overrides, metric, labels, exprValues);
  }

  counter(metric: MetricName, labels: ReadonlyArray<readonly [string, string]>, exprValues: readonly string[] = []): Counter | undefined {
    if (this.overrides.drop.has(metric)) return undefined;
    const l = this.labelsFor(metric, labels, exprValues);
    return this.store.taggedCounter(flatName(metric, l), { name: `istio_${metric}`, tags: l });
  }

  histogram(metric: MetricName, labels: ReadonlyArray<readonly [string, string]>, exprValues: readonly string[] = []): Histogram | undefined {
    if (this.overrides.drop.has(metric)) return undefined;
    const l = this.labelsFor(metric, labels, exprValues);
    return this.store.taggedHistogram(flatName(metric, l), { name: `istio_${metric}`, tags: l }, DEFAULT_BUCKETS);
  }
}
