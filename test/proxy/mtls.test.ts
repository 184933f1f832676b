// Mutual TLS between two engines configured with the xDS Istio 1.26 generates for sidecars: the client's
// outbound cluster chooses ISTIO_MUTUAL TLS by the endpoint's tlsMode metadata (transport_socket_matches),
// offers Istio's ALPN (istio.alpn on HTTP), checks the server's SPIFFE SAN; the server's inbound chains
// (PERMISSIVE: TLS/plaintext × HTTP/TCP by tls_inspector + http_inspector; STRICT: TLS only) require a
// client certificate, set x-forwarded-client-cert, and authorize by principal (HTTP and network RBAC).
// Certificates come from our CA (src/ca) and reach the engines over the agent's SDS server.
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { freePort } from '../helpers/ports';
import { request, sock, startProxy, type RunningEngine, tcpServer } from './helpers';
import { makeCa, sdsCluster, startSds, type Identity } from './sds';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';
import { MESH_MTLS_CIPHERS } from '../helpers/tls';

const spiffe = (ns: string, sa: string) => `spiffe://cluster.local/ns/${ns}/sa/${sa}`;

// ---- xDS in Istio's shape -------------------------------------------------------------------------

const SDS_CONFIG = {
  api_config_source: {
    api_type: 'GRPC',
    transport_api_version: 'V3',
    set_node_on_first_message_only: true,
    grpc_services: [{ envoy_grpc: { cluster_name: 'sds-grpc' } }],
  },
  initial_fetch_timeout: '0s',
  resource_api_version: 'V3',
};
const sds = (name: string) => ({ name, sds_config: SDS_CONFIG });
const TLS_PARAMS = { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' };
const MTLS_HTTP_ALPN = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
const PLAIN_HTTP_ALPN = ['http/1.0', 'http/1.1', 'h2c'];
const MTLS_TCP_ALPN = ['istio-peer-exchange', 'istio'];

/** Istio BuildInboundTLS: client certificate required, SDS `default` + `ROOTCA`. */
function downstreamTls(http: boolean): JsonObject {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
      common_tls_context: {
        tls_params: { ...TLS_PARAMS, cipher_suites: [...MESH_MTLS_CIPHERS] },
        alpn_protocols: http ? ['h2', 'http/1.1'] : ['istio-peer-exchange', 'h2', 'http/1.1'],
        tls_certificate_sds_secret_configs: [sds('default')],
        combined_validation_context: { default_validation_context: {}, validation_context_sds_secret_config: sds('ROOTCA') },
      },
      require_client_certificate: true,
    },
  };
}

/** Istio buildUpstreamTLSSettings for ISTIO_MUTUAL (auto-mTLS). */
function upstreamIstioMutual(sans: string[], sni: string): JsonObject {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      common_tls_context: {
        tls_params: TLS_PARAMS,
        alpn_protocols: MTLS_TCP_ALPN,
        tls_certificate_sds_secret_configs: [sds('default')],
        combined_validation_context: {
          default_validation_context: { match_subject_alt_names: sans.map((s) => ({ exact: s })) },
          validation_context_sds_secret_config: sds('ROOTCA'),
        },
      },
      sni,
    },
  };
}

const RAW_BUFFER = {
  name: 'envoy.transport_sockets.raw_buffer',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' },
};

/** An outbound cluster with Istio's auto-mTLS transport socket matches and endpoints labelled tlsMode. */
function outboundCluster(name: string, port: number, sans: string[], tlsMode: 'istio' | undefined): JsonObject {
  return {
    name,
    type: 'STATIC',
    connect_timeout: '2s',
    metadata: { filter_metadata: { istio: { services: [{ host: 'b.b.svc.cluster.local', name: 'b', namespace: 'b' }] } } },
    load_assignment: {
      cluster_name: name,
      endpoints: [
        {
          lb_endpoints: [
            {
              endpoint: { address: sock('127.0.0.1', port) },
              metadata: {
                filter_metadata: tlsMode
                  ? { 'envoy.transport_socket_match': { tlsMode }, istio: { workload: 'b;b;b;;Orchestrator' } }
                  : { istio: { workload: 'b;b;b;;Orchestrator' } },
              },
            },
          ],
        },
      ],
    },
    transport_socket_matches: [
      {
        name: 'tlsMode-istio',
        match: { tlsMode: 'istio' },
        transport_socket: upstreamIstioMutual(sans, `outbound_.${port}_._.b.b.svc.cluster.local`),
      },
      { name: 'tlsMode-disabled', match: {}, transport_socket: RAW_BUFFER },
    ],
  };
}

const ALPN_FILTER: JsonObject = {
  name: 'istio.alpn',
  typed_config: {
    '@type': 'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig',
    alpn_override: [
      { alpn_override: ['istio-http/1.0', 'istio', 'http/1.0'] },
      { upstream_protocol: 'HTTP11', alpn_override: ['istio-http/1.1', 'istio', 'http/1.1'] },
      { upstream_protocol: 'HTTP2', alpn_override: ['istio-h2', 'istio', 'h2'] },
    ],
  },
};
/** Istio's stats filter (stats.PluginConfig): its principals and connection_security_policy come from the TLS. */
const ISTIO_STATS = { name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig' } };
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };
const TLS_INSPECTOR = {
  name: 'envoy.filters.listener.tls_inspector',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector' },
};
const HTTP_INSPECTOR = {
  name: 'envoy.filters.listener.http_inspector',
  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector' },
};

function hcmFilter(statPrefix: string, cluster: string, httpFilters: JsonObject[], extra: JsonObject = {}): JsonObject {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
      stat_prefix: statPrefix,
      http_filters: [...httpFilters, ROUTER],
      route_config: {
        name: cluster,
        virtual_hosts: [{ name: cluster, domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster, timeout: '0s' } }] }],
      },
      ...extra,
    },
  };
}

function tcpProxy(statPrefix: string, cluster: string): JsonObject {
  return {
    name: 'envoy.filters.network.tcp_proxy',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: statPrefix, cluster },
  };
}

/** Istio's ALLOW policy for `source.principals: [<principal>]`, for the HTTP and the network RBAC filter. */
function allowOnly(principal: string): JsonObject {
  return {
    action: 'ALLOW',
    policies: {
      'ns[b]-policy[allow-a]-rule[0]': {
        permissions: [{ and_rules: { rules: [{ or_rules: { rules: [{ any: true }] } }] } }],
        principals: [{ and_ids: { ids: [{ or_ids: { ids: [{ authenticated: { principal_name: { exact: principal } } }] } }] } }],
      },
    },
  };
}

const bootstrapBase = (id: string, sdsSocket: string, staticListeners: JsonObject[], clusters: JsonObject[]): JsonObject => ({
  node: { id: `sidecar~127.0.0.1~${id}~${id.split('.')[1]}.svc.cluster.local`, cluster: id },
  admin: { address: sock('127.0.0.1', 0) },
  static_resources: {
    listeners: staticListeners,
    clusters: [sdsCluster(sdsSocket), ...clusters],
  },
});

// ---- workloads ------------------------------------------------------------------------------------

async function echoHeaders(): Promise<{ port: number; close: () => Promise<void> }> {
  const s = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ url: req.url, headers: req.headers }));
  });
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return {
    port: (s.address() as net.AddressInfo).port,
    close: () =>
      new Promise<void>((r) => {
        s.closeAllConnections();
        s.close(() => r());
      }),
  };
}

function tcpEcho(): Promise<{ port: number; close: () => Promise<void> }> {
  return tcpServer((c) => {
    c.on('error', () => undefined);
    c.pipe(c);
  });
}

/** Sends a line on a fresh connection; resolves with what came back, or `closed` if the peer closed first. */
function tcpRoundTrip(port: number, line: string, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve) => {
    const c = net.connect(port, host);
    let d = '';
    c.setTimeout(5000, () => {
      c.destroy();
      resolve(d || 'timeout');
    });
    c.on('connect', () => c.write(`${line}\n`));
    c.on('data', (x) => {
      d += x;
      if (d.includes('\n')) {
        c.destroy();
        resolve(d.trim());
      }
    });
    c.on('error', () => undefined);
    c.on('close', () => resolve(d ? d.trim() : 'closed'));
  });
}

function sha256Hex(pem: string): string {
  return crypto.createHash('sha256').update(new crypto.X509Certificate(pem).raw).digest('hex');
}

t.test('two engines: ISTIO_MUTUAL by tlsMode, inbound chains by ALPN, XFCC, principal policy, rotation', async (t) => {
  const dir = tempDir(t, 'mesh-mtls-');
  const { rootPem, issue } = await makeCa();
  const [idA, idB, idC] = await Promise.all([issue(spiffe('a', 'a')), issue(spiffe('b', 'b')), issue(spiffe('c', 'c'))]);

  const app = await echoHeaders();
  const echo = await tcpEcho();
  t.teardown(() => Promise.all([app.close(), echo.close()]).then(() => undefined));

  // ---- B: the server sidecar. One inbound listener per service port, chains as Istio builds them.
  const [bHttp, bTcp] = [await freePort(), await freePort()];
  const sdsB = await startSds(path.join(dir, 'b'), rootPem, idB);
  t.teardown(() => sdsB.stop());
  const inboundHttp = `inbound|${bHttp}||`;
  const inboundTcp = `inbound|${bTcp}||`;
  const httpRbac = {
    name: 'envoy.filters.http.rbac',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC', rules: allowOnly(idA.id) },
  };
  const netRbac = {
    name: 'envoy.filters.network.rbac',
    typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC', stat_prefix: 'tcp.', rules: allowOnly(idA.id) },
  };
  const inboundHcm = (prefix: string) =>
    hcmFilter(prefix, inboundHttp, [httpRbac, ISTIO_STATS], {
      forward_client_cert_details: 'APPEND_FORWARD',
      set_current_client_cert_details: { subject: true, dns: true, uri: true },
      server_name: 'istio-envoy',
    });
  const b = await startProxy(
    bootstrapBase(
      'b-1.b',
      sdsB.socketPath,
      [
        {
          // PERMISSIVE HTTP port
          name: `0.0.0.0_${bHttp}`,
          address: sock('127.0.0.1', bHttp),
          traffic_direction: 'INBOUND',
          listener_filters: [TLS_INSPECTOR, HTTP_INSPECTOR],
          filter_chains: [
            {
              name: 'mtls-http',
              filter_chain_match: { destination_port: bHttp, transport_protocol: 'tls', application_protocols: MTLS_HTTP_ALPN },
              transport_socket: downstreamTls(true),
              filters: [inboundHcm(`inbound_0.0.0.0_${bHttp}`)],
            },
            {
              name: 'plain-http',
              filter_chain_match: { destination_port: bHttp, transport_protocol: 'raw_buffer', application_protocols: PLAIN_HTTP_ALPN },
              filters: [inboundHcm(`inbound_0.0.0.0_${bHttp}`)],
            },
            {
              name: 'mtls-tcp',
              filter_chain_match: { destination_port: bHttp, transport_protocol: 'tls', application_protocols: MTLS_TCP_ALPN },
              transport_socket: downstreamTls(false),
              filters: [netRbac, tcpProxy(inboundHttp, inboundHttp)],
            },
            {
              name: 'plain-tcp',
              filter_chain_match: { destination_port: bHttp, transport_protocol: 'raw_buffer' },
              filters: [netRbac, tcpProxy(inboundHttp, inboundHttp)],
            },
          ],
        },
        {
          // STRICT TCP port: only TLS; the HTTP inspector is off there (Istio filter_disabled)
          name: `0.0.0.0_${bTcp}`,
          address: sock('127.0.0.1', bTcp),
          traffic_direction: 'INBOUND',
          listener_filters: [TLS_INSPECTOR, { ...HTTP_INSPECTOR, filter_disabled: { destination_port_range: { start: bTcp, end: bTcp + 1 } } }],
          filter_chains: [
            {
              name: 'strict-tcp',
              filter_chain_match: { destination_port: bTcp, transport_protocol: 'tls' },
              transport_socket: downstreamTls(false),
              filters: [netRbac, tcpProxy(inboundTcp, inboundTcp)],
            },
          ],
        },
      ],
      [
        {
          name: inboundHttp,
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: inboundHttp, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', app.port) } }] }] },
        },
        {
          name: inboundTcp,
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: { cluster_name: inboundTcp, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock('127.0.0.1', echo.port) } }] }] },
        },
      ],
    ),
  );
  t.teardown(() => b.close());

  // ---- A and C: client sidecars. Outbound HTTP (with istio.alpn) and TCP listeners to B's ports.
  const client = async (name: string, id: Identity, opts: { sans?: string[]; tlsMode?: 'istio' | undefined } = {}) => {
    const tlsMode = 'tlsMode' in opts ? opts.tlsMode : 'istio';
    const sdsX = await startSds(path.join(dir, name), rootPem, id);
    t.teardown(() => sdsX.stop());
    const [oHttp, oTcp] = [await freePort(), await freePort()];
    const sans = opts.sans ?? [idB.id];
    const httpCluster = `outbound|${bHttp}||b.b.svc.cluster.local`;
    const tcpCluster = `outbound|${bTcp}||b.b.svc.cluster.local`;
    const p = await startProxy(
      bootstrapBase(
        `${name}-1.${name}`,
        sdsX.socketPath,
        [
          {
            name: `0.0.0.0_${oHttp}`,
            address: sock('127.0.0.1', oHttp),
            traffic_direction: 'OUTBOUND',
            filter_chains: [{ filters: [hcmFilter(`outbound_0.0.0.0_${oHttp}`, httpCluster, [ALPN_FILTER, ISTIO_STATS])] }],
          },
          {
            name: `0.0.0.0_${oTcp}`,
            address: sock('127.0.0.1', oTcp),
            traffic_direction: 'OUTBOUND',
            filter_chains: [{ filters: [tcpProxy(tcpCluster, tcpCluster)] }],
          },
        ],
        [outboundCluster(httpCluster, bHttp, sans, tlsMode), outboundCluster(tcpCluster, bTcp, sans, tlsMode)],
      ),
    );
    t.teardown(() => p.close());
    return { engine: p, http: oHttp, tcp: oTcp };
  };
  const a = await client('a', idA);
  const c = await client('c', idC);
  for (const e of [a.engine, b, c.engine]) await e.engine.initialized;

  await t.test('HTTP crosses as mTLS: B sees x-forwarded-client-cert naming A', async (t) => {
    const r = await request(a.http, '/hello', { host: 'b.b.svc.cluster.local' });
    t.equal(r.status, 200);
    const seen = JSON.parse(r.body) as { headers: Record<string, string> };
    // Envoy's format for Istio's inbound HCM: By = B's own URI SAN, Hash = SHA-256 of A's certificate (DER)
    t.equal(seen.headers['x-forwarded-client-cert'], `By=${idB.id};Hash=${sha256Hex(idA.certPem)};Subject="";URI=${idA.id}`);
    const stats = await (await fetch(`${b.admin}/stats?filter=ssl.handshake`)).text();
    t.match(stats, new RegExp(`listener\\.127\\.0\\.0\\.1_${bHttp}\\.ssl\\.handshake: [1-9]`), "B's listener terminated TLS");
    const aStats = await (await fetch(`${a.engine.admin}/stats?filter=tlsMode`)).text();
    t.match(
      aStats,
      /cluster\.outbound\|\d+\|\|b\.b\.svc\.cluster\.local\.tlsMode-istio\.total_match_count: [1-9]/,
      'the endpoint took the tlsMode-istio transport socket',
    );
    // Istio's standard metrics name the identities from the TLS connection (istio_stats.cc populatePeerInfo)
    const aProm = await (await fetch(`${a.engine.admin}/stats/prometheus`)).text();
    t.match(
      aProm,
      new RegExp(`istio_requests_total\\{reporter="source",[^}]*source_principal="${idA.id}",[^}]*connection_security_policy="unknown"\\} 1`),
      'A (client): its own SPIFFE identity from the upstream TLS connection',
    );
    const bProm = await (await fetch(`${b.admin}/stats/prometheus`)).text();
    t.match(
      bProm,
      new RegExp(
        `istio_requests_total\\{reporter="destination",[^}]*source_principal="${idA.id}",[^}]*destination_principal="${idB.id}",[^}]*connection_security_policy="mutual_tls"\\} 1`,
      ),
      'B (server): mutual_tls',
    );
  });

  await t.test('raw TCP crosses the STRICT port as mTLS', async (t) => {
    t.equal(await tcpRoundTrip(a.tcp, 'ping over mtls'), 'ping over mtls');
  });

  await t.test("A's next connections to B resume its TLS session, and B still knows A's identity", async (t) => {
    const reused = async (port: number) => {
      const m = new RegExp(`listener\\.127\\.0\\.0\\.1_${port}\\.ssl\\.session_reused: (\\d+)`).exec(
        await (await fetch(`${b.admin}/stats?filter=session_reused`)).text(),
      );
      return Number(m?.[1] ?? 0);
    };
    // TCP: every downstream connection makes its own upstream one (the first test's made the session)
    const tcpBefore = await reused(bTcp);
    t.equal(await tcpRoundTrip(a.tcp, 'resumed'), 'resumed');
    t.ok((await reused(bTcp)) > tcpBefore, "B's TCP listener resumed A's session");
    // HTTP: two requests at once need a second pooled connection next to the one the first test opened
    const httpBefore = await reused(bHttp);
    const rs = await Promise.all([1, 2, 3].map((i) => request(a.http, `/resume-${i}`, { host: 'b.b.svc.cluster.local' })));
    for (const r of rs) {
      t.equal(r.status, 200);
      t.equal(
        (JSON.parse(r.body) as { headers: Record<string, string> }).headers['x-forwarded-client-cert'],
        `By=${idB.id};Hash=${sha256Hex(idA.certPem)};Subject="";URI=${idA.id}`,
        'XFCC names A on a resumed connection too',
      );
    }
    t.ok((await reused(bHttp)) > httpBefore, "B's HTTP listener resumed A's session");
  });

  await t.test("B's certificate carries B's SPIFFE identity (what openssl s_client shows)", async (t) => {
    const peer = await new Promise<tls.PeerCertificate>((resolve, reject) => {
      const s = tls.connect(
        {
          host: '127.0.0.1',
          port: bTcp,
          cert: idA.certPem,
          key: idA.keyPem,
          ca: rootPem,
          ALPNProtocols: MTLS_TCP_ALPN,
          checkServerIdentity: () => undefined,
        },
        () => {
          resolve(s.getPeerCertificate());
          s.destroy();
        },
      );
      s.on('error', reject);
    });
    t.equal(peer.subjectaltname, `URI:${idB.id}`);
    // a client offering only `istio-http/1.1` picks the mTLS HTTP chain, whose context offers h2 and
    // http/1.1: like Envoy, the handshake completes without ALPN instead of failing
    const noOverlap = await new Promise<string | false>((resolve, reject) => {
      const s = tls.connect(
        {
          host: '127.0.0.1',
          port: bHttp,
          cert: idA.certPem,
          key: idA.keyPem,
          ca: rootPem,
          ALPNProtocols: ['istio-http/1.1'],
          checkServerIdentity: () => undefined,
        },
        () => {
          resolve(s.alpnProtocol ?? false);
          s.destroy();
        },
      );
      s.on('error', reject);
    });
    t.equal(noOverlap, false, 'handshake done, no protocol selected');
  });

  await t.test('PERMISSIVE serves plaintext, STRICT refuses it', async (t) => {
    const r = await request(bHttp, '/plain', { headers: { 'x-forwarded-client-cert': 'By=spoofed' } });
    t.equal(r.status, 403, 'plaintext HTTP reaches the plaintext chain, where the principal policy denies it');
    t.equal(r.body, 'RBAC: access denied');
    t.equal(await tcpRoundTrip(bTcp, 'plaintext'), 'closed', 'STRICT: no chain for raw_buffer, the connection is closed');
  });

  await t.test('C is not allowed: 403 on HTTP, closed connection on TCP', async (t) => {
    const r = await request(c.http, '/from-c');
    t.equal(r.status, 403);
    t.equal(r.body, 'RBAC: access denied');
    t.equal(await tcpRoundTrip(c.tcp, 'from c'), 'closed');
    const stats = await (await fetch(`${b.admin}/stats?filter=rbac`)).text();
    t.match(stats, /tcp\.rbac\.denied: [1-9]/, 'the network RBAC filter counted the denial');
  });

  await t.test('a SAN the server does not have fails the upstream connection', async (t) => {
    const wrong = await client('w', idA, { sans: [spiffe('b', 'someone-else')] });
    await wrong.engine.engine.initialized;
    const r = await request(wrong.http, '/x');
    t.equal(r.status, 503);
    t.match(r.body, /upstream connect error/);
  });

  await t.test('no tlsMode label: the tlsMode-disabled socket speaks plaintext', async (t) => {
    const plain = await client('p', idA, { tlsMode: undefined });
    await plain.engine.engine.initialized;
    // plain-http chain on B: no certificate, so A's identity is not seen and the policy denies
    const r = await request(plain.http, '/x');
    t.equal(r.status, 403);
    const stats = await (await fetch(`${plain.engine.admin}/stats?filter=total_match_count`)).text();
    t.match(stats, /tlsMode-disabled\.total_match_count: [1-9]/);
  });

  await t.test('a new SDS certificate serves new connections, established ones keep going', async (t) => {
    const before = await peerFingerprint(bTcp, idA, rootPem);
    t.equal(before, new crypto.X509Certificate(idB.certPem).fingerprint256);
    // an established TCP session through A → B
    const s = net.connect(a.tcp, '127.0.0.1');
    s.on('error', () => undefined);
    const lines: string[] = [];
    let buf = '';
    s.on('data', (d) => {
      buf += d;
      const parts = buf.split('\n');
      buf = parts.pop() ?? '';
      lines.push(...parts);
    });
    s.write('one\n');
    await waitForValue('first echo', () => lines.includes('one'), { timeoutMs: 10_000, intervalMs: 20 });
    const idB2 = await issue(spiffe('b', 'b'));
    sdsB.rotate(idB2);
    const fp2 = new crypto.X509Certificate(idB2.certPem).fingerprint256;
    await waitForValue('new connections see the rotated certificate', async () => (await peerFingerprint(bTcp, idA, rootPem)) === fp2, {
      timeoutMs: 10_000,
      intervalMs: 20,
    });
    s.write('two\n');
    await waitForValue('the established connection still echoes', () => lines.includes('two'), { timeoutMs: 10_000, intervalMs: 20 });
    t.pass('rotation kept the established connection');
    s.destroy();
    const r = await request(a.http, '/after-rotation');
    t.equal(r.status, 200, 'new mTLS connections verify the new certificate');
  });
});

function peerFingerprint(port: number, id: Identity, rootPem: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tls.connect(
      { host: '127.0.0.1', port, cert: id.certPem, key: id.keyPem, ca: rootPem, ALPNProtocols: MTLS_TCP_ALPN, checkServerIdentity: () => undefined },
      () => {
        resolve(s.getPeerX509Certificate()?.fingerprint256 ?? '');
        s.destroy();
      },
    );
    s.on('error', reject);
  });
}

export type { RunningEngine };
