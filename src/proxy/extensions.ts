// The extensions the engine has, listed in its xDS Node as Envoy lists its own (source/server/server.cc fills
// Node.extensions from every registered factory: name, category, the config types it takes in type_urls without
// the `type.googleapis.com/` prefix). The daemon reads the list to decide whether a proxy may be sent Istio's
// own filters (src/discovery/capabilities.ts); the engine has istio.alpn, so it lists it.
// Differs from Envoy on purpose: only what Istio's xDS can name is listed (no access loggers, tracers, …),
// and the HTTP filters are those the engine's filter registry really holds.
import { create } from '@bufbuild/protobuf';
import { ExtensionSchema, type Extension } from '../gen/envoy/config/core/v3/base_pb';
import { HttpInspectorSchema } from '../gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector_pb';
import { OriginalDstSchema } from '../gen/envoy/extensions/filters/listener/original_dst/v3/original_dst_pb';
import { OriginalSrcSchema } from '../gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb';
import { TlsInspectorSchema } from '../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb';
import { HttpConnectionManagerSchema } from '../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RBACSchema as NetworkRbacSchema } from '../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { TcpProxySchema } from '../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { RawBufferSchema } from '../gen/envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer_pb';
import { DownstreamTlsContextSchema, UpstreamTlsContextSchema } from '../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import type { HttpFilterRegistry } from './http/filter-api';
import { PluginConfigSchema } from '../gen/istio/envoy/extensions/stats/config_pb';
import { MetadataExchangeSchema } from '../gen/envoy/tcp/metadataexchange/config/metadata_exchange_pb';

/** HTTP filters Istio's xDS may name (Istio's own included): listed when the registry has them. */
const HTTP_FILTER_NAMES = [
  'envoy.filters.http.router',
  'envoy.filters.http.fault',
  'envoy.filters.http.cors',
  'envoy.filters.http.grpc_stats',
  'envoy.filters.http.jwt_authn',
  'envoy.filters.http.rbac',
  'envoy.filters.http.local_ratelimit',
  'istio.alpn',
  'istio.stats',
  'istio.metadata_exchange',
  'envoy.filters.http.peer_metadata',
];

/** What the listener and cluster code of the engine takes besides HTTP filters. */
const BUILT_IN: ReadonlyArray<{ category: string; name: string; typeNames: string[] }> = [
  { category: 'envoy.filters.network', name: 'envoy.filters.network.http_connection_manager', typeNames: [HttpConnectionManagerSchema.typeName] },
  { category: 'envoy.filters.network', name: 'envoy.filters.network.tcp_proxy', typeNames: [TcpProxySchema.typeName] },
  { category: 'envoy.filters.network', name: 'envoy.filters.network.rbac', typeNames: [NetworkRbacSchema.typeName] },
  // Istio's network filters before tcp_proxy, and its upstream exchange filter on clusters (listener/istio-network.ts)
  { category: 'envoy.filters.network', name: 'istio.stats', typeNames: [PluginConfigSchema.typeName] },
  { category: 'envoy.filters.network', name: 'istio.metadata_exchange', typeNames: [MetadataExchangeSchema.typeName] },
  {
    category: 'envoy.filters.upstream_network',
    name: 'envoy.filters.network.upstream.metadata_exchange',
    typeNames: [MetadataExchangeSchema.typeName],
  },
  { category: 'envoy.filters.listener', name: 'envoy.filters.listener.tls_inspector', typeNames: [TlsInspectorSchema.typeName] },
  { category: 'envoy.filters.listener', name: 'envoy.filters.listener.http_inspector', typeNames: [HttpInspectorSchema.typeName] },
  { category: 'envoy.filters.listener', name: 'envoy.filters.listener.original_dst', typeNames: [OriginalDstSchema.typeName] },
  { category: 'envoy.filters.listener', name: 'envoy.filters.listener.original_src', typeNames: [OriginalSrcSchema.typeName] },
  { category: 'envoy.transport_sockets.downstream', name: 'envoy.transport_sockets.tls', typeNames: [DownstreamTlsContextSchema.typeName] },
  { category: 'envoy.transport_sockets.upstream', name: 'envoy.transport_sockets.tls', typeNames: [UpstreamTlsContextSchema.typeName] },
  { category: 'envoy.transport_sockets.downstream', name: 'envoy.transport_sockets.raw_buffer', typeNames: [RawBufferSchema.typeName] },
  { category: 'envoy.transport_sockets.upstream', name: 'envoy.transport_sockets.raw_buffer', typeNames: [RawBufferSchema.typeName] },
];

/** The engine's Node.extensions with this HTTP filter registry. */
export function engineExtensions(filters: HttpFilterRegistry): Extension[] {
  const http = HTTP_FILTER_NAMES.flatMap((name) => {
    const f = filters.forName(name);
    return f ? [{ category: 'envoy.filters.http', name, typeNames: [...f.configTypes] }] : [];
  });
  return [...http, ...BUILT_IN].map((e) => create(ExtensionSchema, { name: e.name, category: e.category, typeUrls: e.typeNames }));
}
