// HTTP connection manager tracing and request ID extension as istiod 1.26 builds them
// (pilot/pkg/networking/core/tracing.go configureTracingFromTelemetry, configureFromProviderConfig, zipkinConfig,
// otelConfig, buildHCMTracing, buildServiceTags, optionalPolicyTags, configureSampling, proxyConfigSamplingValue,
// configureCustomTags; pilot/pkg/xds/requestidextension). Without Telemetry tracing (and no default tracing
// provider) meshConfig.enableTracing gives an HCM tracing block without a provider (the proxy's bootstrap tracer
// applies) sampled at defaultConfig.tracing.sampling or PILOT_TRACE_SAMPLING; with it, the provider of the
// class's spec (client for outbound and gateways, server for inbound) is configured with its collector cluster
// `outbound|<port>||<host>`. Supported providers: zipkin and opentelemetry (gRPC or HTTP); others (datadog,
// skywalking, lightstep) are logged and leave the HCM untraced, as Istio does for a provider it cannot build.
// The OpenTelemetry resource detectors and Dynatrace sampler are not generated. Pod labels are read with the mesh
// names (service.mesh.io/canonical-*), Istio's own names as a fallback.
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import { type CustomTag as MeshCustomTag, type ExtensionProvider, proxyTracingOf } from '../../config/mesh-telemetry';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { TelemetryClass, TracingSpec } from '../../discovery/telemetry';
import { HeaderValueOption_HeaderAppendAction } from '../../gen/envoy/config/core/v3/base_pb';
import { OpenTelemetryConfigSchema } from '../../gen/envoy/config/trace/v3/opentelemetry_pb';
import { ZipkinConfig_CollectorEndpointVersion, ZipkinConfigSchema } from '../../gen/envoy/config/trace/v3/zipkin_pb';
import type { HttpConnectionManager_TracingSchema } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { type CustomTag, CustomTagSchema } from '../../gen/envoy/type/tracing/v3/custom_tag_pb';
import { registerScope } from '../../lib/log';
import { lookupCluster } from './access-log';
import { durationMs, pack } from './common';

const log = registerScope('telemetry');

type TracingInit = MessageInitShape<typeof HttpConnectionManager_TracingSchema>;

export const ZIPKIN_TRACER = 'envoy.tracers.zipkin';
export const OTEL_TRACER = 'envoy.tracers.opentelemetry';

export interface HcmTracing {
  /** The HCM's `tracing`; undefined: not traced. */
  tracing?: TracingInit;
  /** UuidRequestIdConfig.use_request_id_for_trace_sampling. */
  useRequestIdForTraceSampling: boolean;
}

const literal = (tag: string, value: string): CustomTag => create(CustomTagSchema, { tag, type: { case: 'literal', value: { value } } });

/** buildServiceTags: the workload's canonical service and revision, mesh, namespace and cluster, as literals. */
export function serviceTags(proxy: Proxy): CustomTag[] {
  const l = proxy.labels;
  const raw = proxy.metadata.raw;
  const revision = l['service.mesh.io/canonical-revision'] || l['service.istio.io/canonical-revision'] || 'latest';
  const service = l['service.mesh.io/canonical-name'] || l['service.istio.io/canonical-name'] || 'unknown';
  const meshId = typeof raw['MESH_ID'] === 'string' && raw['MESH_ID'] ? raw['MESH_ID'] : 'unknown';
  return [
    literal('istio.canonical_revision', revision),
    literal('istio.canonical_service', service),
    literal('istio.mesh_id', meshId),
    literal('istio.namespace', proxy.metadata.namespace || 'default'),
    literal('istio.cluster_id', proxy.metadata.clusterId || 'unknown'),
  ];
}

const dryRunTag = (tag: string, key: string): CustomTag =>
  create(CustomTagSchema, {
    tag,
    type: {
      case: 'metadata',
      value: {
        kind: { kind: { case: 'request', value: {} } },
        metadataKey: { key: 'envoy.filters.http.rbac', path: [{ segment: { case: 'key', value: key } }] },
      },
    },
  });

/** optionalPolicyTags: what dry-run AuthorizationPolicies decided, from the RBAC filter's metadata. */
export const POLICY_TAGS = (): CustomTag[] => [
  dryRunTag('istio.authorization.dry_run.allow_policy.name', 'istio_dry_run_allow_shadow_effective_policy_id'),
  dryRunTag('istio.authorization.dry_run.allow_policy.result', 'istio_dry_run_allow_shadow_engine_result'),
  dryRunTag('istio.authorization.dry_run.deny_policy.name', 'istio_dry_run_deny_shadow_effective_policy_id'),
  dryRunTag('istio.authorization.dry_run.deny_policy.result', 'istio_dry_run_deny_shadow_engine_result'),
];

/** Telemetry / ProxyConfig custom tags as Envoy's (buildCustomTagsFromProvider / FromProxyConfig). */
export function customTags(tags: Readonly<Record<string, MeshCustomTag>>): CustomTag[] {
  const out: CustomTag[] = [];
  for (const [tag, t] of Object.entries(tags)) {
    if ('literal' in t && t.literal) out.push(literal(tag, t.literal.value ?? ''));
    else if ('environment' in t && t.environment)
      out.push(
        create(CustomTagSchema, {
          tag,
          type: { case: 'environment', value: { name: t.environment.name ?? '', defaultValue: t.environment.defaultValue ?? '' } },
        }),
      );
    else if ('header' in t && t.header)
      out.push(
        create(CustomTagSchema, {
          tag,
          type: { case: 'requestHeader', value: { name: t.header.name ?? '', defaultValue: t.header.defaultValue ?? '' } },
        }),
      );
  }
  return out;
}

/** configureCustomTags: Istio's tags (unless turned off), then the spec's tags or else the ProxyConfig's, by name. */
function tagsFor(proxy: Proxy, push: PushContext, spec: TracingSpec | undefined): CustomTag[] {
  const pc = proxyTracingOf(proxy.metadata.raw, push.options.meshTelemetry);
  const istioTags = spec ? spec.enableIstioTags : (pc.enableIstioTags ?? true);
  const own = spec?.customTags && Object.keys(spec.customTags).length ? spec.customTags : pc.customTags;
  const tags = [...(istioTags ? [...serviceTags(proxy), ...POLICY_TAGS()] : []), ...customTags(own)];
  return tags.sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0));
}

/** proxyConfigSamplingValue: defaultConfig.tracing.sampling when set (above 100 reads as 1), else PILOT_TRACE_SAMPLING. */
export function proxyConfigSampling(proxy: Proxy, push: PushContext): number {
  const s = proxyTracingOf(proxy.metadata.raw, push.options.meshTelemetry).sampling;
  if (s === undefined || s === 0) return push.options.traceSampling;
  return s > 100 ? 1 : s;
}

const sampling = (random: number): Pick<TracingInit, 'clientSampling' | 'randomSampling' | 'overallSampling'> => ({
  clientSampling: { value: 100 },
  randomSampling: { value: random },
  overallSampling: { value: 100 },
});

/** The provider's tracer config: the Any and its max tag length, or why it cannot be built. */
function providerConfig(proxy: Proxy, push: PushContext, p: ExtensionProvider): { name: string; config: Any; maxTagLength: number } | string {
  if (p.kind !== 'zipkin' && p.kind !== 'opentelemetry') return `provider ${p.kind === 'unsupported' ? p.type : p.kind} does not support tracing`;
  const found = lookupCluster(push, p.service, p.port);
  if (typeof found === 'string') return `could not find cluster for tracing provider ${JSON.stringify(p.name)}: ${found}`;
  if (p.kind === 'zipkin') {
    const config = pack(ZipkinConfigSchema, {
      collectorCluster: found.cluster,
      collectorEndpoint: p.path || '/api/v2/spans',
      collectorEndpointVersion: ZipkinConfig_CollectorEndpointVersion.HTTP_JSON,
      collectorHostname: found.hostname,
      traceId128bit: !p.enable64bitTraceId,
      sharedSpanContext: false,
    });
    return { name: ZIPKIN_TRACER, config, maxTagLength: p.maxTagLength };
  }
  const headers = (hs: readonly { name: string; value: string }[]) => hs.map((h) => ({ key: h.name, value: h.value }));
  const transport: MessageInitShape<typeof OpenTelemetryConfigSchema> = p.http
    ? {
        httpService: {
          httpUri: {
            // url.JoinPath(hostname, path)
            uri: `${found.hostname}/${p.http.path.replace(/^\/+/, '')}`.replace(/\/$/, ''),
            httpUpstreamType: { case: 'cluster', value: found.cluster },
            ...(p.http.timeoutMs !== undefined ? { timeout: durationMs(p.http.timeoutMs) } : {}),
          },
          requestHeadersToAdd: headers(p.http.headers).map((header) => ({
            appendAction: HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
            header,
          })),
        },
      }
    : {
        grpcService: {
          targetSpecifier: { case: 'envoyGrpc', value: { clusterName: found.cluster, authority: found.hostname } },
          ...(p.grpc?.timeoutMs !== undefined ? { timeout: durationMs(p.grpc.timeoutMs) } : {}),
          initialMetadata: headers(p.grpc?.initialMetadata ?? []),
        },
      };
  return {
    name: OTEL_TRACER,
    config: pack(OpenTelemetryConfigSchema, { serviceName: proxy.serviceCluster ?? '', ...transport }),
    maxTagLength: p.maxTagLength,
  };
}

/** configureTracing for one HCM. */
export function hcmTracing(proxy: Proxy, push: PushContext, cls: TelemetryClass): HcmTracing {
  const mesh = push.options.meshTelemetry;
  const pc = proxyTracingOf(proxy.metadata.raw, mesh);
  const t = push.telemetry.tracing(proxy);
  const untraced: HcmTracing = { useRequestIdForTraceSampling: true };
  if (!t) {
    if (!mesh.enableTracing) return untraced;
    const tracing: TracingInit = { ...sampling(proxyConfigSampling(proxy, push)), customTags: tagsFor(proxy, push, undefined) };
    if (pc.maxPathTagLength) tracing.maxPathTagLength = pc.maxPathTagLength;
    return { tracing, useRequestIdForTraceSampling: true };
  }
  const spec = cls === 'sidecarInbound' ? t.server : t.client;
  if (spec.disabled) return untraced;
  const tracing: TracingInit = {};
  if (spec.provider) {
    const built = providerConfig(proxy, push, t.providers.get(spec.provider)!);
    if (typeof built === 'string') {
      log.warn(`Not able to configure requested tracing provider ${JSON.stringify(spec.provider)}: ${built}`);
      return untraced;
    }
    // gateways open a span per upstream request only with PILOT_SPAWN_UPSTREAM_SPAN_FOR_GATEWAY
    if (proxy.type === 'router' && push.options.spawnUpstreamSpanForGateway) tracing.spawnUpstreamSpan = true;
    tracing.provider = { name: built.name, configType: { case: 'typedConfig', value: built.config } };
    if (built.maxTagLength) tracing.maxPathTagLength = built.maxTagLength;
  }
  Object.assign(tracing, sampling(spec.randomSamplingPercentage ?? proxyConfigSampling(proxy, push)));
  tracing.customTags = tagsFor(proxy, push, spec);
  if (tracing.maxPathTagLength === undefined && pc.maxPathTagLength) tracing.maxPathTagLength = pc.maxPathTagLength;
  return { tracing, useRequestIdForTraceSampling: spec.useRequestIdForTraceSampling };
}
