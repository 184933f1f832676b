// PushContext: an immutable snapshot of configuration and services with the indexes the xDS
// generators need (Istio model.PushContext). Built by initPushContext from the ConfigStore and the
// aggregate registry; every rebuild gets a new `version`, and `pushVersion` only grows. Per-proxy
// derived data (sidecar scopes, merged gateways) is memoised inside the snapshot, which stays valid
// because the snapshot never changes. Given the previous snapshot and what changed since (PushChanges),
// a rebuild re-indexes only what the changed kinds feed and takes the rest from the previous snapshot
// (Istio's PushContext.updateContext, pilot/pkg/model/push_context.go); it then equals a full build.
import type { PathNormalization } from '../config/meshconfig';
import { DEFAULT_MESH_TELEMETRY, type MeshTelemetry } from '../config/mesh-telemetry';
import type { ConfigStore } from '../config/store';
import type { Config, Kind, TrafficPolicy } from '../config/types';
import { hostMatches } from './host';
import { endpointTlsMode, selectorMatches, TLS_MODE_DISABLED } from './labels';
import type { Endpoint, Proxy, Service, ServicePort } from './model';
import { DestinationRuleIndex, type MergedDestinationRule } from './push/destinationrule';
import { explainNoGatewayListeners, mergeGateways, selectGateways, type MergedGateway } from './push/gateway';
import { policiesForWorkload } from './push/policies';
import {
  composePeerAuthentication,
  NamespaceMtlsModes,
  peerAuthenticationsFor,
  type MergedPeerAuthentication,
  type MutualTlsMode,
} from './push/peer-authentication';
import { buildSidecarScope, selectSidecar, withVirtualServices, type SidecarScope } from './push/sidecar-scope';
import { MESH_GATEWAY, resolveVirtualService, type VirtualServiceEntry } from './push/virtualservice';
import { byAge, isExportedTo } from './push/visibility';
import { PushStatus, type PushStatusMetric } from './push-status';
import { usesAutoAllocatedIPs, withAutoAllocatedIPs } from './auto-allocate';
import { defaultXdsCache, type XdsCache, type XdsCacheType } from './push/xds-cache';
import type { ServiceRegistry } from './registry/types';
import { Telemetries } from './telemetry';

export { MESH_GATEWAY };
export type { MergedDestinationRule, MergedGateway, MergedPeerAuthentication, MutualTlsMode, SidecarScope, VirtualServiceEntry };

export interface PushContextOptions {
  /** DNS domain suffix (`--domain`). */
  domain?: string;
  /** Mesh root namespace: its Sidecar, DestinationRules and policies apply mesh-wide. */
  rootNamespace?: string;
  clusterId?: string;
  trustDomain?: string;
  /** PILOT_SCOPE_GATEWAY_TO_NAMESPACE. */
  scopeGatewayToNamespace?: boolean;
  /** PILOT_SEND_UNHEALTHY_ENDPOINTS. */
  sendUnhealthyEndpoints?: boolean;
  /** PILOT_DRAINING_LABEL. */
  drainingLabel?: string;
  /** Mesh connectTimeout in milliseconds (Istio default 10s). */
  connectTimeoutMs?: number;
  /** Mesh outboundTrafficPolicy.mode. */
  outboundTrafficPolicy?: 'ALLOW_ANY' | 'REGISTRY_ONLY';
  /** PILOT_HTTP10. */
  http10?: boolean;
  /** ENABLE_100_CONTINUE_HEADERS. */
  enable100Continue?: boolean;
  /** PILOT_ENABLE_ROUTE_COLLAPSE_OPTIMIZATION. */
  routeCollapse?: boolean;
  /** Mesh DNS refresh rate in milliseconds (Istio default 60s). */
  dnsRefreshRateMs?: number;
  /** PILOT_DNS_JITTER_DURATION in milliseconds. */
  dnsJitterMs?: number;
  /** Mesh proxyListenPort (15001) and proxyInboundListenPort (15006). */
  proxyListenPort?: number;
  proxyInboundListenPort?: number;
  /** Mesh enableAutoMtls (Istio default true). */
  enableAutoMtls?: boolean;
  /** PILOT_ENABLE_METADATA_EXCHANGE: offer/accept the `istio-peer-exchange` ALPN. */
  metadataExchange?: boolean;
  /** PILOT_DISABLE_MX_ALPN. */
  disableMxAlpn?: boolean;
  /** PILOT_ENABLE_ALPN_FILTER: the istio.alpn filter on outbound and gateway HTTP connection managers. */
  alpnFilter?: boolean;
  /**
   * PILOT_ENABLE_IP_AUTOALLOCATE: every DNS-capturing proxy gets ServiceEntries' auto-allocated addresses;
   * off, only those asking with DNS_AUTO_ALLOCATE do (Istio's legacy allocation).
   */
  ipAutoallocate?: boolean;
  /** Mesh pathNormalization.normalization (Istio default BASE). */
  pathNormalization?: PathNormalization;
  /** Mesh accessLog*, enableTracing, defaultConfig.tracing, extensionProviders, defaultProviders. */
  meshTelemetry?: MeshTelemetry;
  /** PILOT_TRACE_SAMPLING: percent of requests traced when nothing else says. */
  traceSampling?: number;
  /** PILOT_ENABLE_TELEMETRY_LABEL and PILOT_ENDPOINT_TELEMETRY_LABEL: istio.workload endpoint metadata. */
  enableTelemetryLabel?: boolean;
  endpointTelemetryLabel?: boolean;
  /** PILOT_SPAWN_UPSTREAM_SPAN_FOR_GATEWAY. */
  spawnUpstreamSpanForGateway?: boolean;
  /** PILOT_MX_ADDITIONAL_LABELS: labels the metadata exchange filters also carry. */
  mxAdditionalLabels?: string[];
}

export type ResolvedPushContextOptions = Required<PushContextOptions>;

export const DEFAULT_PUSH_OPTIONS: ResolvedPushContextOptions = {
  domain: 'cluster.local',
  rootNamespace: 'mesh-system',
  clusterId: 'Orchestrator',
  trustDomain: 'cluster.local',
  scopeGatewayToNamespace: false,
  sendUnhealthyEndpoints: false,
  drainingLabel: 'mesh.io/draining',
  connectTimeoutMs: 10_000,
  outboundTrafficPolicy: 'ALLOW_ANY',
  http10: false,
  enable100Continue: true,
  routeCollapse: true,
  dnsRefreshRateMs: 60_000,
  dnsJitterMs: 100,
  proxyListenPort: 15001,
  proxyInboundListenPort: 15006,
  enableAutoMtls: true,
  metadataExchange: true,
  disableMxAlpn: false,
  alpnFilter: true,
  ipAutoallocate: true,
  pathNormalization: 'BASE',
  meshTelemetry: DEFAULT_MESH_TELEMETRY,
  traceSampling: 1,
  enableTelemetryLabel: true,
  endpointTelemetryLabel: true,
  spawnUpstreamSpanForGateway: false,
  mxAdditionalLabels: [],
};

/** A service port a sidecar's own workload serves (Istio ServiceTarget), for inbound config. */
export interface ServiceTarget {
  service: Service;
  port: ServicePort;
  /** Port the workload listens on. */
  targetPort: number;
}

/** The configuration half of a snapshot, shared between a full rebuild and endpoint-only updates. */
interface ConfigIndex {
  virtualServices: VirtualServiceEntry[];
  vsByGateway: Map<string, VirtualServiceEntry[]>;
  destinationRules: DestinationRuleIndex;
  gateways: Config<'Gateway'>[];
  sidecars: Config<'Sidecar'>[];
  requestAuthentications: Config<'RequestAuthentication'>[];
  authorizationPolicies: Config<'AuthorizationPolicy'>[];
  peerAuthentications: Config<'PeerAuthentication'>[];
  namespaceMtls: NamespaceMtlsModes;
  telemetry: Telemetries;
}

interface ServiceIndex {
  services: Service[];
  byHost: Map<string, Service[]>;
  endpoints: Map<string, Endpoint[]>;
}

let pushVersionCounter = 0;

function nextVersion(): { version: string; pushVersion: number } {
  pushVersionCounter += 1;
  // Istio formats push versions as RFC 3339 time "/" counter.
  return { version: `${new Date().toISOString().replace(/\.\d{3}Z$/, 'Z')}/${pushVersionCounter}`, pushVersion: pushVersionCounter };
}

function endpointsKey(hostname: string, namespace: string): string {
  return `${namespace}/${hostname}`;
}

/** The parts of the configuration index, each rebuilt only when a kind it is built from changed. */
type IndexPart = 'virtualServices' | 'destinationRules' | 'gateways' | 'sidecars' | 'authn' | 'authz' | 'telemetry';

/**
 * What each kind of configuration feeds in a push context (Istio updateContext's switch over ConfigsUpdated):
 * a part of the configuration index; `services` (read through the service registries); or `none` (read
 * elsewhere, live: a change still needs a new snapshot, whose new pushVersion drops cached output). A new
 * kind must be placed here (the Record makes that a type error until it is).
 */
const KIND_FEEDS: Readonly<Record<Kind, IndexPart | 'services' | 'none'>> = {
  VirtualService: 'virtualServices',
  DestinationRule: 'destinationRules',
  Gateway: 'gateways',
  Sidecar: 'sidecars',
  RequestAuthentication: 'authn',
  PeerAuthentication: 'authn',
  AuthorizationPolicy: 'authz',
  Telemetry: 'telemetry',
  ServiceEntry: 'services',
  WorkloadEntry: 'services',
  WorkloadGroup: 'services',
  Service: 'services',
  EndpointSlice: 'services',
  Pod: 'services',
  Namespace: 'services',
  EnvoyFilter: 'none',
  WasmPlugin: 'none',
  ProxyConfig: 'none',
  Secret: 'none',
  // The Gateway API kinds reach the push context translated: GatewayApiConfigStore emits their Gateways and
  // VirtualServices as events of those kinds, which feed their own parts above.
  GatewayClass: 'none',
  KubernetesGateway: 'none',
  HTTPRoute: 'none',
  GRPCRoute: 'none',
  ReferenceGrant: 'none',
  TLSRoute: 'none',
  TCPRoute: 'none',
};

/** What changed since a snapshot was built (Istio's PushRequest.ConfigsUpdated, as updateContext reads it). */
export interface PushChanges {
  /** Kinds of the configurations added, updated or deleted. */
  kinds: ReadonlySet<Kind>;
  /** Services or endpoints of some registry changed (Istio: a ServiceEntry key in ConfigsUpdated). */
  services: boolean;
}

/** The index parts and whether services changed, for a change set. */
function changedParts(changes: PushChanges): { parts: Set<IndexPart>; services: boolean } {
  const parts = new Set<IndexPart>();
  let services = changes.services;
  for (const k of changes.kinds) {
    const feeds = KIND_FEEDS[k];
    if (feeds === 'services') services = true;
    else if (feeds !== 'none') parts.add(feeds);
  }
  return { parts, services };
}

function virtualServiceIndex(store: ConfigStore, opts: ResolvedPushContextOptions): Pick<ConfigIndex, 'virtualServices' | 'vsByGateway'> {
  const virtualServices = store
    .list('VirtualService')
    .slice()
    .sort(byAge)
    .map((c) => resolveVirtualService(c, opts.domain));
  const vsByGateway = new Map<string, VirtualServiceEntry[]>();
  for (const v of virtualServices) {
    for (const g of v.gateways) {
      const list = vsByGateway.get(g) ?? [];
      list.push(v);
      vsByGateway.set(g, list);
    }
  }
  return { virtualServices, vsByGateway };
}

/** The configuration index: from scratch, or from `prev` re-indexing only the `changed` parts. */
function buildConfigIndex(store: ConfigStore, opts: ResolvedPushContextOptions, prev?: ConfigIndex, changed?: ReadonlySet<IndexPart>): ConfigIndex {
  const keep = (part: IndexPart): ConfigIndex | undefined => (prev && changed && !changed.has(part) ? prev : undefined);
  const vs = keep('virtualServices');
  const authn = keep('authn');
  return {
    ...(vs ? { virtualServices: vs.virtualServices, vsByGateway: vs.vsByGateway } : virtualServiceIndex(store, opts)),
    destinationRules:
      keep('destinationRules')?.destinationRules ?? new DestinationRuleIndex(store.list('DestinationRule'), opts.rootNamespace, opts.domain),
    gateways: keep('gateways')?.gateways ?? store.list('Gateway').slice().sort(byAge),
    sidecars: keep('sidecars')?.sidecars ?? store.list('Sidecar').slice().sort(byAge),
    requestAuthentications: authn?.requestAuthentications ?? store.list('RequestAuthentication').slice(),
    authorizationPolicies: keep('authz')?.authorizationPolicies ?? store.list('AuthorizationPolicy').slice(),
    peerAuthentications: authn?.peerAuthentications ?? store.list('PeerAuthentication').slice(),
    namespaceMtls: authn?.namespaceMtls ?? new NamespaceMtlsModes(store.list('PeerAuthentication'), opts.rootNamespace),
    telemetry: keep('telemetry')?.telemetry ?? new Telemetries(store.list('Telemetry'), opts.meshTelemetry, opts.rootNamespace),
  };
}

function buildServiceIndex(registry: ServiceRegistry, previous?: ServiceIndex, changedHosts?: ReadonlySet<string>): ServiceIndex {
  // ServiceEntries without addresses get auto-allocated ones (oldest first decides collisions).
  const services = withAutoAllocatedIPs([...registry.services()]);
  const byHost = new Map<string, Service[]>();
  for (const s of services) {
    const list = byHost.get(s.hostname) ?? [];
    list.push(s);
    byHost.set(s.hostname, list);
  }
  const endpoints = new Map<string, Endpoint[]>();
  for (const s of services) {
    const k = endpointsKey(s.hostname, s.namespace);
    const reuse = previous && changedHosts && !changedHosts.has(s.hostname) ? previous.endpoints.get(k) : undefined;
    endpoints.set(k, reuse ?? [...registry.endpoints(s.hostname, s.namespace)]);
  }
  return { services, byHost, endpoints };
}

/** Memos a snapshot may take over from the one before it when nothing they are derived from changed. */
interface InheritedMemos {
  scopes?: Map<string, SidecarScope>;
  /** The previous snapshot's scopes, when only VirtualServices changed them: re-scoped, not rebuilt. */
  rescopeFrom?: ReadonlyMap<string, SidecarScope>;
  gateways?: Map<string, MergedGateway>;
  selectedSidecars?: WeakMap<Proxy, Config<'Sidecar'> | null>;
}

export class PushContext {
  readonly version: string;
  readonly pushVersion: number;
  readonly options: ResolvedPushContextOptions;
  private readonly scopes: Map<string, SidecarScope>;
  private readonly rescopeFrom: ReadonlyMap<string, SidecarScope> | undefined;
  private readonly gatewayCache: Map<string, MergedGateway>;
  private readonly sharedKeys = new WeakMap<Proxy, string>();
  private labelKeysUsed: readonly string[] | undefined;
  private endpointsByAddress: Map<string, Array<{ service: Service; endpoint: Endpoint }>> | undefined;
  private readonly targets = new WeakMap<Proxy, ServiceTarget[]>();
  private readonly selectedSidecars: WeakMap<Proxy, Config<'Sidecar'> | null>;
  /** Istio ProxyStatus: what generating this snapshot's configuration found wrong (the push-status gauges). */
  readonly status: PushStatus;

  private constructor(
    private readonly cfg: ConfigIndex,
    private readonly svc: ServiceIndex,
    options: ResolvedPushContextOptions,
    /** Where generated xDS is reused: between proxies of this snapshot and across snapshots. */
    readonly cache: XdsCache,
    status?: PushStatus,
    memos: InheritedMemos = {},
  ) {
    this.scopes = memos.scopes ?? new Map();
    this.rescopeFrom = memos.rescopeFrom;
    this.gatewayCache = memos.gateways ?? new Map();
    this.selectedSidecars = memos.selectedSidecars ?? new WeakMap();
    const v = nextVersion();
    this.version = v.version;
    this.pushVersion = v.pushVersion;
    this.options = options;
    this.status = status ?? new PushStatus();
    if (!status) {
      for (const r of cfg.destinationRules.all()) {
        for (const s of r.duplicateSubsets) {
          this.status.add('dupSubsets', r.host, '', `Duplicate subset ${s} found while merging destination rules for ${r.host}`);
        }
      }
    }
  }

  /** The Telemetry resources and the mesh's telemetry config, resolved per proxy (Istio PushContext.Telemetry). */
  get telemetry(): Telemetries {
    return this.cfg.telemetry;
  }

  /** Istio PushContext.AddMetric. */
  addMetric(metric: PushStatusMetric, key: string, proxyId = '', message = ''): void {
    this.status.add(metric, key, proxyId, message);
  }

  /** A full snapshot. */
  static build(store: ConfigStore, registry: ServiceRegistry, opts: PushContextOptions = {}, cache: XdsCache = defaultXdsCache): PushContext {
    const o = { ...DEFAULT_PUSH_OPTIONS, ...opts };
    const cfg = buildConfigIndex(store, o);
    cfg.telemetry.reportUnknownProviders();
    return new PushContext(cfg, buildServiceIndex(registry), o, cache);
  }

  /**
   * The snapshot after `changes` (Istio updateContext): the indexes no changed kind feeds are taken from `prev`
   * as they are, and so are its sidecar scopes, merged gateways and Sidecar selections when nothing they are
   * derived from changed (Istio copies its sidecarIndex likewise). Same options and cache as `prev`; a change
   * of options needs a full build.
   */
  static update(prev: PushContext, store: ConfigStore, registry: ServiceRegistry, changes: PushChanges): PushContext {
    const { parts, services } = changedParts(changes);
    const cfg = buildConfigIndex(store, prev.options, prev.cfg, parts);
    if (cfg.telemetry !== prev.cfg.telemetry) cfg.telemetry.reportUnknownProviders();
    const svc = services ? buildServiceIndex(registry) : prev.svc;
    const sidecars = parts.has('sidecars');
    // a scope is built from the services, the Sidecar and the mesh-bound VirtualServices (sidecar-scope.ts)
    const scopes = services || sidecars ? {} : parts.has('virtualServices') ? { rescopeFrom: prev.scopes } : { scopes: prev.scopes };
    const memos: InheritedMemos = {
      ...scopes,
      ...(parts.has('gateways') ? {} : { gateways: prev.gatewayCache }),
      ...(sidecars ? {} : { selectedSidecars: prev.selectedSidecars }),
    };
    return new PushContext(cfg, svc, prev.options, prev.cache, undefined, memos);
  }

  /**
   * A new snapshot that re-reads services and endpoints from the registry (only the endpoints of
   * `hostnames` when given) and keeps this snapshot's configuration indexes: for registry-only changes.
   */
  withRegistryUpdates(registry: ServiceRegistry, hostnames?: ReadonlySet<string>): PushContext {
    // Istio keeps the push context (and its status) across endpoint-only pushes.
    return new PushContext(this.cfg, buildServiceIndex(registry, this.svc, hostnames), this.options, this.cache, this.status);
  }

  // ---------------------------------------------------------------------------------------------
  // output shared between proxies

  /**
   * What a proxy's outbound configuration (outbound clusters, listeners and routes, endpoints) depends on
   * besides this snapshot: proxy kind, namespace, proxyless-ness, the Sidecar that scopes it, and only those
   * of its labels some selector looks at (VirtualService sourceLabels, DestinationRule workloadSelector).
   * Proxies with equal keys get equal outbound output, so it is built and serialised once per key and push
   * (Istio's xDS cache keys by the same inputs). Inbound output depends on the proxy's own addresses and is
   * never shared. Routers key on all labels: gateway selection looks at them.
   */
  sharedKey(proxy: Proxy): string {
    let k = this.sharedKeys.get(proxy);
    if (k !== undefined) return k;
    const scope = this.sidecarOf(proxy);
    const keys = proxy.type === 'router' ? Object.keys(proxy.labels).sort() : this.selectorLabelKeys();
    const labels = keys
      .filter((l) => proxy.labels[l] !== undefined)
      .map((l) => `${l}=${proxy.labels[l]}`)
      .join(',');
    // the interception mode shapes the virtual listeners (TPROXY makes them transparent)
    // and whether it is given auto-allocated ServiceEntry addresses (NDS answers, TCP listener addresses)
    const auto = usesAutoAllocatedIPs(proxy, this.options.ipAutoallocate) ? 'auto' : '';
    // HTTP10 metadata "1" makes its HCMs accept HTTP/1.0 (Istio enableHTTP10)
    const http10 = proxy.metadata.raw['HTTP10'] === '1' ? 'http10' : '';
    // and what the proxy lacks of Istio's Envoy build changes what it is sent (capabilities.ts)
    // and the Telemetry resources that apply to it (workload-selected ones change its filters and logs)
    const telemetry = this.cfg.telemetry.keyOf(proxy);
    k = `${telemetry}|${proxy.type}|${proxy.namespace}|${proxy.proxyless ? 'grpc' : 'envoy'}|${proxy.capabilities?.key ?? ''}|${proxy.metadata.interceptionMode ?? ''}|${auto}|${http10}|${scope ? `${scope.meta.namespace}/${scope.meta.name}` : ''}|${labels}`;
    this.sharedKeys.set(proxy, k);
    return k;
  }

  /**
   * Output of this snapshot for a key (usually holding sharedKey(proxy)): built once and shared by every
   * proxy asking with the same key, through the xDS cache (so PILOT_ENABLE_XDS_CACHE and the per-type
   * switches decide whether it is shared at all). The value is never mutated by callers.
   */
  shared<T>(type: XdsCacheType, key: string, build: () => T): T {
    return this.cache.forPush(type, this.pushVersion, key, build);
  }

  private selectorLabelKeys(): readonly string[] {
    if (!this.labelKeysUsed) {
      const keys = new Set<string>();
      for (const v of this.cfg.virtualServices)
        for (const h of v.spec.http ?? []) for (const m of h.match ?? []) for (const l of Object.keys(m.sourceLabels ?? {})) keys.add(l);
      for (const v of this.cfg.virtualServices)
        for (const t of [...(v.spec.tcp ?? []), ...(v.spec.tls ?? [])])
          for (const m of t.match ?? []) for (const l of Object.keys(m.sourceLabels ?? {})) keys.add(l);
      for (const r of this.cfg.destinationRules.all()) for (const l of Object.keys(r.workloadSelector ?? {})) keys.add(l);
      this.labelKeysUsed = [...keys].sort();
    }
    return this.labelKeysUsed;
  }

  // ---------------------------------------------------------------------------------------------
  // services and endpoints

  /** Every service of every registry (debug output, metrics). */
  allServices(): readonly Service[] {
    return this.svc.services;
  }

  /** Services exported to a namespace (ignoring Sidecar scoping). */
  servicesExportedTo(namespace: string): Service[] {
    return this.svc.services.filter((s) => isExportedTo(s.exportTo, s.namespace, namespace));
  }

  /** The services a proxy may see: its Sidecar scope for sidecars, exportTo only for routers. */
  servicesForProxy(proxy: Proxy): readonly Service[] {
    return this.sidecarScope(proxy).services;
  }

  /**
   * The service for a hostname as a proxy sees it (Istio ServiceForHostname): from its scope, else
   * any exported to its namespace (the proxy's own namespace first, then the oldest).
   */
  serviceForHostname(proxy: Proxy, hostname: string): Service | undefined {
    const scoped = this.sidecarScope(proxy).servicesByHost.get(hostname);
    if (scoped) return scoped;
    const list = (this.svc.byHost.get(hostname) ?? []).filter((s) => isExportedTo(s.exportTo, s.namespace, proxy.namespace));
    return list.find((s) => s.namespace === proxy.namespace) ?? list[0];
  }

  /** Services by hostname in every namespace. */
  servicesByHostname(hostname: string): readonly Service[] {
    return this.svc.byHost.get(hostname) ?? [];
  }

  /** Endpoints of a service port, optionally only those carrying every label of a subset. */
  endpoints(service: Service, port: ServicePort, subsetLabels?: Readonly<Record<string, string>>): Endpoint[] {
    const all = this.svc.endpoints.get(endpointsKey(service.hostname, service.namespace)) ?? [];
    return all.filter((e) => endpointServesPort(e, port, service) && (!subsetLabels || selectorMatches(subsetLabels, e.labels)));
  }

  /** Every endpoint of a service (all ports). */
  allEndpoints(service: Service): readonly Endpoint[] {
    return this.svc.endpoints.get(endpointsKey(service.hostname, service.namespace)) ?? [];
  }

  /** Service ports whose endpoints are this proxy's own workload (matched by IP), for inbound config. */
  serviceTargets(proxy: Proxy): ServiceTarget[] {
    const memo = this.targets.get(proxy);
    if (memo) return memo;
    // Endpoints by address, in service order, built once per snapshot: every sidecar asks, per type.
    if (!this.endpointsByAddress) {
      this.endpointsByAddress = new Map();
      for (const s of this.svc.services) {
        for (const e of this.allEndpoints(s)) {
          const list = this.endpointsByAddress.get(e.address);
          if (list) list.push({ service: s, endpoint: e });
          else this.endpointsByAddress.set(e.address, [{ service: s, endpoint: e }]);
        }
      }
    }
    const mine = proxy.ipAddresses.flatMap((ip) => this.endpointsByAddress!.get(ip) ?? []);
    if (proxy.ipAddresses.length > 1) {
      const order = new Map(this.svc.services.map((s, i) => [s, i]));
      mine.sort((a, b) => order.get(a.service)! - order.get(b.service)!);
    }
    const out: ServiceTarget[] = [];
    const seen = new Set<string>();
    {
      for (const { service: s, endpoint: e } of mine) {
        const port = s.ports.find((p) => endpointServesPort(e, p, s));
        if (!port) continue;
        const k = `${s.namespace}/${s.hostname}/${port.port}`;
        if (seen.has(k)) continue;
        seen.add(k);
        // Istio's endpoint-slice serviceTargets report a proxy whose own endpoint is not ready
        if (e.healthStatus === 'UnHealthy') this.addMetric('endpointNotReady', proxy.id, proxy.id);
        out.push({ service: s, port, targetPort: e.port });
      }
    }
    // a sidecar no service's endpoints name (normal for client-only workloads, else a stale endpoint table)
    if (out.length === 0 && proxy.type === 'sidecar') this.addMetric('noIp', proxy.id, proxy.id);
    this.targets.set(proxy, out);
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // VirtualServices

  /** All VirtualServices, oldest first, hosts resolved. */
  virtualServices(): readonly VirtualServiceEntry[] {
    return this.cfg.virtualServices;
  }

  /**
   * VirtualServices bound to a gateway (`namespace/name`, or `mesh`) that are exported to the proxy's
   * namespace (Istio VirtualServicesForGateway).
   */
  virtualServicesForGateway(proxyNamespace: string, gateway: string): VirtualServiceEntry[] {
    return (this.cfg.vsByGateway.get(gateway) ?? []).filter((v) => isExportedTo(v.exportTo, v.namespace, proxyNamespace));
  }

  // ---------------------------------------------------------------------------------------------
  // DestinationRules

  /** The merged DestinationRule that applies to traffic from this proxy to `hostname`. */
  destinationRule(proxy: Proxy, hostname: string, service?: Service): MergedDestinationRule | undefined {
    const svc = service ?? this.serviceForHostname(proxy, hostname);
    return this.cfg.destinationRules.lookup(hostname, proxy.namespace, proxy.labels, svc?.namespace);
  }

  /** Subset labels of `subset` of the DestinationRule for `hostname`; undefined when unknown. */
  subsetLabels(proxy: Proxy, hostname: string, subset: string): Readonly<Record<string, string>> | undefined {
    const s = this.destinationRule(proxy, hostname)?.subsets.find((x) => x.name === subset);
    return s ? (s.labels ?? {}) : undefined;
  }

  allDestinationRules(): MergedDestinationRule[] {
    return this.cfg.destinationRules.all();
  }

  // ---------------------------------------------------------------------------------------------
  // Gateways and Sidecars

  gateways(): readonly Config<'Gateway'>[] {
    return this.cfg.gateways;
  }

  /** Gateways selected by a router proxy's labels, merged by port (memoised per namespace+labels). */
  mergedGateway(proxy: Proxy): MergedGateway {
    const key = `${proxy.namespace}|${labelsKey(proxy.labels)}`;
    let g = this.gatewayCache.get(key);
    if (!g) {
      g = mergeGateways(selectGateways(this.cfg.gateways, proxy.namespace, proxy.labels, this.options.scopeGatewayToNamespace));
      this.gatewayCache.set(key, g);
    }
    return g;
  }

  /** Why a router proxy gets no listener (see explainNoGatewayListeners). */
  explainNoGatewayListeners(proxy: Proxy): string {
    return explainNoGatewayListeners(this.cfg.gateways, proxy, this.options.scopeGatewayToNamespace);
  }

  /** The Sidecar resource selecting a sidecar proxy, chosen once per proxy and snapshot (memo null: none). */
  private sidecarOf(proxy: Proxy): Config<'Sidecar'> | undefined {
    if (proxy.type !== 'sidecar') return undefined;
    let s = this.selectedSidecars.get(proxy);
    if (s === undefined)
      this.selectedSidecars.set(proxy, (s = selectSidecar(this.cfg.sidecars, proxy.namespace, proxy.labels, this.options.rootNamespace) ?? null));
    return s ?? undefined;
  }

  /** The proxy's Sidecar scope (memoised per namespace and selected Sidecar). */
  sidecarScope(proxy: Proxy): SidecarScope {
    const sidecar = this.sidecarOf(proxy);
    const key = `${proxy.namespace}|${sidecar ? `${sidecar.meta.namespace}/${sidecar.meta.name}` : ''}`;
    let s = this.scopes.get(key);
    if (!s) {
      const meshVs = this.cfg.vsByGateway.get(MESH_GATEWAY) ?? [];
      const before = this.rescopeFrom?.get(key);
      s = before
        ? withVirtualServices(before, meshVs)
        : buildSidecarScope(proxy.namespace, sidecar, this.svc.services, meshVs, this.options.outboundTrafficPolicy);
      this.scopes.set(key, s);
    }
    return s;
  }

  // ---------------------------------------------------------------------------------------------
  // security policies (selection only; translation into filters belongs to the security builders)

  requestAuthentications(proxy: Proxy): Config<'RequestAuthentication'>[] {
    return policiesForWorkload(this.cfg.requestAuthentications, this.options.rootNamespace, proxy.namespace, proxy.labels);
  }

  authorizationPolicies(proxy: Proxy): Config<'AuthorizationPolicy'>[] {
    return policiesForWorkload(this.cfg.authorizationPolicies, this.options.rootNamespace, proxy.namespace, proxy.labels);
  }

  /** The proxy's own effective PeerAuthentication (Istio ComposePeerAuthentication), for its inbound chains. */
  mergedPeerAuthentication(proxy: Proxy): MergedPeerAuthentication {
    return composePeerAuthentication(
      this.options.rootNamespace,
      peerAuthenticationsFor(this.cfg.peerAuthentications, this.options.rootNamespace, proxy.namespace, proxy.labels),
    );
  }

  /** The selector-less PeerAuthentication mode of a namespace as clients see it (Istio GetNamespaceMutualTLSMode). */
  namespaceMutualTlsMode(namespace: string): MutualTlsMode {
    return this.cfg.namespaceMtls.forNamespace(namespace);
  }

  /**
   * Istio BestEffortInferServiceMTLSMode: the mode a client assumes for a service port when deciding auto
   * mTLS. External services: unknown. Passthrough (headless or a PASSTHROUGH balancer): disabled unless
   * every endpoint has a sidecar. Otherwise the namespace's (or mesh's) mode, PERMISSIVE when none.
   */
  inferServiceMtlsMode(tp: TrafficPolicy | undefined, service: Service, port: ServicePort): MutualTlsMode {
    if (service.meshExternal) return 'UNKNOWN';
    if (service.resolution === 'Passthrough' || tp?.loadBalancer?.simple === 'PASSTHROUGH') {
      const eps = this.endpoints(service, port);
      if (eps.length === 0 || eps.some((e) => endpointTlsMode(e.labels) === TLS_MODE_DISABLED)) return 'DISABLE';
    }
    const m = this.namespaceMutualTlsMode(service.namespace);
    return m === 'UNKNOWN' ? 'PERMISSIVE' : m;
  }

  /** Counts for pilot_services / pilot_virt_services. */
  stats(): { services: number; virtualServices: number; destinationRules: number; gateways: number } {
    return {
      services: this.svc.services.length,
      virtualServices: this.cfg.virtualServices.length,
      destinationRules: this.cfg.destinationRules.all().length,
      gateways: this.cfg.gateways.length,
    };
  }
}

/** An endpoint serves a service port when it names that port, or the service has a single port. */
export function endpointServesPort(e: Endpoint, port: ServicePort, service: Service): boolean {
  if (e.servicePortName === port.name) return true;
  return e.servicePortName === '' && service.ports.length === 1;
}

function labelsKey(labels: Readonly<Record<string, string>>): string {
  return Object.keys(labels)
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join(',');
}

/**
 * Istio's initPushContext: a full snapshot from the config store and the aggregate registry, or, given the
 * previous snapshot and what changed since, one updated from it (PushContext.update; `opts` and `cache` are
 * then the previous snapshot's).
 */
export function initPushContext(
  store: ConfigStore,
  registry: ServiceRegistry,
  opts: PushContextOptions = {},
  cache?: XdsCache,
  from?: { prev: PushContext; changes: PushChanges },
): PushContext {
  return from ? PushContext.update(from.prev, store, registry, from.changes) : PushContext.build(store, registry, opts, cache);
}

/** Which hostnames a VirtualService touches (its hosts and destinations), for scoped pushes. */
export function virtualServiceHostnames(v: VirtualServiceEntry): Set<string> {
  const out = new Set(v.hosts);
  for (const r of v.spec.http ?? []) for (const d of r.route ?? []) out.add(d.destination.host);
  for (const r of v.spec.tcp ?? []) for (const d of r.route ?? []) out.add(d.destination.host);
  for (const r of v.spec.tls ?? []) for (const d of r.route ?? []) out.add(d.destination.host);
  return out;
}

export { hostMatches };
