// The metric tables of the spec (doc 1 §4.5, doc 2 §4.6) against a program's /metrics: every name the
// spec lists is either exported with the Prometheus type of its spec type and the labels Istio gives it,
// or named in the test's list of behaviours mesh does not have (with the reason).
import { section, specDoc, tableRows } from './spec';

export type SpecMetricType = 'Sum' | 'LastValue' | 'Distribution';

export interface SpecMetric {
  name: string;
  type: SpecMetricType;
}

/** Rows of the `| Metric | Type | Meaning |` table of a section; `a, b, c` rows name several metrics. */
export function specMetrics(doc: 1 | 2, heading: string): SpecMetric[] {
  const out: SpecMetric[] = [];
  for (const [names, type] of tableRows(section(specDoc(doc), heading), 'Metric')) {
    if (type !== 'Sum' && type !== 'LastValue' && type !== 'Distribution') throw new Error(`unknown metric type ${type} for ${names}`);
    for (const name of names!.split(',').map((n) => n.trim())) out.push({ name, type });
  }
  return out;
}

/** Istio's OpenTelemetry instruments as Prometheus exposes them. */
const PROM_TYPE: Record<SpecMetricType, string> = { Sum: 'counter', LastValue: 'gauge', Distribution: 'histogram' };

export interface Exposition {
  types: Map<string, string>;
  /** Samples by metric family: label sets (without `le`) and values. */
  samples: Map<string, Array<{ series: string; labels: Record<string, string>; value: number }>>;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const samples: Exposition['samples'] = new Map();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) {
      types.set(t[1]!, t[2]!);
      continue;
    }
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!m) continue;
    let family = m[1]!;
    for (const suffix of ['_bucket', '_sum', '_count']) {
      if (family.endsWith(suffix) && types.get(family.slice(0, -suffix.length)) === 'histogram') family = family.slice(0, -suffix.length);
    }
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) if (l[1] !== 'le') labels[l[1]!] = l[2]!;
    const list = samples.get(family) ?? [];
    list.push({ series: m[1]!, labels, value: Number(m[3]) });
    samples.set(family, list);
  }
  return { types, samples };
}

/**
 * Problems of `exp` against the spec: a spec name neither exported nor listed as absent, a wrong type, a
 * sample whose label names differ from Istio's (`labels[name]`, default none), an absent-listed name
 * that is exported after all, or an absent entry the spec does not list.
 */
export function checkSpecMetrics(
  exp: Exposition,
  spec: readonly SpecMetric[],
  labels: Readonly<Record<string, readonly string[]>>,
  absent: Readonly<Record<string, string>>,
): string[] {
  const problems: string[] = [];
  for (const { name, type } of spec) {
    const got = exp.types.get(name);
    if (absent[name] !== undefined) {
      if (got) problems.push(`${name}: listed as absent (${absent[name]}) but exported`);
      continue;
    }
    if (!got) {
      problems.push(`${name}: not exported`);
      continue;
    }
    if (got !== PROM_TYPE[type]) problems.push(`${name}: type ${got}, spec ${type} (${PROM_TYPE[type]})`);
    const want = [...(labels[name] ?? [])].sort().join(',');
    for (const s of exp.samples.get(name) ?? []) {
      const have = Object.keys(s.labels).sort().join(',');
      if (have !== want) problems.push(`${name}: labels {${have}}, Istio's {${want}}`);
    }
  }
  for (const name of Object.keys(absent)) if (!spec.some((s) => s.name === name)) problems.push(`${name}: listed as absent but not in the spec`);
  return [...new Set(problems)];
}

/** The sum of the samples of `name` whose labels include `labels` (for a histogram: its observation count). */
export function sampleSum(exp: Exposition, name: string, labels: Record<string, string> = {}): number {
  const series = exp.types.get(name) === 'histogram' ? `${name}_count` : name;
  return (exp.samples.get(name) ?? [])
    .filter((s) => s.series === series && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}
