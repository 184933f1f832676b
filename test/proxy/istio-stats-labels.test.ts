// The label sets of Istio's standard metrics for HTTP, gRPC and TCP on both reporters, and for unknown peers.
// Expected values are Istio's: istio/proxy release-1.26 testdata/metric/*.yaml.tmpl (client_request_total,
// server_request_total, client_request_total_endpoint_labels, host_header_fallback, tcp_client_connection_open)
// with the node metadata of testdata/{client,server}_node_metadata.json.tmpl; the unknown-peer values follow
// istio_stats.cc (populatePeerInfo: `unknown`, `latest` for the canonical revision) and istio.io's
// "Istio Standard Metrics" page.
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { StatsStore } from '../../src/proxy/stats/store';
import { TagProducer } from '../../src/proxy/stats/tags';
import { renderPrometheus, renderStatsText } from '../../src/proxy/stats/render';
import { istioStatsConfig, PeerParts, type ReportFacts } from '../../src/proxy/istio/reporting';
import {
  decodeExchange,
  encodeExchange,
  exchangeStruct,
  labelKeysOf,
  PeerCache,
  workloadFromEndpoint,
  workloadFromStruct,
} from '../../src/proxy/istio/workload';
import { compileOverrides, overrideLabels } from '../../src/proxy/istio/metrics';
import { create } from '@bufbuild/protobuf';
import { StreamInfo, type DownstreamConnectionInfo } from '../../src/proxy/stream-info';
import { MetricConfigSchema, PluginConfigSchema } from '../../src/gen/istio/envoy/extensions/stats/config_pb';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { GrpcFrameCounter } from '../../src/proxy/http/grpc-frames';

const CLIENT_NODE: JsonObject = {
  LABELS: {
    app: 'productpage',
    'pod-template-hash': '84975bc778',
    version: 'v1',
    'service.istio.io/canonical-name': 'productpage-v1',
    'service.istio.io/canonical-revision': 'version-1',
    role: 'client',
  },
  MESH_ID: 'mesh',
  NAME: 'productpage-v1-84975bc778-pxz2w',
  NAMESPACE: 'default',
  CLUSTER_ID: 'client-cluster',
  OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1',
  WORKLOAD_NAME: 'productpage-v1',
};
const SERVER_NODE: JsonObject = {
  LABELS: {
    app: 'ratings',
    version: 'v1',
    'service.istio.io/canonical-name': 'ratings',
    'service.istio.io/canonical-revision': 'version-1',
    role: 'server',
  },
  NAME: 'ratings-v1-84975bc778-pxz2w',
  NAMESPACE: 'default',
  CLUSTER_ID: 'server-cluster',
  OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/ratings-v1',
  WORKLOAD_NAME: 'ratings-v1',
};
const SERVICE_MD: JsonObject = { istio: { services: [{ host: 'server.default.svc.cluster.local', name: 'server', namespace: 'default' }] } };

/** What one proxy learns of the other through `x-envoy-peer-metadata` (the real encoding, both ways). */
function exchanged(md: JsonObject) {
  return new PeerCache().lookup(encodeExchange(exchangeStruct(workloadFromStruct(md), labelKeysOf(md))))!;
}

const PEER_PART = (o: Record<string, string>) => [
  ['source_workload', o['sw']],
  ['source_canonical_service', o['scs']],
  ['source_canonical_revision', o['scr']],
  ['source_workload_namespace', o['sns']],
  ['source_principal', o['sp']],
  ['source_app', o['sa']],
  ['source_version', o['sv']],
  ['source_cluster', o['sc']],
  ['destination_workload', o['dw']],
  ['destination_workload_namespace', o['dns']],
  ['destination_principal', o['dp']],
  ['destination_app', o['da']],
  ['destination_version', o['dv']],
  ['destination_service', o['ds']],
  ['destination_canonical_service', o['dcs']],
  ['destination_canonical_revision', o['dcr']],
  ['destination_service_name', o['dsn']],
  ['destination_service_namespace', o['dsns']],
  ['destination_cluster', o['dc']],
];
// Istio's testdata: productpage-v1 (client) → ratings-v1 (server) for server.default.svc.cluster.local
const KNOWN = {
  sw: 'productpage-v1',
  scs: 'productpage-v1',
  scr: 'version-1',
  sns: 'default',
  sp: 'unknown',
  sa: 'productpage',
  sv: 'v1',
  sc: 'client-cluster',
  dw: 'ratings-v1',
  dns: 'default',
  dp: 'unknown',
  da: 'ratings',
  dv: 'v1',
  ds: 'server.default.svc.cluster.local',
  dcs: 'ratings',
  dcr: 'version-1',
  dsn: 'server',
  dsns: 'default',
  dc: 'server-cluster',
};

function facts(o: Partial<ReportFacts>): ReportFacts {
  return {
    peer: undefined,
    endpointPeer: undefined,
    peerSan: '',
    localSan: '',
    hostHeader: undefined,
    routeName: '',
    clusterName: 'outbound|9080||server.default.svc.cluster.local',
    clusterMetadata: SERVICE_MD,
    ...o,
  };
}

type Case = {
  name: string;
  direction: 'inbound' | 'outbound';
  node: JsonObject;
  facts: ReportFacts;
  kind: 'http' | 'grpc' | 'tcp';
  expect: Array<Array<string | undefined>>;
};

const httpTail = (protocol: string, grpc: string, policy: string) => [
  ['request_protocol', protocol],
  ['response_code', '200'],
  ['grpc_response_status', grpc],
  ['response_flags', '-'],
  ['connection_security_policy', policy],
];

const cases: Case[] = [
  {
    name: 'HTTP, client sidecar (client_request_total)',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({ peer: exchanged(SERVER_NODE) }),
    kind: 'http',
    expect: [['reporter', 'source'], ...PEER_PART(KNOWN), ...httpTail('http', '', 'unknown')],
  },
  {
    name: 'HTTP, server sidecar without TLS (server_request_total)',
    direction: 'inbound',
    node: SERVER_NODE,
    facts: facts({ peer: exchanged(CLIENT_NODE), clusterName: 'inbound|9080||', hostHeader: 'ignored:1' }),
    kind: 'http',
    expect: [['reporter', 'destination'], ...PEER_PART(KNOWN), ...httpTail('http', '', 'none')],
  },
  {
    name: 'gRPC, client sidecar (client_request_total with GrpcResponseStatus)',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({ peer: exchanged(SERVER_NODE) }),
    kind: 'grpc',
    expect: [['reporter', 'source'], ...PEER_PART(KNOWN), ...httpTail('grpc', '0', 'unknown')],
  },
  {
    name: 'gRPC, server sidecar with mutual TLS',
    direction: 'inbound',
    node: SERVER_NODE,
    facts: facts({
      peer: exchanged(CLIENT_NODE),
      peerSan: 'spiffe://cluster.local/ns/default/sa/client',
      localSan: 'spiffe://cluster.local/ns/default/sa/server',
    }),
    kind: 'grpc',
    expect: [
      ['reporter', 'destination'],
      ...PEER_PART({ ...KNOWN, sp: 'spiffe://cluster.local/ns/default/sa/client', dp: 'spiffe://cluster.local/ns/default/sa/server' }),
      ...httpTail('grpc', '0', 'mutual_tls'),
    ],
  },
  {
    name: 'client sidecar, peer from the endpoint labels (client_request_total_endpoint_labels)',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({ peer: workloadFromEndpoint('ratings-v1;default;ratings;version-1;server-cluster') }),
    kind: 'http',
    expect: [['reporter', 'source'], ...PEER_PART({ ...KNOWN, da: 'unknown', dv: 'unknown' }), ...httpTail('http', '', 'unknown')],
  },
  {
    name: 'client sidecar, Host header fallback without cluster metadata (host_header_fallback)',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({ peer: exchanged(SERVER_NODE), clusterMetadata: undefined, hostHeader: '127.0.0.1:9080' }),
    kind: 'http',
    expect: [['reporter', 'source'], ...PEER_PART({ ...KNOWN, ds: '127.0.0.1:9080', dsn: '127.0.0.1:9080' }), ...httpTail('http', '', 'unknown')],
  },
  {
    name: 'TCP, client sidecar with mutual TLS (tcp_client_connection_open)',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({
      peer: exchanged(SERVER_NODE),
      peerSan: 'spiffe://cluster.local/ns/default/sa/server',
      localSan: 'spiffe://cluster.local/ns/default/sa/client',
    }),
    kind: 'tcp',
    expect: [
      ['reporter', 'source'],
      ...PEER_PART({ ...KNOWN, sp: 'spiffe://cluster.local/ns/default/sa/client', dp: 'spiffe://cluster.local/ns/default/sa/server' }),
      ['request_protocol', 'tcp'],
      ['response_flags', '-'],
      ['connection_security_policy', 'unknown'],
    ],
  },
  {
    name: 'HTTP, server sidecar, unknown peer',
    direction: 'inbound',
    node: SERVER_NODE,
    facts: facts({ clusterName: 'inbound|9080||', clusterMetadata: undefined }),
    kind: 'http',
    expect: [
      ['reporter', 'destination'],
      // no peer: source_* unknown (canonical revision `latest`); the service falls back to the canonical name
      ...PEER_PART({
        ...KNOWN,
        sw: 'unknown',
        scs: 'unknown',
        scr: 'latest',
        sns: 'unknown',
        sa: 'unknown',
        sv: 'unknown',
        sc: 'unknown',
        ds: 'ratings',
        dsn: 'ratings',
      }),
      ...httpTail('http', '', 'none'),
    ],
  },
  {
    name: 'HTTP, client sidecar, unknown peer and no service',
    direction: 'outbound',
    node: CLIENT_NODE,
    facts: facts({ clusterName: 'PassthroughCluster', clusterMetadata: undefined, hostHeader: 'example.com' }),
    kind: 'http',
    expect: [
      ['reporter', 'source'],
      ...PEER_PART({
        ...KNOWN,
        dw: 'unknown',
        dns: 'unknown',
        da: 'unknown',
        dv: 'unknown',
        ds: 'example.com',
        dcs: 'unknown',
        dcr: 'latest',
        dsn: 'PassthroughCluster',
        dsns: 'unknown',
        dc: 'unknown',
      }),
      ...httpTail('http', '', 'unknown'),
    ],
  },
  {
    name: 'TCP, server sidecar, unknown peer with mutual TLS: the namespace comes from the SAN',
    direction: 'inbound',
    node: SERVER_NODE,
    facts: facts({ peerSan: 'spiffe://cluster.local/ns/foo/sa/bar', localSan: 'spiffe://cluster.local/ns/default/sa/server' }),
    kind: 'tcp',
    expect: [
      ['reporter', 'destination'],
      ...PEER_PART({
        ...KNOWN,
        sw: 'unknown',
        scs: 'unknown',
        scr: 'latest',
        sns: 'foo',
        sp: 'spiffe://cluster.local/ns/foo/sa/bar',
        sa: 'unknown',
        sv: 'unknown',
        sc: 'unknown',
        dp: 'spiffe://cluster.local/ns/default/sa/server',
      }),
      ['request_protocol', 'tcp'],
      ['response_flags', '-'],
      ['connection_security_policy', 'mutual_tls'],
    ],
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    const store = new StatsStore();
    const cfg = istioStatsConfig(undefined, 'test', store, c.node, c.direction);
    const part = new PeerParts(cfg).get(c.facts);
    const metric = c.kind === 'tcp' ? 'istio_tcp_connections_opened_total' : 'istio_requests_total';
    if (c.kind === 'tcp') part.tcpSeries('-', []).opened!.inc();
    else part.httpSeries(c.kind, 200, c.kind === 'grpc' ? '0' : '', '-', []).requests!.inc();
    const tagged = [...store.tagged.values()].find((x) => x.name === metric);
    t.same(tagged?.tags, c.expect, 'labels, values and order');
    const prom = renderPrometheus(store, new TagProducer(), { usedOnly: false, filter: undefined });
    const labels = c.expect.map(([k, v]) => `${k}="${v}"`).join(',');
    t.match(prom, `# TYPE ${metric} counter\n${metric}{${labels}} 1\n`, 'Prometheus text');
    t.match(
      renderStatsText(store, { usedOnly: false, filter: undefined }),
      `istiocustom.${metric}.${c.expect.map(([k, v]) => `${k}.${v}`).join('.')}: 1\n`,
    );
  });
}

t.test('the duration histogram renders with Envoy’s default buckets, _sum and _count', async (t) => {
  const store = new StatsStore();
  const cfg = istioStatsConfig(undefined, 'test', store, SERVER_NODE, 'inbound');
  const s = new PeerParts(cfg).get(facts({})).httpSeries('http', 200, '', '-', []);
  s.duration!.record(3);
  s.duration!.record(40);
  const prom = renderPrometheus(store, new TagProducer(), { usedOnly: false, filter: undefined });
  t.match(prom, '# TYPE istio_request_duration_milliseconds histogram\n');
  const line = (le: string) =>
    new RegExp(`istio_request_duration_milliseconds_bucket\\{reporter="destination",[^}]*,le="${le.replace('+', '\\+')}"\\} (\\d+)`).exec(prom)?.[1];
  t.same(
    ['0.5', '1', '5', '10', '25', '50', '100', '3600000', '+Inf'].map(line),
    ['0', '0', '1', '1', '1', '2', '2', '2', '2'],
    'cumulative buckets',
  );
  t.match(prom, /istio_request_duration_milliseconds_sum\{reporter="destination",[^}]*connection_security_policy="none"\} 43\n/);
  t.match(prom, /istio_request_duration_milliseconds_count\{reporter="destination",[^}]*\} 2\n/);
});

t.test('x-envoy-peer-metadata is the protobuf Struct of the node fields Istio sends', async (t) => {
  const v = encodeExchange(exchangeStruct(workloadFromStruct(CLIENT_NODE), labelKeysOf(CLIENT_NODE)));
  // Istio convertWorkloadMetadataToStruct: only these fields, labels reduced to the four it reads
  t.same(decodeExchange(v), {
    CLUSTER_ID: 'client-cluster',
    LABELS: {
      app: 'productpage',
      'service.istio.io/canonical-name': 'productpage-v1',
      'service.istio.io/canonical-revision': 'version-1',
      version: 'v1',
    },
    NAME: 'productpage-v1-84975bc778-pxz2w',
    NAMESPACE: 'default',
    OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1',
    WORKLOAD_NAME: 'productpage-v1',
  });
  t.equal(decodeExchange('not base64 of a struct!'), undefined);
});

t.test('metric overrides: drop, tags_to_remove, dimensions replace in place and add at the end', async (t) => {
  const o = compileOverrides(
    [
      create(MetricConfigSchema, { name: 'requests_total', tagsToRemove: ['source_principal', 'not_a_tag'] }),
      create(MetricConfigSchema, { name: 'requests_total', dimensions: { zeta: 'request.host', alpha: 'request.path', response_code: 'x' } }),
      create(MetricConfigSchema, { name: 'request_bytes', drop: true }),
    ],
    (e) => () => `<${e}>`,
  );
  t.ok(o.drop.has('request_bytes'));
  const values = o.exprs.map((f) => f({ info: new StreamInfo({} as DownstreamConnectionInfo) }));
  const out = overrideLabels(
    o,
    'requests_total',
    [
      ['reporter', 'source'],
      ['source_principal', 'p'],
      ['response_code', '200'],
    ],
    values,
  );
  t.same(out, [
    ['reporter', 'source'],
    ['response_code', '<x>'],
    ['alpha', '<request.path>'],
    ['zeta', '<request.host>'],
  ]);
});

t.test('CEL dimensions from stats.PluginConfig: a standard label replaced, one added (Telemetry tagOverrides)', async (t) => {
  const store = new StatsStore();
  const any = anyPack(
    PluginConfigSchema,
    create(PluginConfigSchema, {
      metrics: [
        create(MetricConfigSchema, {
          name: 'requests_total',
          dimensions: { request_host: 'request.host', destination_app: "'overridden'", broken: 'request.(' },
          tagsToRemove: ['source_cluster'],
        }),
      ],
    }),
  );
  const cfg = istioStatsConfig(any, 'test', store, SERVER_NODE, 'inbound');
  const info = new StreamInfo({} as DownstreamConnectionInfo);
  const values = cfg.sink.overrides.exprs.map((f) => f({ info, request: new RequestHeaders('GET', '/', 'ratings.default:9080', 'http', {}) }));
  new PeerParts(cfg)
    .get(facts({ peer: exchanged(CLIENT_NODE) }))
    .httpSeries('http', 200, '', '-', values)
    .requests!.inc();
  const tags = [...store.tagged.values()].find((x) => x.name === 'istio_requests_total')!.tags;
  const m = new Map(tags);
  t.equal(m.get('destination_app'), 'overridden', 'replaced in place');
  t.equal(
    tags.findIndex(([k]) => k === 'destination_app'),
    11,
    'in place: after the removed source_cluster',
  );
  t.notOk(m.has('source_cluster'), 'removed');
  t.same(tags.at(-1), ['request_host', 'ratings.default:9080'], 'added at the end');
  t.notOk(m.has('broken'), 'an expression that does not parse adds nothing');
  t.throws(
    () =>
      istioStatsConfig(
        anyPack(
          PluginConfigSchema,
          create(PluginConfigSchema, { metrics: [create(MetricConfigSchema, { dimensions: { x: '[1].all(i, i > 0)' } })] }),
        ),
        'test',
        store,
        SERVER_NODE,
        'inbound',
      ),
    /failed to create an expression/,
  );
});

t.test('gRPC messages are counted as each length-prefixed message starts, across chunk boundaries', async (t) => {
  const frame = (n: number) => Buffer.concat([Buffer.from([0, 0, 0, 0, n]), Buffer.alloc(n, 7)]);
  const all = Buffer.concat([frame(3), frame(0), frame(300 % 256), frame(10)]);
  for (const size of [1, 2, 5, 7, all.length]) {
    const c = new GrpcFrameCounter();
    for (let i = 0; i < all.length; i += size) c.feed(all.subarray(i, i + size));
    t.equal(c.count, 4, `chunks of ${size}`);
  }
  const c = new GrpcFrameCounter();
  c.feed(Buffer.concat([frame(10).subarray(0, 8)]));
  t.equal(c.count, 1, 'a message counts from its first byte (Envoy FrameInspector)');
});
