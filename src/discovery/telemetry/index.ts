// The Telemetry resources of a snapshot and the mesh's telemetry config, resolved per proxy and listener
// class (Istio 1.26 pilot/pkg/model/telemetry.go Telemetries: getTelemetries, applicableTelemetries,
// AccessLogging, Tracing, telemetryFilters). Which Telemetries apply: the oldest selector-less one of the root
// namespace, then that of the proxy's namespace, then every one of the proxy's namespace whose selector or
// Gateway targetRef picks the proxy, oldest first; later ones override earlier ones (merge.ts). Results are
// memoised per set of applicable Telemetries, as Istio caches them. Provider names that the mesh config does
// not define are reported once per change of the set (Istio only logs them at debug level).
import type { ExtensionProvider, MeshTelemetry } from '../../config/mesh-telemetry';
import type { Config, TelemetrySpec } from '../../config/types';
import { registerScope } from '../../lib/log';
import { selectorMatches } from '../labels';
import { byAge } from '../push/visibility';
import {
  type LoggingSpec,
  mergeLogs,
  mergeMetrics,
  mergeTracing,
  type MetricsForMode,
  type ProviderMetrics,
  type TracingConfig,
  type WorkloadMode,
} from './merge';

export * from './merge';

const log = registerScope('telemetry');

/** Where a filter sits (Istio ListenerClass). */
export type TelemetryClass = 'gateway' | 'sidecarOutbound' | 'sidecarInbound';

/** What resolution reads of a proxy. */
export interface TelemetryProxy {
  namespace: string;
  labels: Readonly<Record<string, string>>;
  type: 'sidecar' | 'router';
}

/** What tracing tags read of a proxy beyond TelemetryProxy (model.Proxy has it). */
export interface KeyedProxy {
  metadata: { clusterId?: string; namespace?: string; raw: Readonly<Record<string, unknown>> };
  serviceCluster?: string;
}

/** workloadMode: gateways and sidecar outbound report as clients, sidecar inbound as server. */
export const modeOf = (cls: TelemetryClass): WorkloadMode => (cls === 'sidecarInbound' ? 'SERVER' : 'CLIENT');

/** The stats filter a prometheus provider gets on one class of listener (undefined: none). */
export interface StatsConfig {
  provider: string;
  metrics: MetricsForMode;
  reportingInterval?: string;
}

export interface AccessLogConfig {
  provider: ExtensionProvider;
  disabled: boolean;
  filter?: string;
}

export interface ResolvedTracing extends TracingConfig {
  /** The providers the specs name, resolved. */
  providers: ReadonlyMap<string, ExtensionProvider>;
}

interface Applicable {
  key: string;
  metrics: NonNullable<TelemetrySpec['metrics']>;
  logging: NonNullable<TelemetrySpec['accessLogging']>[];
  tracing: NonNullable<TelemetrySpec['tracing']>;
}

const GATEWAY_NAME_LABEL = 'gateway.networking.k8s.io/gateway-name';

function isNamespaceWide(s: TelemetrySpec): boolean {
  return Object.keys(s.selector?.matchLabels ?? {}).length === 0 && targetRefs(s).length === 0;
}

function targetRefs(s: TelemetrySpec): NonNullable<TelemetrySpec['targetRefs']> {
  return s.targetRefs?.length ? s.targetRefs : s.targetRef ? [s.targetRef] : [];
}

/** ShouldAttachPolicy for sidecars and gateways: a selector on labels, or a targetRef to the proxy's Gateway. */
function attaches(c: Config<'Telemetry'>, proxy: TelemetryProxy): boolean {
  const refs = targetRefs(c.spec);
  if (refs.length > 0) {
    const gw = proxy.labels[GATEWAY_NAME_LABEL];
    return refs.some((r) => r.kind === 'Gateway' && (r.group ?? 'gateway.networking.k8s.io') === 'gateway.networking.k8s.io' && r.name === gw);
  }
  return selectorMatches(c.spec.selector?.matchLabels, proxy.labels);
}

let lastReported = '';

export class Telemetries {
  private readonly byNamespace = new Map<string, Config<'Telemetry'>[]>();
  private readonly memo = new Map<string, unknown>();
  /** applicable() per proxy object: every HCM and TCP chain of a proxy asks. */
  private readonly perProxy = new WeakMap<TelemetryProxy, Applicable>();

  constructor(
    telemetries: readonly Config<'Telemetry'>[],
    readonly mesh: MeshTelemetry,
    readonly rootNamespace: string,
  ) {
    for (const c of [...telemetries].sort(byAge)) {
      const list = this.byNamespace.get(c.meta.namespace) ?? [];
      list.push(c);
      this.byNamespace.set(c.meta.namespace, list);
    }
  }

  /** fetchProvider: case-insensitive, the first of the name. */
  provider(name: string): ExtensionProvider | undefined {
    const n = name.toLowerCase();
    return this.mesh.extensionProviders.find((p) => p.name.toLowerCase() === n);
  }

  /** Provider names Telemetries or defaultProviders use that the mesh config does not define, with where. */
  unknownProviders(): string[] {
    const out: string[] = [];
    const check = (names: readonly { name: string }[] | undefined, where: string) => {
      for (const p of names ?? [])
        if (!this.provider(p.name)) out.push(`${where}: provider ${JSON.stringify(p.name)} is not in meshConfig.extensionProviders`);
    };
    for (const [kind, list] of Object.entries(this.mesh.defaultProviders))
      check(
        list.map((name) => ({ name })),
        `meshConfig.defaultProviders.${kind}`,
      );
    for (const list of this.byNamespace.values())
      for (const c of list) {
        const at = `Telemetry ${c.meta.namespace}/${c.meta.name}`;
        (c.spec.metrics ?? []).forEach((m, i) => check(m.providers, `${at} metrics[${i}]`));
        (c.spec.accessLogging ?? []).forEach((m, i) => check(m.providers, `${at} accessLogging[${i}]`));
        (c.spec.tracing ?? []).forEach((m, i) => check(m.providers, `${at} tracing[${i}]`));
      }
    return out;
  }

  /** Logs the unknown providers when they differ from the last report (the configs keep serving without them). */
  reportUnknownProviders(): void {
    const problems = this.unknownProviders();
    const text = problems.join('\n');
    if (text === lastReported) return;
    lastReported = text;
    for (const p of problems) log.warn(`${p}; ignored until it is defined`);
  }

  private namespaceWide(ns: string): Config<'Telemetry'> | undefined {
    return this.byNamespace.get(ns)?.find((c) => isNamespaceWide(c.spec));
  }

  /** applicableTelemetries. */
  private applicable(proxy: TelemetryProxy): Applicable {
    const known = this.perProxy.get(proxy);
    if (known) return known;
    const a: Applicable = { key: '', metrics: [], logging: [], tracing: [] };
    const keys: string[] = [];
    const add = (c: Config<'Telemetry'>) => {
      // the stored version too: the inbound listener is cached across pushes by this key, an edited spec must miss
      keys.push(`${c.meta.namespace}/${c.meta.name}@${c.meta.resourceVersion ?? ''}`);
      a.metrics.push(...(c.spec.metrics ?? []));
      if (c.spec.accessLogging?.length) a.logging.push(c.spec.accessLogging);
      a.tracing.push(...(c.spec.tracing ?? []));
    };
    const root = this.rootNamespace ? this.namespaceWide(this.rootNamespace) : undefined;
    if (root) add(root);
    const ns = proxy.namespace !== this.rootNamespace ? this.namespaceWide(proxy.namespace) : undefined;
    if (ns) add(ns);
    for (const c of this.byNamespace.get(proxy.namespace) ?? []) if (!isNamespaceWide(c.spec) && attaches(c, proxy)) add(c);
    a.key = keys.join(',');
    this.perProxy.set(proxy, a);
    return a;
  }

  private memoised<T>(key: string, build: () => T): T {
    if (this.memo.has(key)) return this.memo.get(key) as T;
    const v = build();
    this.memo.set(key, v);
    return v;
  }

  /**
   * A key of everything telemetry output depends on for this proxy (for output shared between proxies): the
   * Telemetries in scope and, when its HCMs are traced, what the tracing tags and tracer read of the proxy
   * (canonical service labels, cluster and mesh IDs; the node's cluster for an OpenTelemetry tracer).
   */
  keyOf(proxy: TelemetryProxy & KeyedProxy): string {
    const key = this.applicable(proxy).key;
    const t = this.tracing(proxy);
    if (!t && !this.mesh.enableTracing) return key;
    const l = proxy.labels;
    const tags = [
      l['service.mesh.io/canonical-name'] ?? l['service.istio.io/canonical-name'] ?? '',
      l['service.mesh.io/canonical-revision'] ?? l['service.istio.io/canonical-revision'] ?? '',
      proxy.metadata.clusterId ?? '',
      String(proxy.metadata.raw['MESH_ID'] ?? ''),
    ];
    const otel = [...(t?.providers.values() ?? [])].some((p) => p.kind === 'opentelemetry');
    // the proxy's own ProxyConfig tracing (sampling, tags) when its agent sent one
    const pc = proxy.metadata.raw['PROXY_CONFIG'];
    const own = pc !== null && typeof pc === 'object' ? JSON.stringify((pc as Record<string, unknown>)['tracing'] ?? null) : '';
    return `${key}|${tags.join('/')}|${own}${otel ? `|${proxy.serviceCluster ?? ''}` : ''}`;
  }

  /** The stats filters (prometheus providers with metrics on this class), by provider name. */
  stats(proxy: TelemetryProxy, cls: TelemetryClass): StatsConfig[] {
    const a = this.applicable(proxy);
    return this.memoised(`stats|${a.key}|${cls}`, () => {
      const merged: Map<string, ProviderMetrics> = mergeMetrics(a.metrics, this.mesh.defaultProviders.metrics);
      const out: StatsConfig[] = [];
      for (const name of [...merged.keys()].sort()) {
        const p = this.provider(name);
        if (p?.kind !== 'prometheus') continue;
        const pm = merged.get(name)!;
        const metrics = cls === 'sidecarInbound' ? pm.server : pm.client;
        if (metrics.disabled) continue;
        out.push({ provider: p.name, metrics, ...(pm.reportingInterval ? { reportingInterval: pm.reportingInterval } : {}) });
      }
      return out;
    });
  }

  /**
   * AccessLogging: undefined when neither a Telemetry nor defaultProviders configure access logging (the
   * mesh's accessLogFile applies then); otherwise the access-log providers, disabled ones included, by name.
   */
  accessLogs(proxy: TelemetryProxy, cls: TelemetryClass): AccessLogConfig[] | undefined {
    const a = this.applicable(proxy);
    if (a.logging.length === 0 && this.mesh.defaultProviders.accessLogging.length === 0) return undefined;
    return this.memoised(`logs|${a.key}|${modeOf(cls)}`, () => {
      const merged: Map<string, LoggingSpec> = mergeLogs(a.logging, this.mesh.defaultProviders.accessLogging, modeOf(cls));
      const out: AccessLogConfig[] = [];
      for (const [name, spec] of merged) {
        const p = this.provider(name);
        if (p?.kind !== 'envoyFileAccessLog' && p?.kind !== 'envoyOtelAls') continue;
        out.push({ provider: p, disabled: spec.disabled, ...(spec.filter !== undefined ? { filter: spec.filter } : {}) });
      }
      return out.sort((x, y) => (x.provider.name < y.provider.name ? -1 : x.provider.name > y.provider.name ? 1 : 0));
    });
  }

  /** Tracing: undefined falls back to meshConfig.enableTracing. */
  tracing(proxy: TelemetryProxy): ResolvedTracing | undefined {
    const a = this.applicable(proxy);
    return this.memoised(`tracing|${a.key}`, () => {
      const t = mergeTracing(a.tracing, this.mesh.defaultProviders.tracing, (n) => this.provider(n) !== undefined);
      if (!t) return undefined;
      const providers = new Map<string, ExtensionProvider>();
      for (const s of [t.client, t.server]) if (s.provider) providers.set(s.provider, this.provider(s.provider)!);
      return { ...t, providers };
    });
  }
}
