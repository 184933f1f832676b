// HTTP connection managers, HTTP filters, listener filters and TCP proxies as Istio builds them
// (listener_builder.go buildHTTPConnectionManager, gateway.go buildGatewayConnectionManager).
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { PathNormalization } from '../../config/meshconfig';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { AccessLog } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import type { ListenerFilter } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { ListenerFilterSchema, FilterSchema, type Filter } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { CorsSchema } from '../../gen/envoy/extensions/filters/http/cors/v3/cors_pb';
import { HTTPFaultSchema } from '../../gen/envoy/extensions/filters/http/fault/v3/fault_pb';
import { FilterConfigSchema as GrpcStatsSchema } from '../../gen/envoy/extensions/filters/http/grpc_stats/v3/config_pb';
import { RouterSchema } from '../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import { HttpInspectorSchema } from '../../gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector_pb';
import { OriginalDstSchema } from '../../gen/envoy/extensions/filters/listener/original_dst/v3/original_dst_pb';
import { OriginalSrcSchema } from '../../gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb';
import { TlsInspectorSchema } from '../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb';
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManager_ForwardClientCertDetails,
  HttpConnectionManager_PathWithEscapedSlashesAction,
  HttpConnectionManagerSchema,
  type HttpFilter,
  HttpFilterSchema,
} from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import {
  FilterConfig_Protocol as AlpnProtocol,
  FilterConfigSchema as AlpnFilterConfigSchema,
} from '../../gen/istio/envoy/config/filter/http/alpn/v2alpha1/config_pb';
import { TcpProxySchema } from '../../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { UuidRequestIdConfigSchema } from '../../gen/envoy/extensions/request_id/uuid/v3/uuid_pb';
import type { RouteConfigurationSchema } from '../../gen/envoy/config/route/v3/route_pb';
import { supports } from '../../discovery/capabilities';
import { adsConfigSource, durationMs, pack, WK } from './common';
import { ALPN_MTLS_HTTP10, ALPN_MTLS_HTTP11, ALPN_MTLS_HTTP2 } from './tls';
import { accessLogsFor } from './access-log';
import { metadataExchangeHttpFilters, statsHttpFilters } from './telemetry-filters';
import { hcmTracing } from './tracing';

/** Where an HTTP connection manager sits (Istio ListenerClass). */
export type ListenerClass = 'gateway' | 'sidecarOutbound' | 'sidecarInbound';

/**
 * Builders of the authentication (jwt_authn, …) and authorization (rbac) HTTP filters of a proxy.
 * They are placed where Istio places them: after metadata exchange, before grpc_stats/fault/cors/router.
 * The security issue provides them; without them no such filter is emitted.
 */
export interface SecurityFilterBuilders {
  authn?: (proxy: Proxy, push: PushContext, cls: ListenerClass) => HttpFilter[];
  authz?: (proxy: Proxy, push: PushContext, cls: ListenerClass) => HttpFilter[];
  /** Network (TCP) RBAC filters placed before tcp_proxy on inbound and gateway TCP filter chains. */
  authzTcp?: (proxy: Proxy, push: PushContext, cls: ListenerClass) => Filter[];
}

/** Istio names Envoy's `server` header `istio-envoy` on gateways and inbound. */
export const ENVOY_SERVER_NAME = 'istio-envoy';

export function httpFilter(name: string, config: Any): HttpFilter {
  return create(HttpFilterSchema, { name, configType: { case: 'typedConfig', value: config } });
}

export const routerFilter = (): HttpFilter => httpFilter(WK.router, pack(RouterSchema, {}));
export const faultFilter = (): HttpFilter => httpFilter(WK.fault, pack(HTTPFaultSchema, {}));
export const corsFilter = (): HttpFilter => httpFilter(WK.cors, pack(CorsSchema, {}));
export const grpcStatsFilter = (): HttpFilter =>
  httpFilter(
    WK.grpcStats,
    pack(GrpcStatsSchema, { emitFilterState: true, perMethodStatSpecifier: { case: 'statsForAllMethods', value: { value: false } } }),
  );

/**
 * Istio's `istio.alpn` filter (xdsfilters.Alpn): on mesh mTLS upstreams the ALPN becomes `istio-http/1.0`,
 * `istio-http/1.1` or `istio-h2` by the upstream HTTP protocol — what the server sidecar's inbound chains
 * match to tell HTTP from TCP — with `istio` and the plain value after it for servers outside the mesh.
 */
export const alpnFilter = (): HttpFilter =>
  httpFilter(
    WK.alpn,
    pack(AlpnFilterConfigSchema, {
      alpnOverride: [
        { upstreamProtocol: AlpnProtocol.HTTP10, alpnOverride: ALPN_MTLS_HTTP10 },
        { upstreamProtocol: AlpnProtocol.HTTP11, alpnOverride: ALPN_MTLS_HTTP11 },
        { upstreamProtocol: AlpnProtocol.HTTP2, alpnOverride: ALPN_MTLS_HTTP2 },
      ],
    }),
  );

/** Istio's HTTP filter chain order (authn and authz filters come from the security builders). */
export function httpFilters(proxy: Proxy, push: PushContext, cls: ListenerClass, security: SecurityFilterBuilders | undefined): HttpFilter[] {
  // Policies apply where traffic enters a workload (gateway, sidecar inbound), never on sidecar outbound;
  // outbound output is also shared between proxies of different workloads (PushContext.sharedKey).
  const sec = cls === 'sidecarOutbound' ? undefined : security;
  return [
    // metadata exchange first, so authorization failures already know the peer (Istio appendMxFilter)
    ...metadataExchangeHttpFilters(proxy, push, cls),
    ...(sec?.authn?.(proxy, push, cls) ?? []),
    ...(sec?.authz?.(proxy, push, cls) ?? []),
    grpcStatsFilter(),
    // PILOT_ENABLE_ALPN_FILTER: everywhere traffic leaves for an upstream that may be a sidecar (not inbound)
    // (only Istio's Envoy build has it: capabilities.ts)
    ...(push.options.alpnFilter && cls !== 'sidecarInbound' && supports(proxy.capabilities, 'alpn') ? [alpnFilter()] : []),
    faultFilter(),
    corsFilter(),
    // Telemetry.HTTPFilters: istio.stats after fault and cors
    ...statsHttpFilters(proxy, push, cls),
    routerFilter(),
  ];
}

// Istio sets use_request_id_for_trace_sampling on the HCM's request ID extension (Telemetry may turn it off).
const UUID_REQUEST_ID = (useRequestIdForTraceSampling: boolean): Any => pack(UuidRequestIdConfigSchema, { useRequestIdForTraceSampling });

export interface HcmOptions {
  statPrefix: string;
  cls: ListenerClass;
  /** RDS route name, or an inline route configuration. */
  rds?: string;
  routeConfig?: MessageInitShape<typeof RouteConfigurationSchema>;
  security?: SecurityFilterBuilders;
}

/** Istio's mapping of meshConfig.pathNormalization to HCM fields (buildHTTPConnectionManager, listener.go). */
export function pathNormalizationFields(
  n: PathNormalization,
): Pick<MessageInitShape<typeof HttpConnectionManagerSchema>, 'normalizePath' | 'mergeSlashes' | 'pathWithEscapedSlashesAction'> {
  const keep = HttpConnectionManager_PathWithEscapedSlashesAction.KEEP_UNCHANGED;
  switch (n) {
    case 'NONE':
      return { normalizePath: false, pathWithEscapedSlashesAction: keep };
    case 'MERGE_SLASHES':
      return { normalizePath: true, mergeSlashes: true, pathWithEscapedSlashesAction: keep };
    case 'DECODE_AND_MERGE_SLASHES':
      return {
        normalizePath: true,
        mergeSlashes: true,
        pathWithEscapedSlashesAction: HttpConnectionManager_PathWithEscapedSlashesAction.UNESCAPE_AND_FORWARD,
      };
    default:
      return { normalizePath: true, pathWithEscapedSlashesAction: keep };
  }
}

export function httpConnectionManager(proxy: Proxy, push: PushContext, o: HcmOptions): Any {
  const gateway = o.cls === 'gateway';
  const inbound = o.cls === 'sidecarInbound';
  // Istio's enableHTTP10: PILOT_HTTP10, or the proxy's own HTTP10 metadata (ISTIO_META_HTTP10 / proxyMetadata) set to "1"
  const http10 = push.options.http10 === true || proxy.metadata.raw['HTTP10'] === '1';
  const tracing = hcmTracing(proxy, push, o.cls);
  const init: MessageInitShape<typeof HttpConnectionManagerSchema> = {
    statPrefix: o.statPrefix,
    codecType: HttpConnectionManager_CodecType.AUTO,
    httpFilters: httpFilters(proxy, push, o.cls, o.security),
    accessLog: accessLogsFor(proxy, push, o.cls),
    ...(tracing.tracing ? { tracing: tracing.tracing } : {}),
    ...pathNormalizationFields(push.options.pathNormalization),
    useRemoteAddress: gateway,
    upgradeConfigs: [{ upgradeType: 'websocket' }],
    streamIdleTimeout: durationMs(0),
    proxy100Continue: push.options.enable100Continue,
    requestIdExtension: { typedConfig: UUID_REQUEST_ID(tracing.useRequestIdForTraceSampling) },
    routeSpecifier:
      o.rds !== undefined
        ? { case: 'rds', value: { configSource: adsConfigSource(), routeConfigName: o.rds } }
        : { case: 'routeConfig', value: o.routeConfig ?? {} },
  };
  if (gateway) {
    init.xffNumTrustedHops = 0;
    init.forwardClientCertDetails = HttpConnectionManager_ForwardClientCertDetails.SANITIZE_SET;
    init.setCurrentClientCertDetails = { subject: true, cert: true, dns: true, uri: true };
    init.serverName = ENVOY_SERVER_NAME;
    init.httpProtocolOptions = http10 ? { acceptHttp10: true } : {};
  } else if (inbound) {
    init.forwardClientCertDetails = HttpConnectionManager_ForwardClientCertDetails.APPEND_FORWARD;
    init.setCurrentClientCertDetails = { subject: true, dns: true, uri: true };
    init.serverName = ENVOY_SERVER_NAME;
  }
  if (!gateway && http10) init.httpProtocolOptions = { acceptHttp10: true };
  return pack(HttpConnectionManagerSchema, init);
}

export function hcmFilter(config: Any): Filter {
  return create(FilterSchema, { name: WK.hcm, configType: { case: 'typedConfig', value: config } });
}

/**
 * The network filters in front of tcp_proxy on a TCP filter chain: authorization where traffic enters
 * a workload (gateway, sidecar inbound), nothing on sidecar outbound (Istio buildInboundNetworkFilters,
 * buildGatewayListeners).
 */
export function tcpSecurityFilters(proxy: Proxy, push: PushContext, cls: ListenerClass, security: SecurityFilterBuilders | undefined): Filter[] {
  if (cls === 'sidecarOutbound') return [];
  return security?.authzTcp?.(proxy, push, cls) ?? [];
}

export interface WeightedDestination {
  cluster: string;
  weight: number;
}

/** tcp_proxy to one cluster, or weighted clusters (Istio buildOutboundNetworkFilters), with its access logs. */
export function tcpProxyFilter(statPrefix: string, dests: readonly WeightedDestination[], accessLog: readonly AccessLog[] = []): Filter {
  const clusterSpecifier =
    dests.length === 1
      ? { case: 'cluster' as const, value: dests[0]!.cluster }
      : { case: 'weightedClusters' as const, value: { clusters: dests.map((d) => ({ name: d.cluster, weight: d.weight })) } };
  return create(FilterSchema, {
    name: WK.tcpProxy,
    configType: { case: 'typedConfig', value: pack(TcpProxySchema, { statPrefix, clusterSpecifier, accessLog: [...accessLog] }) },
  });
}

export const tlsInspector = (): ListenerFilter =>
  create(ListenerFilterSchema, { name: WK.tlsInspector, configType: { case: 'typedConfig', value: pack(TlsInspectorSchema, {}) } });
export const httpInspector = (): ListenerFilter =>
  create(ListenerFilterSchema, { name: WK.httpInspector, configType: { case: 'typedConfig', value: pack(HttpInspectorSchema, {}) } });
export const originalDst = (): ListenerFilter =>
  create(ListenerFilterSchema, { name: WK.originalDst, configType: { case: 'typedConfig', value: pack(OriginalDstSchema, {}) } });
/** Istio's OriginalSrc: in TPROXY mode inbound upstreams leave from the caller's address, marked 1337 so replies route back to the proxy. */
export const originalSrc = (): ListenerFilter =>
  create(ListenerFilterSchema, { name: WK.originalSrc, configType: { case: 'typedConfig', value: pack(OriginalSrcSchema, { mark: 1337 }) } });
