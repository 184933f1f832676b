// The network filters of a TCP filter chain with Istio's telemetry around the tcp_proxy (istiod 1.26
// pilot/pkg/networking/core/networkfilter.go buildCompleteNetworkFilters, setAccessLogAndBuildTCPFilter;
// listener_inbound.go buildInboundBlackhole; listener_builder.go buildOutboundCatchAllNetworkFiltersOnly,
// blackholeFilterChain): metadata exchange first where asked, then the authorization filters, then the
// istio.stats filters, then tcp_proxy with its access logs. Also the listener-level access logs.
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { TelemetryClass } from '../../discovery/telemetry';
import type { AccessLog } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import type { Filter } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { accessLogsFor, listenerNrFilter } from './access-log';
import { tcpProxyFilter, type WeightedDestination } from './filters';
import { metadataExchangeNetworkFilters, statsNetworkFilters } from './telemetry-filters';

export interface TcpChainOptions {
  /** The TCP metadata exchange filter first (inbound chains, gateway ISTIO_MUTUAL TCP servers). */
  mx?: boolean;
  /** Filters between metadata exchange and stats (network RBAC). */
  security?: readonly Filter[];
  /** Access logs on the tcp_proxy (not on the blackhole chains). */
  accessLog?: boolean;
}

export function telemetryTcpFilters(
  proxy: Proxy,
  push: PushContext,
  cls: TelemetryClass,
  statPrefix: string,
  dests: readonly WeightedDestination[],
  o: TcpChainOptions = {},
): Filter[] {
  return [
    ...(o.mx ? metadataExchangeNetworkFilters(proxy, push) : []),
    ...(o.security ?? []),
    ...statsNetworkFilters(proxy, push, cls),
    tcpProxyFilter(statPrefix, dests, o.accessLog ? accessLogsFor(proxy, push, cls) : []),
  ];
}

/** setListenerAccessLog: the listener's own log, for connections no filter chain matched (NR). */
export function listenerAccessLogs(proxy: Proxy, push: PushContext, cls: TelemetryClass): AccessLog[] {
  return accessLogsFor(proxy, push, cls, listenerNrFilter());
}
