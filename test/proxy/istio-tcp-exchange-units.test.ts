// Istio's in-band TCP metadata exchange (istio/proxy release-1.26
// source/extensions/filters/network/metadata_exchange/) against bytes built here by hand from its layout, not
// from our encoder: metadata_exchange_initial_header.h (magic 0x3D230467, then the payload length, both 32-bit
// big-endian), then a google.protobuf.Any (type_url = 1, value = 2) of a google.protobuf.Struct (fields = 1, a
// map: key = 1, value = 2; Value.string_value = 3, Value.struct_value = 5) serialised deterministically (map keys
// sorted), holding `x-envoy-peer-metadata` (metadata_object.cc convertWorkloadMetadataToStruct) and
// `x-envoy-peer-metadata-id` (the node id). Then the filter's state machine (metadata_exchange.cc) as a table:
// what passes on, what is injected, what lands in filter state, which counters move.
import t from 'tap';
import { StatsStore } from '../../src/proxy/stats/store';
import {
  encodeExchange,
  exchangeConfig,
  ExchangeFilter,
  MAX_PAYLOAD_BYTES,
  NO_PEER,
  upstreamExchange,
  type ExchangeConfig,
} from '../../src/proxy/istio/tcp-exchange';
import { create, type JsonObject } from '@bufbuild/protobuf';
import { TypedStructSchema } from '../../src/gen/udpa/type/v1/typed_struct_pb';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { MetadataExchangeSchema } from '../../src/gen/envoy/tcp/metadataexchange/config/metadata_exchange_pb';
import type { Workload } from '../../src/proxy/istio/workload';
import { any, bytes, field, framed, header, STRUCT, stringValue, struct, structValue } from './mx-bytes';

// ---- one node, and what Istio sends for it -----------------------------------------------------------

const NODE_ID = 'sidecar~10.1.0.7~a-v1-5d8f7c9b4-x2k9p.a~a.svc.cluster.local';
const NODE_METADATA = {
  NAME: 'a-v1-5d8f7c9b4-x2k9p',
  NAMESPACE: 'a',
  WORKLOAD_NAME: 'a-v1',
  CLUSTER_ID: 'Kubernetes',
  OWNER: 'kubernetes://apis/apps/v1/namespaces/a/deployments/a-v1',
  ISTIO_VERSION: '1.26.0',
  MESH_ID: 'cluster.local',
  LABELS: {
    app: 'a',
    version: 'v1',
    role: 'db',
    'service.istio.io/canonical-name': 'a',
    'service.istio.io/canonical-revision': 'v1',
    'pod-template-hash': '5d8f7c9b4',
  },
};

/** convertWorkloadMetadataToStruct: NAME, NAMESPACE, WORKLOAD_NAME, CLUSTER_ID, LABELS (four keys), OWNER; sorted. */
function istioPayload(extraLabels: Array<[string, string]> = []): Buffer {
  const labels: Array<[string, string]> = [
    ['app', 'a'],
    ...extraLabels,
    ['service.istio.io/canonical-name', 'a'],
    ['service.istio.io/canonical-revision', 'v1'],
    ['version', 'v1'],
  ];
  const peer = struct([
    ['CLUSTER_ID', stringValue('Kubernetes')],
    ['LABELS', structValue(labels.map(([k, v]) => [k, stringValue(v)]))],
    ['NAME', stringValue('a-v1-5d8f7c9b4-x2k9p')],
    ['NAMESPACE', stringValue('a')],
    ['OWNER', stringValue('kubernetes://apis/apps/v1/namespaces/a/deployments/a-v1')],
    ['WORKLOAD_NAME', stringValue('a-v1')],
  ]);
  return any(
    STRUCT,
    struct([
      ['x-envoy-peer-metadata', field(5, peer)],
      ['x-envoy-peer-metadata-id', stringValue(NODE_ID)],
    ]),
  );
}

t.test('what a proxy sends: the header and the Any of the Struct, byte for byte', async (t) => {
  const payload = istioPayload();
  const want = framed(payload);
  t.same([...want.subarray(0, 4)], [0x3d, 0x23, 0x04, 0x67], 'magic, most significant byte first');
  t.equal(want.readUInt32BE(4), payload.length);
  t.same(encodeExchange(NODE_ID, NODE_METADATA), want);
  t.same(encodeExchange(NODE_ID, NODE_METADATA, ['role', 'missing']), framed(istioPayload([['role', 'db']])), 'additional_labels travel in LABELS');
});

// ---- the state machine ------------------------------------------------------------------------------

const OWN = Buffer.from('<own metadata>');

function harness(alpn: string, direction: 'downstream' | 'upstream' = 'downstream') {
  const store = new StatsStore();
  const cfg = exchangeConfig(anyPack(MetadataExchangeSchema, create(MetadataExchangeSchema, { protocol: 'istio-peer-exchange' })), 'mx', store);
  const injected: Buffer[] = [];
  const state = new Map<string, unknown>();
  let closed = false;
  const f = new ExchangeFilter(cfg, direction, OWN, {
    alpn: () => alpn,
    inject: (b) => injected.push(b),
    state,
    close: () => (closed = true),
  });
  const counters = () => {
    const s = cfg.stats;
    return {
      alpn_protocol_found: s.alpnProtocolFound.value,
      alpn_protocol_not_found: s.alpnProtocolNotFound.value,
      initial_header_not_found: s.initialHeaderNotFound.value,
      header_not_found: s.headerNotFound.value,
      metadata_added: s.metadataAdded.value,
    };
  };
  return { f, injected, state, counters, closed: () => closed, cfg };
}
const ZERO = { alpn_protocol_found: 0, alpn_protocol_not_found: 0, initial_header_not_found: 0, header_not_found: 0, metadata_added: 0 };
const APP = Buffer.from('hello app');

t.test('state machine: what passes, what is injected, the filter state and the counters', async (t) => {
  const peerA = framed(istioPayload());
  type Row = {
    name: string;
    alpn: string;
    chunks: Array<[Buffer, boolean]>;
    passed: Buffer;
    injected: boolean;
    state: 'peer' | 'none' | 'not found';
    counters: Partial<typeof ZERO>;
    closed?: boolean;
  };
  const rows: Row[] = [
    {
      name: 'ALPN not istio-peer-exchange: nothing written, bytes untouched, no peer',
      alpn: 'istio',
      chunks: [[APP, false]],
      passed: APP,
      injected: false,
      state: 'not found',
      counters: { alpn_protocol_not_found: 1 },
    },
    {
      name: 'no ALPN at all (plaintext): the same',
      alpn: '',
      chunks: [[APP, false]],
      passed: APP,
      injected: false,
      state: 'not found',
      counters: { alpn_protocol_not_found: 1 },
    },
    {
      name: 'header, payload and application bytes in one read',
      alpn: 'istio-peer-exchange',
      chunks: [[bytes(peerA, APP), false]],
      passed: APP,
      injected: true,
      state: 'peer',
      counters: { alpn_protocol_found: 1, metadata_added: 1 },
    },
    {
      name: 'split inside the header and inside the payload: held until complete',
      alpn: 'istio-peer-exchange',
      chunks: [
        [peerA.subarray(0, 3), false],
        [peerA.subarray(3, 20), false],
        [bytes(peerA.subarray(20), APP), false],
      ],
      passed: APP,
      injected: true,
      state: 'peer',
      // every read short of a whole header counts (tryReadInitialProxyHeader)
      counters: { alpn_protocol_found: 1, metadata_added: 1, initial_header_not_found: 1 },
    },
    {
      name: 'wrong magic: the peer has no exchange filter, its bytes go on untouched',
      alpn: 'istio-peer-exchange',
      chunks: [[Buffer.from('GET / HTTP/1.1\r\n\r\n'), false]],
      passed: Buffer.from('GET / HTTP/1.1\r\n\r\n'),
      injected: true,
      state: 'not found',
      counters: { alpn_protocol_found: 1, metadata_added: 1, initial_header_not_found: 1 },
    },
    {
      name: 'right magic, payload not an Any of a Struct: the header is taken, the rest goes on',
      alpn: 'istio-peer-exchange',
      chunks: [[bytes(header(0x3d230467, 4), [0xff, 0xff, 0xff, 0xff], APP), false]],
      passed: bytes([0xff, 0xff, 0xff, 0xff], APP),
      injected: true,
      state: 'not found',
      counters: { alpn_protocol_found: 1, metadata_added: 1, header_not_found: 1 },
    },
    {
      name: 'an Any of another type: no peer, the payload goes on',
      alpn: 'istio-peer-exchange',
      chunks: [[framed(any('type.googleapis.com/google.protobuf.Value', stringValue('x'))), false]],
      passed: any('type.googleapis.com/google.protobuf.Value', stringValue('x')),
      injected: true,
      state: 'not found',
      counters: { alpn_protocol_found: 1, metadata_added: 1, header_not_found: 1 },
    },
    {
      name: 'a Struct without x-envoy-peer-metadata: done, but no peer and no peer_not_found',
      alpn: 'istio-peer-exchange',
      chunks: [[bytes(framed(any(STRUCT, struct([['x-envoy-peer-metadata-id', stringValue('x')]]))), APP), false]],
      passed: APP,
      injected: true,
      state: 'none',
      counters: { alpn_protocol_found: 1, metadata_added: 1 },
    },
    {
      name: 'the peer half-closes before a whole header: what there is goes on',
      alpn: 'istio-peer-exchange',
      chunks: [[Buffer.from('abc'), true]],
      passed: Buffer.from('abc'),
      injected: true,
      state: 'none',
      counters: { alpn_protocol_found: 1, metadata_added: 1, initial_header_not_found: 1 },
    },
    {
      name: 'a payload longer than a connection buffer: the connection is closed',
      alpn: 'istio-peer-exchange',
      chunks: [[header(0x3d230467, MAX_PAYLOAD_BYTES + 1), false]],
      passed: Buffer.alloc(0),
      injected: true,
      state: 'none',
      counters: { alpn_protocol_found: 1, metadata_added: 1 },
      closed: true,
    },
  ];
  for (const r of rows) {
    const h = harness(r.alpn);
    const out = Buffer.concat(r.chunks.map(([c, end]) => h.f.onData(c, end)));
    t.same(out, r.passed, `${r.name}: passed on`);
    t.same(h.injected, r.injected ? [OWN] : [], `${r.name}: injected`);
    const peer = h.state.get('downstream_peer') as Workload | undefined;
    const got = peer ? 'peer' : h.state.has(NO_PEER) ? 'not found' : 'none';
    t.equal(got, r.state, `${r.name}: filter state`);
    t.same(h.counters(), { ...ZERO, ...r.counters }, `${r.name}: counters`);
    t.equal(h.closed(), r.closed ?? false, `${r.name}: closed`);
    // after the exchange concluded, later bytes pass untouched
    if (!r.closed && r.chunks.at(-1)![1] === false && got !== 'none') t.same(h.f.onData(APP, false), APP, `${r.name}: later bytes`);
  }
});

t.test('the peer read from the exchange is the workload Istio names', async (t) => {
  const h = harness('istio-peer-exchange');
  h.f.onData(framed(istioPayload()), false);
  t.has(h.state.get('downstream_peer'), {
    name: 'a-v1-5d8f7c9b4-x2k9p',
    namespace: 'a',
    workload: 'a-v1',
    cluster: 'Kubernetes',
    service: 'a',
    revision: 'v1',
    app: 'a',
    version: 'v1',
    type: 'deployment',
    identity: '',
  });
});

t.test('server-first: the first write sends our metadata, then reads take the peer; upstream side keys upstream_peer', async (t) => {
  const h = harness('istio-peer-exchange', 'upstream');
  h.f.onWrite();
  t.same(h.injected, [OWN], 'written before the first application byte');
  h.f.onWrite();
  t.same(h.injected, [OWN], 'once');
  t.same(h.f.onData(bytes(framed(istioPayload()), APP), false), APP);
  t.ok(h.state.get('upstream_peer'), 'upstream_peer');
  t.notOk(h.state.has('downstream_peer'));
  const n = harness('istio', 'upstream');
  n.f.onWrite();
  t.same(n.injected, []);
  t.ok(n.state.get(NO_PEER), 'ALPN mismatch on the first write: peer_not_found');
  t.equal(n.cfg.stats.alpnProtocolNotFound.value, 1);
});

t.test('config: packed or in a TypedStruct (as istiod sends it); one object for equal configs; others refused', async (t) => {
  const store = new StatsStore();
  const typed = (typeUrl: string, value: JsonObject) => anyPack(TypedStructSchema, create(TypedStructSchema, { typeUrl, value }));
  const ts = typed('type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange', {
    protocol: 'istio-peer-exchange',
    enable_discovery: true,
    additional_labels: ['role'],
  });
  const a = upstreamExchange([{ name: 'istio.metadata_exchange', typedConfig: ts }], 'cluster', store) as ExchangeConfig;
  t.same(
    { protocol: a.protocol, enableDiscovery: a.enableDiscovery, additionalLabels: a.additionalLabels },
    {
      protocol: 'istio-peer-exchange',
      enableDiscovery: true,
      additionalLabels: ['role'],
    },
  );
  t.equal(upstreamExchange([{ name: 'istio.metadata_exchange', typedConfig: ts }], 'other', store), a, 'interned');
  t.equal(upstreamExchange([], 'none', store), undefined);
  t.throws(
    () => upstreamExchange([{ name: 'x', typedConfig: anyPack(MetadataExchangeSchema, create(MetadataExchangeSchema, {})) }], 'c', store),
    /protocol: must not be empty/,
  );
  const other = typed('type.googleapis.com/some.Other', {});
  t.throws(() => upstreamExchange([{ name: 'x', typedConfig: other }], 'c', store), /Didn't find a registered implementation/);
  // Istio's counter names, in the root scope
  const names = ['alpn_protocol_found', 'alpn_protocol_not_found', 'initial_header_not_found', 'header_not_found', 'metadata_added'] as const;
  const mine = [
    a.stats.alpnProtocolFound,
    a.stats.alpnProtocolNotFound,
    a.stats.initialHeaderNotFound,
    a.stats.headerNotFound,
    a.stats.metadataAdded,
  ];
  t.same(
    mine.map((c) => c.name),
    names.map((n) => `metadata_exchange.${n}`),
  );
});

t.test('the same payload on two connections gives the same peer object (the stats label cache is keyed by it)', async (t) => {
  const one = harness('istio-peer-exchange');
  const two = harness('istio-peer-exchange');
  one.f.onData(framed(istioPayload()), false);
  two.f.onData(framed(istioPayload()), false);
  t.ok(one.state.get('downstream_peer'));
  t.equal(one.state.get('downstream_peer'), two.state.get('downstream_peer'));
});
