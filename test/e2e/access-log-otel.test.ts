// The OpenTelemetry access logger as istiod 1.26 configures it for an envoyOtelAls provider
// (pilot/pkg/model/telemetry_logging.go buildOpenTelemetryAccessLogConfig: log name, envoy_grpc to the provider's
// cluster with its host as authority, disable_builtin_labels, Istio's text format as the body, labels as string
// attributes), sending to a real OTLP/gRPC collector (grpc-js serving opentelemetry-proto's LogsService). The
// built engine and, where installed, the real Envoy 1.36 run the same bootstrap; both must export the same records.
import t, { type Test } from 'tap';
import http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing, type DataPlane } from '../helpers/envoy';
import { httpBootstrap, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePort } from '../helpers/ports';
import { summarize } from '../helpers/agent';
import { waitForValue } from '../helpers/wait';
import { addGrpcService } from '../../src/lib/xds/grpc';
import {
  ExportLogsServiceResponseSchema,
  LogsService,
  type ExportLogsServiceRequest,
} from '../../src/gen/opentelemetry/proto/collector/logs/v1/logs_service_pb';
import type { AnyValue, KeyValue } from '../../src/gen/opentelemetry/proto/common/v1/common_pb';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const BODY = '"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% %UPSTREAM_CLUSTER_RAW% %ROUTE_NAME%\n';

function otelLog(logName: string, extra: object): object {
  return {
    name: 'envoy.access_loggers.open_telemetry',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig',
      common_config: {
        log_name: logName,
        grpc_service: { envoy_grpc: { cluster_name: 'otel', authority: 'otel-collector.observability.svc.cluster.local' } },
        transport_api_version: 'V3',
        filter_state_objects_to_log: [
          'upstream_peer',
          'downstream_peer',
          'wasm.upstream_peer',
          'wasm.upstream_peer_id',
          'wasm.downstream_peer',
          'wasm.downstream_peer_id',
        ],
        buffer_flush_interval: '0.2s',
      },
      ...extra,
    },
  };
}

const str = (v: AnyValue | undefined): string | undefined => (v?.value.case === 'stringValue' ? v.value.value : undefined);
const attrs = (kvs: readonly KeyValue[]): Record<string, string | undefined> => Object.fromEntries(kvs.map((kv) => [kv.key, str(kv.value)]));

interface Exported {
  /** Which logger: the `custom` resource attribute of the second one, '' for the first. */
  group: string;
  resource: Record<string, string | undefined>;
  body: string | undefined;
  attributes: Record<string, string | undefined>;
  startMs: number;
}

/** The records the collector got, each with the resource of its batch. */
function flatten(reqs: readonly ExportLogsServiceRequest[]): Exported[] {
  const out: Exported[] = [];
  for (const r of reqs)
    for (const rl of r.resourceLogs) {
      const resource = attrs(rl.resource?.attributes ?? []);
      for (const sl of rl.scopeLogs)
        for (const lr of sl.logRecords)
          out.push({
            group: resource['custom'] ?? '',
            resource,
            body: str(lr.body),
            attributes: attrs(lr.attributes),
            startMs: Number(lr.timeUnixNano / 1_000_000n),
          });
    }
  return out;
}

async function collector(t: Test): Promise<{ port: number; got: ExportLogsServiceRequest[] }> {
  const got: ExportLogsServiceRequest[] = [];
  const server = new grpc.Server();
  addGrpcService(server, LogsService, {
    export: (call, cb) => {
      got.push(call.request);
      cb(null, create(ExportLogsServiceResponseSchema));
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  t.teardown(() => new Promise<void>((r) => server.tryShutdown(() => r())));
  return { port, got };
}

t.test('OTLP access logs as istiod configures envoyOtelAls: engine and Envoy export the same records', { timeout: 180_000 }, async (t) => {
  const backend = http.createServer((req, res) => res.writeHead(req.url === '/missing' ? 404 : 200).end('ok\n'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => backend.close(() => r())));
  const backendPort = (backend.address() as { port: number }).port;
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);

  const results = new Map<DataPlane, Exported[]>();
  for (const plane of dataPlanes()) {
    const c = await collector(t);
    const port = await freePort();
    const otelCluster = {
      ...loopbackCluster('otel', c.port),
      typed_extension_protocol_options: {
        'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
          '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
          explicit_http_config: { http2_protocol_options: {} },
        },
      },
    };
    const routeConfig = {
      name: 'local',
      virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ name: 'default', match: { prefix: '/' }, route: { cluster: 'backend' } }] }],
    };
    const accessLog = [
      otelLog('otel_envoy_accesslog', {
        disable_builtin_labels: true,
        body: { string_value: BODY },
        attributes: {
          values: [
            { key: 'code', value: { string_value: '%RESPONSE_CODE%' } },
            { key: 'ua', value: { string_value: '%REQ(USER-AGENT)%' } },
          ],
        },
      }),
      // the resource attributes of the config, after no built-in labels; a filter: only 4xx
      {
        ...otelLog('errors', {
          disable_builtin_labels: true,
          resource_attributes: { values: [{ key: 'custom', value: { string_value: 'errors-resource' } }] },
          body: { string_value: '%RESPONSE_CODE% %REQ(:PATH)%' },
        }),
        filter: { status_code_filter: { comparison: { op: 'GE', value: { default_value: 400, runtime_key: 'k' } } } },
      },
    ];
    const run = await runStatic(
      t,
      plane,
      httpBootstrap({
        port,
        admin: await freePort(),
        routeConfig,
        clusters: [loopbackCluster('backend', backendPort), otelCluster],
        hcmExtra: { access_log: accessLog },
      }),
      port,
      '/ready',
    );
    if ('refused' in run) {
      t.fail(`${plane} refused the OpenTelemetry access log:\n${summarize(run.refused)}`);
      continue;
    }
    const before = Date.now();
    t.equal((await run.get('/ok?x=1', { 'user-agent': 'otel-test' })).status, 200);
    t.equal((await run.get('/missing', { 'user-agent': 'otel-test' })).status, 404);
    const records = await waitForValue(
      `${plane}: 3 records at the collector`,
      () => {
        const rs = flatten(c.got).filter((r) => !r.body?.includes('/ready'));
        return rs.length >= 3 ? rs : undefined;
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    // Envoy batches per worker thread: the two requests may arrive in either order
    const byBody = (a: Exported, b: Exported) => (a.body ?? '').localeCompare(b.body ?? '');
    const main = records.filter((r) => r.group === '').sort(byBody);
    const errors = records.filter((r) => r.group === 'errors-resource');
    // disable_builtin_labels: no log_name/zone_name/cluster_name/node_name on the resource
    t.same(main[0]?.resource, {}, `${plane}: no built-in resource labels`);
    t.same(
      main.map((r) => [r.body, r.attributes]),
      [
        ['"GET /missing HTTP/1.1" 404 - backend default\n', { code: '404', ua: 'otel-test' }],
        ['"GET /ok?x=1 HTTP/1.1" 200 - backend default\n', { code: '200', ua: 'otel-test' }],
      ],
      `${plane}: body and attributes formatted per request`,
    );
    t.same(
      errors.map((r) => [r.body, r.resource]),
      [['404 /missing', { custom: 'errors-resource' }]],
      `${plane}: the filtered logger and its resource attributes`,
    );
    for (const r of records) t.ok(r.startMs >= before - 1000 && r.startMs <= Date.now(), `${plane}: time_unix_nano is the request's start`);
    // in a stable order: Envoy's workers batch on their own, so arrival order is not part of the comparison
    results.set(
      plane,
      records.map((r) => ({ ...r, startMs: 0 })).sort((a, b) => a.group.localeCompare(b.group) || byBody(a, b)),
    );
  }
  const engine = results.get('engine');
  const envoy = results.get('envoy');
  if (engine && envoy) t.same(engine, envoy, 'engine records = Envoy records');
});
