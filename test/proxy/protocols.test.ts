// Protocols through the engine: TLS termination with SNI-selected chains (inline and file
// certificates), HTTP/2 over TLS (ALPN) and h2c downstream, HTTP/2 upstream, upstream TLS with SAN
// validation, TLS certificates over SDS (ADS), TCP proxy (plain, weighted, TLS passthrough by SNI).
import t from 'tap';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import type { JsonObject } from '@bufbuild/protobuf';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import {
  adminGet,
  adsBootstrap,
  backend,
  cla,
  edsCluster,
  hcm,
  makePki,
  pb,
  request,
  sock,
  startAds,
  startProxy,
  statValue,
  type RunningEngine,
  listenerJson,
  anyHost,
} from './helpers';
import { freePort } from '../helpers/ports';
import { ListenerSchema } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { SecretSchema } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { waitForValue } from '../helpers/wait';

const TLS_SOCKET = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext';
const UP_TLS = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';
const TCP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

const pki = makePki();
t.teardown(() => pki.cleanup());
const certA = pki.leaf('a.example.com', ['DNS:a.example.com']);
const certB = pki.leaf('b.example.com', ['DNS:b.example.com']);
const upstreamCert = pki.leaf('backend', ['DNS:backend.internal', 'URI:spiffe://cluster.local/ns/demo/sa/backend']);

function staticCluster(name: string, port: number, extra: JsonObject = {}): JsonObject {
  return {
    name,
    type: 'STATIC',
    connect_timeout: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', port) } }] }] },
    ...extra,
  };
}

function routeTo(cluster: string): JsonObject {
  return { name: 'r', virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster } }] }] };
}

async function proxyWith(t: Tap, listeners: JsonObject[], clusters: JsonObject[]): Promise<RunningEngine> {
  const p = await startProxy({
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: { listeners, clusters },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  return p;
}
type Tap = { teardown(fn: () => unknown): void };

function httpsGet(port: number, servername: string, path = '/'): Promise<{ status: number; body: string; cn: string; alpn: string | false }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        servername,
        ca: pki.ca.cert,
        headers: { host: servername },
        agent: false,
        checkServerIdentity: () => undefined,
      },
      (res) => {
        const sockt = res.socket as tls.TLSSocket;
        const cn = String(sockt.getPeerCertificate().subject?.CN ?? '');
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, cn, alpn: sockt.alpnProtocol ?? false }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function h2Get(
  url: string,
  path: string,
  opts: http2.SecureClientSessionOptions = {},
): Promise<{ status: number; body: string; headers: http2.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(url, opts);
    s.on('error', reject);
    const r = s.request({ ':path': path, ':authority': 'h2.example.com' });
    let body = '';
    let headers: http2.IncomingHttpHeaders = {};
    r.on('response', (h) => (headers = h));
    r.on('data', (d) => (body += d));
    r.on('end', () => {
      s.close();
      resolve({ status: Number(headers[':status']), body, headers });
    });
    r.on('error', reject);
    r.end();
  });
}

t.test('TLS termination picks the chain by SNI; HTTP/1.1 and HTTP/2 by ALPN', async (t) => {
  const a = await backend('a');
  const b = await backend('b');
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  const port = await freePort();
  const tlsCtx = (cert: JsonObject) => ({
    name: 'envoy.transport_sockets.tls',
    typed_config: { '@type': TLS_SOCKET, common_tls_context: { tls_certificates: [cert], alpn_protocols: ['h2', 'http/1.1'] } },
  });
  const p = await proxyWith(
    t,
    [
      {
        name: 'https',
        address: sock('127.0.0.1', port),
        listener_filters: [
          {
            name: 'envoy.filters.listener.tls_inspector',
            typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' },
          },
        ],
        filter_chains: [
          {
            filter_chain_match: { server_names: ['a.example.com'] },
            transport_socket: tlsCtx({ certificate_chain: { inline_string: certA.cert }, private_key: { inline_string: certA.key } }),
            filters: [hcm({ statPrefix: 'https_a', routeConfig: routeTo('a') })],
          },
          {
            filter_chain_match: { server_names: ['*.example.com'] },
            transport_socket: tlsCtx({ certificate_chain: { filename: certB.certFile }, private_key: { filename: certB.keyFile } }),
            filters: [hcm({ statPrefix: 'https_b', routeConfig: routeTo('b') })],
          },
        ],
      },
    ],
    [staticCluster('a', a.port), staticCluster('b', b.port)],
  );
  const ra = await httpsGet(port, 'a.example.com', '/x');
  t.equal(ra.cn, 'a.example.com', 'exact SNI chain presents certificate a');
  t.equal(ra.body, 'a /x');
  t.equal(ra.alpn, false, 'no ALPN offered by this client, none selected');
  t.equal(a.seen.at(-1)?.headers['x-forwarded-proto'], 'https');
  const rb = await httpsGet(port, 'other.example.com', '/y');
  t.equal(rb.cn, 'b.example.com', 'wildcard SNI chain presents certificate b');
  t.equal(rb.body, 'b /y');
  const h2 = await h2Get(`https://127.0.0.1:${port}`, '/z', { ca: pki.ca.cert, servername: 'a.example.com', checkServerIdentity: () => undefined });
  t.equal(h2.status, 200);
  t.equal(h2.body, 'a /z', 'HTTP/2 over TLS');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'http.https_a.downstream_cx_http2_total'), 1);
  t.equal(statValue(stats, 'listener.127.0.0.1_' + port + '.ssl.handshake'), 3);
  // no chain for a name outside both matches: the connection is closed
  const err = await new Promise<Error | undefined>((resolve) => {
    const s = tls.connect({ host: '127.0.0.1', port, servername: 'nothing.test', ca: pki.ca.cert }, () => resolve(undefined));
    s.on('error', (e) => resolve(e));
    s.on('close', () => resolve(new Error('closed')));
  });
  t.ok(err, 'no filter chain match closes the connection');
  await waitForValue(
    'no_filter_chain_match counted',
    async () => statValue((await adminGet(p, '/stats')).body, `listener.127.0.0.1_${port}.no_filter_chain_match`) === 1,
    { timeoutMs: 10_000, intervalMs: 20 },
  );
});

t.test('h2c prior knowledge downstream and HTTP/2 upstream', async (t) => {
  const seen: string[] = [];
  const h2backend = http2.createServer((req, res) => {
    seen.push(req.httpVersion);
    res.setHeader('x-backend', 'h2');
    res.end(`h2 ${req.url}`);
  });
  await new Promise<void>((r) => h2backend.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => h2backend.close(() => r())));
  const port = await freePort();
  const h2opts = {
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
  };
  await proxyWith(
    t,
    [{ name: 'l', address: sock('127.0.0.1', port), filter_chains: [{ filters: [hcm({ routeConfig: routeTo('h2') })] }] }],
    [staticCluster('h2', (h2backend.address() as net.AddressInfo).port, h2opts)],
  );
  const r = await h2Get(`http://127.0.0.1:${port}`, '/p');
  t.equal(r.status, 200);
  t.equal(r.body, 'h2 /p', 'h2c request proxied');
  const r1 = await request(port, '/q');
  t.equal(r1.body, 'h2 /q', 'HTTP/1.1 on the same listener');
  t.same(seen, ['2.0', '2.0'], 'upstream requests used HTTP/2');
});

t.test('upstream TLS with SNI, CA and SAN validation', async (t) => {
  const srv = https.createServer({ cert: upstreamCert.cert, key: upstreamCert.key }, (req, res) =>
    res.end(`tls-backend ${(req.socket as tls.TLSSocket).servername}`),
  );
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  const bport = (srv.address() as net.AddressInfo).port;
  const port = await freePort();
  const upTls = (san: string) => ({
    transport_socket: {
      name: 'envoy.transport_sockets.tls',
      typed_config: {
        '@type': UP_TLS,
        sni: 'backend.internal',
        common_tls_context: {
          validation_context: {
            trusted_ca: { inline_string: pki.ca.cert },
            match_typed_subject_alt_names: [{ san_type: 'URI', matcher: { exact: san } }],
          },
        },
      },
    },
  });
  const p = await proxyWith(
    t,
    [
      listenerJson(
        'l',
        port,
        hcm({
          routeConfig: anyHost([
            { match: { prefix: '/good' }, route: { cluster: 'good' } },
            { match: { prefix: '/bad' }, route: { cluster: 'bad' } },
          ]),
        }),
      ),
    ],
    [
      staticCluster('good', bport, upTls('spiffe://cluster.local/ns/demo/sa/backend')),
      staticCluster('bad', bport, upTls('spiffe://cluster.local/ns/demo/sa/other')),
    ],
  );
  const good = await request(port, '/good');
  t.equal(good.body, 'tls-backend backend.internal', 'TLS to the upstream with the configured SNI');
  const bad = await request(port, '/bad');
  t.equal(bad.status, 503, 'SAN mismatch fails the connection');
  // Envoy's words for a certificate it could not verify (BoringSSL's drained error queue, as the gateway-tls
  // differential scenario shows Envoy 1.36 answering)
  t.equal(
    bad.body,
    'upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, transport failure reason: TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end',
  );
  t.ok((statValue((await adminGet(p, '/stats')).body, 'cluster.bad.upstream_cx_connect_fail') ?? 0) >= 1);
});

t.test('TLS certificate delivered over SDS on the ADS stream', async (t) => {
  const a = await backend('a');
  t.teardown(() => a.close());
  const port = await freePort();
  const listener = pb(ListenerSchema, {
    name: '0.0.0.0_443',
    address: sock('127.0.0.1', port),
    filter_chains: [
      {
        transport_socket: {
          name: 'envoy.transport_sockets.tls',
          typed_config: {
            '@type': TLS_SOCKET,
            common_tls_context: {
              tls_certificate_sds_secret_configs: [{ name: 'kubernetes://shop-cert', sds_config: { ads: {}, resource_api_version: 'V3' } }],
            },
          },
        },
        filters: [hcm({ routeConfig: routeTo('outbound|80||a.demo.svc.cluster.local') })],
      },
    ],
  });
  const secret = pb(SecretSchema, {
    name: 'kubernetes://shop-cert',
    tls_certificate: { certificate_chain: { inline_string: certA.cert }, private_key: { inline_string: certA.key } },
  });
  const ads = await startAds({
    clusters: [edsCluster('outbound|80||a.demo.svc.cluster.local')],
    endpoints: [cla('outbound|80||a.demo.svc.cluster.local', [{ port: a.port }])],
    listeners: [listener],
    routes: [],
    secrets: [secret],
  });
  t.teardown(() => ads.close());
  const p = await startProxy(adsBootstrap(ads.address));
  t.teardown(() => p.close());
  await p.engine.initialized;
  await waitForValue('secret ACKed', () => ads.ackedVersion(TYPE_URL.secret) !== undefined && ads.ackedVersion(TYPE_URL.secret) !== '', {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  // the dump first: redacting its copy must leave the engine's key alone for the TLS server built afterwards
  const dump = JSON.parse((await adminGet(p, '/config_dump')).body) as { configs: Array<Record<string, unknown>> };
  const secrets = dump.configs.find((c) => c['@type'] === 'type.googleapis.com/envoy.admin.v3.SecretsConfigDump') as {
    dynamic_active_secrets: Array<{ name: string; secret: { tls_certificate: { private_key: { inline_string: string } } } }>;
  };
  t.equal(secrets.dynamic_active_secrets[0]?.name, 'kubernetes://shop-cert');
  t.equal(secrets.dynamic_active_secrets[0]?.secret.tls_certificate.private_key.inline_string, '[redacted]', 'private keys are redacted');
  const r = await httpsGet(port, 'a.example.com', '/sds');
  t.equal(r.cn, 'a.example.com', 'certificate from the SDS secret');
  t.equal(r.body, 'a /sds');

  // a key that does not load is refused when it arrives; the secret in use keeps serving
  const broken = pb(SecretSchema, {
    name: 'kubernetes://shop-cert',
    tls_certificate: {
      certificate_chain: { inline_string: certA.cert },
      private_key: { inline_string: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' },
    },
  });
  ads.update({ secrets: [broken] });
  await waitForValue('the broken secret NACKed', () => ads.lastNack(TYPE_URL.secret) !== undefined, { timeoutMs: 10_000, intervalMs: 20 });
  t.match(ads.lastNack(TYPE_URL.secret), /secret 'kubernetes:\/\/shop-cert': Failed to load certificate chain and private key/);
  const after = await httpsGet(port, 'a.example.com', '/sds-after');
  t.equal(after.cn, 'a.example.com', 'the last good certificate still serves');
  t.equal(after.body, 'a /sds-after');
});

function echoServer(tag: string): Promise<net.Server> {
  return new Promise((resolve) => {
    const s = net.createServer((c) => c.on('data', (d) => c.write(`${tag}:${d}`)));
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}

function tcpExchange(port: number, msg: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect(port, '127.0.0.1', () => c.write(msg));
    c.once('data', (d) => {
      resolve(d.toString());
      c.end();
    });
    c.on('error', reject);
  });
}

t.test('tcp_proxy: one cluster, weighted clusters, and TLS passthrough chosen by SNI', async (t) => {
  const e1 = await echoServer('one');
  const e2 = await echoServer('two');
  t.teardown(() => {
    e1.close();
    e2.close();
  });
  const tlsSrv = tls.createServer({ cert: certA.cert, key: certA.key }, (c) => c.end('passthrough'));
  await new Promise<void>((r) => tlsSrv.listen(0, '127.0.0.1', r));
  t.teardown(() => tlsSrv.close());
  const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
  const port = (s: net.Server) => (s.address() as net.AddressInfo).port;
  const p = await proxyWith(
    t,
    [
      {
        name: 'tcp1',
        address: sock('127.0.0.1', p1),
        filter_chains: [
          { filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP, stat_prefix: 'one', cluster: 'one' } }] },
        ],
      },
      {
        name: 'tcp2',
        address: sock('127.0.0.1', p2),
        filter_chains: [
          {
            filters: [
              {
                name: 'envoy.filters.network.tcp_proxy',
                typed_config: {
                  '@type': TCP,
                  stat_prefix: 'split',
                  weighted_clusters: {
                    clusters: [
                      { name: 'one', weight: 1 },
                      { name: 'two', weight: 1 },
                    ],
                  },
                },
              },
            ],
          },
        ],
      },
      {
        name: 'sni',
        address: sock('127.0.0.1', p3),
        listener_filters: [
          {
            name: 'envoy.filters.listener.tls_inspector',
            typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' },
          },
        ],
        filter_chains: [
          {
            filter_chain_match: { server_names: ['a.example.com'] },
            filters: [{ name: 'envoy.filters.network.tcp_proxy', typed_config: { '@type': TCP, stat_prefix: 'pt', cluster: 'tls' } }],
          },
        ],
      },
    ],
    [staticCluster('one', port(e1)), staticCluster('two', port(e2)), staticCluster('tls', port(tlsSrv))],
  );
  t.equal(await tcpExchange(p1, 'hi'), 'one:hi');
  const hit = new Set<string>();
  for (let i = 0; i < 30 && hit.size < 2; i++) hit.add((await tcpExchange(p2, 'x')).split(':')[0]!);
  t.same([...hit].sort(), ['one', 'two'], 'weighted clusters reach both');
  const body = await new Promise<string>((resolve, reject) => {
    const s = tls.connect(
      { host: '127.0.0.1', port: p3, servername: 'a.example.com', ca: pki.ca.cert, checkServerIdentity: () => undefined },
      () => undefined,
    );
    let d = '';
    s.on('data', (x) => (d += x));
    s.on('end', () => resolve(d));
    s.on('error', reject);
  });
  t.equal(body, 'passthrough', 'TLS passed through untouched to the backend chosen by SNI');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'tcp.one.downstream_cx_total'), 1);
});

t.test('gRPC through the proxy: trailers forwarded, local replies as gRPC status', async (t) => {
  const grpc = await import('@grpc/grpc-js');
  const raw = (b: Buffer) => b;
  const def: import('@grpc/grpc-js').ServiceDefinition = {
    Echo: {
      path: '/mesh.test.Echo/Echo',
      requestStream: false,
      responseStream: false,
      requestSerialize: raw,
      requestDeserialize: raw,
      responseSerialize: raw,
      responseDeserialize: raw,
    },
  };
  const server = new grpc.Server();
  const echo: import('@grpc/grpc-js').handleUnaryCall<Buffer, Buffer> = (call, cb) => {
    if (call.request.toString() === 'fail') cb({ code: grpc.status.FAILED_PRECONDITION, details: 'nope' });
    else cb(null, Buffer.from(`echo ${call.request} via ${call.metadata.get('x-forwarded-proto')[0]}`));
  };
  server.addService(def, { Echo: echo });
  const bport = await new Promise<number>((r, j) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? j(e) : r(p))),
  );
  t.teardown(() => server.forceShutdown());
  const port = await freePort();
  const h2opts = {
    typed_extension_protocol_options: {
      'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
        '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
        explicit_http_config: { http2_protocol_options: {} },
      },
    },
  };
  await proxyWith(
    t,
    [
      listenerJson(
        'l',
        port,
        hcm({
          routeConfig: anyHost([{ match: { prefix: '/mesh.test.Echo/' }, route: { cluster: 'grpc' } }]),
        }),
      ),
    ],
    [staticCluster('grpc', bport, h2opts)],
  );
  const Client = grpc.makeGenericClientConstructor(def, 'Echo');
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as {
    Echo(b: Buffer, cb: (e: import('@grpc/grpc-js').ServiceError | null, r?: Buffer) => void): void;
    close(): void;
  };
  t.teardown(() => client.close());
  const call = (m: string) =>
    new Promise<{ err: import('@grpc/grpc-js').ServiceError | null; res?: Buffer }>((r) =>
      client.Echo(Buffer.from(m), (err, res) => r({ err, res })),
    );
  const ok = await call('hi');
  t.equal(ok.res?.toString(), 'echo hi via http');
  const bad = await call('fail');
  t.equal(bad.err?.code, grpc.status.FAILED_PRECONDITION, 'grpc-status trailer forwarded');
  t.equal(bad.err?.details, 'nope');
  server.forceShutdown();
  const down = await call('x');
  t.equal(down.err?.code, grpc.status.UNAVAILABLE, 'a local 503 becomes UNAVAILABLE');
  t.match(down.err?.details ?? '', /upstream connect error or disconnect\/reset before headers/);
});
