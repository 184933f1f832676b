// OpenTelemetry tracing on static bootstraps of the shape istiod 1.26 writes for an opentelemetry extension
// provider (tracing.go otelConfig: envoy_grpc with the collector's authority, or http_service with
// `<host>/<path>`; service_name the node's cluster), against real collectors: a gRPC server implementing
// opentelemetry.proto.collector.trace.v1.TraceService/Export and an OTLP/HTTP server (POST
// application/x-protobuf). Client → outbound proxy (OUTBOUND, gRPC export) → inbound proxy (INBOUND, HTTP export)
// → app, on the built engine and the real Envoy where installed: W3C traceparent/tracestate continued from the
// client, parent ids chained, kinds, the resource's service.name, and the same attributes on both data planes.
import t, { type Test } from 'tap';
import http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary } from '@bufbuild/protobuf';
import {
  ExportTraceServiceRequestSchema,
  ExportTraceServiceResponseSchema,
  TraceService,
  type ExportTraceServiceRequest,
} from '../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { addGrpcService } from '../../src/lib/xds/grpc';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing, type DataPlane } from '../helpers/envoy';
import { loopback, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePorts } from '../helpers/ports';
import { httpGet } from '../helpers/gateway';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

interface Got {
  via: 'grpc' | 'http';
  req: ExportTraceServiceRequest;
  meta: Record<string, string>;
}

async function collectors(t: Test): Promise<{ grpcPort: number; httpPort: number; got: Got[] }> {
  const got: Got[] = [];
  const server = new grpc.Server();
  addGrpcService(server, TraceService, {
    export: (call, cb) => {
      got.push({ via: 'grpc', req: call.request, meta: Object.fromEntries(Object.entries(call.metadata.getMap()).map(([k, v]) => [k, String(v)])) });
      cb(null, create(ExportTraceServiceResponseSchema, {}));
    },
  });
  const grpcPort = await new Promise<number>((res, rej) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))),
  );
  t.teardown(() => server.forceShutdown());
  const hs = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces' && req.headers['content-type'] === 'application/x-protobuf') {
        got.push({ via: 'http', req: fromBinary(ExportTraceServiceRequestSchema, Buffer.concat(chunks)), meta: { host: req.headers.host ?? '' } });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' });
      } else res.writeHead(400);
      res.end();
    });
  });
  await new Promise<void>((r) => hs.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => hs.close(() => r())));
  return { grpcPort, httpPort: (hs.address() as { port: number }).port, got };
}

function hcm(name: string, provider: object, cluster: string, decorator: string): object {
  return {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: name,
    tracing: {
      provider: {
        name: 'envoy.tracers.opentelemetry',
        typed_config: { '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig', ...provider },
      },
      client_sampling: { value: 100 },
      random_sampling: { value: 100 },
      overall_sampling: { value: 100 },
      custom_tags: [{ tag: 'istio.mesh_id', literal: { value: 'cluster.local' } }],
    },
    route_config: {
      name,
      virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster }, decorator: { operation: decorator } }] }],
    },
    http_filters: [
      { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
    ],
  };
}

const H2 = {
  typed_extension_protocol_options: {
    'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
      '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
      explicit_http_config: { http2_protocol_options: {} },
    },
  },
};

t.test('OpenTelemetry tracing: W3C context, OTLP over gRPC and HTTP (engine and Envoy)', { timeout: 180_000 }, async (t) => {
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);
  const attrsByPlane = new Map<DataPlane, string[][]>();
  for (const plane of dataPlanes()) {
    const c = await collectors(t);
    const seen: http.IncomingHttpHeaders[] = [];
    const appSrv = http.createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((r) => appSrv.listen(0, '127.0.0.1', r));
    t.teardown(() => new Promise<void>((r) => appSrv.close(() => r())));
    const { out, inb, admin } = await freePorts('out', 'inb', 'admin');
    const grpcProvider = {
      grpc_service: {
        envoy_grpc: { cluster_name: 'otel-grpc', authority: 'otel.observability.svc.cluster.local' },
        initial_metadata: [{ key: 'x-tenant', value: 'blue' }],
      },
      service_name: 'a.default',
    };
    const httpProvider = {
      http_service: { http_uri: { uri: 'otel.observability.svc.cluster.local:4318/v1/traces', cluster: 'otel-http', timeout: '5s' } },
      service_name: 'b.default',
    };
    const boot = {
      node: { id: 'sidecar~127.0.0.1~ab.default~default.svc.cluster.local', cluster: 'ab.default' },
      admin: { address: loopback(admin) },
      static_resources: {
        listeners: [
          {
            name: 'outbound',
            address: loopback(out),
            traffic_direction: 'OUTBOUND',
            filter_chains: [
              {
                filters: [
                  {
                    name: 'envoy.filters.network.http_connection_manager',
                    typed_config: hcm('outbound', grpcProvider, 'inbound', 'b.default.svc.cluster.local:80/*'),
                  },
                ],
              },
            ],
          },
          {
            name: 'inbound',
            address: loopback(inb),
            traffic_direction: 'INBOUND',
            filter_chains: [
              {
                filters: [
                  {
                    name: 'envoy.filters.network.http_connection_manager',
                    typed_config: hcm('inbound', httpProvider, 'app', 'b.default.svc.cluster.local:80/*'),
                  },
                ],
              },
            ],
          },
        ],
        clusters: [
          loopbackCluster('inbound', inb),
          loopbackCluster('app', (appSrv.address() as { port: number }).port),
          { ...loopbackCluster('otel-grpc', c.grpcPort), ...H2 },
          loopbackCluster('otel-http', c.httpPort),
        ],
      },
    };
    const run = await runStatic(t, plane, boot, out, '/ready');
    if ('refused' in run) {
      t.fail(`${plane} refused the bootstrap:\n${run.refused}`);
      continue;
    }
    const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const r = await httpGet(out, '/w3c', { traceparent: parent, tracestate: 'congo=t61rcWkgMzE' });
    t.equal(r.status, 200, `${plane}: the request went through`);
    const app = seen.at(-1)!;
    t.match(app['traceparent'], /^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/, `${plane}: the app continues the client's trace`);
    t.equal(app['tracestate'], 'congo=t61rcWkgMzE', `${plane}: tracestate passes through`);
    const deadline = Date.now() + 15_000;
    const spansOf = () =>
      c.got
        .flatMap((g) => g.req.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans.map((s) => ({ g, rs, s })))))
        .filter((x) => Buffer.from(x.s.traceId).toString('hex') === '0af7651916cd43dd8448eb211c80319c');
    while (Date.now() < deadline && spansOf().length < 2) await new Promise((res) => setTimeout(res, 200));
    const spans = spansOf();
    t.equal(spans.length, 2, `${plane}: two spans of the client's trace`);
    const outSpan = spans.find((x) => x.g.via === 'grpc');
    const inSpan = spans.find((x) => x.g.via === 'http');
    if (!outSpan || !inSpan) {
      t.fail(`${plane}: one span over each transport: ${spans.map((x) => x.g.via).join(',')}`);
      continue;
    }
    const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
    t.equal(hex(outSpan.s.parentSpanId), 'b7ad6b7169203331', `${plane}: the outbound span is the client span's child`);
    t.equal(hex(inSpan.s.parentSpanId), hex(outSpan.s.spanId), `${plane}: the inbound span is the outbound span's child`);
    t.equal(app['traceparent'], `00-0af7651916cd43dd8448eb211c80319c-${hex(inSpan.s.spanId)}-01`, `${plane}: the app is told the inbound span`);
    t.same([outSpan.s.kind, inSpan.s.kind], [3, 2], `${plane}: CLIENT then SERVER`);
    t.same(
      [outSpan.s.name, inSpan.s.name],
      ['b.default.svc.cluster.local:80/*', 'b.default.svc.cluster.local:80/*'],
      `${plane}: names from the decorator`,
    );
    const svc = (x: typeof outSpan) => x.rs.resource?.attributes.find((a) => a.key === 'service.name')?.value?.value.value;
    t.same([svc(outSpan), svc(inSpan)], ['a.default', 'b.default'], `${plane}: the resource's service.name`);
    t.equal(outSpan.g.meta['x-tenant'], 'blue', `${plane}: gRPC initial metadata`);
    t.equal(outSpan.g.meta[':authority'] ?? outSpan.g.meta['host'] ?? 'otel.observability.svc.cluster.local', 'otel.observability.svc.cluster.local');
    t.equal(inSpan.g.meta['host'], 'otel.observability.svc.cluster.local:4318', `${plane}: OTLP/HTTP Host from the uri`);
    const attr = (x: typeof outSpan, k: string) => x.s.attributes.find((a) => a.key === k)?.value?.value.value;
    t.equal(attr(inSpan, 'istio.mesh_id'), 'cluster.local', `${plane}: custom tag as attribute`);
    t.equal(attr(inSpan, 'http.status_code'), '200');
    t.ok(outSpan.s.endTimeUnixNano > outSpan.s.startTimeUnixNano, `${plane}: the span has a duration`);
    const scope = outSpan.rs.scopeSpans[0]?.scope;
    t.equal(scope?.name, 'envoy', `${plane}: instrumentation scope envoy`);
    t.match(scope?.version, /^[0-9a-f]+\/1\.\d+\.\d+\/\w+\/RELEASE\//, `${plane}: scope version as Envoy prints its own`);
    attrsByPlane.set(
      plane,
      [outSpan, inSpan].map((x) => x.s.attributes.map((a) => a.key).sort()),
    );
  }
  const engine = attrsByPlane.get('engine');
  const envoy = attrsByPlane.get('envoy');
  if (engine && envoy) t.same(engine, envoy, 'the engine sets the attributes Envoy sets');
});
