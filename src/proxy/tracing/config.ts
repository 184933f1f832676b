// What an HttpConnectionManager's `tracing` and `request_id_extension` compile to (Envoy's
// HttpConnectionManagerConfig tracing part, conn_manager_config.cc, and the tracer factories of
// source/extensions/tracers/{zipkin,opentelemetry}/config.cc). Pure translation; a config Envoy would reject
// throws ConfigError naming where.
// Differs from Envoy on purpose: only the Zipkin (HTTP_JSON) and OpenTelemetry tracers exist (the providers
// istiod configures for zipkin and opentelemetry extension providers); OpenTelemetry resource detectors and
// samplers are ignored (a warning says so: the resource keeps service.name only, sampling stays Envoy's own);
// the bootstrap-level `tracing` is not read (istiod sets the provider on each HCM).
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { HttpConnectionManager } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { ZipkinConfig_CollectorEndpointVersion, ZipkinConfigSchema } from '../../gen/envoy/config/trace/v3/zipkin_pb';
import { OpenTelemetryConfigSchema } from '../../gen/envoy/config/trace/v3/opentelemetry_pb';
import { UuidRequestIdConfigSchema } from '../../gen/envoy/extensions/request_id/uuid/v3/uuid_pb';
import type { CustomTag } from '../../gen/envoy/type/tracing/v3/custom_tag_pb';
import type { Percent } from '../../gen/envoy/type/v3/percent_pb';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import { DEFAULT_REQUEST_ID, type RequestIdOptions } from './request-id';

/** A custom tag, compiled: its value comes from a literal, the environment, a request header or metadata. */
export type CompiledCustomTag =
  | { tag: string; kind: 'literal'; value: string }
  | { tag: string; kind: 'header'; name: string; defaultValue: string }
  | { tag: string; kind: 'metadata'; source: 'request' | 'route' | 'cluster' | 'host'; key: string; path: string[]; defaultValue: string };

export interface ZipkinOptions {
  kind: 'zipkin';
  cluster: string;
  endpoint: string;
  /** Host header of the reports: collector_hostname, else the cluster name. */
  hostname: string;
  traceId128: boolean;
  sharedSpanContext: boolean;
}

export interface OtelOptions {
  kind: 'opentelemetry';
  serviceName: string;
  transport:
    | { kind: 'grpc'; cluster: string; authority: string; timeoutMs: number; metadata: Array<[string, string]> }
    | { kind: 'http'; cluster: string; path: string; authority: string; timeoutMs: number; headers: Array<[string, string]> };
  /** Why some of the config is not acted on (resource detectors, samplers), for one warning. */
  ignored: string[];
}

export type ProviderOptions = ZipkinOptions | OtelOptions;

export interface TracingOptions {
  /** Envoy's operation name: `egress` for OUTBOUND listeners, else `ingress`. */
  operation: 'ingress' | 'egress';
  /** client_sampling in percent (Envoy keeps its integer part, out of 100). */
  clientSampling: number;
  /** random_sampling and overall_sampling out of 10000. */
  randomSampling: number;
  overallSampling: number;
  verbose: boolean;
  maxPathTagLength: number;
  customTags: CompiledCustomTag[];
  spawnUpstreamSpan: boolean;
  requestId: RequestIdOptions;
  /** undefined: tracing is on (request ids carry the decision) but no tracer reports spans. */
  provider: ProviderOptions | undefined;
}

const ZIPKIN = 'type.googleapis.com/envoy.config.trace.v3.ZipkinConfig';
const OTEL = 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig';
const UUID = 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig';
const DEFAULT_MAX_PATH_TAG_LENGTH = 256;

/** Envoy's PROTOBUF_PERCENT_TO_ROUNDED_INTEGER_OR_DEFAULT(…, 10000, 10000). */
function tenThousandths(p: Percent | undefined): number {
  return p ? Math.round((p.value * 10000) / 100) : 10000;
}

/** The HCM's tracing settings; undefined when it has no `tracing` (then tracing costs nothing per request). */
export function tracingOptionsOf(proto: HttpConnectionManager, where: string, egress: boolean): TracingOptions | undefined {
  const t = proto.tracing;
  if (!t) return undefined;
  const tw = `${where}.tracing`;
  return {
    operation: egress ? 'egress' : 'ingress',
    clientSampling: t.clientSampling ? Math.trunc(t.clientSampling.value) : 100,
    randomSampling: tenThousandths(t.randomSampling),
    overallSampling: tenThousandths(t.overallSampling),
    verbose: t.verbose,
    maxPathTagLength: t.maxPathTagLength ?? DEFAULT_MAX_PATH_TAG_LENGTH,
    customTags: t.customTags.map((c, i) => compileCustomTag(c, `${tw}.custom_tags[${i}]`)).filter((c): c is CompiledCustomTag => c !== undefined),
    spawnUpstreamSpan: t.spawnUpstreamSpan ?? false,
    requestId: requestIdOptionsOf(proto.requestIdExtension?.typedConfig, `${where}.request_id_extension`),
    provider: t.provider
      ? providerOf(t.provider.name, t.provider.configType.case === 'typedConfig' ? t.provider.configType.value : undefined, `${tw}.provider`)
      : undefined,
  };
}

/** UuidRequestIdConfig (the only request-id extension Envoy ships); absent: its defaults. */
export function requestIdOptionsOf(any: Any | undefined, where: string): RequestIdOptions {
  if (!any) return DEFAULT_REQUEST_ID;
  if (any.typeUrl !== UUID)
    throw new ConfigError(`${where}: Didn't find a registered implementation for type: '${any.typeUrl.replace(/^.*\//, '')}'`);
  const u = anyUnpack(any, UuidRequestIdConfigSchema);
  if (!u) throw new ConfigError(`${where}: cannot decode UuidRequestIdConfig`);
  return { packTraceReason: u.packTraceReason ?? true, useRequestIdForTraceSampling: u.useRequestIdForTraceSampling ?? true };
}

/**
 * A custom tag. An environment tag reads the variable once, as Envoy does when it loads the config; a tag whose
 * value is empty is never set (CustomTagBase::applySpan), so an unset variable without a default is dropped here.
 */
export function compileCustomTag(c: CustomTag, where: string): CompiledCustomTag | undefined {
  if (!c.tag) throw new ConfigError(`${where}.tag: value length must be at least 1 characters`);
  const t = c.type;
  switch (t.case) {
    case 'literal':
      return { tag: c.tag, kind: 'literal', value: t.value.value };
    case 'environment': {
      const v = process.env[t.value.name] || t.value.defaultValue;
      return v ? { tag: c.tag, kind: 'literal', value: v } : undefined;
    }
    case 'requestHeader':
      return { tag: c.tag, kind: 'header', name: t.value.name.toLowerCase(), defaultValue: t.value.defaultValue };
    case 'metadata': {
      const kind = t.value.kind?.kind.case ?? 'request';
      const key = t.value.metadataKey?.key ?? '';
      const path = (t.value.metadataKey?.path ?? []).map((p) => (p.segment.case === 'key' ? p.segment.value : ''));
      return { tag: c.tag, kind: 'metadata', source: kind, key, path, defaultValue: t.value.defaultValue };
    }
    default:
      throw new ConfigError(`${where}: custom tag has no value source`);
  }
}

/** The tracer named by `provider`, by its typed_config's type as Envoy looks tracers up. */
export function providerOf(name: string, any: Any | undefined, where: string): ProviderOptions {
  if (any?.typeUrl === ZIPKIN || (!any && name === 'envoy.tracers.zipkin')) return zipkinOptionsOf(any, where);
  if (any?.typeUrl === OTEL || (!any && name === 'envoy.tracers.opentelemetry')) return otelOptionsOf(any, where);
  throw new ConfigError(
    `${where}: Didn't find a registered implementation for name: '${name}' (this proxy has the envoy.tracers.zipkin and envoy.tracers.opentelemetry tracers)`,
  );
}

function zipkinOptionsOf(any: Any | undefined, where: string): ZipkinOptions {
  const z = any ? anyUnpack(any, ZipkinConfigSchema) : undefined;
  if (!z) throw new ConfigError(`${where}.typed_config: a ZipkinConfig is required`);
  if (!z.collectorCluster) throw new ConfigError(`${where}.typed_config.collector_cluster: value length must be at least 1 characters`);
  if (!z.collectorEndpoint) throw new ConfigError(`${where}.typed_config.collector_endpoint: value length must be at least 1 characters`);
  if (z.collectorEndpointVersion === ZipkinConfig_CollectorEndpointVersion.DEPRECATED_AND_UNAVAILABLE_DO_NOT_USE)
    throw new ConfigError(
      'hidden_envoy_deprecated_HTTP_JSON_V1 has been deprecated. Please use a non-default envoy::config::trace::v3::ZipkinConfig::CollectorEndpointVersion value.',
    );
  if (z.collectorEndpointVersion !== ZipkinConfig_CollectorEndpointVersion.HTTP_JSON)
    throw new ConfigError(`${where}.typed_config.collector_endpoint_version: only HTTP_JSON (Zipkin v2 JSON) is supported`);
  return {
    kind: 'zipkin',
    cluster: z.collectorCluster,
    endpoint: z.collectorEndpoint,
    hostname: z.collectorHostname || z.collectorCluster,
    traceId128: z.traceId128bit,
    sharedSpanContext: z.sharedSpanContext ?? true,
  };
}

function otelOptionsOf(any: Any | undefined, where: string): OtelOptions {
  const o = any ? anyUnpack(any, OpenTelemetryConfigSchema) : undefined;
  if (!o) throw new ConfigError(`${where}.typed_config: an OpenTelemetryConfig is required`);
  const ignored: string[] = [];
  if (o.resourceDetectors.length > 0)
    ignored.push(`resource_detectors (${o.resourceDetectors.map((d) => d.name).join(', ')}): the resource carries service.name only`);
  if (o.sampler) ignored.push(`sampler ${o.sampler.name}: spans are sampled by the HCM's own sampling`);
  let transport: OtelOptions['transport'];
  if (o.grpcService) {
    const g = o.grpcService;
    if (g.targetSpecifier.case !== 'envoyGrpc') throw new ConfigError(`${where}.typed_config.grpc_service: only envoy_grpc is supported`);
    transport = {
      kind: 'grpc',
      cluster: g.targetSpecifier.value.clusterName,
      authority: g.targetSpecifier.value.authority || g.targetSpecifier.value.clusterName,
      timeoutMs: durationToMs(g.timeout) ?? 0,
      metadata: g.initialMetadata.map((h) => [h.key.toLowerCase(), h.value]),
    };
  } else if (o.httpService) {
    const u = o.httpService.httpUri;
    if (!u || u.httpUpstreamType.case !== 'cluster') throw new ConfigError(`${where}.typed_config.http_service.http_uri: a cluster is required`);
    const { host, path } = splitUri(u.uri);
    transport = {
      kind: 'http',
      cluster: u.httpUpstreamType.value,
      path: path || '/v1/traces',
      authority: host || u.httpUpstreamType.value,
      timeoutMs: durationToMs(u.timeout) ?? 0,
      headers: o.httpService.requestHeadersToAdd.filter((h) => h.header).map((h) => [h.header!.key.toLowerCase(), h.header!.value]),
    };
  } else {
    throw new ConfigError(`${where}.typed_config: one of grpc_service or http_service is required`);
  }
  return { kind: 'opentelemetry', serviceName: o.serviceName || 'unknown_service:envoy', transport, ignored };
}

/** `http://host:4318/v1/traces` → host and path; a bare `host/path` (istiod's url.JoinPath of hostname and path) too. */
export function splitUri(uri: string): { host: string; path: string } {
  const rest = uri.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const slash = rest.indexOf('/');
  return slash < 0 ? { host: rest, path: '' } : { host: rest.slice(0, slash), path: rest.slice(slash) };
}
