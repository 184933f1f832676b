// How the Telemetry resources in scope of a proxy combine, per provider and workload mode: Istio 1.26
// pilot/pkg/model/telemetry.go mergeMetrics, mergeLogs and Tracing, ported rule for rule (including their
// quirks: a later `providers` list replaces the earlier one rather than adding to it; disabling ALL_METRICS
// drops the provider's filter for that mode until a later override names a metric again; tracing fields are
// replaced shallowly, custom tags as a whole). Pure: inputs are the specs in override order (root namespace,
// namespace, workload) and the mesh's default providers; provider lookup is the caller's.
import type { CustomTag } from '../../config/mesh-telemetry';
import type { TelemetrySpec } from '../../config/types';

export type WorkloadMode = 'CLIENT' | 'SERVER';

type MetricsSpec = NonNullable<TelemetrySpec['metrics']>[number];
type TracingSpecIn = NonNullable<TelemetrySpec['tracing']>[number];
type AccessLoggingSpec = NonNullable<TelemetrySpec['accessLogging']>[number];

export interface TagOverride {
  name: string;
  remove: boolean;
  value: string;
}

export interface MetricOverride {
  /** Istio metric enum name (REQUEST_COUNT…) or a custom metric name. */
  name: string;
  disabled: boolean;
  tags: TagOverride[];
}

export interface MetricsForMode {
  /** No stats filter for this mode. */
  disabled: boolean;
  overrides: MetricOverride[];
}

export interface ProviderMetrics {
  client: MetricsForMode;
  server: MetricsForMode;
  /** reportingInterval of the last Metrics entry that set one, as written ("15s"). */
  reportingInterval?: string;
}

/** Istio's MetricSelector.IstioMetric values but ALL_METRICS, sorted (allMetrics). */
export const ALL_METRICS: readonly string[] = [
  'GRPC_REQUEST_MESSAGES',
  'GRPC_RESPONSE_MESSAGES',
  'REQUEST_COUNT',
  'REQUEST_DURATION',
  'REQUEST_SIZE',
  'RESPONSE_SIZE',
  'TCP_CLOSED_CONNECTIONS',
  'TCP_OPENED_CONNECTIONS',
  'TCP_RECEIVED_BYTES',
  'TCP_SENT_BYTES',
];

const names = (providers: readonly { name: string }[] | undefined): string[] => (providers ?? []).map((p) => p.name);

/** getModes: CLIENT or SERVER alone, anything else (unset, CLIENT_AND_SERVER) both. */
function modesOf(mode: string | undefined): WorkloadMode[] {
  return mode === 'CLIENT' || mode === 'SERVER' ? [mode] : ['CLIENT', 'SERVER'];
}

type Match = { metric?: string; customMetric?: string; mode?: string } | undefined;

function isAllMetrics(m: Match): boolean {
  if (m?.customMetric) return false;
  if (m?.metric) return m.metric === 'ALL_METRICS';
  return true;
}

function matches(m: Match): readonly string[] {
  if (m?.customMetric) return [m.customMetric];
  if (m?.metric && m.metric !== 'ALL_METRICS') return [m.metric];
  return ALL_METRICS;
}

interface Acc {
  disabled?: boolean;
  tags?: Map<string, { operation?: string; value?: string }>;
}

/** mergeMetrics: provider name → client/server metric config. */
export function mergeMetrics(metrics: readonly MetricsSpec[], defaults: readonly string[]): Map<string, ProviderMetrics> {
  const providers = new Map<string, Map<WorkloadMode, Map<string, Acc>>>();
  if (metrics.length === 0) for (const d of defaults) providers.set(d, new Map());
  let scoped = [...defaults];
  for (const m of metrics) if (names(m.providers).length > 0) scoped = names(m.providers);
  const inScope = new Set(scoped);
  let parent = [...defaults];
  const disabledAll = new Set<string>();
  const intervals = new Map<string, string>();
  for (const m of metrics) {
    const ps = names(m.providers).length > 0 ? names(m.providers) : parent;
    parent = ps;
    for (const p of ps) {
      if (!inScope.has(p)) continue;
      if (m.reportingInterval) intervals.set(p, m.reportingInterval);
      if (!providers.has(p))
        providers.set(
          p,
          new Map([
            ['CLIENT', new Map()],
            ['SERVER', new Map()],
          ]),
        );
      const mp = providers.get(p)!;
      for (const o of m.overrides ?? []) {
        if (isAllMetrics(o.match) && o.disabled === true) {
          for (const mode of modesOf(o.match?.mode)) disabledAll.add(`${p}/${mode}`);
          continue;
        }
        for (const mode of modesOf(o.match?.mode)) {
          disabledAll.delete(`${p}/${mode}`);
          if (!mp.has(mode)) mp.set(mode, new Map());
          for (const metric of matches(o.match)) {
            const acc = mp.get(mode)!.get(metric) ?? {};
            if (o.disabled !== undefined) acc.disabled = o.disabled;
            for (const [k, v] of Object.entries(o.tagOverrides ?? {})) (acc.tags ??= new Map()).set(k, v);
            mp.get(mode)!.set(metric, acc);
          }
        }
      }
    }
  }
  const out = new Map<string, ProviderMetrics>();
  for (const [p, modes] of providers) {
    const pm: ProviderMetrics = { client: { disabled: false, overrides: [] }, server: { disabled: false, overrides: [] } };
    const interval = intervals.get(p);
    if (interval) pm.reportingInterval = interval;
    for (const [mode, metricMap] of modes) {
      const target = mode === 'CLIENT' ? pm.client : pm.server;
      if (disabledAll.has(`${p}/${mode}`)) {
        target.disabled = true;
        continue;
      }
      for (const [metric, acc] of metricMap) {
        const tags = [...(acc.tags ?? new Map<string, { operation?: string; value?: string }>())].map(([name, t]) =>
          // UPSERT is the default operation
          t.operation === 'REMOVE' ? { name, remove: true, value: '' } : { name, remove: false, value: t.value ?? '' },
        );
        tags.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        target.overrides.push({ name: metric, disabled: acc.disabled === true, tags });
      }
    }
    const byName = (a: MetricOverride, b: MetricOverride) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    pm.client.overrides.sort(byName);
    pm.server.overrides.sort(byName);
    out.set(p, pm);
  }
  return out;
}

export interface LoggingSpec {
  disabled: boolean;
  /** CEL expression deciding whether to log. */
  filter?: string;
}

function matchMode(match: { mode?: string } | undefined, mode: WorkloadMode): boolean {
  if (!match || match.mode === undefined || match.mode === 'CLIENT_AND_SERVER') return true;
  return match.mode === mode;
}

/**
 * mergeLogs: provider name → whether it logs and with which filter. `levels` holds the accessLogging lists
 * of the root namespace, namespace and workload Telemetries that have one, in that order.
 */
export function mergeLogs(
  levels: readonly (readonly AccessLoggingSpec[])[],
  defaults: readonly string[],
  mode: WorkloadMode,
): Map<string, LoggingSpec> {
  const providers = new Map<string, LoggingSpec>();
  if (levels.length === 0) {
    for (const d of defaults) providers.set(d, { disabled: false });
    return providers;
  }
  let scoped = [...defaults];
  const filters = new Map<string, LoggingSpec>();
  for (const level of levels) {
    const found = new Set<string>();
    for (const l of level) {
      if (!matchMode(l.match, mode)) continue;
      for (const p of names(l.providers)) {
        found.add(p);
        filters.set(p, { disabled: false, ...(l.filter ? { filter: l.filter.expression ?? '' } : {}) });
      }
    }
    if (found.size > 0) scoped = [...found];
  }
  const inScope = new Set(scoped);
  let parent = [...defaults];
  for (const level of levels) {
    for (const l of level) {
      const ps = names(l.providers).length > 0 ? names(l.providers) : parent;
      parent = ps;
      for (const p of ps) {
        if (!inScope.has(p) || !matchMode(l.match, mode)) continue;
        providers.set(p, l.disabled === true ? { disabled: true } : (filters.get(p) ?? { disabled: false }));
      }
    }
  }
  return providers;
}

export interface TracingSpec {
  /** Provider name; undefined: none configured. */
  provider?: string;
  disabled: boolean;
  randomSamplingPercentage?: number;
  customTags?: Record<string, CustomTag>;
  useRequestIdForTraceSampling: boolean;
  enableIstioTags: boolean;
}

export interface TracingConfig {
  client: TracingSpec;
  server: TracingSpec;
}

/**
 * Tracing: undefined when no Telemetry in scope has tracing and the mesh names no default tracing provider
 * (the caller falls back to meshConfig.enableTracing). Only the first provider of a list counts; a spec
 * left without a provider is disabled. `known` says whether a provider name exists in the mesh config
 * (an unknown one leaves the spec without a provider, as Istio's failed lookup does).
 */
export function mergeTracing(
  tracing: readonly TracingSpecIn[],
  defaults: readonly string[],
  known: (name: string) => boolean,
): TracingConfig | undefined {
  if (tracing.length === 0 && defaults.length === 0) return undefined;
  const fresh = (): TracingSpec => ({ disabled: false, useRequestIdForTraceSampling: true, enableIstioTags: true });
  const client = fresh();
  const server = fresh();
  const lookup = (n: string) => (known(n) ? n : undefined);
  if (defaults.length > 0) client.provider = server.provider = lookup(defaults[0]!);
  for (const t of tracing) {
    const specs = t.match?.mode === 'CLIENT' ? [client] : t.match?.mode === 'SERVER' ? [server] : [client, server];
    const ps = names(t.providers);
    for (const s of specs) {
      if (ps.length > 0) s.provider = lookup(ps[0]!);
      if (t.disableSpanReporting !== undefined) s.disabled = t.disableSpanReporting;
      if (t.customTags !== undefined) s.customTags = t.customTags as Record<string, CustomTag>;
      if (t.randomSamplingPercentage !== undefined) s.randomSamplingPercentage = t.randomSamplingPercentage;
      if (t.useRequestIdForTraceSampling !== undefined) s.useRequestIdForTraceSampling = t.useRequestIdForTraceSampling;
      if (t.enableIstioTags !== undefined) s.enableIstioTags = t.enableIstioTags;
    }
  }
  if (client.provider === undefined) client.disabled = true;
  if (server.provider === undefined) server.disabled = true;
  return { client, server };
}
