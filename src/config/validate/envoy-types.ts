// The Envoy message types this build can check an EnvoyFilter patch against: every Envoy config and
// extension file generated under src/gen. Types outside it are resolved by package only (envoy-packages.ts).
import { createRegistry, type Registry } from '@bufbuild/protobuf';
import {
  file_google_protobuf_struct,
  file_google_protobuf_any,
  file_google_protobuf_wrappers,
  file_google_protobuf_duration,
  file_google_protobuf_empty,
} from '@bufbuild/protobuf/wkt';
import { file_envoy_annotations_deprecation } from '../../gen/envoy/annotations/deprecation_pb';
import { file_envoy_annotations_resource } from '../../gen/envoy/annotations/resource_pb';
import { file_envoy_config_accesslog_v3_accesslog } from '../../gen/envoy/config/accesslog/v3/accesslog_pb';
import { file_envoy_config_bootstrap_v3_bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { file_envoy_config_cluster_v3_circuit_breaker } from '../../gen/envoy/config/cluster/v3/circuit_breaker_pb';
import { file_envoy_config_cluster_v3_cluster } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { file_envoy_config_cluster_v3_filter } from '../../gen/envoy/config/cluster/v3/filter_pb';
import { file_envoy_config_cluster_v3_outlier_detection } from '../../gen/envoy/config/cluster/v3/outlier_detection_pb';
import { file_envoy_config_core_v3_address } from '../../gen/envoy/config/core/v3/address_pb';
import { file_envoy_config_core_v3_backoff } from '../../gen/envoy/config/core/v3/backoff_pb';
import { file_envoy_config_core_v3_base } from '../../gen/envoy/config/core/v3/base_pb';
import { file_envoy_config_core_v3_config_source } from '../../gen/envoy/config/core/v3/config_source_pb';
import { file_envoy_config_core_v3_event_service_config } from '../../gen/envoy/config/core/v3/event_service_config_pb';
import { file_envoy_config_core_v3_extension } from '../../gen/envoy/config/core/v3/extension_pb';
import { file_envoy_config_core_v3_grpc_method_list } from '../../gen/envoy/config/core/v3/grpc_method_list_pb';
import { file_envoy_config_core_v3_grpc_service } from '../../gen/envoy/config/core/v3/grpc_service_pb';
import { file_envoy_config_core_v3_health_check } from '../../gen/envoy/config/core/v3/health_check_pb';
import { file_envoy_config_core_v3_http_uri } from '../../gen/envoy/config/core/v3/http_uri_pb';
import { file_envoy_config_core_v3_protocol } from '../../gen/envoy/config/core/v3/protocol_pb';
import { file_envoy_config_core_v3_proxy_protocol } from '../../gen/envoy/config/core/v3/proxy_protocol_pb';
import { file_envoy_config_core_v3_resolver } from '../../gen/envoy/config/core/v3/resolver_pb';
import { file_envoy_config_core_v3_socket_option } from '../../gen/envoy/config/core/v3/socket_option_pb';
import { file_envoy_config_core_v3_substitution_format_string } from '../../gen/envoy/config/core/v3/substitution_format_string_pb';
import { file_envoy_config_core_v3_udp_socket_config } from '../../gen/envoy/config/core/v3/udp_socket_config_pb';
import { file_envoy_config_endpoint_v3_endpoint_components } from '../../gen/envoy/config/endpoint/v3/endpoint_components_pb';
import { file_envoy_config_endpoint_v3_endpoint } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import { file_envoy_config_listener_v3_api_listener } from '../../gen/envoy/config/listener/v3/api_listener_pb';
import { file_envoy_config_listener_v3_listener_components } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { file_envoy_config_listener_v3_listener } from '../../gen/envoy/config/listener/v3/listener_pb';
import { file_envoy_config_listener_v3_quic_config } from '../../gen/envoy/config/listener/v3/quic_config_pb';
import { file_envoy_config_listener_v3_udp_listener_config } from '../../gen/envoy/config/listener/v3/udp_listener_config_pb';
import { file_envoy_config_metrics_v3_stats } from '../../gen/envoy/config/metrics/v3/stats_pb';
import { file_envoy_config_overload_v3_overload } from '../../gen/envoy/config/overload/v3/overload_pb';
import { file_envoy_config_rbac_v3_rbac } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import { file_envoy_config_route_v3_route_components } from '../../gen/envoy/config/route/v3/route_components_pb';
import { file_envoy_config_route_v3_route } from '../../gen/envoy/config/route/v3/route_pb';
import { file_envoy_config_route_v3_scoped_route } from '../../gen/envoy/config/route/v3/scoped_route_pb';
import { file_envoy_config_trace_v3_http_tracer } from '../../gen/envoy/config/trace/v3/http_tracer_pb';
import { file_envoy_extensions_access_loggers_file_v3_file } from '../../gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { file_envoy_extensions_clusters_aggregate_v3_cluster } from '../../gen/envoy/extensions/clusters/aggregate/v3/cluster_pb';
import { file_envoy_extensions_common_ratelimit_v3_ratelimit } from '../../gen/envoy/extensions/common/ratelimit/v3/ratelimit_pb';
import { file_envoy_extensions_filters_common_fault_v3_fault } from '../../gen/envoy/extensions/filters/common/fault/v3/fault_pb';
import { file_envoy_extensions_filters_http_cors_v3_cors } from '../../gen/envoy/extensions/filters/http/cors/v3/cors_pb';
import { file_envoy_extensions_filters_http_fault_v3_fault } from '../../gen/envoy/extensions/filters/http/fault/v3/fault_pb';
import { file_envoy_extensions_filters_http_grpc_stats_v3_config } from '../../gen/envoy/extensions/filters/http/grpc_stats/v3/config_pb';
import { file_envoy_extensions_filters_http_health_check_v3_health_check } from '../../gen/envoy/extensions/filters/http/health_check/v3/health_check_pb';
import { file_envoy_extensions_filters_http_jwt_authn_v3_config } from '../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { file_envoy_extensions_filters_http_local_ratelimit_v3_local_rate_limit } from '../../gen/envoy/extensions/filters/http/local_ratelimit/v3/local_rate_limit_pb';
import { file_envoy_extensions_filters_http_rbac_v3_rbac } from '../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { file_envoy_extensions_filters_http_router_v3_router } from '../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import { file_envoy_extensions_filters_listener_http_inspector_v3_http_inspector } from '../../gen/envoy/extensions/filters/listener/http_inspector/v3/http_inspector_pb';
import { file_envoy_extensions_filters_listener_original_dst_v3_original_dst } from '../../gen/envoy/extensions/filters/listener/original_dst/v3/original_dst_pb';
import { file_envoy_extensions_filters_listener_original_src_v3_original_src } from '../../gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb';
import { file_envoy_extensions_filters_listener_tls_inspector_v3_tls_inspector } from '../../gen/envoy/extensions/filters/listener/tls_inspector/v3/tls_inspector_pb';
import { file_envoy_extensions_filters_network_http_connection_manager_v3_http_connection_manager } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { file_envoy_extensions_filters_network_rbac_v3_rbac } from '../../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { file_envoy_extensions_filters_network_tcp_proxy_v3_tcp_proxy } from '../../gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { file_envoy_extensions_load_balancing_policies_common_v3_common } from '../../gen/envoy/extensions/load_balancing_policies/common/v3/common_pb';
import { file_envoy_extensions_load_balancing_policies_least_request_v3_least_request } from '../../gen/envoy/extensions/load_balancing_policies/least_request/v3/least_request_pb';
import { file_envoy_extensions_load_balancing_policies_random_v3_random } from '../../gen/envoy/extensions/load_balancing_policies/random/v3/random_pb';
import { file_envoy_extensions_load_balancing_policies_ring_hash_v3_ring_hash } from '../../gen/envoy/extensions/load_balancing_policies/ring_hash/v3/ring_hash_pb';
import { file_envoy_extensions_load_balancing_policies_round_robin_v3_round_robin } from '../../gen/envoy/extensions/load_balancing_policies/round_robin/v3/round_robin_pb';
import { file_envoy_extensions_load_balancing_policies_wrr_locality_v3_wrr_locality } from '../../gen/envoy/extensions/load_balancing_policies/wrr_locality/v3/wrr_locality_pb';
import { file_envoy_extensions_request_id_uuid_v3_uuid } from '../../gen/envoy/extensions/request_id/uuid/v3/uuid_pb';
import { file_envoy_extensions_retry_host_previous_hosts_v3_previous_hosts } from '../../gen/envoy/extensions/retry/host/previous_hosts/v3/previous_hosts_pb';
import { file_envoy_extensions_retry_priority_previous_priorities_v3_previous_priorities_config } from '../../gen/envoy/extensions/retry/priority/previous_priorities/v3/previous_priorities_config_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_common } from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { file_envoy_extensions_transport_sockets_tls_v3_tls } from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { file_envoy_extensions_upstreams_http_v3_http_protocol_options } from '../../gen/envoy/extensions/upstreams/http/v3/http_protocol_options_pb';
import { file_envoy_type_http_v3_path_transformation } from '../../gen/envoy/type/http/v3/path_transformation_pb';
import { file_envoy_type_matcher_v3_filter_state } from '../../gen/envoy/type/matcher/v3/filter_state_pb';
import { file_envoy_type_matcher_v3_metadata } from '../../gen/envoy/type/matcher/v3/metadata_pb';
import { file_envoy_type_matcher_v3_node } from '../../gen/envoy/type/matcher/v3/node_pb';
import { file_envoy_type_matcher_v3_number } from '../../gen/envoy/type/matcher/v3/number_pb';
import { file_envoy_type_matcher_v3_path } from '../../gen/envoy/type/matcher/v3/path_pb';
import { file_envoy_type_matcher_v3_regex } from '../../gen/envoy/type/matcher/v3/regex_pb';
import { file_envoy_type_matcher_v3_string } from '../../gen/envoy/type/matcher/v3/string_pb';
import { file_envoy_type_matcher_v3_struct } from '../../gen/envoy/type/matcher/v3/struct_pb';
import { file_envoy_type_matcher_v3_value } from '../../gen/envoy/type/matcher/v3/value_pb';
import { file_envoy_type_metadata_v3_metadata } from '../../gen/envoy/type/metadata/v3/metadata_pb';
import { file_envoy_type_tracing_v3_custom_tag } from '../../gen/envoy/type/tracing/v3/custom_tag_pb';
import { file_envoy_type_v3_hash_policy } from '../../gen/envoy/type/v3/hash_policy_pb';
import { file_envoy_type_v3_http } from '../../gen/envoy/type/v3/http_pb';
import { file_envoy_type_v3_http_status } from '../../gen/envoy/type/v3/http_status_pb';
import { file_envoy_type_v3_percent } from '../../gen/envoy/type/v3/percent_pb';
import { file_envoy_type_v3_range } from '../../gen/envoy/type/v3/range_pb';
import { file_envoy_type_v3_ratelimit_unit } from '../../gen/envoy/type/v3/ratelimit_unit_pb';
import { file_envoy_type_v3_semantic_version } from '../../gen/envoy/type/v3/semantic_version_pb';
import { file_envoy_type_v3_token_bucket } from '../../gen/envoy/type/v3/token_bucket_pb';
import { file_udpa_annotations_migrate } from '../../gen/udpa/annotations/migrate_pb';
import { file_udpa_annotations_security } from '../../gen/udpa/annotations/security_pb';
import { file_udpa_annotations_sensitive } from '../../gen/udpa/annotations/sensitive_pb';
import { file_udpa_annotations_status } from '../../gen/udpa/annotations/status_pb';
import { file_udpa_annotations_versioning } from '../../gen/udpa/annotations/versioning_pb';
import { file_udpa_type_v1_typed_struct } from '../../gen/udpa/type/v1/typed_struct_pb';
import { file_xds_annotations_v3_status } from '../../gen/xds/annotations/v3/status_pb';
import { file_xds_core_v3_authority } from '../../gen/xds/core/v3/authority_pb';
import { file_xds_core_v3_collection_entry } from '../../gen/xds/core/v3/collection_entry_pb';
import { file_xds_core_v3_context_params } from '../../gen/xds/core/v3/context_params_pb';
import { file_xds_core_v3_extension } from '../../gen/xds/core/v3/extension_pb';
import { file_xds_core_v3_resource_locator } from '../../gen/xds/core/v3/resource_locator_pb';
import { file_xds_type_matcher_v3_matcher } from '../../gen/xds/type/matcher/v3/matcher_pb';
import { file_xds_type_matcher_v3_regex } from '../../gen/xds/type/matcher/v3/regex_pb';
import { file_xds_type_matcher_v3_string } from '../../gen/xds/type/matcher/v3/string_pb';

let registry: Registry | undefined;

export function envoyValidationRegistry(): Registry {
  registry ??= createRegistry(
    file_google_protobuf_struct,
    file_google_protobuf_any,
    file_google_protobuf_wrappers,
    file_google_protobuf_duration,
    file_google_protobuf_empty,
    file_envoy_annotations_deprecation,
    file_envoy_annotations_resource,
    file_envoy_config_accesslog_v3_accesslog,
    file_envoy_config_bootstrap_v3_bootstrap,
    file_envoy_config_cluster_v3_circuit_breaker,
    file_envoy_config_cluster_v3_cluster,
    file_envoy_config_cluster_v3_filter,
    file_envoy_config_cluster_v3_outlier_detection,
    file_envoy_config_core_v3_address,
    file_envoy_config_core_v3_backoff,
    file_envoy_config_core_v3_base,
    file_envoy_config_core_v3_config_source,
    file_envoy_config_core_v3_event_service_config,
    file_envoy_config_core_v3_extension,
    file_envoy_config_core_v3_grpc_method_list,
    file_envoy_config_core_v3_grpc_service,
    file_envoy_config_core_v3_health_check,
    file_envoy_config_core_v3_http_uri,
    file_envoy_config_core_v3_protocol,
    file_envoy_config_core_v3_proxy_protocol,
    file_envoy_config_core_v3_resolver,
    file_envoy_config_core_v3_socket_option,
    file_envoy_config_core_v3_substitution_format_string,
    file_envoy_config_core_v3_udp_socket_config,
    file_envoy_config_endpoint_v3_endpoint_components,
    file_envoy_config_endpoint_v3_endpoint,
    file_envoy_config_listener_v3_api_listener,
    file_envoy_config_listener_v3_listener_components,
    file_envoy_config_listener_v3_listener,
    file_envoy_config_listener_v3_quic_config,
    file_envoy_config_listener_v3_udp_listener_config,
    file_envoy_config_metrics_v3_stats,
    file_envoy_config_overload_v3_overload,
    file_envoy_config_rbac_v3_rbac,
    file_envoy_config_route_v3_route_components,
    file_envoy_config_route_v3_route,
    file_envoy_config_route_v3_scoped_route,
    file_envoy_config_trace_v3_http_tracer,
    file_envoy_extensions_access_loggers_file_v3_file,
    file_envoy_extensions_clusters_aggregate_v3_cluster,
    file_envoy_extensions_common_ratelimit_v3_ratelimit,
    file_envoy_extensions_filters_common_fault_v3_fault,
    file_envoy_extensions_filters_http_cors_v3_cors,
    file_envoy_extensions_filters_http_fault_v3_fault,
    file_envoy_extensions_filters_http_grpc_stats_v3_config,
    file_envoy_extensions_filters_http_health_check_v3_health_check,
    file_envoy_extensions_filters_http_jwt_authn_v3_config,
    file_envoy_extensions_filters_http_local_ratelimit_v3_local_rate_limit,
    file_envoy_extensions_filters_http_rbac_v3_rbac,
    file_envoy_extensions_filters_http_router_v3_router,
    file_envoy_extensions_filters_listener_http_inspector_v3_http_inspector,
    file_envoy_extensions_filters_listener_original_dst_v3_original_dst,
    file_envoy_extensions_filters_listener_original_src_v3_original_src,
    file_envoy_extensions_filters_listener_tls_inspector_v3_tls_inspector,
    file_envoy_extensions_filters_network_http_connection_manager_v3_http_connection_manager,
    file_envoy_extensions_filters_network_rbac_v3_rbac,
    file_envoy_extensions_filters_network_tcp_proxy_v3_tcp_proxy,
    file_envoy_extensions_load_balancing_policies_common_v3_common,
    file_envoy_extensions_load_balancing_policies_least_request_v3_least_request,
    file_envoy_extensions_load_balancing_policies_random_v3_random,
    file_envoy_extensions_load_balancing_policies_ring_hash_v3_ring_hash,
    file_envoy_extensions_load_balancing_policies_round_robin_v3_round_robin,
    file_envoy_extensions_load_balancing_policies_wrr_locality_v3_wrr_locality,
    file_envoy_extensions_request_id_uuid_v3_uuid,
    file_envoy_extensions_retry_host_previous_hosts_v3_previous_hosts,
    file_envoy_extensions_retry_priority_previous_priorities_v3_previous_priorities_config,
    file_envoy_extensions_transport_sockets_tls_v3_common,
    file_envoy_extensions_transport_sockets_tls_v3_secret,
    file_envoy_extensions_transport_sockets_tls_v3_tls,
    file_envoy_extensions_upstreams_http_v3_http_protocol_options,
    file_envoy_type_http_v3_path_transformation,
    file_envoy_type_matcher_v3_filter_state,
    file_envoy_type_matcher_v3_metadata,
    file_envoy_type_matcher_v3_node,
    file_envoy_type_matcher_v3_number,
    file_envoy_type_matcher_v3_path,
    file_envoy_type_matcher_v3_regex,
    file_envoy_type_matcher_v3_string,
    file_envoy_type_matcher_v3_struct,
    file_envoy_type_matcher_v3_value,
    file_envoy_type_metadata_v3_metadata,
    file_envoy_type_tracing_v3_custom_tag,
    file_envoy_type_v3_hash_policy,
    file_envoy_type_v3_http,
    file_envoy_type_v3_http_status,
    file_envoy_type_v3_percent,
    file_envoy_type_v3_range,
    file_envoy_type_v3_ratelimit_unit,
    file_envoy_type_v3_semantic_version,
    file_envoy_type_v3_token_bucket,
    file_udpa_annotations_migrate,
    file_udpa_annotations_security,
    file_udpa_annotations_sensitive,
    file_udpa_annotations_status,
    file_udpa_annotations_versioning,
    file_udpa_type_v1_typed_struct,
    file_xds_annotations_v3_status,
    file_xds_core_v3_authority,
    file_xds_core_v3_collection_entry,
    file_xds_core_v3_context_params,
    file_xds_core_v3_extension,
    file_xds_core_v3_resource_locator,
    file_xds_type_matcher_v3_matcher,
    file_xds_type_matcher_v3_regex,
    file_xds_type_matcher_v3_string,
  );
  return registry;
}
