// Every Envoy type mesh emits, for turning packed Any values into JSON (config_dump) and back.
// Built on first use: loading these descriptors costs start-up time the CLI should not pay.
import { createRegistry, type Registry } from '@bufbuild/protobuf';
import { file_envoy_config_cluster_v3_cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { file_envoy_config_endpoint_v3_endpoint } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { file_envoy_config_listener_v3_listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { file_envoy_config_route_v3_route } from '../../gen/envoy/config/route/v3/route_pb';
import { file_envoy_config_route_v3_route_components } from '../../gen/envoy/config/route/v3/route_components_pb';
import { file_envoy_admin_v3_config_dump } from '../../gen/envoy/admin/v3/config_dump_pb';
import { file_envoy_admin_v3_config_dump_shared } from '../../gen/envoy/admin/v3/config_dump_shared_pb';
import { file_envoy_extensions_filters_network_http_connection_manager_v3_http_connection_manager } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { file_envoy_extensions_filters_network_tcp_proxy_v3_tcp_proxy } from '../../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { file_envoy_extensions_filters_network_rbac_v3_rbac } from '../../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { file_envoy_extensions_filters_http_router_v3_router } from '../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import { file_envoy_extensions_filters_http_fault_v3_fault } from '../../gen/envoy/extensions/filters/http/fault/v3/fault_pb';
import { file_envoy_extensions_filters_http_cors_v3_cors } from '../../gen/envoy/extensions/filters/http/cors/v3/cors_pb';
import { file_envoy_extensions_filters_http_jwt_authn_v3_config } from '../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { file_envoy_extensions_filters_http_rbac_v3_rbac } from '../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { file_envoy_extensions_filters_http_grpc_stats_v3_config } from '../../gen/envoy/extensions/filters/http/grpc_stats/v3/config_pb';
import { file_envoy_extensions_filters_http_health_check_v3_health_check } from '../../gen/envoy/extensions/filters/http/health_check/v3/health_check_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_tls } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { file_istio_envoy_config_filter_http_alpn_v2alpha1_config } from '../../gen/istio/envoy/config/filter/http/alpn/v2alpha1/config_pb';
import { file_envoy_extensions_transport_sockets_raw_buffer_v3_raw_buffer } from '../../gen/envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { file_envoy_extensions_upstreams_http_v3_http_protocol_options } from '../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb';
import { file_envoy_extensions_access_loggers_file_v3_file } from '../../gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { file_envoy_extensions_filters_listener_tls_inspector_v3_tls_inspector } from '../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb';
import { file_envoy_extensions_filters_listener_http_inspector_v3_http_inspector } from '../../gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector_pb';
import { file_envoy_extensions_filters_listener_original_dst_v3_original_dst } from '../../gen/envoy/extensions/filters/listener/original_dst/v3/original_dst_pb';
import { file_envoy_extensions_filters_listener_original_src_v3_original_src } from '../../gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb';
import { file_envoy_extensions_load_balancing_policies_round_robin_v3_round_robin } from '../../gen/envoy/extensions/load_balancing_policies/round_robin/v3/round_robin_pb';
import { file_envoy_extensions_load_balancing_policies_least_request_v3_least_request } from '../../gen/envoy/extensions/load_balancing_policies/least_request/v3/least_request_pb';
import { file_envoy_extensions_load_balancing_policies_random_v3_random } from '../../gen/envoy/extensions/load_balancing_policies/random/v3/random_pb';
import { file_envoy_extensions_load_balancing_policies_ring_hash_v3_ring_hash } from '../../gen/envoy/extensions/load_balancing_policies/ring_hash/v3/ring_hash_pb';
import { file_envoy_extensions_load_balancing_policies_wrr_locality_v3_wrr_locality } from '../../gen/envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality_pb';
import { file_udpa_type_v1_typed_struct } from '../../gen/udpa/type/v1/typed_struct_pb';
import { file_envoy_extensions_retry_host_previous_hosts_v3_previous_hosts } from '../../gen/envoy/extensions/retry/host/previous_hosts/v3/previous_hosts_pb';
import { file_envoy_extensions_request_id_uuid_v3_uuid } from '../../gen/envoy/extensions/request_id/uuid/v3/uuid_pb';
import { file_envoy_extensions_retry_priority_previous_priorities_v3_previous_priorities_config } from '../../gen/envoy/extensions/retry/priority/previous_priorities/v3/previous_priorities_config_pb';
import { file_istio_networking_nds_v1_nds } from '../../gen/istio/networking/nds/v1/nds_pb';
import { file_envoy_config_trace_v3_zipkin } from '../../gen/envoy/config/trace/v3/zipkin_pb';
import { file_envoy_config_trace_v3_opentelemetry } from '../../gen/envoy/config/trace/v3/opentelemetry_pb';
import { file_envoy_extensions_access_loggers_filters_cel_v3_cel } from '../../gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb';
import { file_envoy_extensions_access_loggers_open_telemetry_v3_logs_service } from '../../gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb';
import { file_istio_envoy_extensions_stats_config } from '../../gen/istio/envoy/extensions/stats/config_pb';

let registry: Registry | undefined;

export function envoyTypeRegistry(): Registry {
  registry ??= createRegistry(
    file_envoy_config_cluster_v3_cluster,
    file_envoy_config_endpoint_v3_endpoint,
    file_envoy_config_listener_v3_listener,
    file_envoy_config_route_v3_route,
    // VirtualHost: VHDS resources
    file_envoy_config_route_v3_route_components,
    file_envoy_admin_v3_config_dump,
    file_envoy_admin_v3_config_dump_shared,
    file_envoy_extensions_filters_network_http_connection_manager_v3_http_connection_manager,
    file_envoy_extensions_filters_network_tcp_proxy_v3_tcp_proxy,
    file_envoy_extensions_filters_network_rbac_v3_rbac,
    file_envoy_extensions_filters_http_router_v3_router,
    file_envoy_extensions_filters_http_fault_v3_fault,
    file_envoy_extensions_filters_http_cors_v3_cors,
    file_envoy_extensions_filters_http_jwt_authn_v3_config,
    file_envoy_extensions_filters_http_rbac_v3_rbac,
    file_envoy_extensions_filters_http_grpc_stats_v3_config,
    file_envoy_extensions_filters_http_health_check_v3_health_check,
    file_envoy_extensions_transport_sockets_tls_v3_tls,
    file_envoy_extensions_transport_sockets_tls_v3_secret,
    file_envoy_extensions_transport_sockets_raw_buffer_v3_raw_buffer,
    file_istio_envoy_config_filter_http_alpn_v2alpha1_config,
    file_envoy_extensions_upstreams_http_v3_http_protocol_options,
    file_envoy_extensions_access_loggers_file_v3_file,
    file_envoy_extensions_filters_listener_tls_inspector_v3_tls_inspector,
    file_envoy_extensions_filters_listener_http_inspector_v3_http_inspector,
    file_envoy_extensions_filters_listener_original_dst_v3_original_dst,
    file_envoy_extensions_filters_listener_original_src_v3_original_src,
    file_envoy_extensions_load_balancing_policies_round_robin_v3_round_robin,
    file_envoy_extensions_load_balancing_policies_least_request_v3_least_request,
    file_envoy_extensions_load_balancing_policies_random_v3_random,
    file_envoy_extensions_load_balancing_policies_ring_hash_v3_ring_hash,
    file_envoy_extensions_load_balancing_policies_wrr_locality_v3_wrr_locality,
    file_udpa_type_v1_typed_struct,
    file_envoy_extensions_request_id_uuid_v3_uuid,
    file_envoy_extensions_retry_host_previous_hosts_v3_previous_hosts,
    file_envoy_extensions_retry_priority_previous_priorities_v3_previous_priorities_config,
    file_istio_networking_nds_v1_nds,
    // telemetry: tracers, access loggers and their CEL filter, Istio's stats filter config
    file_envoy_config_trace_v3_zipkin,
    file_envoy_config_trace_v3_opentelemetry,
    file_envoy_extensions_access_loggers_filters_cel_v3_cel,
    file_envoy_extensions_access_loggers_open_telemetry_v3_logs_service,
    file_istio_envoy_extensions_stats_config,
  );
  return registry;
}
