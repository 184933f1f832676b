// Capability-aware generation: what a proxy lacks of Istio's Envoy build, read from its Node.extensions, and
// what the daemon sends it instead. The upstream Envoy's list is the real one (fixtures/, from /server_info of
// Envoy 1.36.2); Istio's alpn override lists come from Istio's xdsfilters.Alpn (mtlsHTTP11ALPN, mtlsHTTP2ALPN).
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { ExtensionSchema, type Extension } from '../../../src/gen/envoy/config/core/v3/base_pb';
import { ClusterSchema, type Cluster } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { ListenerSchema } from '../../../src/gen/envoy/config/listener/v3/listener_pb';
import { HttpConnectionManagerSchema } from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { UpstreamTlsContextSchema } from '../../../src/gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { leftOutReport, proxyCapabilities, supports } from '../../../src/discovery/capabilities';
import { alpnInsteadOfFilter } from '../../../src/xds/gen/tls';
import { generatorsFor } from '../../../src/xds/gen';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { engineExtensions } from '../../../src/proxy/extensions';
import { defaultFilterRegistry } from '../../../src/proxy/http/filters/index';
import { cfg, proxy, internalService } from '../../discovery/fixtures';
import { REPO } from '../../helpers/spec';
import { fullPush, pushOf } from './helpers';

interface Fixture {
  extensions: Array<{ name: string; category: string; type_urls: string[] }>;
}
const fixture = JSON.parse(fs.readFileSync(path.join(REPO, 'test/xds/gen/fixtures/envoy-1.36.2-extensions.json'), 'utf8')) as Fixture;
const upstreamEnvoy: Extension[] = fixture.extensions.map((e) =>
  create(ExtensionSchema, { name: e.name, category: e.category, typeUrls: e.type_urls }),
);
const ALPN_TYPE = 'istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig';
const ext = (name: string, typeUrls: string[], disabled = false) =>
  create(ExtensionSchema, { name, category: 'envoy.filters.http', typeUrls, disabled });

// Istio's own telemetry filters as its proxy lists them (istio/proxy: stats, peer metadata, TCP metadata exchange)
const ISTIO_TELEMETRY = [
  ext('istio.stats', ['stats.PluginConfig']),
  ext('istio.metadata_exchange', ['io.istio.http.peer_metadata.Config']),
  create(ExtensionSchema, {
    name: 'envoy.filters.network.metadata_exchange',
    category: 'envoy.filters.network',
    typeUrls: ['envoy.tcp.metadataexchange.config.MetadataExchange'],
  }),
];
const TELEMETRY_MISSING = ['stats', 'peerMetadata', 'metadataExchange'];

t.test('proxyCapabilities: what the node lists decides what is missing', async (t) => {
  const ALL = ['alpn', ...TELEMETRY_MISSING];
  const rows: Array<[string, Extension[], string[], string]> = [
    ["no extensions listed: Istio's build is assumed", [], [], ''],
    ['the real upstream Envoy 1.36.2 list', upstreamEnvoy, ALL, `no:${ALL.join(',')}`],
    [
      "Istio's proxy: the same list plus istio.alpn and the telemetry filters",
      [...upstreamEnvoy, ext('istio.alpn', [ALPN_TYPE]), ...ISTIO_TELEMETRY],
      [],
      '',
    ],
    ['istio.alpn listed but disabled', [...upstreamEnvoy, ext('istio.alpn', [ALPN_TYPE], true), ...ISTIO_TELEMETRY], ['alpn'], 'no:alpn'],
    [
      'the config type under another name: Envoy finds factories by type',
      [...upstreamEnvoy, ext('my.alpn', [ALPN_TYPE]), ...ISTIO_TELEMETRY],
      [],
      '',
    ],
    ['the name with another config type', [...upstreamEnvoy, ext('istio.alpn', ['some.other.Config']), ...ISTIO_TELEMETRY], ['alpn'], 'no:alpn'],
    ['the name without type_urls', [ext('istio.alpn', [])], TELEMETRY_MISSING, `no:${TELEMETRY_MISSING.join(',')}`],
    [
      'istio.alpn and istio.stats only',
      [...upstreamEnvoy, ext('istio.alpn', [ALPN_TYPE]), ISTIO_TELEMETRY[0]!],
      ['peerMetadata', 'metadataExchange'],
      'no:peerMetadata,metadataExchange',
    ],
  ];
  for (const [what, list, missing, key] of rows) {
    const c = proxyCapabilities(list);
    t.same(c.missing, missing, `${what}: missing`);
    t.equal(c.key, key, `${what}: key`);
    t.equal(supports(c, 'alpn'), !missing.includes('alpn'), `${what}: supports alpn`);
    t.equal(supports(c, 'stats'), !missing.includes('stats'), `${what}: supports stats`);
    t.equal(leftOutReport(c) !== undefined, missing.length > 0, `${what}: logged only when something is left out`);
  }
  t.equal(supports(undefined, 'alpn'), true, "a proxy the server never classified is Istio's build");
  t.match(leftOutReport(proxyCapabilities(upstreamEnvoy)), /^istio\.alpn \(not in the node's extensions\): /);
});

t.test('the engine lists its own extensions, istio.alpn among them', async (t) => {
  const list = engineExtensions(defaultFilterRegistry());
  const names = list.map((e) => e.name);
  for (const n of [
    'istio.alpn',
    'envoy.filters.http.router',
    'envoy.filters.http.jwt_authn',
    'envoy.filters.http.rbac',
    'envoy.filters.network.http_connection_manager',
    'envoy.filters.network.tcp_proxy',
    'envoy.filters.listener.tls_inspector',
    'envoy.transport_sockets.tls',
    'istio.stats',
    'envoy.filters.http.peer_metadata',
  ]) {
    t.ok(names.includes(n), n);
  }
  t.notOk(names.includes('envoy.filters.http.local_ratelimit'), 'a filter the engine lacks is not listed');
  t.ok(list.find((e) => e.name === 'istio.alpn')?.typeUrls.includes(ALPN_TYPE), 'with its config type, as Envoy lists it');
  const c = proxyCapabilities(list);
  // the telemetry filters reach the engine once it lists them (the stats side of issue 26)
  t.same([c.reported, c.missing.includes('alpn')], [true, false], 'so the daemon sends it istio.alpn');
  t.ok(
    c.missing.every((f) => f !== 'alpn'),
    'and leaves out only the telemetry filters it does not list',
  );
});

t.test('alpnInsteadOfFilter: the ALPN istio.alpn would set, on clusters of a fixed protocol', async (t) => {
  const envoy = proxyCapabilities(upstreamEnvoy);
  t.same(alpnInsteadOfFilter(envoy, 'http/1.1'), ['istio-http/1.1', 'istio', 'http/1.1']);
  t.same(alpnInsteadOfFilter(envoy, 'h2'), ['istio-h2', 'istio', 'h2']);
  t.equal(alpnInsteadOfFilter(envoy, undefined), undefined, "TCP or the downstream protocol: Istio's ALPN stays");
  t.equal(alpnInsteadOfFilter(undefined, 'http/1.1'), undefined, 'a proxy with the filter keeps it');
});

// ---------------------------------------------------------------------------------------------
// generation

const configs = [
  internalService('apps', 'svc', {
    addresses: ['10.96.0.9'],
    ports: [
      { number: 80, name: 'http', protocol: 'HTTP' },
      { number: 90, name: 'grpc', protocol: 'GRPC' },
      { number: 100, name: 'tcp', protocol: 'TCP' },
    ],
    endpoints: [{ address: '10.1.0.1', labels: { 'security.istio.io/tlsMode': 'istio' } }],
  }),
  cfg('DestinationRule', 'apps', 'svc', { host: 'svc.apps.svc.cluster.local', trafficPolicy: { tls: { mode: 'ISTIO_MUTUAL' } } }),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
  }),
];
const setup = () => pushOf(configs);
const watch = (typeUrl: string) => ({ typeUrl, resourceNames: new Set<string>(), wildcard: true });

function gateway(extensions: Extension[]) {
  const p = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' });
  p.capabilities = proxyCapabilities(extensions);
  return p;
}

t.test("a gateway on upstream Envoy gets no istio.alpn; one on Istio's build in the same push still does", async (t) => {
  const push = setup();
  const filters = (extensions: Extension[]) => {
    const p = gateway(extensions);
    const [l] = generatorsFor(p)[TYPE_URL.listener]!.generate(p, watch(TYPE_URL.listener), fullPush(push)).resources;
    const fc = anyUnpack(l!.resource, ListenerSchema)!.filterChains[0]!.filters[0]!.configType;
    return anyUnpack(fc.case === 'typedConfig' ? fc.value : (undefined as never), HttpConnectionManagerSchema)!.httpFilters.map((f) => f.name);
  };
  t.same(filters(upstreamEnvoy), [
    // no istio.metadata_exchange either (telemetry-filters.ts)
    'envoy.filters.http.grpc_stats',
    'envoy.filters.http.fault',
    'envoy.filters.http.cors',
    'envoy.filters.http.router',
  ]);
  t.same(filters([]), [
    'istio.metadata_exchange',
    'envoy.filters.http.grpc_stats',
    'istio.alpn',
    'envoy.filters.http.fault',
    'envoy.filters.http.cors',
    'envoy.filters.http.router',
  ]);
});

t.test('mesh mTLS clusters of upstream Envoy offer the ALPN of their fixed protocol', async (t) => {
  const push = setup();
  const alpns = (extensions: Extension[]) => {
    const p = proxy('sidecar~10.2.0.1~c.apps~apps.svc.cluster.local', { NAMESPACE: 'apps' });
    p.capabilities = proxyCapabilities(extensions);
    const res = generatorsFor(p)[TYPE_URL.cluster]!.generate(p, watch(TYPE_URL.cluster), fullPush(push)).resources;
    const out: Record<string, string[] | undefined> = {};
    for (const port of [80, 90, 100]) {
      const c = anyUnpack(res.find((r) => r.name === `outbound|${port}||svc.apps.svc.cluster.local`)!.resource, ClusterSchema) as Cluster;
      const ts = c.transportSocket?.configType;
      out[port] = ts?.case === 'typedConfig' ? anyUnpack(ts.value, UpstreamTlsContextSchema)?.commonTlsContext?.alpnProtocols : undefined;
    }
    return out;
  };
  t.same(alpns(upstreamEnvoy), {
    80: ['istio-http/1.1', 'istio', 'http/1.1'],
    90: ['istio-h2', 'istio', 'h2'],
    // no istio-peer-exchange: upstream Envoy has no exchange filter, and a server agreeing to it would send it
    // exchange bytes (istio/proxy metadata_exchange.cc writes its metadata once the ALPN says so)
    100: ['istio'],
  });
  t.same(
    alpns([]),
    { 80: ['istio-peer-exchange', 'istio'], 90: ['istio-peer-exchange', 'istio', 'h2'], 100: ['istio-peer-exchange', 'istio'] },
    "Istio's build: the filter sets it per request",
  );
});
