// Every message type the engine can meet inside a bootstrap or an admin dump: the xDS resource and
// extension types (src/lib/xds/registry.ts) plus the bootstrap, secrets, access loggers and matchers.
import { create, createFileRegistry, createRegistry, type DescMessage, type Registry } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { envoyTypeRegistry } from '../lib/xds/registry';
import { file_envoy_config_bootstrap_v3_bootstrap } from '../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_secret } from '../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { file_envoy_admin_v3_server_info } from '../gen/envoy/admin/v3/server_info_pb';
import { file_envoy_admin_v3_clusters } from '../gen/envoy/admin/v3/clusters_pb';
import { file_envoy_admin_v3_listeners } from '../gen/envoy/admin/v3/listeners_pb';
import { file_envoy_extensions_filters_http_local_ratelimit_v3_local_rate_limit } from '../gen/envoy/extensions/filters/http/local_ratelimit/v3/local_rate_limit_pb';
import { file_envoy_config_metrics_v3_stats } from '../gen/envoy/config/metrics/v3/stats_pb';
import { file_envoy_config_core_v3_substitution_format_string } from '../gen/envoy/config/core/v3/substitution_format_string_pb';
import { file_xds_type_matcher_v3_matcher } from '../gen/xds/type/matcher/v3/matcher_pb';
import { file_envoy_extensions_clusters_aggregate_v3_cluster } from '../gen/envoy/extensions/clusters/aggregate/v3/cluster_pb';
import { file_envoy_extensions_transport_sockets_raw_buffer_v3_raw_buffer } from '../gen/envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer_pb';
import { file_istio_envoy_config_filter_http_alpn_v2alpha1_config } from '../gen/istio/envoy/config/filter/http/alpn/v2alpha1/config_pb';
import { file_io_istio_http_peer_metadata_config } from '../gen/io/istio/http/peer_metadata/config_pb';
import { file_envoy_tcp_metadataexchange_config_metadata_exchange } from '../gen/envoy/tcp/metadataexchange/config/metadata_exchange_pb';
import { ACCESS_LOG_FILES } from './accesslog/types';
import { file_envoy_config_trace_v3_zipkin } from '../gen/envoy/config/trace/v3/zipkin_pb';
import { file_envoy_config_trace_v3_opentelemetry } from '../gen/envoy/config/trace/v3/opentelemetry_pb';

let registry: Registry | undefined;

export function proxyTypeRegistry(): Registry {
  registry ??= createRegistry(
    envoyTypeRegistry(),
    file_envoy_config_bootstrap_v3_bootstrap,
    file_envoy_extensions_transport_sockets_tls_v3_secret,
    file_envoy_admin_v3_server_info,
    file_envoy_admin_v3_clusters,
    file_envoy_admin_v3_listeners,
    file_envoy_extensions_filters_http_local_ratelimit_v3_local_rate_limit,
    file_envoy_config_metrics_v3_stats,
    file_envoy_config_core_v3_substitution_format_string,
    file_xds_type_matcher_v3_matcher,
    file_envoy_extensions_clusters_aggregate_v3_cluster,
    file_istio_envoy_config_filter_http_alpn_v2alpha1_config,
    file_envoy_extensions_transport_sockets_raw_buffer_v3_raw_buffer,
    // Istio's metadata exchange filters (HTTP and TCP): istiod sends them as TypedStructs of these types
    file_io_istio_http_peer_metadata_config,
    file_envoy_tcp_metadataexchange_config_metadata_exchange,
    ...ACCESS_LOG_FILES,
    // HCM tracing providers (envoy.tracers.zipkin, envoy.tracers.opentelemetry)
    file_envoy_config_trace_v3_zipkin,
    file_envoy_config_trace_v3_opentelemetry,
  );
  return registry;
}

const synthetic = new Map<string, DescMessage>();

/** An empty message type standing in for an extension this build has no schema for. */
function syntheticMessage(typeName: string): DescMessage | undefined {
  let d = synthetic.get(typeName);
  if (d) return d;
  const dot = typeName.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const file = create(FileDescriptorProtoSchema, {
    name: `mesh-synthetic/${typeName}.proto`,
    package: typeName.slice(0, dot),
    messageType: [{ name: typeName.slice(dot + 1) }],
    syntax: 'proto3',
  });
  d = createFileRegistry(file, () => undefined).getMessage(typeName);
  if (d) synthetic.set(typeName, d);
  return d;
}

/**
 * The registry for rendering admin JSON: known types as usual; a typed config of a type this build
 * has no schema for (Istio's UuidRequestIdConfig, retry predicates…) renders as just its `@type`
 * instead of failing the whole dump.
 */
export function dumpTypeRegistry(): Registry {
  const base = proxyTypeRegistry();
  return {
    kind: 'registry',
    [Symbol.iterator]: () => base[Symbol.iterator](),
    get: (n) => base.get(n) ?? syntheticMessage(n),
    getMessage: (n) => base.getMessage(n) ?? syntheticMessage(n),
    getEnum: (n) => base.getEnum(n),
    getExtension: (n) => base.getExtension(n),
    getExtensionFor: (e, no) => base.getExtensionFor(e, no),
    getService: (n) => base.getService(n),
  };
}
