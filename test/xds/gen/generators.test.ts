// Generators: decode the packed resources and check them against Istio/Envoy documented output.
import t from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { initPushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { ClusterSchema, Cluster_DiscoveryType, Cluster_LbPolicy, type Cluster } from '../../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { ClusterLoadAssignmentSchema } from '../../../src/gen/envoy/config/endpoint/v3/endpoint_pb';
import { ListenerSchema } from '../../../src/gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema } from '../../../src/gen/envoy/config/route/v3/route_pb';
import { HttpConnectionManagerSchema } from '../../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { HealthStatus } from '../../../src/gen/envoy/config/core/v3/health_check_pb';
import { generatorsFor } from '../../../src/xds/gen';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { cfg, ListStore, proxy, internalService } from '../../discovery/fixtures';
import { fullPush, pushOf } from './helpers';

const configs = [
  internalService('apps', 'reviews', {
    addresses: ['10.96.0.9'],
    ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
    workloadSelector: { matchLabels: { app: 'reviews' } },
  }),
  cfg('WorkloadEntry', 'apps', 'r1', { address: '10.1.0.1', labels: { app: 'reviews', version: 'v1' } }),
  cfg('WorkloadEntry', 'apps', 'r2', { address: '10.1.0.2', labels: { app: 'reviews', version: 'v2', 'mesh.io/draining': 'true' } }),
  cfg('DestinationRule', 'apps', 'reviews', {
    host: 'reviews',
    trafficPolicy: {
      loadBalancer: { simple: 'ROUND_ROBIN' },
      connectionPool: { tcp: { maxConnections: 10 } },
      outlierDetection: { consecutive5xxErrors: 3, interval: '5s' },
    },
    subsets: [
      { name: 'v1', labels: { version: 'v1' } },
      { name: 'v2', labels: { version: 'v2' }, trafficPolicy: { loadBalancer: { consistentHash: { httpHeaderName: 'x' } } } },
    ],
  }),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['bookinfo.com'] }],
  }),
  cfg('VirtualService', 'apps', 'reviews', {
    hosts: ['bookinfo.com', 'reviews'],
    gateways: ['mesh-system/gw', 'mesh'],
    http: [
      {
        name: 'canary',
        match: [{ uri: { prefix: '/api' }, headers: { 'x-user': { exact: 'jason' } }, ignoreUriCase: true }],
        rewrite: { uri: '/v2' },
        timeout: '3s',
        route: [
          { destination: { host: 'reviews', subset: 'v1' }, weight: 80 },
          { destination: { host: 'reviews', subset: 'v2' }, weight: 20 },
        ],
        retries: { attempts: 3, retryOn: '5xx,503' },
      },
      { name: 'old', match: [{ uri: { exact: '/old' } }], redirect: { uri: '/new', redirectCode: 302 } },
      { name: 'rest', route: [{ destination: { host: 'reviews' } }], fault: { abort: { httpStatus: 503, percentage: { value: 10 } } } },
    ],
  }),
];

const setup = () => pushOf(configs);
const watch = (typeUrl: string, names: string[] = []) => ({ typeUrl, resourceNames: new Set(names), wildcard: names.length === 0 });

const gw = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' });
const sc = proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews', version: 'v1' } });

t.test('CDS: outbound default and subset clusters with DestinationRule policy', async (t) => {
  const push = setup();
  const res = generatorsFor(gw)[TYPE_URL.cluster]!.generate(gw, watch(TYPE_URL.cluster), fullPush(push)).resources;
  t.same(
    res.map((r) => r.name).sort(),
    [
      'BlackHoleCluster',
      'outbound|9080||reviews.apps.svc.cluster.local',
      'outbound|9080|v1|reviews.apps.svc.cluster.local',
      'outbound|9080|v2|reviews.apps.svc.cluster.local',
    ].sort(),
  );
  const get = (n: string) => anyUnpack(res.find((r) => r.name === n)!.resource, ClusterSchema) as Cluster;
  const def = get('outbound|9080||reviews.apps.svc.cluster.local');
  t.equal(def.clusterDiscoveryType.case, 'type');
  t.equal(def.edsClusterConfig?.serviceName, 'outbound|9080||reviews.apps.svc.cluster.local');
  t.equal(def.edsClusterConfig?.edsConfig?.configSourceSpecifier.case, 'ads');
  t.equal(def.lbPolicy, Cluster_LbPolicy.ROUND_ROBIN);
  t.equal(def.circuitBreakers?.thresholds[0]?.maxConnections, 10);
  t.equal(def.circuitBreakers?.thresholds[0]?.maxRequests, 4294967295);
  t.equal(def.outlierDetection?.consecutive5xx, 3);
  t.equal(def.outlierDetection?.enforcingConsecutive5xx, 100);
  t.equal(def.outlierDetection?.interval?.seconds, 5n);
  t.equal(def.connectTimeout?.seconds, 10n);
  t.equal(get('outbound|9080|v2|reviews.apps.svc.cluster.local').lbPolicy, Cluster_LbPolicy.RING_HASH, 'subset policy overrides');
  const sidecarNames = generatorsFor(sc)
    [TYPE_URL.cluster]!.generate(sc, watch(TYPE_URL.cluster), fullPush(push))
    .resources.map((r) => r.name);
  for (const n of ['PassthroughCluster', 'InboundPassthroughCluster', 'BlackHoleCluster', 'inbound|9080||']) t.ok(sidecarNames.includes(n), n);
});

t.test('CDS: a Passthrough service is ORIGINAL_DST on a sidecar and EDS on a router (Istio convertResolution)', async (t) => {
  const push = pushOf([
    ...configs,
    internalService('apps', 'headless', { resolution: 'NONE', addresses: [], ports: [{ number: 8080, name: 'http', protocol: 'HTTP' }] }),
  ]);
  const name = 'outbound|8080||headless.apps.svc.cluster.local';
  const typeOf = (p: typeof gw) => {
    const r = generatorsFor(p)
      [TYPE_URL.cluster]!.generate(p, watch(TYPE_URL.cluster), fullPush(push))
      .resources.find((x) => x.name === name);
    const c = r && (anyUnpack(r.resource, ClusterSchema) as Cluster);
    return c?.clusterDiscoveryType.case === 'type' ? Cluster_DiscoveryType[c.clusterDiscoveryType.value] : undefined;
  };
  t.equal(typeOf(sc), 'ORIGINAL_DST', 'sidecar: the connection’s original destination');
  t.equal(typeOf(gw), 'EDS', 'router: "Gateways cannot use passthrough clusters. So fallback to EDS"');
});

t.test('EDS: subset filtering, draining label, empty answer for unknown clusters', async (t) => {
  const push = setup();
  const names = ['outbound|9080||reviews.apps.svc.cluster.local', 'outbound|9080|v1|reviews.apps.svc.cluster.local', 'outbound|1|x|nope.example.com'];
  const res = generatorsFor(gw)[TYPE_URL.endpoint]!.generate(gw, watch(TYPE_URL.endpoint, names), fullPush(push)).resources;
  t.same(
    res.map((r) => r.name),
    names,
    'one answer per watched cluster',
  );
  const cla = (i: number) => anyUnpack(res[i]!.resource, ClusterLoadAssignmentSchema)!;
  const all = cla(0).endpoints.flatMap((l) => l.lbEndpoints);
  const addr = (e: (typeof all)[number]) => {
    const ep = e.hostIdentifier.case === 'endpoint' ? e.hostIdentifier.value : undefined;
    return ep?.address?.address.case === 'socketAddress' ? ep.address.address.value.address : '';
  };
  t.same(
    all.map((e) => [addr(e), e.healthStatus]),
    [
      ['10.1.0.1', HealthStatus.HEALTHY],
      ['10.1.0.2', HealthStatus.DRAINING],
    ],
  );
  t.equal(cla(1).endpoints.flatMap((l) => l.lbEndpoints).length, 1);
  t.same(cla(2).endpoints, []);
});

t.test('gateway LDS and RDS', async (t) => {
  const push = setup();
  const g = generatorsFor(gw);
  const [l] = g[TYPE_URL.listener]!.generate(gw, watch(TYPE_URL.listener), fullPush(push)).resources;
  t.equal(l!.name, '0.0.0.0_80');
  const listener = anyUnpack(l!.resource, ListenerSchema)!;
  const tc = listener.filterChains[0]!.filters[0]!.configType;
  const hcm = anyUnpack(tc.case === 'typedConfig' ? tc.value : (undefined as never), HttpConnectionManagerSchema)!;
  t.equal(hcm.statPrefix, 'outbound_0.0.0.0_80');
  t.equal(hcm.useRemoteAddress, true);
  t.equal(hcm.normalizePath, true);
  t.equal(hcm.routeSpecifier.case === 'rds' && hcm.routeSpecifier.value.routeConfigName, 'http.80');
  t.same(
    hcm.httpFilters.map((f) => f.name),
    // Istio's gateway HCM: metadata exchange first (appendMxFilter)
    [
      'istio.metadata_exchange',
      'envoy.filters.http.grpc_stats',
      'istio.alpn',
      'envoy.filters.http.fault',
      'envoy.filters.http.cors',
      'envoy.filters.http.router',
    ],
  );
  const [r] = g[TYPE_URL.route]!.generate(gw, watch(TYPE_URL.route, ['http.80']), fullPush(push)).resources;
  const rc = anyUnpack(r!.resource, RouteConfigurationSchema)!;
  t.equal(rc.virtualHosts.length, 1);
  const vh = rc.virtualHosts[0]!;
  t.equal(vh.name, 'bookinfo.com:80');
  t.same(vh.domains, ['bookinfo.com']);
  t.equal(rc.ignorePortInHostMatching, true);
  const [canary, old, rest] = vh.routes;
  t.equal(canary!.name, 'canary');
  t.equal(canary!.match?.pathSpecifier.case, 'prefix');
  t.equal(canary!.match?.caseSensitive, false);
  t.equal(canary!.match?.headers[0]?.name, 'x-user');
  const action = canary!.action.case === 'route' ? canary!.action.value : undefined;
  t.equal(action?.prefixRewrite, '/v2');
  t.equal(action?.timeout?.seconds, 3n);
  t.same(action?.clusterSpecifier.case === 'weightedClusters' && action.clusterSpecifier.value.clusters.map((c) => [c.name, c.weight]), [
    ['outbound|9080|v1|reviews.apps.svc.cluster.local', 80],
    ['outbound|9080|v2|reviews.apps.svc.cluster.local', 20],
  ]);
  t.equal(action?.retryPolicy?.numRetries, 3);
  t.equal(action?.retryPolicy?.retryOn, '5xx,retriable-status-codes');
  t.same(action?.retryPolicy?.retriableStatusCodes, [503]);
  t.equal(old!.action.case, 'redirect');
  t.equal(old!.action.case === 'redirect' && old!.action.value.pathRewriteSpecifier.value, '/new');
  t.equal(rest!.action.case === 'route' && rest!.action.value.timeout?.seconds, 0n, 'Istio default timeout 0 (disabled)');
  t.equal(rest!.action.case === 'route' && rest!.action.value.retryPolicy?.numRetries, 2, 'mesh default retries');
  t.ok(rest!.typedPerFilterConfig['envoy.filters.http.fault']);
  const missing = anyUnpack(
    g[TYPE_URL.route]!.generate(gw, watch(TYPE_URL.route, ['http.8080']), fullPush(push)).resources[0]!.resource,
    RouteConfigurationSchema,
  )!;
  t.same(missing.virtualHosts, [], 'unknown route: empty configuration');
});

t.test('sidecar LDS and RDS', async (t) => {
  const push = setup();
  const g = generatorsFor(sc);
  const names = g[TYPE_URL.listener]!.generate(sc, watch(TYPE_URL.listener), fullPush(push)).resources.map((r) => r.name);
  t.same(names, ['virtualOutbound', 'virtualInbound', '0.0.0.0_9080']);
  const out = anyUnpack(
    g[TYPE_URL.listener]!.generate(sc, watch(TYPE_URL.listener, ['virtualOutbound']), fullPush(push)).resources[0]!.resource,
    ListenerSchema,
  )!;
  t.equal(out.useOriginalDst, true);
  t.equal(out.address?.address.case === 'socketAddress' && out.address.address.value.portSpecifier.value, 15001);
  const rc = anyUnpack(
    g[TYPE_URL.route]!.generate(sc, watch(TYPE_URL.route, ['9080']), fullPush(push)).resources[0]!.resource,
    RouteConfigurationSchema,
  )!;
  // the VirtualService host outside the registry gets its own vhost, as in Istio
  t.same(
    rc.virtualHosts.map((v) => v.name),
    ['bookinfo.com:9080', 'reviews.apps.svc.cluster.local:9080', 'allow_any'],
  );
  t.same(rc.virtualHosts[0]!.domains, ['bookinfo.com']);
  t.same(rc.virtualHosts[1]!.domains, ['reviews.apps.svc.cluster.local', 'reviews', 'reviews.apps.svc', 'reviews.apps', '10.96.0.9']);
});

t.test('TPROXY interception makes the virtual listeners transparent (Istio buildVirtual*Listener)', async (t) => {
  const push = setup();
  const tproxy = proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', {
    NAMESPACE: 'apps',
    LABELS: { app: 'reviews', version: 'v1' },
    INTERCEPTION_MODE: 'TPROXY',
  });
  const listeners = (p: typeof sc) =>
    generatorsFor(p)
      [TYPE_URL.listener]!.generate(p, watch(TYPE_URL.listener), fullPush(push))
      .resources.map((r) => anyUnpack(r.resource, ListenerSchema)!);
  const byName = (ls: ReturnType<typeof listeners>) => Object.fromEntries(ls.map((l) => [l.name, l.transparent]));
  t.same(
    byName(listeners(tproxy)),
    { virtualOutbound: true, virtualInbound: true, '0.0.0.0_9080': undefined },
    'only the two listeners iptables sends connections to',
  );
  t.same(
    byName(listeners(sc)),
    { virtualOutbound: undefined, virtualInbound: undefined, '0.0.0.0_9080': undefined },
    'REDIRECT (the default): not transparent',
  );
});

t.test('TPROXY: virtualInbound carries original_src with mark 1337 after original_dst (Istio populateListenerFilters)', async (t) => {
  const push = setup();
  const tproxy = proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', {
    NAMESPACE: 'apps',
    LABELS: { app: 'reviews', version: 'v1' },
    INTERCEPTION_MODE: 'TPROXY',
  });
  const inbound = (p: typeof sc) =>
    generatorsFor(p)
      [TYPE_URL.listener]!.generate(p, watch(TYPE_URL.listener), fullPush(push))
      .resources.map((r) => anyUnpack(r.resource, ListenerSchema)!)
      .find((l) => l.name === 'virtualInbound')!;
  const filters = inbound(tproxy).listenerFilters;
  t.same(
    filters.slice(0, 2).map((f) => f.name),
    ['envoy.filters.listener.original_dst', 'envoy.filters.listener.original_src'],
  );
  const src = filters[1]!.configType.case === 'typedConfig' ? filters[1]!.configType.value : undefined;
  t.equal(src?.typeUrl, 'type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc');
  const { OriginalSrcSchema } = await import('../../../src/gen/envoy/extensions/filters/listener/original_src/v3/original_src_pb');
  t.equal(anyUnpack(src!, OriginalSrcSchema)?.mark, 1337);
  t.notOk(
    inbound(sc).listenerFilters.some((f) => f.name === 'envoy.filters.listener.original_src'),
    'not in REDIRECT mode',
  );
});

t.test('reuse across pushes: packed output equals a fresh serialisation, and edits show up', async (t) => {
  const { toBinary } = await import('@bufbuild/protobuf');
  const { buildSidecarRouteConfiguration } = await import('../../../src/xds/gen/rds');
  const sorted = (list: { name: string }[]) => list.map((c) => c.name).sort();
  const first = setup();
  const gen = generatorsFor(sc);
  const rds1 = gen[TYPE_URL.route]!.generate(sc, watch(TYPE_URL.route, ['9080']), fullPush(first)).resources[0]!;
  t.same(
    Buffer.from(rds1.resource.value),
    Buffer.from(toBinary(RouteConfigurationSchema, buildSidecarRouteConfiguration(sc, first, '9080'))),
    'RDS bytes are toBinary bytes',
  );
  // second snapshot of the same configs: everything reused, still identical
  const second = setup();
  const rds2 = gen[TYPE_URL.route]!.generate(sc, watch(TYPE_URL.route, ['9080']), fullPush(second)).resources[0]!;
  t.same(Buffer.from(rds2.resource.value), Buffer.from(rds1.resource.value));
  const cds1 = gen[TYPE_URL.cluster]!.generate(sc, watch(TYPE_URL.cluster), fullPush(first)).resources;
  const cds2 = gen[TYPE_URL.cluster]!.generate(sc, watch(TYPE_URL.cluster), fullPush(second)).resources;
  t.same(sorted(cds2), sorted(cds1));
  t.same(
    cds2.map((r) => Buffer.from(r.resource.value)),
    cds1.map((r) => Buffer.from(r.resource.value)),
    'same bytes from the reused clusters',
  );
  // an edit: the route timeout of the VirtualService and the DestinationRule's connection limit change
  const edited = configs.map((c) => {
    if (c.kind === 'VirtualService')
      return cfg('VirtualService', 'apps', 'reviews', {
        ...c.spec,
        http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '7s' }],
      } as never);
    if (c.kind === 'DestinationRule')
      return cfg('DestinationRule', 'apps', 'reviews', { ...c.spec, trafficPolicy: { connectionPool: { tcp: { maxConnections: 77 } } } } as never);
    return c;
  });
  const store = new ListStore(edited);
  const third = initPushContext(store, buildRegistries(store, []));
  const rc = anyUnpack(
    gen[TYPE_URL.route]!.generate(sc, watch(TYPE_URL.route, ['9080']), fullPush(third)).resources[0]!.resource,
    RouteConfigurationSchema,
  )!;
  const vh = rc.virtualHosts.find((v) => v.domains.includes('reviews.apps.svc.cluster.local'))!;
  const action = vh.routes[0]!.action;
  t.equal(action.case === 'route' ? action.value.timeout?.seconds : undefined, 7n, 'edited VirtualService reaches RDS');
  const cds3 = gen[TYPE_URL.cluster]!.generate(sc, watch(TYPE_URL.cluster), fullPush(third)).resources;
  const def = anyUnpack(cds3.find((r) => r.name === 'outbound|9080||reviews.apps.svc.cluster.local')!.resource, ClusterSchema)!;
  t.equal(def.circuitBreakers?.thresholds[0]?.maxConnections, 77, 'edited DestinationRule reaches CDS');
});

t.test('HTTP/1.0: the proxy\'s HTTP10 metadata "1" (ISTIO_META_HTTP10) sets accept_http_10 on its HCMs (Istio enableHTTP10)', async (t) => {
  const push = setup();
  const hcms = (p: typeof gw) =>
    generatorsFor(p)
      [TYPE_URL.listener]!.generate(p, watch(TYPE_URL.listener), fullPush(push))
      .resources.flatMap((r) =>
        anyUnpack(r.resource, ListenerSchema)!.filterChains.flatMap((c) =>
          c.filters.flatMap((f) =>
            f.name === 'envoy.filters.network.http_connection_manager' && f.configType.case === 'typedConfig'
              ? [anyUnpack(f.configType.value, HttpConnectionManagerSchema)!]
              : [],
          ),
        ),
      );
  const gw10 = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', {
    LABELS: { istio: 'ingressgateway' },
    NAMESPACE: 'mesh-system',
    HTTP10: '1',
  });
  const sc10 = proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', {
    NAMESPACE: 'apps',
    LABELS: { app: 'reviews', version: 'v1' },
    HTTP10: '1',
  });
  for (const [name, plain, with10] of [
    ['gateway', gw, gw10],
    ['sidecar', sc, sc10],
  ] as const) {
    const off = hcms(plain);
    const on = hcms(with10);
    t.ok(off.length > 0 && on.length === off.length, `${name}: HCMs generated`);
    t.ok(
      off.every((h) => h.httpProtocolOptions?.acceptHttp10 !== true),
      `${name}: HTTP/1.0 refused (426) by default`,
    );
    t.ok(
      on.every((h) => h.httpProtocolOptions?.acceptHttp10 === true),
      `${name}: every HCM accepts HTTP/1.0 with HTTP10=1`,
    );
  }
  const yes = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', {
    LABELS: { istio: 'ingressgateway' },
    NAMESPACE: 'mesh-system',
    HTTP10: 'true',
  });
  t.ok(
    hcms(yes).every((h) => h.httpProtocolOptions?.acceptHttp10 !== true),
    'only "1" enables it, as in Istio',
  );
});
