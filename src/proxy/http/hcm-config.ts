// What an HttpConnectionManager proto compiles to before it serves anything (Envoy's HttpConnectionManagerConfig):
// its options, its HTTP filter chain with the terminal router's settings, where its routes come from, and its
// stats. Pure translation: a proto Envoy would reject throws ConfigError naming where.
import type { Registry } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManager_ServerHeaderTransformation,
  type HttpConnectionManager,
} from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RouterSchema } from '../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import type { Logger, LoggerRegistry } from '../log';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import { cidrContains, parseCidr, parseIp } from '../common/cidr';
import type { RequestPolicy } from '../codec/h1/parser';
import type { RouteConfigProvider, RouteManager } from '../route/rds';
import { ResponseCodeStats, type Counter, type Gauge, type Histogram, type StatsScope, type StatsStore } from '../stats/store';
import type { ClusterManager } from '../upstream/cluster-manager';
import { typeNameOf, type FilterFactoryContext, type HttpFilter, type HttpFilterRegistry } from './filter-api';
import { pathOptionsOf, type EscapedSlashesAction } from './path';
import { unwrapTypedStruct } from './typed-struct';
import type { ClusterCall } from '../common/cluster-call';
import { NO_LOCAL_INFO, type LocalInfo } from '../common/local-info';
import { clientCertDetailsOf, forwardClientCertOf, type ClientCertDetail, type ForwardClientCert } from './xfcc';

export interface HcmDeps {
  stats: StatsStore;
  log: LoggerRegistry;
  clusters: ClusterManager;
  routes: RouteManager;
  filters: HttpFilterRegistry;
  typeRegistry: Registry;
  upstreamCall: ClusterCall;
  /** The listener's traffic_direction: TrafficDirection (0 unspecified, 1 inbound, 2 outbound). */
  trafficDirection?: number;
  /** This proxy: filters that describe it (Istio's stats and metadata exchange), tracers, loggers. */
  local?: LocalInfo;
}

export class HcmStats {
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxHttp1Total: Counter;
  readonly cxHttp2Total: Counter;
  readonly cxHttp1Active: Gauge;
  readonly cxHttp2Active: Gauge;
  readonly cxDestroy: Counter;
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqHttp1Total: Counter;
  readonly rqHttp2Total: Counter;
  readonly rqCompleted: Counter;
  readonly rqTime: Histogram;
  readonly codes: ResponseCodeStats;
  readonly rqRxReset: Counter;
  readonly noRoute: Counter;
  readonly noCluster: Counter;
  readonly rqDirectResponse: Counter;
  readonly rqRedirect: Counter;
  readonly rqTotalRouter: Counter;
  constructor(readonly scope: StatsScope) {
    const c = (n: string) => scope.counter(n);
    const g = (n: string) => scope.gauge(n);
    this.cxTotal = c('downstream_cx_total');
    this.cxActive = g('downstream_cx_active');
    this.cxHttp1Total = c('downstream_cx_http1_total');
    this.cxHttp2Total = c('downstream_cx_http2_total');
    this.cxHttp1Active = g('downstream_cx_http1_active');
    this.cxHttp2Active = g('downstream_cx_http2_active');
    this.cxDestroy = c('downstream_cx_destroy');
    this.rqTotal = c('downstream_rq_total');
    this.rqActive = g('downstream_rq_active');
    this.rqHttp1Total = c('downstream_rq_http1_total');
    this.rqHttp2Total = c('downstream_rq_http2_total');
    this.rqCompleted = c('downstream_rq_completed');
    this.rqTime = scope.histogram('downstream_rq_time');
    this.codes = new ResponseCodeStats(scope, 'downstream_rq', false);
    this.rqRxReset = c('downstream_rq_rx_reset');
    this.noRoute = c('no_route');
    this.noCluster = c('no_cluster');
    this.rqDirectResponse = c('rq_direct_response');
    this.rqRedirect = c('rq_redirect');
    this.rqTotalRouter = c('rq_total');
  }
}

export interface HcmOptions {
  serverName: string;
  serverHeader: 'overwrite' | 'appendIfAbsent' | 'passThrough';
  useRemoteAddress: boolean;
  xffNumTrustedHops: number;
  skipXffAppend: boolean;
  via: string;
  generateRequestId: boolean;
  preserveExternalRequestId: boolean;
  alwaysSetRequestIdInResponse: boolean;
  normalizePath: boolean;
  mergeSlashes: boolean;
  escapedSlashes: EscapedSlashesAction;
  stripPort: 'none' | 'any' | 'matching';
  stripTrailingHostDot: boolean;
  codec: 'auto' | 'http1' | 'http2';
  idleTimeoutMs: number;
  maxRequestHeadersKb: number;
  /** common_http_protocol_options.max_headers_count (Envoy's default 100), http_protocol_options.accept_http_10 and allow_custom_methods. */
  h1Policy: RequestPolicy;
  defaultHostForHttp10: string;
  upgradeTypes: ReadonlySet<string>;
  forwardClientCert: ForwardClientCert;
  clientCertDetails: readonly ClientCertDetail[];
}

/** The terminal router's settings (envoy.extensions.filters.http.router.v3.Router). */
export interface RouterOptions {
  suppressEnvoyHeaders: boolean;
  respectExpectedRqTimeout: boolean;
  /** The `router` logger: Envoy's router logs each request's cluster at debug. */
  log: Logger;
  /** Requests the engine makes itself through a cluster: mirrored copies. */
  upstreamCall: ClusterCall;
}

/** One HTTP filter of the chain, in order; the router is not one of them (it ends every chain). */
export interface ChainEntry {
  name: string;
  filter: HttpFilter;
  disabled: boolean;
}

/** The HCM's settings as the request path reads them. */
export function hcmOptionsOf(proto: HttpConnectionManager, where: string): HcmOptions {
  const po = pathOptionsOf(proto);
  const options: HcmOptions = {
    serverName: proto.serverName || 'envoy',
    serverHeader:
      proto.serverHeaderTransformation === HttpConnectionManager_ServerHeaderTransformation.APPEND_IF_ABSENT
        ? 'appendIfAbsent'
        : proto.serverHeaderTransformation === HttpConnectionManager_ServerHeaderTransformation.PASS_THROUGH
          ? 'passThrough'
          : 'overwrite',
    useRemoteAddress: proto.useRemoteAddress ?? false,
    xffNumTrustedHops: proto.xffNumTrustedHops,
    skipXffAppend: proto.skipXffAppend,
    via: proto.via,
    generateRequestId: proto.generateRequestId ?? true,
    preserveExternalRequestId: proto.preserveExternalRequestId,
    alwaysSetRequestIdInResponse: proto.alwaysSetRequestIdInResponse,
    normalizePath: po.normalize,
    mergeSlashes: po.mergeSlashes,
    escapedSlashes: po.escapedSlashes,
    stripPort:
      proto.stripPortMode.case === 'stripAnyHostPort' && proto.stripPortMode.value ? 'any' : proto.stripMatchingHostPort ? 'matching' : 'none',
    stripTrailingHostDot: proto.stripTrailingHostDot,
    codec:
      proto.codecType === HttpConnectionManager_CodecType.HTTP1
        ? 'http1'
        : proto.codecType === HttpConnectionManager_CodecType.HTTP2
          ? 'http2'
          : 'auto',
    idleTimeoutMs: durationToMs(proto.commonHttpProtocolOptions?.idleTimeout) ?? 3_600_000,
    maxRequestHeadersKb: proto.maxRequestHeadersKb ?? 60,
    h1Policy: {
      acceptHttp10: proto.httpProtocolOptions?.acceptHttp10 ?? false,
      maxHeadersCount: proto.commonHttpProtocolOptions?.maxHeadersCount ?? 100,
      allowCustomMethods: proto.httpProtocolOptions?.allowCustomMethods ?? false,
    },
    defaultHostForHttp10: proto.httpProtocolOptions?.defaultHostForHttp10 ?? '',
    upgradeTypes: new Set(proto.upgradeConfigs.filter((u) => u.enabled !== false).map((u) => u.upgradeType.toLowerCase())),
    forwardClientCert: forwardClientCertOf(proto.forwardClientCertDetails),
    clientCertDetails: clientCertDetailsOf(proto.setCurrentClientCertDetails),
  };
  if (proto.localReplyConfig && (proto.localReplyConfig.mappers.length > 0 || proto.localReplyConfig.bodyFormat)) {
    throw new ConfigError(`${where}.local_reply_config: custom local replies are not supported`);
  }
  return options;
}

/** Envoy's internal-request test from internal_address_config ranges; undefined: the default (RFC 1918/loopback). */
export function internalAddressTest(proto: HttpConnectionManager, where: string): ((ip: string) => boolean) | undefined {
  const iac = proto.internalAddressConfig;
  if (!iac || iac.cidrRanges.length === 0) return undefined;
  const ranges = iac.cidrRanges.map((r, i) => parseCidr(r, `${where}.internal_address_config.cidr_ranges[${i}]`));
  return (ip) => ranges.some((c) => cidrContains(c, parseIp(ip)));
}

/** The HTTP filters, in chain order, and the settings of the router that must end the chain. */
export function compileHttpFilters(
  proto: HttpConnectionManager,
  where: string,
  deps: HcmDeps,
  scope: StatsScope,
  log: Logger,
): { filters: ChainEntry[]; router: RouterOptions } {
  // HTTP filters, in chain order; the router must be the one terminal filter, last
  const filters: ChainEntry[] = [];
  const routerLog = deps.log.get('router');
  let routerOpts: RouterOptions = { suppressEnvoyHeaders: false, respectExpectedRqTimeout: false, log: routerLog, upstreamCall: deps.upstreamCall };
  proto.httpFilters.forEach((f, i) => {
    const fw = `${where}.http_filters[${i}]`;
    if (f.configType.case === 'configDiscovery') throw new ConfigError(`${fw}.config_discovery: extension config discovery (ECDS) is not supported`);
    let any = f.configType.case === 'typedConfig' ? f.configType.value : undefined;
    if (any) any = unwrapTypedStruct(any, deps.typeRegistry, fw);
    const factory = any ? deps.filters.forType(typeNameOf(any)) : deps.filters.forName(f.name);
    if (!factory) {
      // optional filters, and filters disabled by default (only per-route config could enable them), are skipped
      if (f.isOptional || f.disabled) {
        log.debug(`${fw}: ${f.isOptional ? 'optional' : 'disabled'} filter '${f.name}' is not supported by this proxy; skipped`);
        return;
      }
      throw new ConfigError(`Didn't find a registered implementation for name: '${f.name}'`);
    }
    const last = i === proto.httpFilters.length - 1;
    if (factory.terminal && !last)
      throw new ConfigError(`Error: terminal filter named ${f.name} of type ${factory.name} must be the last filter in a http filter chain.`);
    if (!factory.terminal && last)
      throw new ConfigError(`Error: non-terminal filter named ${f.name} of type ${factory.name} is the last filter in a http filter chain.`);
    if (factory.terminal) {
      const r = any ? anyUnpack(any, RouterSchema) : undefined;
      routerOpts = {
        suppressEnvoyHeaders: r?.suppressEnvoyHeaders ?? false,
        respectExpectedRqTimeout: r?.respectExpectedRqTimeout ?? false,
        log: routerLog,
        upstreamCall: deps.upstreamCall,
      };
      return;
    }
    const ctx: FilterFactoryContext = {
      statPrefix: proto.statPrefix,
      stats: scope,
      log: deps.log,
      typeRegistry: deps.typeRegistry,
      upstream: deps.upstreamCall,
      where: fw,
      filterName: f.name,
      local: deps.local ?? NO_LOCAL_INFO,
      clusterMetadata: (c) => deps.clusters.get(c)?.metadata,
      direction: deps.trafficDirection === 1 ? 'inbound' : deps.trafficDirection === 2 ? 'outbound' : 'unspecified',
    };
    filters.push({ name: f.name, filter: factory.create(any, ctx), disabled: f.disabled });
  });
  if (proto.httpFilters.length === 0) throw new ConfigError(`${where}.http_filters: at least one filter (the router) is required`);
  return { filters, router: routerOpts };
}

/** Where the HCM's routes come from: an RDS subscription over ADS or its inline route_config. */
export function routeProviderOf(proto: HttpConnectionManager, where: string, routes: RouteManager, isStatic: boolean): RouteConfigProvider {
  const rs = proto.routeSpecifier;
  if (rs.case === 'rds') {
    const src = rs.value.configSource?.configSourceSpecifier.case;
    if (src !== 'ads') throw new ConfigError(`${where}.rds.config_source: only ADS is supported`);
    if (!rs.value.routeConfigName) throw new ConfigError(`${where}.rds.route_config_name: must not be empty`);
    return routes.provider(rs.value.routeConfigName);
  } else if (rs.case === 'routeConfig') {
    return routes.compileInline(rs.value, isStatic);
  } else if (rs.case === 'scopedRoutes') {
    throw new ConfigError(`${where}.scoped_routes: scoped routes are not supported`);
  } else {
    throw new ConfigError(`${where}: HttpConnectionManager needs rds or route_config`);
  }
}
