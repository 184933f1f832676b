// The tracing pieces that are pure, against Envoy's documented and tested behaviour: the trace reason packed
// into x-request-id (UUID extension: '9' sampled, 'a' forced, 'b' client, '4' none), B3 and W3C trace-context
// parsing and writing (Envoy's span_context_extractor tests, the W3C spec's example), the HCM tracing config
// as istiod 1.26 writes it (pilot/pkg/networking/core/tracing.go), the sampling decision, Zipkin v2 JSON and
// OTLP span shapes.
import t from 'tap';
import { fromBinary } from '@bufbuild/protobuf';
import { HttpConnectionManagerSchema } from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { ExportTraceServiceRequestSchema } from '../../src/gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { StatsStore } from '../../src/proxy/stats/store';
import { tracingOptionsOf, splitUri } from '../../src/proxy/tracing/config';
import { requestIdInteger, traceReasonOf, withTraceReason, DEFAULT_REQUEST_ID } from '../../src/proxy/tracing/request-id';
import { b3Sampled, extractB3, extractW3c, injectB3, injectW3c } from '../../src/proxy/tracing/propagation';
import { HttpTracer, httpUrl } from '../../src/proxy/tracing/tracer';
import { TraceSpan } from '../../src/proxy/tracing/span';
import { zipkinJson } from '../../src/proxy/tracing/zipkin';
import { exportRequest, grpcFrame, otlpSpan } from '../../src/proxy/tracing/otel';
import { localInfoOf } from '../../src/proxy/common/local-info';
import { pb, HCM_TYPE, ROUTER } from './helpers';

const hdr = (h: Record<string, string>) => ({ get: (n: string) => h[n] });

t.test('x-request-id carries the trace reason in its 15th character (UuidRequestIdConfig.pack_trace_reason)', async (t) => {
  const rid = 'a121e9e1-feae-4136-9e0f-6fa2ce94dd15';
  t.equal(traceReasonOf(rid, DEFAULT_REQUEST_ID), 'notTraceable');
  for (const [reason, c] of [
    ['sampling', '9'],
    ['serviceForced', 'a'],
    ['clientForced', 'b'],
    ['notTraceable', '4'],
  ] as const) {
    const packed = withTraceReason(rid, reason, DEFAULT_REQUEST_ID);
    t.equal(packed[14], c, reason);
    t.equal(packed.length, 36);
    t.equal(traceReasonOf(packed, DEFAULT_REQUEST_ID), reason);
  }
  const off = { packTraceReason: false, useRequestIdForTraceSampling: true };
  t.equal(withTraceReason(rid, 'sampling', off), rid, 'pack_trace_reason false leaves the id alone');
  t.equal(traceReasonOf('a121e9e1-feae-9136-9e0f-6fa2ce94dd15', off), 'notTraceable');
  t.equal(withTraceReason('not-a-uuid', 'sampling', DEFAULT_REQUEST_ID), 'not-a-uuid', 'only 36-character UUIDs are altered');
  t.equal(requestIdInteger(rid), 0xa121e9e1, 'stable sampling reads the first 8 hex digits');
  t.equal(requestIdInteger('zz'), undefined);
  t.equal(requestIdInteger('xyz12345-…'), undefined);
});

t.test('B3: multi-header and single-header contexts, the sampling flag, malformed ids', async (t) => {
  const ctx = extractB3(hdr({ 'x-b3-traceid': '0000000000000001', 'x-b3-spanid': '0000000000000002', 'x-b3-parentspanid': '3' }), true);
  t.same(ctx, { traceId: '0000000000000001', spanId: '0000000000000002', parentId: '0000000000000003', sampled: true, traceState: '' });
  t.equal(
    extractB3(hdr({ 'x-b3-traceid': '463ac35c9f6413ad48485a3953bb6124', 'x-b3-spanid': 'a2fb4a1d1a96d312' }), false)!.traceId,
    '463ac35c9f6413ad48485a3953bb6124',
    '128-bit trace ids are kept',
  );
  t.equal(extractB3(hdr({ 'x-b3-traceid': '1' }), true), undefined, 'no span id: no context');
  t.throws(() => extractB3(hdr({ 'x-b3-traceid': 'xyz', 'x-b3-spanid': '1' }), true), { name: 'TraceHeaderError' });
  // the b3 single header: {TraceId}-{SpanId}-{SamplingState}-{ParentSpanId}
  const single = extractB3(hdr({ b3: '80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1-05e3ac9a4f6e3b90' }), true);
  t.same(single, {
    traceId: '80f198ee56343ba864fe8b2a57d3eff7',
    spanId: 'e457b5a2e4d86bd1',
    parentId: '05e3ac9a4f6e3b90',
    sampled: true,
    traceState: '',
  });
  t.equal(extractB3(hdr({ b3: '0' }), false), undefined, 'a lone sampling flag is no context');
  t.throws(() => extractB3(hdr({ b3: 'x' }), false), { name: 'TraceHeaderError' });
  t.equal(b3Sampled(hdr({ b3: '80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-0-05e3ac9a4f6e3b90' })), false);
  t.equal(b3Sampled(hdr({ b3: 'e457b5a2e4d86bd1-e457b5a2e4d86bd1-d' })), true, 'd (debug) samples');
  t.equal(b3Sampled(hdr({ b3: '1' })), true);
  t.equal(b3Sampled(hdr({ 'x-b3-sampled': '1' })), true);
  t.equal(b3Sampled(hdr({ 'x-b3-sampled': 'true' })), true, 'old tracers send true');
  t.equal(b3Sampled(hdr({ 'x-b3-sampled': '0' })), false);
  t.equal(b3Sampled(hdr({})), undefined, 'no decision: the proxy decides');
  const out: Record<string, string> = {};
  injectB3({ set: (k, v) => (out[k] = v) }, 'aa', 'bb', '', false);
  t.same(out, { 'x-b3-traceid': 'aa', 'x-b3-spanid': 'bb', 'x-b3-sampled': '0' }, 'no parent header for a root span');
});

t.test('W3C trace-context: the spec example, version ff and all-zero ids refused, flags written back', async (t) => {
  const ctx = extractW3c(hdr({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'congo=t61rcWkgMzE' }));
  t.same(ctx, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    parentId: '',
    sampled: true,
    traceState: 'congo=t61rcWkgMzE',
  });
  t.equal(extractW3c(hdr({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' })).sampled, false);
  for (const bad of [
    '00-00000000000000000000000000000000-b7ad6b7169203331-01',
    '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01',
    'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
    '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331',
    '00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01',
  ])
    t.throws(() => extractW3c(hdr({ traceparent: bad })), { name: 'TraceHeaderError' }, bad);
  const out: Record<string, string> = {};
  injectW3c({ set: (k, v) => (out[k] = v) }, '0af7651916cd43dd8448eb211c80319c', '00f067aa0ba902b7', true, 'congo=t61rcWkgMzE');
  t.same(out, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01', tracestate: 'congo=t61rcWkgMzE' });
});

/** The HCM istiod 1.26 writes for a sidecar with a zipkin extension provider (tracing.go zipkinConfig). */
function istioHcm(tracing: object, requestId?: object) {
  return pb(HttpConnectionManagerSchema, {
    statPrefix: 'inbound_0.0.0.0_8080',
    routeConfig: {},
    httpFilters: [ROUTER],
    tracing,
    ...(requestId ? { requestIdExtension: { typedConfig: requestId } } : {}),
  } as never);
}
const ZIPKIN_PROVIDER = {
  name: 'envoy.tracers.zipkin',
  typedConfig: {
    '@type': 'type.googleapis.com/envoy.config.trace.v3.ZipkinConfig',
    collectorCluster: 'outbound|9411||zipkin.istio-system.svc.cluster.local',
    collectorEndpoint: '/api/v2/spans',
    collectorEndpointVersion: 'HTTP_JSON',
    collectorHostname: 'zipkin.istio-system.svc.cluster.local',
    traceId128bit: true,
    sharedSpanContext: false,
  },
};

t.test("the HCM tracing config istiod writes compiles to Envoy's settings", async (t) => {
  const o = tracingOptionsOf(
    istioHcm({
      clientSampling: { value: 100 },
      randomSampling: { value: 1 },
      overallSampling: { value: 100 },
      customTags: [
        { tag: 'istio.canonical_service', literal: { value: 'reviews' } },
        { tag: 'from-env', environment: { name: 'MESH_TRACING_TEST_UNSET', defaultValue: 'dflt' } },
        { tag: 'dropped', environment: { name: 'MESH_TRACING_TEST_UNSET' } },
        { tag: 'ua', requestHeader: { name: 'User-Agent', defaultValue: '-' } },
        {
          tag: 'istio.authorization.dry_run.allow_policy.name',
          metadata: {
            kind: { request: {} },
            metadataKey: { key: 'envoy.filters.http.rbac', path: [{ key: 'istio_dry_run_allow_shadow_effective_policy_id' }] },
          },
        },
      ],
      provider: ZIPKIN_PROVIDER,
      spawnUpstreamSpan: true,
      maxPathTagLength: 99,
    }),
    'hcm',
    false,
  )!;
  t.equal(o.operation, 'ingress');
  t.equal(o.randomSampling, 100, '1% of 10000');
  t.equal(o.overallSampling, 10000);
  t.equal(o.clientSampling, 100);
  t.equal(o.maxPathTagLength, 99);
  t.equal(o.spawnUpstreamSpan, true);
  t.same(o.requestId, { packTraceReason: true, useRequestIdForTraceSampling: true });
  t.same(
    o.customTags.map((c) => c.tag),
    ['istio.canonical_service', 'from-env', 'ua', 'istio.authorization.dry_run.allow_policy.name'],
    'an environment tag with no value and no default is never set',
  );
  t.same(o.provider, {
    kind: 'zipkin',
    cluster: 'outbound|9411||zipkin.istio-system.svc.cluster.local',
    endpoint: '/api/v2/spans',
    hostname: 'zipkin.istio-system.svc.cluster.local',
    traceId128: true,
    sharedSpanContext: false,
  });
  const d = tracingOptionsOf(istioHcm({ provider: ZIPKIN_PROVIDER }), 'hcm', true)!;
  t.equal(d.operation, 'egress');
  t.equal(d.randomSampling, 10000, 'Envoy samples everything when random_sampling is unset');
  t.equal(d.maxPathTagLength, 256);
  t.equal(d.spawnUpstreamSpan, false);
  t.equal(tracingOptionsOf(pb(HttpConnectionManagerSchema, { statPrefix: 'x' }), 'hcm', false), undefined, 'no tracing: no tracer');
  const rid = tracingOptionsOf(
    istioHcm(
      { provider: ZIPKIN_PROVIDER },
      { '@type': 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig', useRequestIdForTraceSampling: false },
    ),
    'hcm',
    false,
  )!;
  t.same(rid.requestId, { packTraceReason: true, useRequestIdForTraceSampling: false });
});

t.test('OpenTelemetry providers as istiod writes them: gRPC, HTTP, resource detectors ignored with a reason', async (t) => {
  const grpc = tracingOptionsOf(
    istioHcm({
      provider: {
        name: 'envoy.tracers.opentelemetry',
        typedConfig: {
          '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
          grpcService: {
            envoyGrpc: { clusterName: 'outbound|4317||otel.observability.svc.cluster.local', authority: 'otel.observability.svc.cluster.local' },
            initialMetadata: [{ key: 'X-Token', value: 't' }],
          },
          serviceName: 'reviews.default',
          resourceDetectors: [{ name: 'envoy.tracers.opentelemetry.resource_detectors.environment' }],
        },
      },
    }),
    'hcm',
    false,
  )!;
  t.same(grpc.provider, {
    kind: 'opentelemetry',
    serviceName: 'reviews.default',
    transport: {
      kind: 'grpc',
      cluster: 'outbound|4317||otel.observability.svc.cluster.local',
      authority: 'otel.observability.svc.cluster.local',
      timeoutMs: 0,
      metadata: [['x-token', 't']],
    },
    ignored: ['resource_detectors (envoy.tracers.opentelemetry.resource_detectors.environment): the resource carries service.name only'],
  });
  const http = tracingOptionsOf(
    istioHcm({
      provider: {
        name: 'envoy.tracers.opentelemetry',
        typedConfig: {
          '@type': 'type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig',
          httpService: { httpUri: { uri: 'otel.observability.svc.cluster.local/v1/traces', cluster: 'outbound|4318||otel', timeout: '3s' } },
        },
      },
    }),
    'hcm',
    false,
  )!;
  t.same(http.provider, {
    kind: 'opentelemetry',
    serviceName: 'unknown_service:envoy',
    transport: {
      kind: 'http',
      cluster: 'outbound|4318||otel',
      path: '/v1/traces',
      authority: 'otel.observability.svc.cluster.local',
      timeoutMs: 3000,
      headers: [],
    },
    ignored: [],
  });
  t.same(splitUri('http://h:4318/v1/traces'), { host: 'h:4318', path: '/v1/traces' });
  t.same(splitUri('h'), { host: 'h', path: '' });
  t.throws(
    () => tracingOptionsOf(istioHcm({ provider: { name: 'envoy.tracers.datadog' } }), 'hcm', false),
    /Didn't find a registered implementation|only HTTP_JSON/,
  );
  t.throws(
    () =>
      tracingOptionsOf(
        istioHcm({ provider: { ...ZIPKIN_PROVIDER, typedConfig: { ...ZIPKIN_PROVIDER.typedConfig, collectorEndpointVersion: 'HTTP_PROTO' } } }),
        'hcm',
        false,
      ),
    /Didn't find a registered implementation|only HTTP_JSON/,
  );
});

t.test('the sampling decision (mutateTracingRequestHeader): random, client, forced, overall', async (t) => {
  const store = new StatsStore();
  const tracer = (tracing: object) =>
    new HttpTracer(
      tracingOptionsOf(istioHcm(tracing), 'hcm', false)!,
      { call: () => Promise.reject(new Error('no')), local: localInfoOf(undefined), stats: store.scope(''), warn: () => {} },
      store.scope('http.x.'),
    );
  const req = (h: Record<string, string>) => new RequestHeaders('GET', '/', 'a', 'http', { ...h });
  const rid = '00000063-feae-4136-9e0f-6fa2ce94dd15'; // 0x63 = 99: under 1%, over 0.5%
  const none = tracer({ randomSampling: { value: 0 } });
  const h0 = req({ 'x-request-id': rid });
  t.equal(none.decide(h0), 'notTraceable');
  t.equal(h0.get('x-request-id')![14], '4');
  const one = tracer({ randomSampling: { value: 1 } });
  const h1 = req({ 'x-request-id': rid });
  t.equal(one.decide(h1), 'sampling', '99 % 10000 < 100');
  t.equal(h1.get('x-request-id'), '00000063-feae-9136-9e0f-6fa2ce94dd15');
  t.equal(tracer({ randomSampling: { value: 0.5 } }).decide(req({ 'x-request-id': rid })), 'notTraceable', '99 ≥ 50');
  t.equal(none.decide(req({ 'x-request-id': rid, 'x-client-trace-id': 'c' })), 'clientForced');
  t.equal(none.decide(req({ 'x-request-id': rid, 'x-envoy-force-trace': 'true' })), 'serviceForced');
  t.equal(
    tracer({ randomSampling: { value: 0 }, clientSampling: { value: 0 } }).decide(req({ 'x-request-id': rid, 'x-client-trace-id': 'c' })),
    'notTraceable',
  );
  t.equal(none.decide(req({ 'x-request-id': '00000063-feae-9136-9e0f-6fa2ce94dd15' })), 'sampling', 'an upstream decision is kept');
  t.equal(
    tracer({ overallSampling: { value: 0 } }).decide(req({ 'x-request-id': rid, 'x-envoy-force-trace': 'true' })),
    'notTraceable',
    'overall sampling has the last word',
  );
  t.equal(none.decide(req({})), 'notTraceable', 'no request id: not traceable');
});

t.test('http.url and the span shapes: Zipkin v2 JSON and OTLP', async (t) => {
  const h = new RequestHeaders('GET', '/a/very/long/path', 'svc:80', 'http', { 'x-forwarded-proto': 'https' });
  t.equal(httpUrl(h, 7), 'https://svc:80/a/very');
  h.set('x-envoy-original-path', '/orig');
  t.equal(httpUrl(h, 256), 'https://svc:80/orig', 'the path before a rewrite');
  const s = new TraceSpan('463ac35c9f6413ad48485a3953bb6124', 'a2fb4a1d1a96d312', 'server', true, 1_000_000);
  s.parentId = '48485a3953bb6124';
  s.name = 'reviews.default.svc.cluster.local:9080/*';
  s.endUs = 1_000_250;
  s.setTag('http.status_code', '503');
  t.same(zipkinJson(s, 'reviews.default', '10.1.2.3'), {
    traceId: '463ac35c9f6413ad48485a3953bb6124',
    parentId: '48485a3953bb6124',
    id: 'a2fb4a1d1a96d312',
    kind: 'SERVER',
    name: 'reviews.default.svc.cluster.local:9080/*',
    timestamp: 1_000_000,
    duration: 250,
    localEndpoint: { serviceName: 'reviews.default', ipv4: '10.1.2.3', port: 0 },
    tags: { 'http.status_code': '503' },
    annotations: [{ timestamp: 1_000_250, value: 'ss' }],
  });
  const req = fromBinary(
    ExportTraceServiceRequestSchema,
    (await import('@bufbuild/protobuf')).toBinary(ExportTraceServiceRequestSchema, exportRequest('reviews.default', 'v1', [otlpSpan(s)])),
  );
  const rs = req.resourceSpans[0]!;
  t.same(
    rs.resource?.attributes.map((a) => [a.key, a.value?.value.value]),
    [['service.name', 'reviews.default']],
  );
  t.same([rs.scopeSpans[0]!.scope?.name, rs.scopeSpans[0]!.scope?.version], ['envoy', 'v1'], "Envoy's instrumentation scope");
  const o = rs.scopeSpans[0]!.spans[0]!;
  t.equal(Buffer.from(o.traceId).toString('hex'), '463ac35c9f6413ad48485a3953bb6124');
  t.equal(Buffer.from(o.parentSpanId).toString('hex'), '48485a3953bb6124');
  t.equal(o.kind, 2, 'SPAN_KIND_SERVER');
  t.equal(o.startTimeUnixNano, 1_000_000_000n);
  t.equal(o.endTimeUnixNano, 1_000_250_000n);
  t.equal(o.status?.code, 2, 'a 5xx is STATUS_CODE_ERROR');
  t.same(grpcFrame(Buffer.from([7, 8])), Buffer.from([0, 0, 0, 0, 2, 7, 8]), 'gRPC length prefix');
});

void HCM_TYPE;

t.test('tracing without a provider (a null span): the decorator header is still written on egress, removed on ingress', async (t) => {
  const store = new StatsStore();
  const tracer = (egress: boolean) =>
    new HttpTracer(
      tracingOptionsOf(istioHcm({}), 'hcm', egress)!,
      { call: () => Promise.reject(new Error('no')), local: localInfoOf(undefined), stats: store.scope(''), warn: () => {} },
      store.scope('http.x.'),
    );
  const stream = (h: Record<string, string>) => {
    const request = new RequestHeaders('GET', '/', 'a', 'http', { 'x-request-id': '00000063-feae-4136-9e0f-6fa2ce94dd15', ...h });
    return {
      request,
      info: {},
      connection: {},
      route: () => ({ route: { decoratorOperation: 'svc:80/*', decoratorPropagate: true } }),
      trace: undefined,
    } as never as Parameters<HttpTracer['onRequest']>[0];
  };
  const out = stream({});
  tracer(true).onRequest(out);
  t.equal(out.request.get('x-envoy-decorator-operation'), 'svc:80/*', 'egress: the route decorator goes upstream');
  const inbound = stream({ 'x-envoy-decorator-operation': 'caller-op' });
  tracer(false).onRequest(inbound);
  t.equal(inbound.request.get('x-envoy-decorator-operation'), undefined, 'ingress: the header is consumed');
  // encodeHeaders: ingress answers with the route's operation unless the request named one; egress keeps the
  // callee's operation from the application
  const response = () => {
    const h = new Map<string, string>([['x-envoy-decorator-operation', 'callee-op']]);
    return { get: (n: string) => h.get(n), set: (n: string, v: string) => void h.set(n, v), remove: (n: string) => void h.delete(n), h };
  };
  const overridden = response();
  tracer(false).onResponseHeaders(inbound, overridden);
  t.equal(overridden.h.get('x-envoy-decorator-operation'), 'callee-op', 'ingress, operation named by the caller: not written');
  const plain = stream({});
  tracer(false).onRequest(plain);
  const answer = response();
  answer.h.clear();
  tracer(false).onResponseHeaders(plain, answer);
  t.equal(answer.h.get('x-envoy-decorator-operation'), 'svc:80/*', 'ingress: the route operation goes to the caller');
  const back = response();
  tracer(true).onResponseHeaders(out, back);
  t.equal(back.h.get('x-envoy-decorator-operation'), undefined, 'egress: taken off the response');
});
