// Istio's in-band TCP metadata exchange between sidecars over real mutual TLS (istio/proxy release-1.26
// metadata_exchange.cc): a client sidecar's outbound tcp_proxy whose cluster carries the upstream exchange filter
// and offers ALPN `istio-peer-exchange, istio` (Istio's ALPN_IN_MESH_WITH_MXC), a server sidecar's inbound TLS
// chain offering `istio-peer-exchange, h2, http/1.1` with the exchange filter before istio.stats and tcp_proxy
// (istiod 1.26 TCPListenerMx / TCPClusterMx). Each side learns the other: the server's reporter=destination
// series names the client workload, the client's reporter=source series the server's (from the exchange, with
// app and version the endpoint labels lack); the application never sees an exchange byte, and Istio's TCP byte
// counts leave them out (tcp_proxy counts what passes the filters). A raw TLS client speaking the exchange from
// bytes written by hand checks the wire format both ways; clients that do not negotiate `istio-peer-exchange`
// (a plain TLS client, and upstream Envoy 1.36 where installed: it has no exchange filter) are served as before.
import t, { type Test } from 'tap';
import net from 'node:net';
import tls from 'node:tls';
import fs from 'node:fs';
import { fromBinary, toJson, type JsonObject } from '@bufbuild/protobuf';
import { AnySchema, StructSchema } from '@bufbuild/protobuf/wkt';
import { adminGet, makePki, sock, startProxy, statValue, type RunningEngine, type TestPki } from './helpers';
import { freePorts } from '../helpers/ports';
import { seriesOf } from '../helpers/prometheus';
import { waitForValue } from '../helpers/wait';
import { envoyMissing } from '../helpers/envoy';
import { runStatic } from '../helpers/static-plane';
import { httpGet } from '../helpers/gateway';
import { peerExchange, stringValue, structValue } from './mx-bytes';

const node = (name: string, ns: string) => ({
  id: `sidecar~127.0.0.1~${name}-v1-7d4b9c8f6-abcde.${ns}~${ns}.svc.cluster.local`,
  cluster: `${name}.${ns}`,
  metadata: {
    NAME: `${name}-v1-7d4b9c8f6-abcde`,
    NAMESPACE: ns,
    WORKLOAD_NAME: `${name}-v1`,
    CLUSTER_ID: 'Kubernetes',
    OWNER: `kubernetes://apis/apps/v1/namespaces/${ns}/deployments/${name}-v1`,
    LABELS: { app: name, version: 'v1', 'service.istio.io/canonical-name': name, 'service.istio.io/canonical-revision': 'v1' },
  },
});
const A = node('a', 'a');
const B = node('b', 'b');
const spiffe = (ns: string) => `spiffe://cluster.local/ns/${ns}/sa/${ns}`;

const TYPED_STRUCT = 'type.googleapis.com/udpa.type.v1.TypedStruct';
const MX_CONFIG = {
  '@type': TYPED_STRUCT,
  type_url: 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange',
  value: { protocol: 'istio-peer-exchange', enable_discovery: true },
};
const MX = { name: 'istio.metadata_exchange', typed_config: MX_CONFIG };
const STATS = { name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig', tcp_reporting_duration: '0.2s' } };
const tcpProxy = (cluster: string) => ({
  name: 'envoy.filters.network.tcp_proxy',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: cluster, cluster },
});
const SERVICE = { istio: { services: [{ host: 'b.b.svc.cluster.local', name: 'b', namespace: 'b' }] } };
const TLS_PARAMS = { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' };

interface Certs {
  pki: TestPki;
  a: { certFile: string; keyFile: string };
  b: { certFile: string; keyFile: string };
}

const common = (c: Certs, who: 'a' | 'b', alpn: string[]) => ({
  tls_params: TLS_PARAMS,
  alpn_protocols: alpn,
  tls_certificates: [{ certificate_chain: { filename: c[who].certFile }, private_key: { filename: c[who].keyFile } }],
  validation_context: { trusted_ca: { filename: c.pki.ca.certFile } },
});

/** B's sidecar: Istio's inbound TCP chain (TLS with client certificates; exchange, stats, tcp_proxy to the app). */
function serverBootstrap(c: Certs, port: number, app: number): JsonObject {
  return {
    node: B,
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners: [
        {
          name: 'virtualInbound',
          address: sock('127.0.0.1', port),
          traffic_direction: 'INBOUND',
          // Istio's inbound listeners read the ClientHello (a client agreeing on no ALPN is still served, as by BoringSSL)
          listener_filters: [
            {
              name: 'envoy.filters.listener.tls_inspector',
              typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' },
            },
          ],
          filter_chains: [
            {
              transport_socket: {
                name: 'envoy.transport_sockets.tls',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                  common_tls_context: common(c, 'b', ['istio-peer-exchange', 'h2', 'http/1.1']),
                  require_client_certificate: true,
                },
              },
              filters: [MX, STATS, tcpProxy('inbound|9000||')],
            },
          ],
        },
      ],
      clusters: [
        {
          name: 'inbound|9000||',
          type: 'STATIC',
          connect_timeout: '1s',
          metadata: { filter_metadata: SERVICE },
          load_assignment: { cluster_name: 'inbound|9000||', endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', app) } }] }] },
        },
      ],
    },
  };
}

/** A's sidecar: an outbound TCP listener to B's cluster, ISTIO_MUTUAL with `alpn`; Istio's stats and exchange filters when `istio`. */
function clientBootstrap(c: Certs, port: number, server: number, alpn: string[], istio: boolean): JsonObject {
  const name = 'outbound|9000||b.b.svc.cluster.local';
  return {
    node: A,
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners: [
        {
          name: 'outbound_9000',
          address: sock('127.0.0.1', port),
          traffic_direction: 'OUTBOUND',
          filter_chains: [{ filters: [...(istio ? [STATS] : []), tcpProxy(name)] }],
        },
      ],
      clusters: [
        {
          name,
          type: 'STATIC',
          connect_timeout: '1s',
          metadata: { filter_metadata: SERVICE },
          ...(istio ? { filters: [{ name: 'istio.metadata_exchange', typed_config: MX_CONFIG }] } : {}),
          transport_socket: {
            name: 'envoy.transport_sockets.tls',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
              common_tls_context: common(c, 'a', alpn),
              sni: 'outbound_.9000_._.b.b.svc.cluster.local',
            },
          },
          load_assignment: {
            cluster_name: name,
            endpoints: [
              {
                lb_endpoints: [
                  {
                    endpoint: { address: sock('127.0.0.1', server) },
                    // Istio's endpoint telemetry label: workload;namespace;canonical;revision;cluster (no app/version)
                    metadata: { filter_metadata: { istio: { workload: 'b-v1;b;b;v1;Kubernetes' } } },
                  },
                ],
              },
            ],
          },
        },
      ],
    },
  };
}

/** The application: echoes, and keeps every byte each connection brought. */
async function echoApp(t: Test): Promise<{ port: number; received: () => string[] }> {
  const got: string[] = [];
  const s = net.createServer((c) => {
    const i = got.push('') - 1;
    c.on('data', (d) => {
      got[i] += d.toString('latin1');
      c.write(d);
    });
    c.on('end', () => c.end());
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => s.close(() => r())));
  return { port: (s.address() as net.AddressInfo).port, received: () => [...got] };
}

/** One plaintext connection through A's listener: sends `msg`, waits for its echo, closes. */
function roundTrip(port: number, msg: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let data = '';
    const c = net.connect(port, '127.0.0.1', () => c.write(msg));
    c.on('data', (d) => {
      data += d.toString('latin1');
      if (data.length >= msg.length) c.end();
    });
    c.on('error', reject);
    c.on('close', () => resolve(data));
  });
}

const prom = async (e: RunningEngine) => (await adminGet(e, '/stats/prometheus')).body;
const stat = async (e: RunningEngine, name: string) => statValue((await adminGet(e, '/stats')).body, name);

/** The one series of `metric` a sidecar reports as `reporter`, once its connection was closed and reported. */
async function closedSeries(e: RunningEngine, reporter: string): Promise<Record<string, string>> {
  const s = await waitForValue(
    () => `no closed istio_tcp connection as ${reporter}`,
    async () => seriesOf(await prom(e), 'istio_tcp_connections_closed_total').find((x) => x.labels['reporter'] === reporter),
    { timeoutMs: 5000, intervalMs: 50 },
  );
  return s.labels;
}
async function bytesOf(e: RunningEngine, reporter: string): Promise<[number | undefined, number | undefined]> {
  const text = await prom(e);
  const v = (m: string) => seriesOf(text, m).find((x) => x.labels['reporter'] === reporter)?.value;
  return [v('istio_tcp_received_bytes_total'), v('istio_tcp_sent_bytes_total')];
}

// Istio's standard labels for this connection (istio_stats.cc populatePeerInfo), written from the two nodes above.
const SOURCE_A = {
  source_workload: 'a-v1',
  source_canonical_service: 'a',
  source_canonical_revision: 'v1',
  source_workload_namespace: 'a',
  source_principal: spiffe('a'),
  source_app: 'a',
  source_version: 'v1',
  source_cluster: 'Kubernetes',
};
const DESTINATION_B = {
  destination_workload: 'b-v1',
  destination_workload_namespace: 'b',
  destination_principal: spiffe('b'),
  destination_app: 'b',
  destination_version: 'v1',
  destination_service: 'b.b.svc.cluster.local',
  destination_canonical_service: 'b',
  destination_canonical_revision: 'v1',
  destination_service_name: 'b',
  destination_service_namespace: 'b',
  destination_cluster: 'Kubernetes',
};
/** What a destination reporter gives a peer it knows nothing of but its certificate. */
const SOURCE_UNKNOWN_BUT_PRINCIPAL = {
  source_workload: 'unknown',
  source_canonical_service: 'unknown',
  source_canonical_revision: 'latest',
  source_workload_namespace: 'a',
  source_principal: spiffe('a'),
  source_app: 'unknown',
  source_version: 'unknown',
  source_cluster: 'unknown',
};
const TCP = { request_protocol: 'tcp', response_flags: '-' };

async function setup(t: Test) {
  const pki = makePki();
  t.teardown(() => pki.cleanup());
  const certs: Certs = { pki, a: pki.leaf('a', [`URI:${spiffe('a')}`]), b: pki.leaf('b', [`URI:${spiffe('b')}`]) };
  const app = await echoApp(t);
  const ports = await freePorts('client', 'server');
  const server = await startProxy(serverBootstrap(certs, ports.server, app.port));
  t.teardown(() => server.close());
  return { certs, app, ports, server };
}

t.test('engine ↔ engine: each sidecar names the other, learnt in-band; the app sees only its bytes', async (t) => {
  const { certs, app, ports, server } = await setup(t);
  const client = await startProxy(clientBootstrap(certs, ports.client, ports.server, ['istio-peer-exchange', 'istio'], true));
  t.teardown(() => client.close());

  t.equal(await roundTrip(ports.client, 'ping!'), 'ping!', 'the echo comes back whole');
  t.same(app.received(), ['ping!'], 'the application received its five bytes and nothing else');

  t.same(await closedSeries(server, 'destination'), {
    reporter: 'destination',
    ...SOURCE_A,
    ...DESTINATION_B,
    ...TCP,
    connection_security_policy: 'mutual_tls',
  });
  t.same(await closedSeries(client, 'source'), {
    reporter: 'source',
    ...SOURCE_A,
    ...DESTINATION_B,
    ...TCP,
    connection_security_policy: 'unknown',
  });
  t.same(await bytesOf(server, 'destination'), [5, 5], 'the server counts the application bytes only');
  t.same(await bytesOf(client, 'source'), [5, 5], 'the client counts the application bytes only');
  for (const [who, e] of [
    ['server', server],
    ['client', client],
  ] as const) {
    t.equal(await stat(e, 'metadata_exchange.alpn_protocol_found'), 1, `${who}: alpn_protocol_found`);
    t.equal(await stat(e, 'metadata_exchange.metadata_added'), 1, `${who}: metadata_added`);
    t.equal(await stat(e, 'metadata_exchange.alpn_protocol_not_found'), 0, `${who}: alpn_protocol_not_found`);
    t.equal(await stat(e, 'metadata_exchange.initial_header_not_found'), 0, `${who}: initial_header_not_found`);
    t.equal(await stat(e, 'metadata_exchange.header_not_found'), 0, `${who}: header_not_found`);
  }
});

t.test('bulk both ways through the two exchange filters: every byte arrives, in order, and is counted once', async (t) => {
  const { certs, app, ports, server } = await setup(t);
  const client = await startProxy(clientBootstrap(certs, ports.client, ports.server, ['istio-peer-exchange', 'istio'], true));
  t.teardown(() => client.close());
  const payload = Buffer.alloc(4 * 1024 * 1024);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 7 + (i >> 10)) & 0xff;
  const back = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    const c = net.connect(ports.client, '127.0.0.1', () => c.write(payload));
    c.on('data', (d: Buffer) => {
      chunks.push(d);
      n += d.length;
      if (n >= payload.length) c.end();
    });
    c.on('error', reject);
    c.on('close', () => resolve(Buffer.concat(chunks)));
  });
  t.ok(back.equals(payload), 'the echo is the payload, byte for byte');
  t.ok(Buffer.from(app.received()[0]!, 'latin1').equals(payload), 'the application got the payload and nothing else');
  await closedSeries(server, 'destination');
  t.same(await bytesOf(server, 'destination'), [payload.length, payload.length]);
  await closedSeries(client, 'source');
  t.same(await bytesOf(client, 'source'), [payload.length, payload.length]);
});

t.test('server-first protocol: the server app speaks first, both exchanges still happen', async (t) => {
  const pki = makePki();
  t.teardown(() => pki.cleanup());
  const certs: Certs = { pki, a: pki.leaf('a', [`URI:${spiffe('a')}`]), b: pki.leaf('b', [`URI:${spiffe('b')}`]) };
  const greeter = net.createServer((c) => {
    c.end('220 ready\r\n');
    c.on('error', () => undefined);
  });
  await new Promise<void>((r) => greeter.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => greeter.close(() => r())));
  const ports = await freePorts('client', 'server');
  const server = await startProxy(serverBootstrap(certs, ports.server, (greeter.address() as net.AddressInfo).port));
  t.teardown(() => server.close());
  const client = await startProxy(clientBootstrap(certs, ports.client, ports.server, ['istio-peer-exchange', 'istio'], true));
  t.teardown(() => client.close());
  const got = await new Promise<string>((resolve, reject) => {
    let data = '';
    const c = net.connect(ports.client, '127.0.0.1');
    c.on('data', (d) => (data += d));
    c.on('end', () => c.end());
    c.on('error', reject);
    c.on('close', () => resolve(data));
  });
  t.equal(got, '220 ready\r\n', 'the greeting arrives without exchange bytes');
  t.has(await closedSeries(server, 'destination'), SOURCE_A);
  t.has(await closedSeries(client, 'source'), DESTINATION_B);
});

/** A TLS client as A's certificate, offering `alpn`. */
function tlsClient(c: Certs, port: number, alpn: string[]): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect({
      host: '127.0.0.1',
      port,
      ca: c.pki.ca.cert,
      cert: fs.readFileSync(c.a.certFile),
      key: fs.readFileSync(c.a.keyFile),
      ALPNProtocols: alpn,
      checkServerIdentity: () => undefined,
    });
    s.once('secureConnect', () => resolve(s));
    s.once('error', reject);
  });
}
function readAll(s: tls.TLSSocket): Promise<Buffer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => chunks.push(d));
    s.on('close', () => resolve(Buffer.concat(chunks)));
    s.on('error', () => undefined);
  });
}

t.test('the wire format both ways: hand-written exchange in, the server’s exchange out', async (t) => {
  const { certs, app, ports, server } = await setup(t);
  const s = await tlsClient(certs, ports.server, ['istio-peer-exchange']);
  t.equal(s.alpnProtocol, 'istio-peer-exchange');
  const all = readAll(s);
  const mine = peerExchange('sidecar~10.0.0.9~c-1.c~c.svc.cluster.local', [
    ['CLUSTER_ID', stringValue('east')],
    ['LABELS', structValue([['app', stringValue('c-app')]])],
    ['NAMESPACE', stringValue('c')],
    ['WORKLOAD_NAME', stringValue('c-v3')],
  ]);
  // header and payload arrive in pieces, then the application bytes
  s.write(mine.subarray(0, 5));
  await new Promise((r) => setTimeout(r, 50));
  s.write(mine.subarray(5));
  s.write('ping!');
  await new Promise((r) => setTimeout(r, 200));
  s.end();
  const out = await all;
  t.same([...out.subarray(0, 4)], [0x3d, 0x23, 0x04, 0x67], 'the server answers with the magic, big-endian');
  const n = out.readUInt32BE(4);
  const any = fromBinary(AnySchema, out.subarray(8, 8 + n));
  t.equal(any.typeUrl, 'type.googleapis.com/google.protobuf.Struct');
  t.same(toJson(StructSchema, fromBinary(StructSchema, any.value)), {
    'x-envoy-peer-metadata': {
      CLUSTER_ID: 'Kubernetes',
      LABELS: { app: 'b', 'service.istio.io/canonical-name': 'b', 'service.istio.io/canonical-revision': 'v1', version: 'v1' },
      NAME: 'b-v1-7d4b9c8f6-abcde',
      NAMESPACE: 'b',
      OWNER: 'kubernetes://apis/apps/v1/namespaces/b/deployments/b-v1',
      WORKLOAD_NAME: 'b-v1',
    },
    'x-envoy-peer-metadata-id': B.id,
  });
  t.equal(out.subarray(8 + n).toString(), 'ping!', 'then the echo');
  t.same(app.received(), ['ping!'], 'the application never saw the exchange');
  t.has(await closedSeries(server, 'destination'), {
    source_workload: 'c-v3',
    // populatePeerInfo: the namespace of the certificate's SPIFFE id wins over the exchanged one
    source_workload_namespace: 'a',
    source_app: 'c-app',
    source_cluster: 'east',
    source_principal: spiffe('a'),
  });
});

t.test('no istio-peer-exchange agreed (a client that does not offer it): no exchange, bytes untouched', async (t) => {
  const { certs, app, ports, server } = await setup(t);
  const s = await tlsClient(certs, ports.server, ['istio']);
  t.equal(s.alpnProtocol, false, 'the server offers no `istio`: nothing negotiated');
  const all = readAll(s);
  s.write('ping!');
  await new Promise((r) => setTimeout(r, 200));
  s.end();
  t.equal((await all).toString(), 'ping!', 'the client gets its echo and nothing else');
  t.same(app.received(), ['ping!']);
  t.same(await closedSeries(server, 'destination'), {
    reporter: 'destination',
    ...SOURCE_UNKNOWN_BUT_PRINCIPAL,
    ...DESTINATION_B,
    ...TCP,
    connection_security_policy: 'mutual_tls',
  });
  t.equal(await stat(server, 'metadata_exchange.alpn_protocol_not_found'), 1);
  t.equal(await stat(server, 'metadata_exchange.metadata_added'), 0);
});

t.test(
  'upstream Envoy as the client (no exchange filter; offers `istio`): served, the source known by its certificate',
  { skip: envoyMissing() ?? false },
  async (t) => {
    const { certs, app, ports, server } = await setup(t);
    const admin = (await freePorts('admin')).admin;
    // what the daemon gives upstream Envoy (capabilities.ts: no Istio filters): ALPN `istio`, no stats or exchange filter
    const boot = clientBootstrap(certs, ports.client, ports.server, ['istio'], false) as { admin: object };
    boot.admin = { address: sock('127.0.0.1', admin) };
    const envoy = await runStatic(t, 'envoy', boot, ports.client, async () => (await httpGet(admin, '/ready')).status === 200);
    if ('refused' in envoy) return t.fail(`Envoy refused the client config:\n${envoy.refused}`);
    t.equal(await roundTrip(ports.client, 'ping!'), 'ping!');
    t.same(app.received(), ['ping!']);
    t.same(await closedSeries(server, 'destination'), {
      reporter: 'destination',
      ...SOURCE_UNKNOWN_BUT_PRINCIPAL,
      ...DESTINATION_B,
      ...TCP,
      connection_security_policy: 'mutual_tls',
    });
    t.equal(await stat(server, 'metadata_exchange.alpn_protocol_not_found'), 1);
  },
);
