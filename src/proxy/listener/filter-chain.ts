// A listener's filter chain compiled from its proto (Envoy's FilterChainManagerImpl / ListenerImpl filter
// factories): the match, the downstream TLS context, network RBAC filters, and the terminal filter — the HTTP
// connection manager or the TCP proxy. A chain that fails to compile releases what it had taken.
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { FilterChain } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { HttpConnectionManagerSchema } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { DownstreamTlsContextSchema } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { ConfigError } from '../common/config-error';
import { HcmRuntime } from '../http/hcm';
import type { HcmDeps } from '../http/hcm-config';
import type { Logger } from '../log';
import { TlsContext } from '../tls/context';
import type { SecretManager } from '../tls/secrets';
import { compileChainMatch, type CompiledChainMatch } from './chain-match';
import { NetworkRbac, TcpProxy } from './tcp-proxy';
import { IstioNetworkStats, TcpChainFilters, type ConnectionObserver } from './istio-network';
import { unwrapTypedStruct } from '../http/typed-struct';
import { exchangeConfig, type ExchangeConfig } from '../istio/tcp-exchange';
import { NO_LOCAL_INFO } from '../common/local-info';
import type { Any } from '@bufbuild/protobuf/wkt';

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const TCP_PROXY = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const NET_RBAC = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';
const TLS_SOCKET = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext';
const RAW_BUFFER = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';
const ISTIO_STATS = 'type.googleapis.com/stats.PluginConfig';
const ISTIO_MX = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';

export interface CompiledChain {
  name: string;
  match: CompiledChainMatch;
  tls: TlsContext | undefined;
  rbac: NetworkRbac[];
  hcm: HcmRuntime | undefined;
  tcp: TcpProxy | undefined;
}

export interface ChainContext {
  deps: HcmDeps & { secrets: SecretManager };
  isStatic: boolean;
  /** The listener's port, for the HCM's strip_matching_host_port. */
  port: number;
  log: Logger;
  /** traffic_direction OUTBOUND: the HCM traces as egress. */
  egress?: boolean;
}

export function compileFilterChain(fc: FilterChain, where: string, x: ChainContext): CompiledChain {
  const match = compileChainMatch(fc.filterChainMatch, `${where}.filter_chain_match`);
  let tlsCtx: TlsContext | undefined;
  const ts = fc.transportSocket;
  if (ts && ts.configType.case === 'typedConfig' && ts.configType.value.typeUrl !== RAW_BUFFER) {
    if (ts.configType.value.typeUrl !== TLS_SOCKET)
      throw new ConfigError(`${where}.transport_socket: Didn't find a registered implementation for name: '${ts.name}'`);
    const d = anyUnpack(ts.configType.value, DownstreamTlsContextSchema);
    if (!d) throw new ConfigError(`${where}.transport_socket: cannot decode DownstreamTlsContext`);
    tlsCtx = new TlsContext(
      d.commonTlsContext,
      { role: 'server', requireClientCertificate: d.requireClientCertificate ?? false },
      x.deps.secrets,
      `${where}.transport_socket`,
    );
  }
  const rbac: NetworkRbac[] = [];
  const observers: ConnectionObserver[] = [];
  let exchange: ExchangeConfig | undefined;
  let hcm: HcmRuntime | undefined;
  let tcp: TcpProxy | undefined;
  try {
    if (fc.filters.length === 0) throw new ConfigError(`${where}.filters: at least one network filter is required`);
    fc.filters.forEach((f, i) => {
      const fw = `${where}.filters[${i}]`;
      if (f.configType.case !== 'typedConfig') throw new ConfigError(`${fw}: typed_config is required (config discovery is not supported)`);
      const any = unwrapTypedStruct(f.configType.value, x.deps.typeRegistry, fw);
      const last = i === fc.filters.length - 1;
      switch (any.typeUrl) {
        case HCM: {
          if (!last)
            throw new ConfigError(
              `Error: terminal filter named ${f.name} of type envoy.filters.network.http_connection_manager must be the last filter in a network filter chain.`,
            );
          const h = anyUnpack(any, HttpConnectionManagerSchema);
          if (!h) throw new ConfigError(`${fw}: cannot decode HttpConnectionManager`);
          hcm = new HcmRuntime(h, fw, x.deps, x.isStatic, x.port, x.egress);
          break;
        }
        case TCP_PROXY:
          if (!last)
            throw new ConfigError(
              `Error: terminal filter named ${f.name} of type envoy.filters.network.tcp_proxy must be the last filter in a network filter chain.`,
            );
          tcp = new TcpProxy(
            any,
            fw,
            x.deps.stats,
            x.deps.clusters,
            x.log,
            x.deps.upstreamCall,
            new TcpChainFilters(observers, exchange, x.deps.local ?? NO_LOCAL_INFO),
          );
          break;
        case ISTIO_MX:
        case ISTIO_STATS:
          if (last)
            throw new ConfigError(`Error: non-terminal filter named ${f.name} of type ${f.name} is the last filter in a network filter chain.`);
          if (any.typeUrl === ISTIO_MX) exchange = exchangeConfig(any, fw, x.deps.stats);
          else observers.push(istioNetworkStats(any, fw, x));
          break;
        case NET_RBAC:
          if (last)
            throw new ConfigError(
              `Error: non-terminal filter named ${f.name} of type envoy.filters.network.rbac is the last filter in a network filter chain.`,
            );
          rbac.push(new NetworkRbac(any, fw, x.deps.stats));
          break;
        default:
          throw new ConfigError(`Didn't find a registered implementation for name: '${f.name}'`);
      }
    });
  } catch (e) {
    tlsCtx?.release();
    hcm?.release();
    throw e;
  }
  return { name: fc.name, match, tls: tlsCtx, rbac, hcm, tcp };
}

function istioNetworkStats(any: Any, where: string, x: ChainContext): IstioNetworkStats {
  const d = x.deps;
  const direction = d.trafficDirection === 1 ? 'inbound' : d.trafficDirection === 2 ? 'outbound' : 'unspecified';
  return new IstioNetworkStats(any, where, d.stats, d.local?.metadata ?? {}, direction, (c) => d.clusters.get(c)?.metadata);
}

export function releaseChain(c: CompiledChain): void {
  c.tls?.release();
  c.hcm?.release();
}
