// Outbound and inbound clusters as Istio's ClusterBuilder makes them (pilot/pkg/networking/core
// cluster.go, cluster_builder.go, cluster_traffic_policy.go): discovery type from the service's
// resolution, DestinationRule traffic policy (port-level and subset overrides) → load balancer,
// circuit breakers, outlier detection, upstream TLS and HTTP protocol options.
import { supports } from '../../discovery/capabilities';
import { create } from '@bufbuild/protobuf';
import type { JsonObject } from '@bufbuild/protobuf';
import type { ConnectionPoolSettings, LoadBalancerSettings, OutlierDetection, TrafficPolicy } from '../../config/types';
import type { MergedDestinationRule, PushContext } from '../../discovery/push-context';
import type { Proxy, Service, ServicePort } from '../../discovery/model';
import { isHttp2 } from '../../discovery/registry/protocol';
import {
  Cluster_DiscoveryType,
  Cluster_DnsLookupFamily,
  Cluster_LbPolicy,
  Cluster_CommonLbConfigSchema,
  Cluster_EdsClusterConfigSchema,
  Cluster_MaglevLbConfigSchema,
  Cluster_RingHashLbConfigSchema,
  ClusterSchema,
  UpstreamConnectionOptionsSchema,
  type Cluster,
} from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { CircuitBreakers_ThresholdsSchema, CircuitBreakersSchema } from '../../gen/envoy/config/cluster/v3/circuit_breaker_pb';
import { OutlierDetectionSchema } from '../../gen/envoy/config/cluster/v3/outlier_detection_pb';
import { PercentSchema } from '../../gen/envoy/type/v3/percent_pb';
import { MetadataSchema } from '../../gen/envoy/config/core/v3/base_pb';
import { FilterSchema as ClusterFilterSchema } from '../../gen/envoy/config/cluster/v3/filter_pb';
import { metadataExchangeClusterFilters } from './telemetry-filters';
import { UpstreamHttpProtocolOptionsSchema } from '../../gen/envoy/config/core/v3/protocol_pb';
import { anyPack, anyUnpack } from '@bufbuild/protobuf/wkt';
import { HttpProtocolOptionsSchema } from '../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb';
import {
  adsConfigSource,
  BLACKHOLE_CLUSTER,
  buildSubsetKey,
  durationMs,
  goDuration,
  goDurationMs,
  INBOUND_PASSTHROUGH_CLUSTER,
  pack,
  PASSTHROUGH_CLUSTER,
  WK,
} from './common';
import { clusterLoadAssignment } from './endpoints';
import {
  alpnInsteadOfFilter,
  autoMtlsTransportSocketMatches,
  buildUpstreamTlsContext,
  buildUpstreamTlsSettings,
  tlsTransportSocket,
  type UpstreamHttp,
} from './tls';
import { registerScope } from '../../lib/log';

const log = registerScope('default');

const MAX_UINT32 = 4294967295;
/** Source address Istio binds inbound connections to, so iptables lets them through to the app. */
export const INBOUND_PASSTHROUGH_BIND_IPV4 = '127.0.0.6';

type PolicyFields = Omit<TrafficPolicy, 'portLevelSettings'>;

/**
 * Istio MergeTrafficPolicy: a subset's policy overrides the rule's field by field, then the
 * port-level settings for this port (the subset's if it has any for the port, else the rule's).
 */
export function mergeTrafficPolicy(base: TrafficPolicy | undefined, subset: TrafficPolicy | undefined, port: number): PolicyFields {
  const out: PolicyFields = {};
  const apply = (p: PolicyFields | undefined) => {
    if (!p) return;
    if (p.loadBalancer) out.loadBalancer = p.loadBalancer;
    if (p.connectionPool) out.connectionPool = p.connectionPool;
    if (p.outlierDetection) out.outlierDetection = p.outlierDetection;
    if (p.tls) out.tls = p.tls;
  };
  apply(base);
  apply(subset);
  const pls = subset?.portLevelSettings?.find((s) => s.port?.number === port) ?? base?.portLevelSettings?.find((s) => s.port?.number === port);
  apply(pls);
  return out;
}

function defaultThresholds() {
  return {
    maxConnections: MAX_UINT32,
    maxPendingRequests: MAX_UINT32,
    maxRequests: MAX_UINT32,
    maxRetries: MAX_UINT32,
    trackRemaining: true,
  };
}

export function applyLoadBalancer(c: Cluster, lb: LoadBalancerSettings | undefined): void {
  if (c.clusterDiscoveryType.case === 'type' && c.clusterDiscoveryType.value === Cluster_DiscoveryType.ORIGINAL_DST) {
    c.lbPolicy = Cluster_LbPolicy.CLUSTER_PROVIDED;
    return;
  }
  const ch = lb?.consistentHash;
  if (ch) {
    if (ch.maglev) {
      c.lbPolicy = Cluster_LbPolicy.MAGLEV;
      c.lbConfig = {
        case: 'maglevLbConfig',
        value: create(Cluster_MaglevLbConfigSchema, ch.maglev.tableSize ? { tableSize: BigInt(ch.maglev.tableSize) } : {}),
      };
    } else {
      c.lbPolicy = Cluster_LbPolicy.RING_HASH;
      const min = ch.ringHash?.minimumRingSize ?? ch.minimumRingSize;
      c.lbConfig = {
        case: 'ringHashLbConfig',
        value: create(Cluster_RingHashLbConfigSchema, { minimumRingSize: BigInt(min && min > 0 ? min : 1024) }),
      };
    }
    return;
  }
  switch (lb?.simple) {
    case 'ROUND_ROBIN':
      c.lbPolicy = Cluster_LbPolicy.ROUND_ROBIN;
      break;
    case 'RANDOM':
      c.lbPolicy = Cluster_LbPolicy.RANDOM;
      break;
    case 'PASSTHROUGH':
      c.lbPolicy = Cluster_LbPolicy.CLUSTER_PROVIDED;
      c.clusterDiscoveryType = { case: 'type', value: Cluster_DiscoveryType.ORIGINAL_DST };
      c.edsClusterConfig = undefined;
      c.loadAssignment = undefined;
      break;
    default:
      // LEAST_REQUEST, LEAST_CONN and unset: Istio's default balancer is LEAST_REQUEST
      c.lbPolicy = Cluster_LbPolicy.LEAST_REQUEST;
  }
}

export function applyConnectionPool(c: Cluster, cp: ConnectionPoolSettings | undefined): void {
  const t: ReturnType<typeof defaultThresholds> = defaultThresholds();
  if (cp?.tcp?.maxConnections) t.maxConnections = cp.tcp.maxConnections;
  if (cp?.http?.http1MaxPendingRequests) t.maxPendingRequests = cp.http.http1MaxPendingRequests;
  if (cp?.http?.http2MaxRequests) t.maxRequests = cp.http.http2MaxRequests;
  if (cp?.http?.maxRetries) t.maxRetries = cp.http.maxRetries;
  c.circuitBreakers = create(CircuitBreakersSchema, { thresholds: [create(CircuitBreakers_ThresholdsSchema, t)] });
  const ct = goDuration(cp?.tcp?.connectTimeout);
  if (ct) c.connectTimeout = ct;
  const ka = cp?.tcp?.tcpKeepalive;
  if (ka) {
    c.upstreamConnectionOptions = create(UpstreamConnectionOptionsSchema, {
      tcpKeepalive: {
        ...(ka.probes ? { keepaliveProbes: ka.probes } : {}),
        ...(goDurationMs(ka.time) ? { keepaliveTime: Math.floor(goDurationMs(ka.time)! / 1000) } : {}),
        ...(goDurationMs(ka.interval) ? { keepaliveInterval: Math.floor(goDurationMs(ka.interval)! / 1000) } : {}),
      },
    });
  }
}

export function applyOutlierDetection(c: Cluster, od: OutlierDetection | undefined): void {
  if (!od) return;
  const out: Record<string, unknown> = { enforcingSuccessRate: 0 };
  if (od.consecutive5xxErrors !== undefined) {
    out.consecutive5xx = od.consecutive5xxErrors;
    out.enforcingConsecutive5xx = od.consecutive5xxErrors > 0 ? 100 : 0;
  }
  const gw = od.consecutiveGatewayErrors ?? (od.consecutiveErrors && od.consecutiveErrors > 0 ? od.consecutiveErrors : undefined);
  if (gw !== undefined) {
    out.consecutiveGatewayFailure = gw;
    out.enforcingConsecutiveGatewayFailure = gw > 0 ? 100 : 0;
  }
  const interval = goDuration(od.interval);
  if (interval) out.interval = interval;
  const bet = goDuration(od.baseEjectionTime);
  if (bet) out.baseEjectionTime = bet;
  if (od.maxEjectionPercent && od.maxEjectionPercent > 0) out.maxEjectionPercent = od.maxEjectionPercent;
  if (od.splitExternalLocalOriginErrors) {
    out.splitExternalLocalOriginErrors = true;
    if (od.consecutiveLocalOriginFailures && od.consecutiveLocalOriginFailures > 0) {
      out.consecutiveLocalOriginFailure = od.consecutiveLocalOriginFailures;
      out.enforcingConsecutiveLocalOriginFailure = 100;
    }
    out.enforcingLocalOriginSuccessRate = 0;
  }
  c.outlierDetection = create(OutlierDetectionSchema, out);
  if (od.minHealthPercent !== undefined && od.minHealthPercent >= 0) {
    c.commonLbConfig ??= create(Cluster_CommonLbConfigSchema, {});
    c.commonLbConfig.healthyPanicThreshold = create(PercentSchema, { value: od.minHealthPercent });
  }
}

/** Upstream HTTP protocol options: HTTP/2 for gRPC/HTTP2 ports (or h2UpgradePolicy UPGRADE), downstream protocol for sniffed ports. */
export function applyHttpProtocolOptions(c: Cluster, port: ServicePort | undefined, cp: ConnectionPoolSettings | undefined, gateway: boolean): void {
  const h = cp?.http;
  const common: Record<string, unknown> = {};
  const idle = goDuration(h?.idleTimeout);
  if (idle) common.idleTimeout = idle;
  if (h?.maxRequestsPerConnection) common.maxRequestsPerConnection = h.maxRequestsPerConnection;
  const mcd = goDuration(cp?.tcp?.maxConnectionDuration);
  if (mcd) common.maxConnectionDuration = mcd;
  const h2Opts = h?.maxConcurrentStreams ? { maxConcurrentStreams: h.maxConcurrentStreams } : {};
  let upstream: unknown;
  const proto = port?.protocol;
  if (h?.useClientProtocol || (proto === 'UnsupportedProtocol' && !gateway)) {
    upstream = { case: 'useDownstreamProtocolConfig', value: { httpProtocolOptions: {}, http2ProtocolOptions: h2Opts } };
  } else if ((proto && isHttp2(proto)) || (proto === 'HTTP' && h?.h2UpgradePolicy === 'UPGRADE')) {
    upstream = { case: 'explicitHttpConfig', value: { protocolConfig: { case: 'http2ProtocolOptions', value: h2Opts } } };
  }
  if (!upstream && Object.keys(common).length === 0) return;
  c.typedExtensionProtocolOptions[WK.httpProtocolOptions] = pack(HttpProtocolOptionsSchema, {
    ...(Object.keys(common).length > 0 ? { commonHttpProtocolOptions: common } : {}),
    ...(upstream ? { upstreamProtocolOptions: upstream } : {}),
  } as Parameters<typeof pack<typeof HttpProtocolOptionsSchema>>[1]);
}

function serviceMetadata(
  service: Service,
  port: number,
  subset: string,
  dr: MergedDestinationRule | undefined,
  tlsMode?: string,
  telemetryLabel = true,
): JsonObject {
  const istio: JsonObject = {
    // Istio addTelemetryMetadata: the service the stats filter labels destination_service* with (PILOT_ENABLE_TELEMETRY_LABEL)
    ...(telemetryLabel ? { services: [{ host: service.hostname, name: service.name ?? service.hostname, namespace: service.namespace }] } : {}),
    default_original_port: port,
  };
  if (subset) istio.subset = subset;
  const from = dr?.from[0];
  if (from) istio.config = `/apis/${from.apiVersion}/namespaces/${from.meta.namespace}/destination-rule/${from.meta.name}`;
  // Istio AddALPNOverrideToMetadata: TLS the application originates keeps its own ALPN.
  if (from && (tlsMode === 'SIMPLE' || tlsMode === 'MUTUAL')) istio.alpn_override = 'false';
  return istio;
}

export interface ClusterBuildContext {
  push: PushContext;
  proxy: Proxy;
  /** True for router proxies (gateways): no downstream-protocol clusters. */
  gateway: boolean;
}

function discoveryCluster(
  name: string,
  service: Service,
  ctx: ClusterBuildContext,
  subsetLabels: Readonly<Record<string, string>> | undefined,
  port: ServicePort,
): Cluster {
  const o = ctx.push.options;
  const c = create(ClusterSchema, { name, connectTimeout: durationMs(o.connectTimeoutMs) });
  // Istio convertResolution: a router cannot use an original-destination cluster, so a headless Service's
  // (Passthrough) cluster on a gateway is EDS over its endpoints, as a ClientSide one
  const resolution = service.resolution === 'Passthrough' && ctx.gateway ? 'ClientSide' : service.resolution;
  switch (resolution) {
    case 'ClientSide':
      c.clusterDiscoveryType = { case: 'type', value: Cluster_DiscoveryType.EDS };
      c.edsClusterConfig = create(Cluster_EdsClusterConfigSchema, { edsConfig: adsConfigSource(), serviceName: name });
      break;
    case 'DNS':
    case 'DNSRoundRobin': {
      c.clusterDiscoveryType = {
        case: 'type',
        value: service.resolution === 'DNS' ? Cluster_DiscoveryType.STRICT_DNS : Cluster_DiscoveryType.LOGICAL_DNS,
      };
      c.dnsLookupFamily = Cluster_DnsLookupFamily.V4_ONLY;
      c.respectDnsTtl = true;
      c.dnsRefreshRate = durationMs(o.dnsRefreshRateMs);
      let eps = ctx.push.endpoints(service, port, subsetLabels);
      if (service.resolution === 'DNSRoundRobin') eps = eps.slice(0, 1);
      c.loadAssignment = clusterLoadAssignment(name, eps, {
        sendUnhealthy: o.sendUnhealthyEndpoints,
        drainingLabel: o.drainingLabel,
        requireIp: false,
      });
      if (c.loadAssignment.endpoints.length === 0) {
        const type = service.resolution === 'DNS' ? 'STRICT_DNS' : 'LOGICAL_DNS';
        ctx.push.addMetric('dnsNoEndpoints', name, ctx.proxy.id, `${type} cluster without endpoints ${name} found while pushing CDS`);
      }
      break;
    }
    case 'Passthrough':
      c.clusterDiscoveryType = { case: 'type', value: Cluster_DiscoveryType.ORIGINAL_DST };
      break;
  }
  return c;
}

function applyPolicy(
  c: Cluster,
  service: Service,
  port: ServicePort,
  subset: string,
  policy: PolicyFields,
  ctx: ClusterBuildContext,
  dr: MergedDestinationRule | undefined,
  subsetPolicy?: TrafficPolicy,
): void {
  applyConnectionPool(c, policy.connectionPool);
  applyOutlierDetection(c, policy.outlierDetection);
  applyLoadBalancer(c, policy.loadBalancer);
  applyHttpProtocolOptions(c, port, policy.connectionPool, ctx.gateway);
  if (ctx.push.options.sendUnhealthyEndpoints) {
    // PILOT_SEND_UNHEALTHY_ENDPOINTS also turns the panic threshold off
    c.commonLbConfig ??= create(Cluster_CommonLbConfigSchema, {});
    c.commonLbConfig.healthyPanicThreshold = create(PercentSchema, { value: 0 });
  }
  applyUpstreamTls(c, service, port, subset, policy, ctx, dr, subsetPolicy);
}

/**
 * Istio buildUpstreamTLSSettings + applyUpstreamTLSSettings: the rule's TLS, or ISTIO_MUTUAL by auto mTLS.
 * Auto mTLS becomes transport socket matches, so endpoints without a sidecar (no tlsMode metadata) still get
 * plaintext — except on ORIGINAL_DST clusters, which have no endpoint metadata to match on.
 */
function applyUpstreamTls(
  c: Cluster,
  service: Service,
  port: ServicePort,
  subset: string,
  policy: PolicyFields,
  ctx: ClusterBuildContext,
  dr: MergedDestinationRule | undefined,
  subsetPolicy?: TrafficPolicy,
): void {
  const o = ctx.push.options;
  // A subset's own traffic policy decides passthrough for it; the default cluster looks at the rule's.
  const serviceMode = ctx.push.inferServiceMtlsMode(subset ? subsetPolicy : dr?.trafficPolicy, service, port);
  const sni = `outbound_.${port.port}_.${subset}_.${service.hostname}`;
  const { tls, ctx: mtlsCtx } = buildUpstreamTlsSettings(
    policy.tls,
    service.serviceAccounts,
    sni,
    o.enableAutoMtls,
    service.meshExternal,
    serviceMode,
  );
  let built;
  try {
    built = buildUpstreamTlsContext(tls, {
      clusterName: c.name,
      http2: clusterIsHttp2(c),
      sidecar: !ctx.gateway,
      drWithSelector: !!dr?.workloadSelector,
      externalRegistry: service.registry === 'External',
      serviceAccounts: service.serviceAccounts,
      // as on inbound chains (lds.ts): no istio-peer-exchange offered by a proxy that cannot speak it
      metadataExchange: o.metadataExchange && supports(ctx.proxy.capabilities, 'metadataExchange'),
      disableMxAlpn: o.disableMxAlpn,
      alpnInsteadOfFilter: o.alpnFilter ? alpnInsteadOfFilter(ctx.proxy.capabilities, upstreamHttp(c, port)) : undefined,
    });
  } catch (e) {
    log.error(`failed to build Upstream TLSContext: ${(e as Error).message}`);
    return;
  }
  if (!built) return;
  const socket = tlsTransportSocket(built.context);
  const originalDst = c.clusterDiscoveryType.case === 'type' && c.clusterDiscoveryType.value === Cluster_DiscoveryType.ORIGINAL_DST;
  if (mtlsCtx === 'autoDetected' && !originalDst) c.transportSocketMatches = autoMtlsTransportSocketMatches(socket);
  else c.transportSocket = socket;
  if (built.autoSni || built.autoSanValidation) setAutoSni(c, built.autoSni, built.autoSanValidation);
}

/** The HTTP version a cluster speaks upstream when its port fixes it; undefined for TCP and the downstream's protocol. */
function upstreamHttp(c: Cluster, port: ServicePort): UpstreamHttp | undefined {
  if (clusterIsHttp2(c)) return 'h2';
  const any = c.typedExtensionProtocolOptions[WK.httpProtocolOptions];
  const h = any && anyUnpack(any, HttpProtocolOptionsSchema);
  if (h?.upstreamProtocolOptions.case === 'useDownstreamProtocolConfig') return undefined;
  return port.protocol === 'HTTP' ? 'http/1.1' : undefined;
}

/** Istio isHttp2Cluster: the cluster's upstream protocol is HTTP/2 (explicitly). */
function clusterIsHttp2(c: Cluster): boolean {
  const any = c.typedExtensionProtocolOptions[WK.httpProtocolOptions];
  if (!any) return false;
  const h = anyUnpack(any, HttpProtocolOptionsSchema);
  return h?.upstreamProtocolOptions.case === 'explicitHttpConfig' && h.upstreamProtocolOptions.value.protocolConfig.case === 'http2ProtocolOptions';
}

/** Istio setAutoSniAndAutoSanValidation: SNI and SAN checks from the request's host. */
function setAutoSni(c: Cluster, autoSni: boolean, autoSanValidation: boolean): void {
  const any = c.typedExtensionProtocolOptions[WK.httpProtocolOptions];
  const h = (any && anyUnpack(any, HttpProtocolOptionsSchema)) || create(HttpProtocolOptionsSchema, {});
  h.upstreamHttpProtocolOptions ??= create(UpstreamHttpProtocolOptionsSchema, {});
  if (autoSni) h.upstreamHttpProtocolOptions.autoSni = true;
  if (autoSanValidation) h.upstreamHttpProtocolOptions.autoSanValidation = true;
  c.typedExtensionProtocolOptions[WK.httpProtocolOptions] = anyPack(HttpProtocolOptionsSchema, h);
}

/** Istio applyMetadataExchange: outbound and passthrough clusters of Envoy proxies (not proxyless gRPC). */
function clusterMx(ctx: ClusterBuildContext): Cluster['filters'] {
  return ctx.proxy.proxyless ? [] : metadataExchangeClusterFilters(ctx.proxy, ctx.push).map((f) => create(ClusterFilterSchema, f));
}

/**
 * The default cluster `outbound|<port>||<host>` and one per DestinationRule subset, for one port
 * of a service. `only` limits the result to the named clusters (gRPC asks for them by name).
 */
export function buildOutboundClusters(service: Service, port: ServicePort, ctx: ClusterBuildContext, only?: ReadonlySet<string>): Cluster[] {
  if (port.protocol === 'UDP') return [];
  const dr = ctx.push.destinationRule(ctx.proxy, service.hostname, service);
  const out: Cluster[] = [];
  const defaultName = buildSubsetKey('outbound', '', service.hostname, port.port);
  const basePolicy = mergeTrafficPolicy(dr?.trafficPolicy, undefined, port.port);
  if (!only || only.has(defaultName)) {
    const c = discoveryCluster(defaultName, service, ctx, undefined, port);
    applyPolicy(c, service, port, '', basePolicy, ctx, dr);
    c.metadata = create(MetadataSchema, {
      filterMetadata: { istio: serviceMetadata(service, port.port, '', dr, basePolicy.tls?.mode, ctx.push.options.enableTelemetryLabel) },
    });
    c.filters = clusterMx(ctx);
    out.push(c);
  }
  for (const subset of dr?.subsets ?? []) {
    const name = buildSubsetKey('outbound', subset.name, service.hostname, port.port);
    if (only && !only.has(name)) continue;
    const c = discoveryCluster(name, service, ctx, subset.labels ?? {}, port);
    const policy = mergeTrafficPolicy(dr!.trafficPolicy, subset.trafficPolicy, port.port);
    applyPolicy(c, service, port, subset.name, policy, ctx, dr, subset.trafficPolicy);
    c.metadata = create(MetadataSchema, {
      filterMetadata: { istio: serviceMetadata(service, port.port, subset.name, dr, policy.tls?.mode, ctx.push.options.enableTelemetryLabel) },
    });
    c.filters = clusterMx(ctx);
    out.push(c);
  }
  return out;
}

/** `inbound|<targetPort>||`: original-destination cluster bound to 127.0.0.6 (Istio 1.26 inbound). */
export function buildInboundCluster(service: Service, port: ServicePort, targetPort: number, ctx: ClusterBuildContext): Cluster {
  const c = create(ClusterSchema, {
    name: buildSubsetKey('inbound', '', '', targetPort),
    clusterDiscoveryType: { case: 'type', value: Cluster_DiscoveryType.ORIGINAL_DST },
    lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
    connectTimeout: durationMs(ctx.push.options.connectTimeoutMs),
    upstreamBindConfig: {
      sourceAddress: { address: INBOUND_PASSTHROUGH_BIND_IPV4, portSpecifier: { case: 'portValue', value: 0 } },
    },
    circuitBreakers: { thresholds: [defaultThresholds()] },
    commonLbConfig: {},
    metadata: { filterMetadata: { istio: serviceMetadata(service, port.port, '', undefined, undefined, ctx.push.options.enableTelemetryLabel) } },
  });
  applyHttpProtocolOptions(c, port, undefined, false);
  return c;
}

export function buildBlackHoleCluster(ctx: ClusterBuildContext): Cluster {
  return create(ClusterSchema, {
    name: BLACKHOLE_CLUSTER,
    clusterDiscoveryType: { case: 'type', value: Cluster_DiscoveryType.STATIC },
    connectTimeout: durationMs(ctx.push.options.connectTimeoutMs),
  });
}

export function buildPassthroughCluster(ctx: ClusterBuildContext): Cluster {
  const c = create(ClusterSchema, {
    name: PASSTHROUGH_CLUSTER,
    clusterDiscoveryType: { case: 'type', value: Cluster_DiscoveryType.ORIGINAL_DST },
    lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
    connectTimeout: durationMs(ctx.push.options.connectTimeoutMs),
    circuitBreakers: { thresholds: [defaultThresholds()] },
  });
  c.typedExtensionProtocolOptions[WK.httpProtocolOptions] = pack(HttpProtocolOptionsSchema, {
    upstreamProtocolOptions: { case: 'useDownstreamProtocolConfig', value: { httpProtocolOptions: {}, http2ProtocolOptions: {} } },
  });
  c.filters = clusterMx(ctx);
  return c;
}

export function buildInboundPassthroughCluster(ctx: ClusterBuildContext): Cluster {
  const c = create(ClusterSchema, {
    name: INBOUND_PASSTHROUGH_CLUSTER,
    clusterDiscoveryType: { case: 'type', value: Cluster_DiscoveryType.ORIGINAL_DST },
    lbPolicy: Cluster_LbPolicy.CLUSTER_PROVIDED,
    connectTimeout: durationMs(ctx.push.options.connectTimeoutMs),
    upstreamBindConfig: {
      sourceAddress: { address: INBOUND_PASSTHROUGH_BIND_IPV4, portSpecifier: { case: 'portValue', value: 0 } },
    },
    circuitBreakers: { thresholds: [defaultThresholds()] },
  });
  c.typedExtensionProtocolOptions[WK.httpProtocolOptions] = pack(HttpProtocolOptionsSchema, {
    upstreamProtocolOptions: { case: 'useDownstreamProtocolConfig', value: { httpProtocolOptions: {}, http2ProtocolOptions: {} } },
  });
  return c;
}
