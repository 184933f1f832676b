// Istio's telemetry filters: `istio.metadata_exchange` (HTTP peer_metadata, network and upstream network
// MetadataExchange) and `istio.stats` (stats.PluginConfig) as istiod 1.26 builds them:
// pilot/pkg/xds/filters/filters.go (SidecarInboundMetadataFilter, SidecarOutboundMetadataFilter,
// TCPListenerMx, TCPClusterMx, additionalLabels) and pilot/pkg/model/telemetry.go (buildHTTPTelemetryFilter,
// buildTCPTelemetryFilter, generateStatsConfig, metricToPrometheusMetric, disableHostHeaderFallback).
//
// Upstream Envoy has none of these filters: Envoy looks a filter's factory up by the type of its config (the
// TypedStruct's type_url for Istio's filters) and rejects a listener or cluster naming one it lacks. An HTTP
// filter may be marked is_optional to be skipped instead, but network and cluster filters have no such flag,
// and marking only some would make the same config mean different things on different proxies. So a proxy
// whose Node.extensions do not list them (upstream Envoy; capabilities.ts) gets none of them, optional or
// not: it reports no Istio standard metrics and exchanges no peer metadata. Everything else (access logs,
// tracing) is upstream Envoy's and is sent to every proxy.
import { create, type JsonObject } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import { supports } from '../../discovery/capabilities';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { StatsConfig, TelemetryClass } from '../../discovery/telemetry';
import { FilterSchema, type Filter } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { type HttpFilter, HttpFilterSchema } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { PluginConfigSchema, Reporter } from '../../gen/istio/envoy/extensions/stats/config_pb';
import { TypedStructSchema } from '../../gen/udpa/type/v1/typed_struct_pb';
import { goDuration, pack } from './common';

// filters.ts has its own; this file sits below it (filters.ts calls in here)
const httpFilter = (name: string, config: Any): HttpFilter => create(HttpFilterSchema, { name, configType: { case: 'typedConfig', value: config } });

export const MX_FILTER = 'istio.metadata_exchange';
export const STATS_FILTER = 'istio.stats';
export const PEER_METADATA_TYPE_URL = 'type.googleapis.com/io.istio.http.peer_metadata.Config';
export const METADATA_EXCHANGE_TYPE_URL = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';
/** The ALPN the TCP metadata exchange speaks (and the inbound chains match). */
export const MX_PROTOCOL = 'istio-peer-exchange';

/** protoconv.TypedStructWithFields: a TypedStruct naming the config type, its fields as a Struct. */
export function typedStruct(typeUrl: string, fields: JsonObject): Any {
  return pack(TypedStructSchema, { typeUrl, value: fields });
}

function withLabels(cfg: JsonObject, labels: readonly string[]): JsonObject {
  return labels.length ? { ...cfg, additional_labels: [...labels] } : cfg;
}

/** The peer_metadata HTTP filter: inbound discovers and propagates downstream, the others upstream. */
export function mxHttpFilter(cls: TelemetryClass, additionalLabels: readonly string[] = []): HttpFilter {
  const side = cls === 'sidecarInbound' ? 'downstream' : 'upstream';
  const cfg: JsonObject = {
    [`${side}_discovery`]: [{ istio_headers: {} }, { workload_discovery: {} }],
    [`${side}_propagation`]: [{ istio_headers: {} }],
  };
  return httpFilter(MX_FILTER, typedStruct(PEER_METADATA_TYPE_URL, withLabels(cfg, additionalLabels)));
}

const mxTcpConfig = (additionalLabels: readonly string[]): JsonObject =>
  withLabels({ protocol: MX_PROTOCOL, enable_discovery: true }, additionalLabels);

/** TCPListenerMx: first network filter of inbound chains (and of gateway TCP servers with ISTIO_MUTUAL). */
export function mxNetworkFilter(additionalLabels: readonly string[] = []): Filter {
  return create(FilterSchema, {
    name: MX_FILTER,
    configType: { case: 'typedConfig', value: typedStruct(METADATA_EXCHANGE_TYPE_URL, mxTcpConfig(additionalLabels)) },
  });
}

/** TCPClusterMx: the upstream network filter of outbound service clusters and the passthrough cluster. */
export function mxClusterFilter(additionalLabels: readonly string[] = []): { name: string; typedConfig: Any } {
  return { name: MX_FILTER, typedConfig: typedStruct(METADATA_EXCHANGE_TYPE_URL, mxTcpConfig(additionalLabels)) };
}

/** metricToPrometheusMetric: the Telemetry API's metric names as the stats filter calls them. */
export const PROMETHEUS_METRIC_NAMES: Readonly<Record<string, string>> = {
  REQUEST_COUNT: 'requests_total',
  REQUEST_DURATION: 'request_duration_milliseconds',
  REQUEST_SIZE: 'request_bytes',
  RESPONSE_SIZE: 'response_bytes',
  TCP_OPENED_CONNECTIONS: 'tcp_connections_opened_total',
  TCP_CLOSED_CONNECTIONS: 'tcp_connections_closed_total',
  TCP_SENT_BYTES: 'tcp_sent_bytes_total',
  TCP_RECEIVED_BYTES: 'tcp_received_bytes_total',
  GRPC_REQUEST_MESSAGES: 'request_messages_total',
  GRPC_RESPONSE_MESSAGES: 'response_messages_total',
};

/**
 * generateStatsConfig: the host header is no destination_service fallback where requests come from outside
 * (inbound, gateways); overrides become per-metric dimensions (CEL), removed tags and drops. The rotation and
 * graceful-deletion intervals stay unset at Istio's defaults (0s, 5m: METRIC_ROTATION_INTERVAL and
 * METRIC_GRACEFUL_DELETION_INTERVAL are not read).
 */
export function statsPluginConfig(cls: TelemetryClass, s: StatsConfig, waypoint = false): Any {
  const tcpReportingDuration = goDuration(s.reportingInterval);
  return pack(PluginConfigSchema, {
    disableHostHeaderFallback: cls === 'sidecarInbound' || cls === 'gateway',
    ...(tcpReportingDuration ? { tcpReportingDuration } : {}),
    ...(waypoint ? { reporter: Reporter.SERVER_GATEWAY } : {}),
    metrics: s.metrics.overrides.map((o) => ({
      name: PROMETHEUS_METRIC_NAMES[o.name] ?? o.name,
      drop: o.disabled,
      dimensions: Object.fromEntries(o.tags.filter((t) => !t.remove).map((t) => [t.name, t.value])),
      tagsToRemove: o.tags.filter((t) => t.remove).map((t) => t.name),
    })),
  });
}

const mxLabels = (push: PushContext) => push.options.mxAdditionalLabels;

/** The metadata exchange HTTP filter of an HCM, first of its filters (appendMxFilter); none for upstream Envoy. */
export function metadataExchangeHttpFilters(proxy: Proxy, push: PushContext, cls: TelemetryClass): HttpFilter[] {
  if (!push.options.metadataExchange || !supports(proxy.capabilities, 'peerMetadata')) return [];
  return [mxHttpFilter(cls, mxLabels(push))];
}

/** The metadata exchange network filter of inbound chains (buildMetadataExchangeNetworkFilters). */
export function metadataExchangeNetworkFilters(proxy: Proxy, push: PushContext): Filter[] {
  if (!push.options.metadataExchange || !supports(proxy.capabilities, 'metadataExchange')) return [];
  return [mxNetworkFilter(mxLabels(push))];
}

/** The upstream metadata exchange filter of outbound clusters (applyMetadataExchange). */
export function metadataExchangeClusterFilters(proxy: Proxy, push: PushContext): Array<{ name: string; typedConfig: Any }> {
  if (!push.options.metadataExchange || !supports(proxy.capabilities, 'metadataExchange')) return [];
  return [mxClusterFilter(mxLabels(push))];
}

/** Telemetry.HTTPFilters: one istio.stats filter per prometheus provider in scope, after fault and cors. */
export function statsHttpFilters(proxy: Proxy, push: PushContext, cls: TelemetryClass): HttpFilter[] {
  if (!supports(proxy.capabilities, 'stats')) return [];
  return push.telemetry.stats(proxy, cls).map((s) => httpFilter(STATS_FILTER, statsPluginConfig(cls, s)));
}

/** Telemetry.TCPFilters: istio.stats network filters placed before tcp_proxy. */
export function statsNetworkFilters(proxy: Proxy, push: PushContext, cls: TelemetryClass): Filter[] {
  if (!supports(proxy.capabilities, 'stats')) return [];
  return push.telemetry
    .stats(proxy, cls)
    .map((s) => create(FilterSchema, { name: STATS_FILTER, configType: { case: 'typedConfig', value: statsPluginConfig(cls, s) } }));
}
