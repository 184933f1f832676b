// The access-log pieces in-process: filters (access_log_impl.cc semantics and the CEL ExpressionFilter), log
// formats, and the OpenTelemetry logger's batching (CommonGrpcAccessLogConfig buffer_size_bytes and
// buffer_flush_interval) with the OTLP request decoded as the collector would. Line-for-line agreement with the
// real Envoy is in test/e2e/access-log-formats.test.ts and access-log-otel.test.ts.
import t from 'tap';
import { fromBinary, fromJson, type JsonObject } from '@bufbuild/protobuf';
import { AccessLogFilterSchema, AccessLogSchema } from '../../src/gen/envoy/config/accesslog/v3/accesslog_pb';
import { SubstitutionFormatStringSchema } from '../../src/gen/envoy/config/core/v3/substitution_format_string_pb';
import { ExportLogsServiceRequestSchema } from '../../src/gen/opentelemetry/proto/collector/logs/v1/logs_service_pb';
import { compileAccessLogs, type ClusterCall } from '../../src/proxy/accesslog';
import { compileFilter } from '../../src/proxy/accesslog/filters';
import { compileLogFormat } from '../../src/proxy/accesslog/format-string';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { ConfigError } from '../../src/proxy/common/config-error';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { StreamInfo } from '../../src/proxy/stream-info';
import type { CelContext } from '../../src/proxy/cel/evaluator';

const registry = proxyTypeRegistry();

function ctx(code: number, path = '/a?b=1', headers: Record<string, string> = {}): CelContext {
  const info = new StreamInfo({
    remoteAddress: '10.0.0.1',
    remotePort: 1234,
    localAddress: '10.0.0.2',
    localPort: 80,
    serverName: '',
    alpn: '',
    tls: false,
    peerCertificatePresented: false,
    peerCertificateValidated: false,
    peerUriSans: [],
    peerDnsSans: [],
    peerSubject: '',
  });
  info.responseCode = code;
  return { info, request: new RequestHeaders('GET', path, 'svc', 'http', headers) };
}

const filter = (json: JsonObject) => compileFilter(fromJson(AccessLogFilterSchema, json, { registry }), 'f');

t.test('filters', async (t) => {
  const cel = filter({
    extension_filter: {
      name: 'envoy.access_loggers.extension_filters.cel',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter',
        expression: 'response.code >= 500',
      },
    },
  });
  t.equal(cel(ctx(503)), true);
  t.equal(cel(ctx(200)), false);
  const status = filter({ status_code_filter: { comparison: { op: 'LE', value: { default_value: 299, runtime_key: 'k' } } } });
  t.equal(status(ctx(200)), true);
  t.equal(status(ctx(404)), false);
  const or = filter({
    or_filter: { filters: [{ header_filter: { header: { name: 'x-debug', present_match: true } } }, { response_flag_filter: { flags: ['UH'] } }] },
  });
  t.equal(or(ctx(200, '/', { 'x-debug': '1' })), true);
  const uh = ctx(503);
  uh.info.setFlag('UH');
  t.equal(or(uh), true);
  t.equal(or(ctx(200)), false);
  t.throws(() => filter({ response_flag_filter: { flags: ['XX'] } }), ConfigError);
  t.throws(
    () =>
      filter({
        extension_filter: {
          name: 'cel',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter',
            expression: 'response.code >=',
          },
        },
      }),
    /Not able to parse filter expression/,
  );
});

t.test('log formats', async (t) => {
  const fmt = (json: JsonObject) => compileLogFormat(fromJson(SubstitutionFormatStringSchema, json, { registry }), 'l', '');
  t.equal(fmt({ text_format_source: { inline_string: '%RESPONSE_CODE% %REQ(X-NONE)% %REQ_WITHOUT_QUERY(:PATH)%\n' } })(ctx(200)), '200 - /a\n');
  t.equal(fmt({ text_format_source: { inline_string: '[%REQ(X-NONE)%]' }, omit_empty_values: true })(ctx(200)), '[]');
  t.equal(fmt({ text_format: '%CEL(request.url_path)% %CEL(request.headers.nope)%' })(ctx(200)), '/a -');
  t.equal(fmt({ json_format: { z: '%RESPONSE_CODE%', a: '%REQ(:PATH)%', n: '%REQ(X-NONE)%' } })(ctx(201)), '{"a":"/a?b=1","n":null,"z":201}\n');
  t.throws(() => fmt({ text_format: '%NOPE%' }), /Not supported field in StreamInfo: NOPE/);
  t.throws(
    () =>
      fmt({
        text_format: 'x',
        formatters: [
          { name: 'x', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog', path: 'x' } },
        ],
      }),
    /formatters\[0\]/,
  );
});

t.test('a file that cannot be opened refuses the config', async (t) => {
  const log = fromJson(
    AccessLogSchema,
    {
      name: 'envoy.access_loggers.file',
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog', path: '/nonexistent-dir/access.log' },
    },
    { registry },
  );
  t.throws(() => compileAccessLogs([log], 'hcm'), /hcm\.access_log\[0\]\.path: unable to open file '\/nonexistent-dir\/access\.log': ENOENT/);
});

t.test('OpenTelemetry batching', async (t) => {
  const calls: { cluster: string; authority: string; path: string; body: Buffer }[] = [];
  const call: ClusterCall = async (cluster, c) => {
    calls.push({ cluster, authority: c.authority, path: c.path, body: c.body! });
    return { status: 200 };
  };
  const logger = (extra: JsonObject) =>
    compileAccessLogs(
      [
        fromJson(
          AccessLogSchema,
          {
            name: 'envoy.access_loggers.open_telemetry',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig',
              common_config: { log_name: 'otel_envoy_accesslog', grpc_service: { envoy_grpc: { cluster_name: 'outbound|4317||otel' } }, ...extra },
              body: { string_value: '%RESPONSE_CODE%' },
            },
          },
          { registry },
        ),
      ],
      'hcm',
      { call, local: { nodeName: 'sidecar~1', clusterName: 'productpage.default', zoneName: 'z1' } },
    )[0]!;
  // buffer_size_bytes 1: every entry is sent at once; the authority defaults to the cluster name
  const eager = logger({ buffer_size_bytes: 1 });
  eager(ctx(200));
  eager(ctx(404));
  t.equal(calls.length, 2);
  t.equal(calls[0]!.path, '/opentelemetry.proto.collector.logs.v1.LogsService/Export');
  t.equal(calls[0]!.authority, 'outbound|4317||otel');
  const req = fromBinary(ExportLogsServiceRequestSchema, calls[1]!.body.subarray(5));
  t.equal(calls[1]!.body.readUInt32BE(1), calls[1]!.body.length - 5, 'one gRPC frame');
  const rl = req.resourceLogs[0]!;
  // the built-in labels (disable_builtin_labels unset)
  t.same(
    rl.resource!.attributes.map((a) => [a.key, a.value?.value.value]),
    [
      ['log_name', 'otel_envoy_accesslog'],
      ['zone_name', 'z1'],
      ['cluster_name', 'productpage.default'],
      ['node_name', 'sidecar~1'],
    ],
  );
  t.same(
    rl.scopeLogs[0]!.logRecords.map((r) => r.body?.value.value),
    ['404'],
  );
  // the default buffer: entries wait for buffer_flush_interval, then go in one request
  calls.length = 0;
  const lazy = logger({ buffer_flush_interval: '0.1s' });
  lazy(ctx(200));
  lazy(ctx(201));
  t.equal(calls.length, 0);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(calls.length, 1);
  const batch = fromBinary(ExportLogsServiceRequestSchema, calls[0]!.body.subarray(5));
  t.same(
    batch.resourceLogs[0]!.scopeLogs[0]!.logRecords.map((r) => r.body?.value.value),
    ['200', '201'],
  );
});
