// CEL over Envoy's attributes (src/proxy/cel): expected values from Envoy's attribute documentation
// (intro/arch_overview/advanced/attributes), source/extensions/filters/common/expr/context.cc (how each attribute
// is derived), evaluator.cc (builder options, print) and test/extensions/filters/common/expr/evaluator_test.cc
// (the printed forms).
import t from 'tap';
import { compileCel, formatDouble, formatDurationNs, printCelValue, type CelContext } from '../../src/proxy/cel/evaluator';
import { celUint } from '@bufbuild/cel';
import { ConfigError } from '../../src/proxy/common/config-error';
import { HeaderMap, RequestHeaders } from '../../src/proxy/codec/headers';
import { StreamInfo, type DownstreamConnectionInfo } from '../../src/proxy/stream-info';

const conn = (o: Partial<DownstreamConnectionInfo> = {}): DownstreamConnectionInfo => ({
  remoteAddress: '10.1.1.1',
  remotePort: 40000,
  localAddress: '10.2.2.2',
  localPort: 9080,
  serverName: '',
  alpn: '',
  tls: false,
  peerCertificatePresented: false,
  peerCertificateValidated: false,
  peerUriSans: [],
  peerDnsSans: [],
  peerSubject: '',
  ...o,
});

function context(): CelContext {
  const info = new StreamInfo(
    conn({
      tls: true,
      peerCertificatePresented: true,
      serverName: 'outbound_.9080_._.reviews.default.svc.cluster.local',
      peerUriSans: ['spiffe://cluster.local/ns/default/sa/productpage', 'spiffe://other'],
      peerSubject: 'O=cluster.local',
    }),
  );
  info.protocol = 'HTTP/1.1';
  info.responseCode = 503;
  info.responseCodeDetails = 'upstream_reset_before_response_started{connection_failure}';
  info.setFlag('UF');
  info.setFlag('URX');
  info.bytesReceived = 11;
  info.bytesSent = 91;
  info.upstreamCluster = 'outbound|9080||reviews.default.svc.cluster.local';
  info.upstreamHost = '10.3.3.3:9080';
  info.routeName = 'default';
  info.attemptCount = 2;
  info.endHr = info.startHr + 1500.25;
  info.dynamicMetadata.set('istio', { mode: 'strict', n: 3 });
  const request = new RequestHeaders('POST', '/api/v1/items?id=7&x=y#frag', 'reviews:9080', 'http', {
    'content-length': '11',
    'user-agent': 'curl/8.5.0',
    referer: 'http://productpage/',
    'x-request-id': '7f9a-11',
    'x-multi': ['a', 'b'],
  });
  const response = new HeaderMap({ 'content-type': 'application/grpc', 'grpc-status': '14' });
  return {
    info,
    request,
    response,
    filterState: new Map<string, unknown>([
      ['text', 'hello'],
      ['peer', { namespace: 'default', workload: 'reviews-v1' }],
    ]),
    xds: {
      listenerDirection: 1,
      filterChainName: 'virtualInbound-catchall-http',
      node: { id: 'sidecar~10.2.2.2~reviews-v1.default~default.svc.cluster.local' },
    },
  };
}

const c = context();
const value = (e: string, ctx: CelContext = c) => compileCel(e, 'test').evaluateString(ctx);

t.test('request attributes (context.cc RequestLookupValues)', async (t) => {
  const table: [string, string | undefined][] = [
    ['request.path', '/api/v1/items?id=7&x=y#frag'],
    ['request.url_path', '/api/v1/items'],
    // the query ends before a fragment
    ['request.query', 'id=7&x=y'],
    ['request.host', 'reviews:9080'],
    ['request.scheme', 'http'],
    ['request.method', 'POST'],
    ['request.referer', 'http://productpage/'],
    ['request.useragent', 'curl/8.5.0'],
    ['request.id', '7f9a-11'],
    ['request.protocol', 'HTTP/1.1'],
    // content-length when present, else bytes received
    ['request.size', '11'],
    ['request.duration', '1.50025s'],
    // header names are case-insensitive; repeated values read joined with ','
    ["request.headers['User-Agent']", 'curl/8.5.0'],
    ["request.headers['x-multi']", 'a,b'],
    ["request.headers[':method']", 'POST'],
    ["'referer' in request.headers", 'true'],
    ["request.headers['absent']", undefined],
    ['has(request.headers.absent)', 'false'],
    ['request.time > timestamp("2020-01-01T00:00:00Z")', 'true'],
  ];
  for (const [e, want] of table) t.equal(value(e), want, e);
});

t.test('response, connection, peers, upstream, xds, metadata, filter_state', async (t) => {
  const table: [string, string | undefined][] = [
    ['response.code', '503'],
    ['response.code_details', 'upstream_reset_before_response_started{connection_failure}'],
    // UF is bit 5, URX bit 15 of Envoy's legacy response flags
    ['response.flags', String((1 << 5) | (1 << 15))],
    // trailers-only gRPC response: the status comes from the headers
    ['response.grpc_status', '14'],
    ["response.headers['content-type']", 'application/grpc'],
    ['response.size', '91'],
    ['source.address', '10.1.1.1:40000'],
    ['source.port', '40000'],
    ['destination.address', '10.2.2.2:9080'],
    ['destination.port', '9080'],
    ['connection.mtls', 'true'],
    ['connection.requested_server_name', 'outbound_.9080_._.reviews.default.svc.cluster.local'],
    // the first URI SAN only
    ['connection.uri_san_peer_certificate', 'spiffe://cluster.local/ns/default/sa/productpage'],
    ['connection.subject_peer_certificate', 'O=cluster.local'],
    ['upstream.address', '10.3.3.3:9080'],
    ['upstream.port', '9080'],
    // a uint
    ['upstream.request_attempt_count == 2u', 'true'],
    ['type(upstream.request_attempt_count) == uint', 'true'],
    ['xds.cluster_name', 'outbound|9080||reviews.default.svc.cluster.local'],
    ['xds.route_name', 'default'],
    ['xds.listener_direction', '1'],
    ['xds.filter_chain_name', 'virtualInbound-catchall-http'],
    ['xds.node.id', 'sidecar~10.2.2.2~reviews-v1.default~default.svc.cluster.local'],
    ["metadata.filter_metadata['istio'].mode", 'strict'],
    // Struct numbers are doubles
    ["metadata.filter_metadata['istio'].n", '3'],
    ["filter_state['text']", 'hello'],
    ['filter_state.peer.workload', 'reviews-v1'],
    ["filter_state['absent']", undefined],
  ];
  for (const [e, want] of table) t.equal(value(e), want, e);
});

t.test('ExpressionFilter examples from the Envoy docs', async (t) => {
  const p = compileCel("(connection.mtls && request.headers['x-log-mtls'] == 'true') || request.url_path.contains('v1')", 'f');
  t.equal(p.matches(c), true);
  t.equal(compileCel('response.code >= 400', 'f').matches(c), true);
  t.equal(compileCel('response.code >= 600', 'f').matches(c), false);
  // an error (missing attribute) is false; a non-boolean result too
  t.equal(compileCel("request.headers['absent'] == 'x'", 'f').matches(c), false);
  t.equal(compileCel('response.code', 'f').matches(c), false);
  t.equal(compileCel("request.path.matches('^/api/v[0-9]+/')", 'f').matches(c), true);
});

t.test("Envoy's builder options", async (t) => {
  // no comprehensions, no string(): refused when the expression is built
  t.throws(() => compileCel("['a'].all(x, x == 'a')", 'f'), ConfigError);
  t.throws(() => compileCel('string(response.code)', 'f'), /failed to create an expression/);
  t.throws(() => compileCel('response.code >=', 'f'), /Not able to parse filter expression/);
  // no string or list concatenation: an evaluation error
  t.equal(value("request.method + '!'"), undefined);
  t.equal(value('[1] + [2]'), undefined);
  t.equal(value('1 + 2'), '3');
  // only Envoy's variables resolve
  t.equal(value('c'), undefined);
  t.equal(value('constructor'), undefined);
});

t.test('attributes are built only when read', async (t) => {
  const info = new StreamInfo(conn());
  info.responseCode = 200;
  const boom = {
    get(): string {
      throw new Error('response headers read');
    },
  };
  const ctx: CelContext = { info, request: new RequestHeaders('GET', '/', 'h', 'http', {}), response: boom, trailers: boom };
  t.equal(compileCel("request.method == 'GET' && response.code == 200", 'f').matches(ctx), true);
  t.equal(compileCel("response.headers['x'] == 'y'", 'f').matches(ctx), false);
});

t.test('Expr::print (evaluator_test.cc)', async (t) => {
  t.equal(printCelValue(false), 'false');
  t.equal(printCelValue(123n), '123');
  t.equal(printCelValue(celUint(123n)), '123');
  t.equal(printCelValue(1.23), '1.23');
  t.equal(printCelValue('test'), 'test');
  t.equal(printCelValue(new TextEncoder().encode('test')), 'test');
  t.equal(printCelValue(null), 'NULL');
  t.equal(value('duration("60s")'), '1m');
  t.equal(value('timestamp("2020-12-22T01:50:34Z")'), '2020-12-22T01:50:34+00:00');
  // absl::FormatDuration and absl::StrCat(double)
  t.equal(formatDurationNs(3_723_500_000_000n), '1h2m3.5s');
  t.equal(formatDurationNs(150_000_000n), '150ms');
  t.equal(formatDurationNs(2_500n), '2.5us');
  t.equal(formatDurationNs(0n), '0');
  t.equal(formatDouble(1e7), '1e+07');
  t.equal(formatDouble(0.0001), '0.0001');
  t.equal(formatDouble(1234567), '1.23457e+06');
  t.equal(formatDouble(3), '3');
});
