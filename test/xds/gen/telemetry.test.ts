// The daemon's telemetry xDS from Telemetry resources and mesh config, against Istio 1.26's own expectations:
// the stats.PluginConfig JSON of pilot/pkg/model/telemetry_test.go TestTelemetryFilters, the merge rules of
// mergeLogs/Tracing, the filters of pilot/pkg/xds/filters/filters.go, the access log formats of
// telemetry_logging.go and the tracing of networking/core/tracing.go (zipkin collector cluster, sampling,
// Istio's tags).
import t from 'tap';
import { toJson } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { parseMeshConfig } from '../../../src/config/meshconfig';
import type { Config, TelemetrySpec } from '../../../src/config/types';
import { initPushContext, type PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { mergeLogs, mergeTracing } from '../../../src/discovery/telemetry';
import { FileAccessLogSchema } from '../../../src/gen/envoy/extensions/access_loggers/file/v3/file_pb';
import { OpenTelemetryAccessLogConfigSchema } from '../../../src/gen/envoy/extensions/access_loggers/open_telemetry/v3/logs_service_pb';
import { ExpressionFilterSchema } from '../../../src/gen/envoy/extensions/access_loggers/filters/cel/v3/cel_pb';
import { ZipkinConfigSchema } from '../../../src/gen/envoy/config/trace/v3/zipkin_pb';
import { HttpConnectionManagerSchema } from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { UuidRequestIdConfigSchema } from '../../../src/gen/envoy/extensions/request_id/uuid/v3/uuid_pb';
import { PluginConfigSchema } from '../../../src/gen/istio/envoy/extensions/stats/config_pb';
import { TypedStructSchema } from '../../../src/gen/udpa/type/v1/typed_struct_pb';
import { ISTIO_TEXT_FORMAT } from '../../../src/xds/gen/access-log';
import { endpointMetadata, workloadTelemetryLabel } from '../../../src/xds/gen/endpoints';
import type { Endpoint } from '../../../src/discovery/model';
import { httpConnectionManager } from '../../../src/xds/gen/filters';
import { mxHttpFilter, mxNetworkFilter, statsHttpFilters, statsNetworkFilters } from '../../../src/xds/gen/telemetry-filters';
import { cfg, internalService, ListStore, proxy } from '../../discovery/fixtures';

const tel = (ns: string, spec: TelemetrySpec, name = 'default') => cfg('Telemetry', ns, name, spec);
const sidecar = () => proxy('sidecar~10.1.0.5~test-1.default~default.svc.cluster.local', { NAMESPACE: 'default', LABELS: { app: 'test' } });

function pushWith(configs: Config[], meshYaml = ''): PushContext {
  const store = new ListStore(configs);
  const mesh = parseMeshConfig(meshYaml, 'mesh.yaml');
  return initPushContext(store, buildRegistries(store, []), { meshTelemetry: mesh.telemetry, rootNamespace: 'mesh-system' });
}

/** The istio.stats filter configs of an outbound HCM, as protojson (Istio's test compares these strings). */
function statsJson(push: PushContext, cls: 'sidecarOutbound' | 'sidecarInbound' | 'gateway' = 'sidecarOutbound', tcp = false): string[] {
  const p = sidecar();
  const anys = tcp
    ? statsNetworkFilters(p, push, cls).map((f) => (f.configType.case === 'typedConfig' ? f.configType.value : undefined)!)
    : statsHttpFilters(p, push, cls).map((f) => (f.configType.case === 'typedConfig' ? f.configType.value : undefined)!);
  return anys.map((a) => {
    t.equal(a.typeUrl, 'type.googleapis.com/stats.PluginConfig');
    return JSON.stringify(toJson(PluginConfigSchema, anyUnpack(a, PluginConfigSchema)!, { useProtoFieldName: true }));
  });
}

const ALL = (extra: string) =>
  [
    'request_messages_total',
    'response_messages_total',
    'requests_total',
    'request_duration_milliseconds',
    'request_bytes',
    'response_bytes',
    'tcp_connections_closed_total',
    'tcp_connections_opened_total',
    'tcp_received_bytes_total',
    'tcp_sent_bytes_total',
  ].map((n) => `{${extra.replace('NAME', n)}}`);

t.test('istio.stats config: the cases of Istio TestTelemetryFilters', async (t) => {
  const overrides = [
    {
      match: { metric: 'REQUEST_COUNT' },
      tagOverrides: { remove: { operation: 'REMOVE' as const }, add: { operation: 'UPSERT' as const, value: 'bar' } },
    },
  ];
  const emptyPrometheus: TelemetrySpec = { metrics: [{ providers: [{ name: 'prometheus' }] }] };
  const reenable: TelemetrySpec = { metrics: [{ providers: [{ name: 'prometheus' }], overrides: [{ match: { metric: 'ALL_METRICS' } }] }] };
  const overridesPrometheus: TelemetrySpec = { metrics: [{ providers: [{ name: 'prometheus' }], overrides }] };
  const disabledAll: TelemetrySpec = {
    metrics: [{ providers: [{ name: 'prometheus' }], overrides: [{ match: { metric: 'ALL_METRICS' }, disabled: true }] }],
  };
  const disabledImplicit: TelemetrySpec = { metrics: [{ providers: [{ name: 'prometheus' }], overrides: [{ disabled: true }] }] };
  const cfgJson = '{"metrics":[{"dimensions":{"add":"bar"},"name":"requests_total","tags_to_remove":["remove"]}]}';
  const rows: Array<[string, Config[], string, string[], boolean?]> = [
    ['empty', [], '', []],
    ['disabled-prometheus', [tel('mesh-system', disabledAll)], '', []],
    ['disabled-prometheus-implicit', [tel('mesh-system', disabledImplicit)], '', []],
    ['disabled-then-empty', [tel('mesh-system', disabledAll), tel('default', emptyPrometheus)], '', []],
    ['disabled-then-reenable', [tel('mesh-system', disabledAll), tel('default', reenable)], '', [`{"metrics":[${ALL('"name":"NAME"').join(',')}]}`]],
    ['disabled-then-overrides', [tel('mesh-system', disabledAll), tel('default', overridesPrometheus)], '', [cfgJson]],
    ['default prometheus', [tel('mesh-system', emptyPrometheus)], '', ['{}']],
    ['default provider prometheus', [], 'defaultProviders:\n  metrics: [prometheus]\n', ['{}']],
    ['prometheus overrides', [tel('mesh-system', overridesPrometheus)], '', [cfgJson]],
    [
      'prometheus overrides all metrics',
      [tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }], overrides: [{ tagOverrides: overrides[0]!.tagOverrides }] }] })],
      '',
      [`{"metrics":[${ALL('"dimensions":{"add":"bar"},"name":"NAME","tags_to_remove":["remove"]').join(',')}]}`],
    ],
    [
      'prometheus overrides all metrics first',
      [
        tel('mesh-system', {
          metrics: [
            {
              providers: [{ name: 'prometheus' }],
              overrides: [
                { tagOverrides: overrides[0]!.tagOverrides },
                { match: { metric: 'REQUEST_COUNT' }, tagOverrides: { add: { value: 'add-override' } } },
              ],
            },
          ],
        }),
      ],
      '',
      [
        `{"metrics":[${ALL('"dimensions":{"add":"bar"},"name":"NAME","tags_to_remove":["remove"]')
          .join(',')
          .replace('"add":"bar"},"name":"requests_total"', '"add":"add-override"},"name":"requests_total"')}]}`,
      ],
    ],
    ['prometheus overrides TCP', [tel('mesh-system', overridesPrometheus)], '', [cfgJson], true],
    [
      'reporting-interval',
      [tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }], reportingInterval: '15s' }] })],
      '',
      ['{"tcp_reporting_duration":"15s"}'],
    ],
    [
      'override-interval',
      [
        tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }], reportingInterval: '15s' }] }),
        tel('default', { metrics: [{ providers: [{ name: 'prometheus' }], reportingInterval: '10s' }] }),
      ],
      '',
      ['{"tcp_reporting_duration":"10s"}'],
    ],
    [
      'namespace overrides merge without provider',
      [tel('mesh-system', emptyPrometheus), tel('default', { metrics: [{ overrides }] })],
      '',
      [cfgJson],
    ],
    [
      'namespace overrides merge with default provider',
      [tel('default', { metrics: [{ overrides }] })],
      'defaultProviders:\n  metrics: [prometheus]\n',
      [cfgJson],
    ],
  ];
  for (const [name, configs, mesh, want, tcp] of rows) t.same(statsJson(pushWith(configs, mesh), 'sidecarOutbound', tcp), want, name);
});

t.test('istio.stats: inbound and gateways do not fall back to the host header; a disabled mode drops only its filter', async (t) => {
  const push = pushWith([
    tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }], overrides: [{ match: { mode: 'SERVER' }, disabled: true }] }] }),
  ]);
  t.same(statsJson(push, 'sidecarInbound'), [], 'SERVER disabled: no inbound filter');
  t.same(statsJson(push, 'sidecarOutbound'), ['{}'], 'client side untouched');
  const gw = pushWith([], 'defaultProviders:\n  metrics: [prometheus]\n');
  t.same(statsJson(gw, 'gateway'), ['{"disable_host_header_fallback":true}']);
});

t.test('workload selection: a selector narrows a Telemetry to matching workloads of its namespace', async (t) => {
  const push = pushWith([
    tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }] }] }),
    tel('default', { selector: { matchLabels: { app: 'test' } }, metrics: [{ overrides: [{ disabled: true }] }] }, 'only-test'),
    tel(
      'default',
      { selector: { matchLabels: { app: 'other' } }, metrics: [{ overrides: [{ match: { metric: 'REQUEST_COUNT' }, disabled: true }] }] },
      'other',
    ),
  ]);
  t.same(statsJson(push), [], 'app=test: every metric disabled by its workload Telemetry');
  const other = proxy('sidecar~10.1.0.6~o-1.default~default.svc.cluster.local', { NAMESPACE: 'default', LABELS: { app: 'other' } });
  const json = statsHttpFilters(other, push, 'sidecarOutbound').map((f) =>
    JSON.stringify(toJson(PluginConfigSchema, anyUnpack(f.configType.value as never, PluginConfigSchema)!, { useProtoFieldName: true })),
  );
  t.same(json, ['{"metrics":[{"name":"requests_total","drop":true}]}'], 'app=other: REQUEST_COUNT dropped');
  t.not(push.sharedKey(sidecar()), push.sharedKey(other), 'so their outbound output is not shared');
});

t.test('mergeLogs: the rules of Istio mergeLogs', async (t) => {
  const p = (name: string) => ({ name });
  const rows: Array<[string, Parameters<typeof mergeLogs>[0], string[], 'CLIENT' | 'SERVER', Record<string, unknown>]> = [
    ['nothing: the default providers', [], ['envoy'], 'CLIENT', { envoy: { disabled: false } }],
    [
      'a provider with a filter',
      [[{ providers: [p('envoy')], filter: { expression: 'response.code >= 400' } }]],
      [],
      'CLIENT',
      { envoy: { disabled: false, filter: 'response.code >= 400' } },
    ],
    ['root enables, namespace disables', [[{ providers: [p('envoy')] }], [{ disabled: true }]], [], 'CLIENT', { envoy: { disabled: true } }],
    // the default stays in scope but no entry for this mode names it: nothing (the mesh file applies then)
    ['server-only entry on the client side', [[{ match: { mode: 'SERVER' }, providers: [p('envoy')] }]], ['otel'], 'CLIENT', {}],
    [
      'a later provider list replaces the earlier',
      [[{ providers: [p('envoy')] }], [{ providers: [p('otel')] }]],
      [],
      'CLIENT',
      { otel: { disabled: false } },
    ],
  ];
  for (const [name, levels, defaults, mode, want] of rows) t.same(Object.fromEntries(mergeLogs(levels, defaults, mode)), want, name);
});

t.test('mergeTracing: the rules of Istio Telemetries.Tracing', async (t) => {
  const known = (n: string) => n !== 'missing';
  t.equal(mergeTracing([], [], known), undefined, 'nothing configured: the mesh fallback');
  const d = mergeTracing([], ['zipkin'], known)!;
  t.same([d.client.provider, d.client.disabled, d.client.useRequestIdForTraceSampling, d.client.enableIstioTags], ['zipkin', false, true, true]);
  const c = mergeTracing([{ match: { mode: 'CLIENT' }, providers: [{ name: 'zipkin' }], randomSamplingPercentage: 50 }], [], known)!;
  t.same(
    [c.client.provider, c.client.randomSamplingPercentage, c.server.disabled],
    ['zipkin', 50, true],
    'client-only: the server side has no provider',
  );
  const u = mergeTracing([{ providers: [{ name: 'missing' }] }], [], known)!;
  t.same([u.client.disabled, u.server.disabled], [true, true], 'an unknown provider leaves the spec disabled');
  const off = mergeTracing([{ providers: [{ name: 'zipkin' }] }, { disableSpanReporting: true, useRequestIdForTraceSampling: false }], [], known)!;
  t.same([off.client.provider, off.client.disabled, off.client.useRequestIdForTraceSampling], ['zipkin', true, false]);
});

t.test('metadata exchange filters: Istio filters.go shapes', async (t) => {
  const ts = (a: { typeUrl: string; value: Uint8Array }) => anyUnpack(a as never, TypedStructSchema)!;
  const inbound = ts(mxHttpFilter('sidecarInbound').configType.value as never);
  t.equal(inbound.typeUrl, 'type.googleapis.com/io.istio.http.peer_metadata.Config');
  t.same(inbound.value, {
    downstream_discovery: [{ istio_headers: {} }, { workload_discovery: {} }],
    downstream_propagation: [{ istio_headers: {} }],
  });
  const outbound = ts(mxHttpFilter('sidecarOutbound', ['role']).configType.value as never);
  t.same(outbound.value, {
    upstream_discovery: [{ istio_headers: {} }, { workload_discovery: {} }],
    upstream_propagation: [{ istio_headers: {} }],
    additional_labels: ['role'],
  });
  const tcp = mxNetworkFilter();
  t.equal(tcp.name, 'istio.metadata_exchange');
  const tcpCfg = ts(tcp.configType.value as never);
  t.same(
    [tcpCfg.typeUrl, tcpCfg.value],
    ['type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange', { protocol: 'istio-peer-exchange', enable_discovery: true }],
  );
});

function hcm(push: PushContext, cls: 'sidecarOutbound' | 'sidecarInbound' | 'gateway', p = sidecar()) {
  return anyUnpack(httpConnectionManager(p, push, { statPrefix: 'x', cls, rds: '80' }), HttpConnectionManagerSchema)!;
}

t.test('HCM access logs: mesh accessLogFile TEXT and JSON, Telemetry providers with CEL filters', async (t) => {
  const fileOf = (push: PushContext, cls: 'sidecarOutbound' | 'sidecarInbound' = 'sidecarOutbound') =>
    hcm(push, cls).accessLog.map((a) => ({
      name: a.name,
      file: a.configType.case === 'typedConfig' ? anyUnpack(a.configType.value, FileAccessLogSchema) : undefined,
      filter: a.filter,
    }));
  t.same(fileOf(pushWith([])), [], 'no accessLogFile, no Telemetry: no logs');
  const text = fileOf(pushWith([], 'accessLogFile: /dev/stdout\n'));
  t.equal(text.length, 1);
  t.equal(text[0]!.name, 'envoy.access_loggers.file');
  t.equal(text[0]!.file!.path, '/dev/stdout');
  const fmt = text[0]!.file!.accessLogFormat;
  t.equal(fmt.case === 'logFormat' && fmt.value.format.case === 'textFormatSource' && fmt.value.format.value.specifier.value, ISTIO_TEXT_FORMAT);
  t.match(
    ISTIO_TEXT_FORMAT,
    /^\[%START_TIME%\] "%REQ\(:METHOD\)% %REQ\(X-ENVOY-ORIGINAL-PATH\?:PATH\)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% /,
  );
  const json = fileOf(pushWith([], 'accessLogFile: /tmp/a.log\naccessLogEncoding: JSON\n'));
  const jf = json[0]!.file!.accessLogFormat;
  t.ok(jf.case === 'logFormat' && jf.value.format.case === 'jsonFormat');
  const fields = jf.case === 'logFormat' && jf.value.format.case === 'jsonFormat' ? (jf.value.format.value as Record<string, unknown>) : {};
  t.equal(Object.keys(fields).length, 24, "Istio's 24 JSON fields");
  t.equal(fields['upstream_cluster'], '%UPSTREAM_CLUSTER_RAW%');
  const custom = fileOf(pushWith([], 'accessLogFile: /dev/stdout\naccessLogFormat: "%RESPONSE_CODE%"\n'));
  const cf = custom[0]!.file!.accessLogFormat;
  t.equal(
    cf.case === 'logFormat' && cf.value.format.case === 'textFormatSource' && cf.value.format.value.specifier.value,
    '%RESPONSE_CODE%\n',
    'a newline is added',
  );

  // Telemetry: the built-in `envoy` provider with a CEL filter, server side only
  const tp = pushWith([
    tel('mesh-system', {
      accessLogging: [{ providers: [{ name: 'envoy' }], match: { mode: 'SERVER' }, filter: { expression: 'response.code >= 400' } }],
    }),
  ]);
  t.same(fileOf(tp, 'sidecarOutbound'), [], 'client side: the entry does not match, no logger and no fallback');
  const server = fileOf(tp, 'sidecarInbound');
  t.equal(server.length, 1);
  t.equal(server[0]!.file!.path, '/dev/stdout');
  const f = server[0]!.filter!;
  t.equal(f.filterSpecifier.case, 'extensionFilter');
  const ext = f.filterSpecifier.case === 'extensionFilter' ? f.filterSpecifier.value : undefined;
  t.equal(ext?.name, 'envoy.access_loggers.extension_filters.cel');
  t.equal(anyUnpack(ext!.configType.value as never, ExpressionFilterSchema)!.expression, 'response.code >= 400');

  // an unknown provider: no logger built, so the mesh file applies (Istio: no configs, fallback)
  const unknown = fileOf(pushWith([tel('mesh-system', { accessLogging: [{ providers: [{ name: 'nope' }] }] })], 'accessLogFile: /dev/stderr\n'));
  t.same(
    unknown.map((u) => u.file?.path),
    ['/dev/stderr'],
  );
  t.match(pushWith([tel('mesh-system', { accessLogging: [{ providers: [{ name: 'nope' }] }] })]).telemetry.unknownProviders(), [
    /Telemetry mesh-system\/default accessLogging\[0\]: provider "nope"/,
  ]);
});

t.test('HCM tracing: mesh enableTracing fallback, zipkin provider with its collector cluster, Istio tags, request id', async (t) => {
  const zipkinSvc = internalService('observability', 'zipkin', {
    ports: [{ number: 9411, name: 'http', protocol: 'HTTP' }],
    endpoints: [{ address: '10.9.0.1' }],
  });
  const meshYaml = 'extensionProviders:\n- name: zipkin\n  zipkin:\n    service: zipkin.observability.svc.cluster.local\n    port: 9411\n';
  const p = proxy('sidecar~10.1.0.5~test-1.default~default.svc.cluster.local', {
    NAMESPACE: 'default',
    CLUSTER_ID: 'Kubernetes',
    MESH_ID: 'mesh1',
    LABELS: { app: 'test', 'service.mesh.io/canonical-name': 'test', 'service.mesh.io/canonical-revision': 'v1' },
  });
  // the default mesh (enableTracing true): a tracing block without provider, sampled at PILOT_TRACE_SAMPLING 1%
  const base = hcm(pushWith([]), 'sidecarOutbound', p).tracing!;
  t.equal(base.provider, undefined);
  t.same([base.clientSampling?.value, base.randomSampling?.value, base.overallSampling?.value], [100, 1, 100]);
  const tags = Object.fromEntries(base.customTags.map((c) => [c.tag, c.type.case === 'literal' ? c.type.value.value : c.type.case]));
  t.same(tags, {
    'istio.authorization.dry_run.allow_policy.name': 'metadata',
    'istio.authorization.dry_run.allow_policy.result': 'metadata',
    'istio.authorization.dry_run.deny_policy.name': 'metadata',
    'istio.authorization.dry_run.deny_policy.result': 'metadata',
    'istio.canonical_revision': 'v1',
    'istio.canonical_service': 'test',
    'istio.cluster_id': 'Kubernetes',
    'istio.mesh_id': 'mesh1',
    'istio.namespace': 'default',
  });
  t.same(
    base.customTags.map((c) => c.tag),
    Object.keys(tags),
    'sorted by tag',
  );
  t.equal(hcm(pushWith([], 'enableTracing: false\n'), 'sidecarOutbound', p).tracing, undefined, 'enableTracing false: no tracing');
  t.equal(hcm(pushWith([], 'defaultConfig:\n  tracing:\n    sampling: 25\n'), 'sidecarOutbound', p).tracing!.randomSampling!.value, 25);

  // Telemetry with the zipkin provider, 10% sampling, a literal tag; request id sampling off
  const push = pushWith(
    [
      zipkinSvc,
      tel('mesh-system', {
        tracing: [
          {
            providers: [{ name: 'zipkin' }],
            randomSamplingPercentage: 10,
            customTags: { team: { literal: { value: 'a' } } },
            useRequestIdForTraceSampling: false,
          },
        ],
      }),
    ],
    meshYaml,
  );
  const h = hcm(push, 'sidecarOutbound', p);
  const tr = h.tracing!;
  t.equal(tr.provider?.name, 'envoy.tracers.zipkin');
  const z = anyUnpack(tr.provider!.configType.value as never, ZipkinConfigSchema)!;
  t.same(
    [z.collectorCluster, z.collectorEndpoint, z.collectorHostname, z.traceId128bit, z.sharedSpanContext, z.collectorEndpointVersion],
    ['outbound|9411||zipkin.observability.svc.cluster.local', '/api/v2/spans', 'zipkin.observability.svc.cluster.local', true, false, 1],
  );
  t.equal(tr.randomSampling!.value, 10);
  t.ok(tr.customTags.some((c) => c.tag === 'team' && c.type.case === 'literal' && c.type.value.value === 'a'));
  t.equal(anyUnpack(h.requestIdExtension!.typedConfig!, UuidRequestIdConfigSchema)!.useRequestIdForTraceSampling, false);
  t.equal(
    anyUnpack(hcm(pushWith([]), 'sidecarOutbound', p).requestIdExtension!.typedConfig!, UuidRequestIdConfigSchema)!.useRequestIdForTraceSampling,
    true,
  );
  // the provider's service missing from the registry: the HCM is left untraced (Istio logs and returns)
  t.equal(hcm(pushWith([tel('mesh-system', { tracing: [{ providers: [{ name: 'zipkin' }] }] })], meshYaml), 'sidecarOutbound', p).tracing, undefined);
});

t.test('unknown providers are reported, the rest keeps serving', async (t) => {
  const push = pushWith(
    [tel('mesh-system', { metrics: [{ providers: [{ name: 'prometheus' }, { name: 'statsd' }] }], tracing: [{ providers: [{ name: 'jaeger' }] }] })],
    'defaultProviders:\n  accessLogging: [otel]\n',
  );
  t.same(push.telemetry.unknownProviders(), [
    'meshConfig.defaultProviders.accessLogging: provider "otel" is not in meshConfig.extensionProviders',
    'Telemetry mesh-system/default metrics[0]: provider "statsd" is not in meshConfig.extensionProviders',
    'Telemetry mesh-system/default tracing[0]: provider "jaeger" is not in meshConfig.extensionProviders',
  ]);
  t.same(statsJson(push), ['{}'], 'prometheus still gets its filter');
});

t.test('outbound output is shared only between proxies whose tracing tags agree', async (t) => {
  const sc = (name: string, labels: Record<string, string>) =>
    proxy(`sidecar~10.1.0.7~${name}.default~default.svc.cluster.local`, { NAMESPACE: 'default', LABELS: labels });
  const push = pushWith([]);
  const a = sc('a-1', { app: 'a', 'service.mesh.io/canonical-name': 'a' });
  const a2 = sc('a-2', { app: 'a', 'service.mesh.io/canonical-name': 'a' });
  const b = sc('b-1', { app: 'b', 'service.mesh.io/canonical-name': 'b' });
  t.equal(push.sharedKey(a), push.sharedKey(a2), 'two replicas share');
  t.not(push.sharedKey(a), push.sharedKey(b), 'another canonical service does not (its istio.canonical_service tag differs)');
  const untraced = pushWith([], 'enableTracing: false\n');
  t.equal(untraced.sharedKey(a), untraced.sharedKey(b), 'without tracing the tags do not matter');
});

t.test("a proxy's own ProxyConfig tracing wins over the mesh default (Istio ProxyConfigOrDefault)", async (t) => {
  const push = pushWith([], 'defaultConfig:\n  tracing:\n    sampling: 25\n');
  const own = proxy('sidecar~10.1.0.8~c-1.default~default.svc.cluster.local', {
    NAMESPACE: 'default',
    PROXY_CONFIG: { tracing: { sampling: 60, customTags: { env: { environment: { name: 'ENV', defaultValue: 'dev' } } } } },
  });
  const tr = hcm(push, 'sidecarOutbound', own).tracing!;
  t.equal(tr.randomSampling!.value, 60);
  const env = tr.customTags.find((c) => c.tag === 'env');
  t.same(env?.type.case === 'environment' && [env.type.value.name, env.type.value.defaultValue], ['ENV', 'dev']);
  const none = proxy('sidecar~10.1.0.9~d-1.default~default.svc.cluster.local', { NAMESPACE: 'default', PROXY_CONFIG: { concurrency: 2 } });
  t.equal(hcm(push, 'sidecarOutbound', none).tracing!.randomSampling!.value, 1, 'a ProxyConfig without tracing: PILOT_TRACE_SAMPLING');
  t.equal(hcm(push, 'sidecarOutbound', sidecar()).tracing!.randomSampling!.value, 25, 'no ProxyConfig sent: the mesh default');
  t.not(push.sharedKey(own), push.sharedKey(none), 'their outbound output is not shared');
});

t.test('OpenTelemetry access log: Istio openTelemetryLog (collector cluster, log name, body, attributes, peer state)', async (t) => {
  const otelSvc = internalService('observability', 'otel', { ports: [{ number: 4317, name: 'grpc', protocol: 'GRPC' }] });
  const mesh = [
    'extensionProviders:',
    '- name: otel',
    '  envoyOtelAls:',
    '    service: otel.observability.svc.cluster.local',
    '    port: 4317',
    '    logFormat: { labels: { status: "%RESPONSE_CODE%", path: "%REQ(:PATH)%" } }',
  ].join('\n');
  const push = pushWith([otelSvc, tel('mesh-system', { accessLogging: [{ providers: [{ name: 'otel' }] }] })], mesh);
  const [al] = hcm(push, 'sidecarOutbound').accessLog;
  t.equal(al!.name, 'envoy.access_loggers.open_telemetry');
  const c = anyUnpack(al!.configType.value as never, OpenTelemetryAccessLogConfigSchema)!;
  t.equal(c.commonConfig!.logName, 'otel_envoy_accesslog');
  const g = c.commonConfig!.grpcService!.targetSpecifier;
  t.same(g.case === 'envoyGrpc' && [g.value.clusterName, g.value.authority], [
    'outbound|4317||otel.observability.svc.cluster.local',
    'otel.observability.svc.cluster.local',
  ]);
  t.same(c.commonConfig!.filterStateObjectsToLog, ['upstream_peer', 'downstream_peer']);
  t.equal(c.disableBuiltinLabels, true);
  t.equal(c.body!.value.case === 'stringValue' && c.body!.value.value, ISTIO_TEXT_FORMAT, 'no text format given: the body is Istio’s TEXT format');
  t.same(
    c.attributes!.values.map((kv) => [kv.key, kv.value!.value.value]),
    [
      ['path', '%REQ(:PATH)%'],
      ['status', '%RESPONSE_CODE%'],
    ],
    'labels become attributes, sorted by key',
  );
});

t.test('endpoint istio.workload metadata: Istio AppendLbEndpointMetadata', async (t) => {
  const ep = (labels: Record<string, string>, extra: Partial<Endpoint> = {}): Endpoint => ({
    address: '10.1.0.1',
    port: 8080,
    servicePortName: 'http',
    hostname: 'reviews.default.svc.cluster.local',
    namespace: 'default',
    labels,
    healthStatus: 'Healthy',
    workloadName: 'reviews-v2',
    clusterId: 'Kubernetes',
    ...extra,
  });
  const rows: Array<[string, Endpoint, string]> = [
    [
      'canonical labels',
      ep({ 'service.mesh.io/canonical-name': 'reviews', 'service.mesh.io/canonical-revision': 'v2' }),
      'reviews-v2;default;reviews;v2;Kubernetes',
    ],
    ['app and version', ep({ app: 'reviews', version: 'v3' }), 'reviews-v2;default;reviews;v3;Kubernetes'],
    ['no labels: the workload name, revision latest left empty', ep({}), 'reviews-v2;default;reviews-v2;;Kubernetes'],
    ['no workload name or cluster', ep({ app: 'x' }, { workloadName: undefined, clusterId: undefined }), ';default;x;;'],
  ];
  for (const [name, e, want] of rows) {
    t.equal(workloadTelemetryLabel(e), want, name);
    t.same(endpointMetadata(e, true)?.filterMetadata['istio'], { workload: want }, `${name}: as metadata`);
  }
  t.equal(endpointMetadata(ep({}), false), undefined, 'flags off and no sidecar: no metadata at all');
});
