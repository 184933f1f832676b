// Two built engines as two sidecars (pilot-agent envoy -c, real processes): a client sidecar's outbound
// listener → the server sidecar's inbound listener → the app, with the xDS istiod 1.26 gives them
// (pilot/pkg/xds/filters/filters.go SidecarOutboundMetadataFilter / SidecarInboundMetadataFilter as TypedStructs,
// pilot/pkg/model/telemetry.go stats.PluginConfig packed as an Any, disable_host_header_fallback inbound).
// The two exchange their metadata in headers the app never sees, and each reports the request on its
// /stats/prometheus as Istio does: reporter=source on the client, reporter=destination on the server, each
// naming the other (values from istio/proxy testdata/metric/{client,server}_request_total.yaml.tmpl).
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { waitFor, waitForValue } from '../helpers/wait';
import { freePorts } from '../helpers/ports';
import { runStatic, loopback, loopbackCluster } from '../helpers/static-plane';
import { httpGet } from '../helpers/gateway';

const CLIENT_NODE = {
  id: 'sidecar~10.0.0.1~productpage-v1-84975bc778-pxz2w.default~default.svc.cluster.local',
  metadata: {
    LABELS: {
      app: 'productpage',
      version: 'v1',
      'service.mesh.io/canonical-name': 'productpage-v1',
      'service.mesh.io/canonical-revision': 'version-1',
    },
    NAME: 'productpage-v1-84975bc778-pxz2w',
    NAMESPACE: 'default',
    CLUSTER_ID: 'client-cluster',
    OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1',
    WORKLOAD_NAME: 'productpage-v1',
  },
};
const SERVER_NODE = {
  id: 'sidecar~10.0.0.2~ratings-v1-84975bc778-pxz2w.default~default.svc.cluster.local',
  metadata: {
    LABELS: { app: 'ratings', version: 'v1', 'service.mesh.io/canonical-name': 'ratings', 'service.mesh.io/canonical-revision': 'version-1' },
    NAME: 'ratings-v1-84975bc778-pxz2w',
    NAMESPACE: 'default',
    CLUSTER_ID: 'server-cluster',
    OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/ratings-v1',
    WORKLOAD_NAME: 'ratings-v1',
  },
};

const TYPED_STRUCT = 'type.googleapis.com/udpa.type.v1.TypedStruct';
const mx = (value: object) => ({
  name: 'istio.metadata_exchange',
  typed_config: { '@type': TYPED_STRUCT, type_url: 'type.googleapis.com/io.istio.http.peer_metadata.Config', value },
});
const OUTBOUND_MX = mx({
  upstream_discovery: [{ istio_headers: {} }, { workload_discovery: {} }],
  upstream_propagation: [{ istio_headers: {} }],
});
const INBOUND_MX = mx({
  downstream_discovery: [{ istio_headers: {} }, { workload_discovery: {} }],
  downstream_propagation: [{ istio_headers: {} }],
});
const stats = (cfg: object) => ({ name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig', ...cfg } });
const ROUTER = { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } };

function sidecar(o: { node: object; port: number; admin: number; direction: string; filters: object[]; cluster: object; statPrefix: string }) {
  const name = (o.cluster as { name: string }).name;
  return {
    node: o.node,
    admin: { address: loopback(o.admin) },
    static_resources: {
      listeners: [
        {
          name: o.statPrefix,
          address: loopback(o.port),
          traffic_direction: o.direction,
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                    stat_prefix: o.statPrefix,
                    route_config: {
                      name: 'r',
                      virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: name } }] }],
                    },
                    http_filters: [...o.filters, ROUTER],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [o.cluster],
    },
  };
}

const SOURCE_NAMES = [
  'source_workload',
  'source_canonical_service',
  'source_canonical_revision',
  'source_workload_namespace',
  'source_principal',
  'source_app',
  'source_version',
  'source_cluster',
];
const DESTINATION_NAMES = [
  'destination_workload',
  'destination_workload_namespace',
  'destination_principal',
  'destination_app',
  'destination_version',
  'destination_service',
  'destination_canonical_service',
  'destination_canonical_revision',
  'destination_service_name',
  'destination_service_namespace',
  'destination_cluster',
];
const KNOWN_SOURCE = ['productpage-v1', 'productpage-v1', 'version-1', 'default', 'unknown', 'productpage', 'v1', 'client-cluster'];
/** No exchange headers: Istio's values for an unknown peer (istio_stats.cc populatePeerInfo). */
const UNKNOWN_SOURCE = ['unknown', 'unknown', 'latest', 'unknown', 'unknown', 'unknown', 'unknown', 'unknown'];
const LABELS = (reporter: string, policy: string, code: string, src = KNOWN_SOURCE) =>
  [
    ['reporter', reporter],
    ['source_workload', src[0]],
    ['source_canonical_service', src[1]],
    ['source_canonical_revision', src[2]],
    ['source_workload_namespace', src[3]],
    ['source_principal', src[4]],
    ['source_app', src[5]],
    ['source_version', src[6]],
    ['source_cluster', src[7]],
    ['destination_workload', 'ratings-v1'],
    ['destination_workload_namespace', 'default'],
    ['destination_principal', 'unknown'],
    ['destination_app', 'ratings'],
    ['destination_version', 'v1'],
    ['destination_service', 'server.default.svc.cluster.local'],
    ['destination_canonical_service', 'ratings'],
    ['destination_canonical_revision', 'version-1'],
    ['destination_service_name', 'server'],
    ['destination_service_namespace', 'default'],
    ['destination_cluster', 'server-cluster'],
    ['request_protocol', 'http'],
    ['response_code', code],
    ['grpc_response_status', ''],
    ['response_flags', '-'],
    ['connection_security_policy', policy],
  ]
    .map(([k, v]) => `${k}="${v}"`)
    .join(',');

t.test('client and server sidecars exchange metadata and both report the request as Istio does', async (t) => {
  const ports = await freePorts('app', 'client', 'clientAdmin', 'server', 'serverAdmin');
  const seen: http.IncomingHttpHeaders[] = [];
  const app = http.createServer((req, res) => {
    seen.push(req.headers);
    if (req.url === '/missing') res.statusCode = 404;
    res.end(req.url === '/missing' ? undefined : 'hello from ratings');
  });
  await new Promise<void>((r) => app.listen(ports.app, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => app.close(() => r())));

  const server = await runStatic(
    t,
    'engine',
    sidecar({
      node: SERVER_NODE,
      port: ports.server,
      admin: ports.serverAdmin,
      direction: 'INBOUND',
      statPrefix: 'inbound_0.0.0.0_9080',
      filters: [INBOUND_MX, stats({ disable_host_header_fallback: true })],
      cluster: {
        ...loopbackCluster('inbound|9080||', ports.app),
        metadata: { filter_metadata: { istio: { services: [{ host: 'server.default.svc.cluster.local', name: 'server', namespace: 'default' }] } } },
      },
    }),
    ports.server,
  );
  if ('refused' in server) return t.fail(`server sidecar refused its config:\n${server.refused}`);
  const client = await runStatic(
    t,
    'engine',
    sidecar({
      node: CLIENT_NODE,
      port: ports.client,
      admin: ports.clientAdmin,
      direction: 'OUTBOUND',
      statPrefix: 'outbound_0.0.0.0_9080',
      filters: [OUTBOUND_MX, stats({})],
      cluster: {
        ...loopbackCluster('outbound|9080||server.default.svc.cluster.local', ports.server),
        metadata: { filter_metadata: { istio: { services: [{ host: 'server.default.svc.cluster.local', name: 'server', namespace: 'default' }] } } },
      },
    }),
    ports.client,
  );
  if ('refused' in client) return t.fail(`client sidecar refused its config:\n${client.refused}`);
  // runStatic's readiness GET / went to the server directly (no exchange headers), then through the client
  seen.length = 0;

  const r = await client.get('/ratings/1', { host: 'server.default.svc.cluster.local' });
  t.equal(r.status, 200);
  t.equal(r.body, 'hello from ratings');
  t.notOk(r.headers['x-envoy-peer-metadata'] ?? r.headers['x-envoy-peer-metadata-id'], 'the client app sees no exchange headers');
  t.equal(seen.length, 1);
  t.notOk(seen[0]!['x-envoy-peer-metadata'] ?? seen[0]!['x-envoy-peer-metadata-id'], 'the server app sees no exchange headers');
  await client.get('/missing', { host: 'server.default.svc.cluster.local' });

  const scrape = async (port: number) => (await httpGet(port, '/stats/prometheus')).body;
  const clientProm = await scrape(ports.clientAdmin);
  const serverProm = await scrape(ports.serverAdmin);
  t.match(clientProm, `# TYPE istio_requests_total counter\n`);
  t.match(clientProm, `istio_requests_total{${LABELS('source', 'unknown', '200')}} 2\n`, 'client: reporter=source');
  t.match(clientProm, `istio_requests_total{${LABELS('source', 'unknown', '404')}} 1\n`);
  t.match(serverProm, `istio_requests_total{${LABELS('destination', 'none', '200')}} 2\n`, 'server: reporter=destination');
  t.match(serverProm, `istio_requests_total{${LABELS('destination', 'none', '200', UNKNOWN_SOURCE)}} 1\n`, 'server: a request without peer metadata');
  t.match(serverProm, `istio_requests_total{${LABELS('destination', 'none', '404')}} 1\n`);
  for (const [who, prom, reporter, policy] of [
    ['client', clientProm, 'source', 'unknown'],
    ['server', serverProm, 'destination', 'none'],
  ] as const) {
    t.match(prom, `# TYPE istio_request_duration_milliseconds histogram\n`, who);
    t.match(prom, `istio_request_duration_milliseconds_bucket{${LABELS(reporter, policy, '200')},le="+Inf"} 2\n`, who);
    t.match(prom, `istio_request_duration_milliseconds_count{${LABELS(reporter, policy, '200')}} 2\n`, who);
    t.match(prom, `istio_response_bytes_sum{${LABELS(reporter, policy, '200')}} 36\n`, `${who}: response body bytes`);
    t.match(prom, `istio_request_bytes_count{${LABELS(reporter, policy, '404')}} 1\n`, who);
  }
  const text = (await httpGet(ports.serverAdmin, '/stats?filter=istio_requests_total')).body;
  t.match(
    text,
    /^istiocustom\.istio_requests_total\.reporter\.destination\.source_workload\.productpage-v1\..*response_code\.200\..*: 2$/m,
    '/stats text form',
  );
});

/** A TCP listener does not answer HTTP: ready is the admin's /ready (static listeners are up by then). */
const adminReady = (admin: number) => async () => (await httpGet(admin, '/ready')).status === 200;

function tcpSidecar(o: { node: object; port: number; admin: number; direction: string; filters: object[]; cluster: object; statPrefix: string }) {
  const b = sidecar({ ...o, filters: [] }) as { static_resources: { listeners: Array<{ filter_chains: Array<{ filters: object[] }> }> } };
  const name = (o.cluster as { name: string }).name;
  b.static_resources.listeners[0]!.filter_chains[0]!.filters = [
    ...o.filters,
    {
      name: 'envoy.filters.network.tcp_proxy',
      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: name, cluster: name },
    },
  ];
  return b;
}

const TCP_MX = {
  name: 'istio.metadata_exchange',
  typed_config: {
    '@type': TYPED_STRUCT,
    type_url: 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange',
    value: { protocol: 'istio-peer-exchange', enable_discovery: true },
  },
};

t.test('TCP: both sidecars count connections and bytes with Istio labels (plaintext, no exchange: endpoint labels / unknown peer)', async (t) => {
  const ports = await freePorts('app', 'client', 'clientAdmin', 'server', 'serverAdmin');
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(ports.app, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => echo.close(() => r())));
  const service = { istio: { services: [{ host: 'server.default.svc.cluster.local', name: 'server', namespace: 'default' }] } };
  const server = await runStatic(
    t,
    'engine',
    tcpSidecar({
      node: SERVER_NODE,
      port: ports.server,
      admin: ports.serverAdmin,
      direction: 'INBOUND',
      statPrefix: 'inbound_0.0.0.0_9000',
      filters: [TCP_MX, stats({ disable_host_header_fallback: true, tcp_reporting_duration: '0.2s' })],
      cluster: { ...loopbackCluster('inbound|9000||', ports.app), metadata: { filter_metadata: service } },
    }),
    ports.server,
    adminReady(ports.serverAdmin),
  );
  if ('refused' in server) return t.fail(`server sidecar refused its config:\n${server.refused}`);
  const upstream = loopbackCluster('outbound|9000||server.default.svc.cluster.local', ports.server) as {
    load_assignment: { endpoints: Array<{ lb_endpoints: object[] }> };
  };
  // Istio's endpoint telemetry label (PILOT_ENDPOINT_TELEMETRY_LABEL): workload;namespace;canonical;revision;cluster
  upstream.load_assignment.endpoints[0]!.lb_endpoints = upstream.load_assignment.endpoints[0]!.lb_endpoints.map((e) => ({
    ...e,
    metadata: { filter_metadata: { istio: { workload: 'ratings-v1;default;ratings;version-1;server-cluster' } } },
  }));
  const client = await runStatic(
    t,
    'engine',
    tcpSidecar({
      node: CLIENT_NODE,
      port: ports.client,
      admin: ports.clientAdmin,
      direction: 'OUTBOUND',
      statPrefix: 'outbound_0.0.0.0_9000',
      filters: [stats({ tcp_reporting_duration: '0.2s' })],
      // Istio's TCPClusterMx: without it the client's lookup never concludes and it reports only at close
      cluster: { ...upstream, metadata: { filter_metadata: service }, filters: [TCP_MX] },
    }),
    ports.client,
    adminReady(ports.clientAdmin),
  );
  if ('refused' in client) return t.fail(`client sidecar refused its config:\n${client.refused}`);

  // one connection that stays open past a report, then closes
  const sock = net.connect(ports.client, '127.0.0.1');
  await new Promise<void>((r) => sock.once('connect', () => r()));
  sock.write('ping!');
  await new Promise<void>((r) => sock.once('data', () => r()));
  const scrape = async (port: number) => (await httpGet(port, '/stats/prometheus')).body;
  const CLIENT = [
    ['reporter', 'source'],
    ...['productpage-v1', 'productpage-v1', 'version-1', 'default', 'unknown', 'productpage', 'v1', 'client-cluster'].map((v, i) => [
      SOURCE_NAMES[i]!,
      v,
    ]),
    // the peer from the endpoint's labels: no app/version there (client_request_total_endpoint_labels)
    ...[
      'ratings-v1',
      'default',
      'unknown',
      'unknown',
      'unknown',
      'server.default.svc.cluster.local',
      'ratings',
      'version-1',
      'server',
      'default',
      'server-cluster',
    ].map((v, i) => [DESTINATION_NAMES[i]!, v]),
    ['request_protocol', 'tcp'],
    ['response_flags', '-'],
    ['connection_security_policy', 'unknown'],
  ];
  const SERVER = [
    ['reporter', 'destination'],
    ...UNKNOWN_SOURCE.map((v, i) => [SOURCE_NAMES[i]!, v]),
    ...[
      'ratings-v1',
      'default',
      'unknown',
      'ratings',
      'v1',
      'server.default.svc.cluster.local',
      'ratings',
      'version-1',
      'server',
      'default',
      'server-cluster',
    ].map((v, i) => [DESTINATION_NAMES[i]!, v]),
    ['request_protocol', 'tcp'],
    ['response_flags', '-'],
    ['connection_security_policy', 'none'],
  ];
  const l = (x: string[][]) => x.map(([k, v]) => `${k}="${v}"`).join(',');
  // opened is reported while the connection is open, once the lookup concluded (no ALPN on plaintext: the first
  // byte ends it with peer_not_found) at the next report
  await waitFor(
    () => 'the client reports the open connection',
    async () => (await scrape(ports.clientAdmin)).includes(`istio_tcp_connections_opened_total{${l(CLIENT)}} 1\n`),
    { timeoutMs: 5000, intervalMs: 100 },
  );
  sock.end();
  await new Promise<void>((r) => sock.once('close', () => r()));
  for (const [who, port, labels] of [
    ['client', ports.clientAdmin, CLIENT],
    ['server', ports.serverAdmin, SERVER],
  ] as const) {
    await waitFor(
      () => `${who} reports the closed connection`,
      async () => (await scrape(port)).includes(`istio_tcp_connections_closed_total{${l(labels)}} 1\n`),
      { timeoutMs: 5000, intervalMs: 100 },
    );
    const prom = await scrape(port);
    t.match(prom, `# TYPE istio_tcp_connections_opened_total counter\nistio_tcp_connections_opened_total{${l(labels)}} 1\n`, who);
    t.match(prom, `istio_tcp_received_bytes_total{${l(labels)}} 5\n`, `${who}: received`);
    t.match(prom, `istio_tcp_sent_bytes_total{${l(labels)}} 5\n`, `${who}: sent`);
  }
});

t.test('gRPC: request_protocol grpc, grpc_response_status from the trailers, and the message counts', async (t) => {
  const ports = await freePorts('app', 'client', 'clientAdmin');
  const frame = (s: string) => Buffer.concat([Buffer.from([0, 0, 0, 0, s.length]), Buffer.from(s)]);
  const app = http2.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/grpc' });
      res.write(frame('one'));
      res.write(frame('two'));
      res.addTrailers({ 'grpc-status': '0' });
      res.end();
    });
  });
  await new Promise<void>((r) => app.listen(ports.app, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => app.close(() => r())));
  const grpcStats = {
    name: 'envoy.filters.http.grpc_stats',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.http.grpc_stats.v3.FilterConfig',
      emit_filter_state: true,
      stats_for_all_methods: false,
    },
  };
  const client = await runStatic(
    t,
    'engine',
    sidecar({
      node: CLIENT_NODE,
      port: ports.client,
      admin: ports.clientAdmin,
      direction: 'OUTBOUND',
      statPrefix: 'outbound_0.0.0.0_9090',
      filters: [grpcStats, stats({})],
      cluster: {
        ...loopbackCluster('outbound|9090||server.default.svc.cluster.local', ports.app),
        typed_extension_protocol_options: {
          'envoy.extensions.upstreams.http.v3.HttpProtocolOptions': {
            '@type': 'type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions',
            explicit_http_config: { http2_protocol_options: {} },
          },
        },
        metadata: { filter_metadata: { istio: { services: [{ host: 'server.default.svc.cluster.local', name: 'server', namespace: 'default' }] } } },
      },
    }),
    ports.client,
  );
  if ('refused' in client) return t.fail(`client sidecar refused its config:\n${client.refused}`);
  const session = http2.connect(`http://127.0.0.1:${ports.client}`);
  t.teardown(() => session.close());
  const req = session.request({
    ':method': 'POST',
    ':path': '/ratings.Ratings/Get',
    ':authority': 'server.default.svc.cluster.local',
    'content-type': 'application/grpc',
    te: 'trailers',
  });
  req.end(frame('hello'));
  const trailers = await new Promise<http2.IncomingHttpHeaders>((resolve) => {
    req.on('trailers', (tr) => resolve(tr));
    req.resume();
  });
  t.equal(trailers['grpc-status'], '0');
  await new Promise<void>((r) => req.on('close', () => r()));
  const prom = await waitForValue(
    () => 'the client reports the gRPC call',
    async () => {
      const p = (await httpGet(ports.clientAdmin, '/stats/prometheus')).body;
      return p.includes('request_protocol="grpc"') ? p : undefined;
    },
    { timeoutMs: 5000, intervalMs: 100 },
  );
  // Istio's values with no peer (no exchange, no endpoint labels): the workload namespace unknown, the service
  // namespace from the cluster's istio.services
  const peer = [
    ['reporter', 'source'],
    ...KNOWN_SOURCE.map((v, i) => [SOURCE_NAMES[i]!, v]),
    ...[
      'unknown',
      'unknown',
      'unknown',
      'unknown',
      'unknown',
      'server.default.svc.cluster.local',
      'unknown',
      'latest',
      'server',
      'default',
      'unknown',
    ].map((v, i) => [DESTINATION_NAMES[i]!, v]),
  ];
  const l = (x: string[][]) => x.map(([k, v]) => `${k}="${v}"`).join(',');
  const full = [
    ...peer,
    ['request_protocol', 'grpc'],
    ['response_code', '200'],
    ['grpc_response_status', '0'],
    ['response_flags', '-'],
    ['connection_security_policy', 'unknown'],
  ];
  t.match(prom, `istio_requests_total{${l(full)}} 1\n`);
  // the message counts carry the peer labels only (Istio reports them before adding the protocol labels)
  t.match(prom, `istio_request_messages_total{${l(peer)}} 1\n`);
  t.match(prom, `istio_response_messages_total{${l(peer)}} 2\n`);
});
