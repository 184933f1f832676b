// Pure pieces of the engine against Envoy's documented behaviour: RBAC evaluation, load balancing,
// filter chain selection, first-byte inspection, path normalisation, stat tag extraction and
// rendering, RE2 translation, substitution formats and bootstrap loading.
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { RBACSchema } from '../../src/gen/envoy/config/rbac/v3/rbac_pb';
import { RbacEngine } from '../../src/proxy/rbac/engine';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { Host } from '../../src/proxy/upstream/host';
import { LoadBalancer, priorityLoads, priorityStates, type LbPolicy } from '../../src/proxy/upstream/lb';
import { compileChainMatch, selectChain, type ConnectionFacts } from '../../src/proxy/listener/chain-match';
import { FilterChainMatchSchema } from '../../src/gen/envoy/config/listener/v3/listener_components_pb';
import { parseClientHello, sniffHttp, sniffHttpHost } from '../../src/proxy/listener/sniff';
import { processPath } from '../../src/proxy/http/path';
import { TagProducer } from '../../src/proxy/stats/tags';
import { isNullStat, StatsStore } from '../../src/proxy/stats/store';
import { renderPrometheus, renderStatsText } from '../../src/proxy/stats/render';
import { fullMatcher, globalReplacer, searcher } from '../../src/lib/re2';
import { compileFormat, formatLog } from '../../src/proxy/format/substitution';
import { StreamInfo, type DownstreamConnectionInfo } from '../../src/proxy/stream-info';
import { BootstrapError, loadBootstrap, parseBootstrap } from '../../src/proxy/bootstrap';
import { OutlierDetector } from '../../src/proxy/upstream/outlier';
import { isLoopback } from '../../src/proxy/common/cidr';
import { pb } from './helpers';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import net from 'node:net';
import { tempDir } from '../helpers/temp';
import { plainConnection } from '../helpers/connection';

function conn(o: Partial<DownstreamConnectionInfo> = {}): DownstreamConnectionInfo {
  return plainConnection({ remoteAddress: '10.0.0.5', remotePort: 40000, localAddress: '10.0.0.1', localPort: 8080, ...o });
}

t.test('RBAC evaluation', async (t) => {
  const rules = (action: string, policies: JsonObject) => new RbacEngine(pb(RBACSchema, { action, policies }), 'rbac');
  const allow = rules('ALLOW', {
    'ns-foo': {
      permissions: [
        { and_rules: { rules: [{ header: { name: ':method', string_match: { exact: 'GET' } } }, { url_path: { path: { prefix: '/api/' } } }] } },
      ],
      principals: [{ authenticated: { principal_name: { exact: 'spiffe://cluster.local/ns/foo/sa/app' } } }],
    },
    'any-port-9000': { permissions: [{ destination_port: 9000 }], principals: [{ any: true }] },
    'jwt-admins': {
      permissions: [{ any: true }],
      principals: [
        {
          metadata: {
            filter: 'envoy.filters.http.jwt_authn',
            path: [{ key: 'payload' }, { key: 'groups' }],
            value: { list_match: { one_of: { string_match: { exact: 'admin' } } } },
          },
        },
      ],
    },
    'not-from-10': {
      permissions: [{ url_path: { path: { exact: '/public' } } }],
      principals: [{ not_id: { remote_ip: { address_prefix: '10.0.0.0', prefix_len: 8 } } }],
    },
  });
  const input = (o: { method?: string; path?: string; c?: Partial<DownstreamConnectionInfo>; md?: Record<string, JsonObject> }) => ({
    headers: new RequestHeaders(o.method ?? 'GET', o.path ?? '/', 'h', 'http', {}),
    path: (o.path ?? '/').split('?')[0],
    connection: conn(o.c),
    dynamicMetadata: o.md ? new Map(Object.entries(o.md)) : undefined,
  });
  const mtls = { tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://cluster.local/ns/foo/sa/app'] };
  t.same(allow.evaluate(input({ path: '/api/x', c: mtls })), { allowed: true, policy: 'ns-foo' });
  t.same(allow.evaluate(input({ path: '/api/x', method: 'POST', c: mtls })), { allowed: false, policy: '' }, 'method must match');
  t.same(allow.evaluate(input({ path: '/api/x' })), { allowed: false, policy: '' }, 'plaintext is not authenticated');
  t.same(allow.evaluate(input({ path: '/x', c: { localPort: 9000 } })), { allowed: true, policy: 'any-port-9000' });
  t.same(allow.evaluate(input({ md: { 'envoy.filters.http.jwt_authn': { payload: { groups: ['dev', 'admin'] } } } })), {
    allowed: true,
    policy: 'jwt-admins',
  });
  t.same(allow.evaluate(input({ path: '/public' })), { allowed: false, policy: '' }, 'not_id excludes 10/8');
  t.same(allow.evaluate(input({ path: '/public', c: { remoteAddress: '192.168.1.1' } })), { allowed: true, policy: 'not-from-10' });
  const deny = rules('DENY', { 'deny-admin': { permissions: [{ url_path: { path: { prefix: '/admin' } } }], principals: [{ any: true }] } });
  t.same(deny.evaluate(input({ path: '/admin/x' })), { allowed: false, policy: 'deny-admin' });
  t.same(deny.evaluate(input({ path: '/ok' })), { allowed: true, policy: '' });
  const log = rules('LOG', { all: { permissions: [{ any: true }], principals: [{ any: true }] } });
  t.same(log.evaluate(input({})), { allowed: true, policy: 'all' }, 'LOG always allows');
  const empty = rules('ALLOW', {});
  t.equal(empty.evaluate(input({})).allowed, false, 'ALLOW with no policies denies everything');
  t.throws(
    () => rules('ALLOW', { c: { permissions: [{ any: true }], principals: [{ any: true }], condition: { const_expr: { bool_value: true } } } }),
    /CEL conditions are not supported/,
  );
  const dns = rules('ALLOW', {
    p: { permissions: [{ any: true }], principals: [{ authenticated: { principal_name: { suffix: '.example.com' } } }] },
  });
  t.equal(
    dns.evaluate(input({ c: { tls: true, peerCertificatePresented: true, peerDnsSans: ['svc.example.com'] } })).allowed,
    true,
    'DNS SAN when there is no URI SAN',
  );
  // Envoy AuthenticatedMatcher: every URI SAN, then every DNS SAN, then the subject
  t.equal(
    dns.evaluate(input({ c: { tls: true, peerCertificatePresented: true, peerUriSans: ['spiffe://x'], peerDnsSans: ['svc.example.com'] } })).allowed,
    true,
    'DNS SANs are tried after URI SANs',
  );
});

function hosts(spec: Array<{ w?: number; health?: 'healthy' | 'unhealthy' | 'draining' | 'degraded'; p?: number }>): Host[] {
  return spec.map(
    (s, i) => new Host('10.0.0.' + (i + 1), 80, '', s.w ?? 1, s.health ?? 'healthy', s.p ?? 0, { region: '', zone: '', subZone: '' }, undefined),
  );
}

function seq(n: number, seed = 1): () => number {
  let x = seed;
  return () => {
    x = (x * 16807) % 2147483647;
    return (x - 1) / 2147483646;
  };
}

t.test('load balancing', async (t) => {
  const lb = (policy: LbPolicy, hs: Host[], panic = 50) => {
    const l = new LoadBalancer({ policy, panicThreshold: panic, overprovisioningFactor: 140, choiceCount: 2, random: seq(0) });
    l.update(hs);
    return l;
  };
  const counts = (l: LoadBalancer, n: number) => {
    const c: Record<string, number> = {};
    for (let i = 0; i < n; i++) {
      const h = l.choose()!;
      c[h.address] = (c[h.address] ?? 0) + 1;
    }
    return c;
  };
  t.same(counts(lb('ROUND_ROBIN', hosts([{}, {}, {}])), 300), { '10.0.0.1': 100, '10.0.0.2': 100, '10.0.0.3': 100 }, 'round robin is even');
  t.same(counts(lb('ROUND_ROBIN', hosts([{ w: 1 }, { w: 3 }])), 400), { '10.0.0.1': 100, '10.0.0.2': 300 }, 'weighted round robin follows weights');
  const skipped = counts(lb('ROUND_ROBIN', hosts([{}, { health: 'unhealthy' }, { health: 'draining' }, {}])), 100);
  t.same(Object.keys(skipped).sort(), ['10.0.0.1', '10.0.0.4'], 'unhealthy and draining hosts are excluded');
  const panic = counts(lb('ROUND_ROBIN', hosts([{}, { health: 'unhealthy' }, { health: 'unhealthy' }])), 90);
  t.equal(Object.keys(panic).length, 3, 'under 50% healthy: panic mode balances over all hosts');
  const noPanic = counts(lb('ROUND_ROBIN', hosts([{}, { health: 'unhealthy' }, { health: 'unhealthy' }]), 0), 30);
  t.same(Object.keys(noPanic), ['10.0.0.1'], 'panic threshold 0 disables panic');
  t.equal(lb('ROUND_ROBIN', hosts([{ health: 'unhealthy' }]), 0).choose(), undefined, 'no healthy host and no panic → none');
  // priorities: P0 fully healthy takes everything; P0 half healthy spills over (1.4 × 50% = 70%)
  t.same(priorityLoads(priorityStates(hosts([{ p: 0 }, { p: 1 }]))), [100, 0]);
  t.same(priorityLoads(priorityStates(hosts([{ p: 0 }, { p: 0, health: 'unhealthy' }, { p: 1 }]))), [70, 30]);
  t.same(priorityLoads(priorityStates(hosts([{ p: 0, health: 'unhealthy' }, { p: 1 }]))), [0, 100], 'all of P0 down: P1 takes all');
  const pr = counts(lb('ROUND_ROBIN', hosts([{ p: 0 }, { p: 1 }])), 50);
  t.same(Object.keys(pr), ['10.0.0.1'], 'healthy P0 gets all traffic');
  // least request: with two candidates the one with fewer active requests wins
  const hs = hosts([{}, {}]);
  hs[0]!.stats.rqActive = 5;
  const lr = counts(lb('LEAST_REQUEST', hs), 200);
  t.ok((lr['10.0.0.2'] ?? 0) > 140, `least request prefers the idle host (${JSON.stringify(lr)})`);
  const rnd = counts(lb('RANDOM', hosts([{}, {}, {}, {}])), 4000);
  for (const v of Object.values(rnd)) t.ok(v > 800 && v < 1200, `random is roughly uniform (${v})`);
  const avoid = lb('ROUND_ROBIN', hosts([{}, {}]));
  const first = avoid.choose()!;
  t.not(avoid.choose({ avoid: new Set([first]) }), first, 'retry host predicate avoids the previous host');
  const rh = lb('RING_HASH', hosts([{}, {}, {}, {}]));
  t.equal(rh.choose({ hash: 42 }), rh.choose({ hash: 42 }), 'consistent hash is stable for a key');
});

t.test('load balancing state shares its lists where they are equal (thousands of clusters in a sidecar)', async (t) => {
  const all = hosts([{}, {}]);
  const [one] = priorityStates(all);
  t.equal(one!.hosts, all, "one priority: the hosts list is the cluster's own");
  t.equal(one!.healthy, one!.hosts, 'all healthy: the healthy list is the hosts list');
  t.same(one!.degraded, []);
  t.same(priorityLoads([one!]), [100]);
  const mixed = hosts([{}, { health: 'unhealthy' }, { health: 'degraded' }]);
  const [m] = priorityStates(mixed);
  t.same(
    m!.healthy.map((h) => h.address),
    ['10.0.0.1'],
    'an unhealthy host: a list of its own',
  );
  t.same(
    m!.degraded.map((h) => h.address),
    ['10.0.0.3'],
  );
  t.equal(mixed.length, 3, "the cluster's list is not changed");
  const two = priorityStates(hosts([{ p: 0 }, { p: 1 }]));
  t.same(
    two.map((s) => s.hosts.length),
    [1, 1],
    'two priorities: a list each',
  );
});

t.test('outlier detection: consecutive 5xx ejects, max_ejection_percent caps, time returns hosts', async (t) => {
  let now = 1000;
  const hs = hosts([{}, {}, {}, {}]);
  let changes = 0;
  const store = new StatsStore();
  const od = new OutlierDetector(
    {
      consecutive5xx: 3,
      enforcing5xx: 100,
      consecutiveGatewayFailure: 5,
      enforcingGatewayFailure: 0,
      consecutiveLocalOriginFailure: 5,
      enforcingLocalOriginFailure: 100,
      splitExternalLocalOriginErrors: false,
      intervalMs: 1_000_000,
      baseEjectionMs: 30_000,
      maxEjectionMs: 300_000,
      maxEjectionPercent: 25,
    },
    store.scope('cluster.c.'),
    () => hs,
    () => changes++,
    () => now,
    () => 0,
  );
  t.teardown(() => od.close());
  od.reportHttp(hs[0]!, 503);
  od.reportHttp(hs[0]!, 200);
  od.reportHttp(hs[0]!, 503);
  od.reportHttp(hs[0]!, 503);
  t.equal(hs[0]!.ejected, false, 'a success resets the count');
  od.reportHttp(hs[0]!, 500);
  t.equal(hs[0]!.ejected, true, 'three consecutive 5xx eject');
  t.equal(hs[0]!.healthFlags(), '/failed_outlier_check');
  for (let i = 0; i < 3; i++) od.reportLocal(hs[1]!, 'connect_failed');
  t.equal(hs[1]!.ejected, false, 'a second ejection would exceed 25% of 4 hosts');
  t.equal(store.value('cluster.c.outlier_detection.ejections_overflow'), 1);
  t.equal(store.value('cluster.c.outlier_detection.ejections_active'), 1);
  now += 30_000;
  od.tick();
  t.equal(hs[0]!.ejected, false, 'back after base_ejection_time');
  t.equal(changes, 2, 'load balancer rebuilt on ejection and return');
});

t.test('filter chain selection', async (t) => {
  const chain = (name: string, m: JsonObject) => ({ name, match: compileChainMatch(pb(FilterChainMatchSchema, m), name) });
  const chains = [
    chain('plain', {}),
    chain('port-9080', { destination_port: 9080 }),
    chain('sni-exact', { server_names: ['api.example.com'], transport_protocol: 'tls' }),
    chain('sni-wild', { server_names: ['*.example.com'], transport_protocol: 'tls' }),
    chain('tls-any', { transport_protocol: 'tls' }),
    chain('http', { application_protocols: ['http/1.1', 'h2c'] }),
    chain('from-10', { source_prefix_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 8 }] }),
  ];
  const f = (o: Partial<ConnectionFacts>): ConnectionFacts => ({
    destinationPort: 8080,
    destinationIp: '10.0.0.1',
    serverName: '',
    transportProtocol: 'raw_buffer',
    applicationProtocols: [],
    sourceIp: '192.168.0.1',
    sourcePort: 1234,
    ...o,
  });
  const pick = (o: Partial<ConnectionFacts>) => selectChain(chains, f(o))?.name;
  t.equal(pick({}), 'plain');
  t.equal(pick({ destinationPort: 9080 }), 'port-9080', 'destination port is the first criterion');
  t.equal(pick({ transportProtocol: 'tls', serverName: 'api.example.com' }), 'sni-exact');
  t.equal(pick({ transportProtocol: 'tls', serverName: 'www.example.com' }), 'sni-wild');
  t.equal(pick({ transportProtocol: 'tls', serverName: 'a.b.example.com' }), 'sni-wild', 'wildcards cover deeper names');
  t.equal(pick({ transportProtocol: 'tls', serverName: 'other.org' }), 'tls-any');
  t.equal(pick({ applicationProtocols: ['http/1.1'] }), 'http');
  t.equal(pick({ sourceIp: '10.1.1.1' }), 'from-10');
  t.equal(
    selectChain([chain('only', { server_names: ['a.com'] })], f({ serverName: 'b.com' })),
    undefined,
    'no match → no chain (default chain applies)',
  );
});

t.test('first-byte inspection', async (t) => {
  const hello = await new Promise<Buffer>((resolve) => {
    const srv = net.createServer((s) =>
      s.once('data', (d) => {
        resolve(d);
        s.destroy();
        srv.close();
      }),
    );
    srv.listen(0, '127.0.0.1', () => {
      const c = tls.connect({
        host: '127.0.0.1',
        port: (srv.address() as net.AddressInfo).port,
        servername: 'Shop.Example.com',
        ALPNProtocols: ['h2', 'http/1.1'],
      });
      c.on('error', () => undefined);
    });
  });
  t.same(
    parseClientHello(hello),
    { kind: 'tls', sni: 'shop.example.com', alpn: ['h2', 'http/1.1'] },
    'SNI (lower-cased) and ALPN of a real ClientHello',
  );
  t.same(parseClientHello(hello.subarray(0, 20)), { kind: 'more' }, 'a partial hello asks for more');
  t.same(sniffHttp(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n')), { kind: 'raw', alpn: ['h2c'] });
  t.same(sniffHttp(Buffer.from('PRI * HTTP/2')), { kind: 'more' });
  t.same(sniffHttp(Buffer.from('GET /x HTTP/1.1\r\nHost: a\r\n')), { kind: 'raw', alpn: ['http/1.1'] });
  t.same(
    sniffHttp(Buffer.from('GET /x HTTP/1.1\nHost: a\n')),
    { kind: 'raw', alpn: ['http/1.1'] },
    'a bare LF ends the request line: the codec answers it',
  );
  t.same(sniffHttp(Buffer.from(' ')), { kind: 'raw', alpn: [] }, 'white space first is no request line to wait for');
  t.same(sniffHttp(Buffer.from('GET /x HT')), { kind: 'more' });
  t.same(sniffHttp(Buffer.from('\x00\x01binary')), { kind: 'raw', alpn: [] });
  t.same(sniffHttpHost(Buffer.from('GET / HTTP/1.1\r\nHost: svc.ns:9080\r\n\r\n'), 80), { host: 'svc.ns', port: 9080 });
  t.same(sniffHttpHost(Buffer.from('GET http://a.b/x HTTP/1.1\r\nHost: c\r\n\r\n'), 80), { host: 'a.b', port: 80 }, 'absolute-form target wins');
  t.equal(sniffHttpHost(Buffer.from('GET / HTTP/1.1\r\nHost: a'), 80), 'more');
});

t.test('path normalisation', async (t) => {
  const o = { normalize: true, mergeSlashes: true, escapedSlashes: 'keep' as const };
  const cases: Array<[string, object, unknown]> = [
    ['/a/./b/../c?x=/../', o, { action: 'continue', path: '/a/c?x=/../' }],
    ['/a/%2E%2E/b', o, { action: 'continue', path: '/b' }],
    // Envoy keeps an escape it does not decode as written, and passes an invalid one (fixtures/path-header-cases.ts)
    ['/%7euser/%2f', o, { action: 'continue', path: '/~user/%2f' }],
    ['//a///b', o, { action: 'continue', path: '/a/b' }],
    ['/../../x', o, { action: 'continue', path: '/x' }],
    ['/a%zz', o, { action: 'continue', path: '/a%zz' }],
    ['/a%00', o, { action: 'reject' }],
    ['/a%2Fb', { ...o, escapedSlashes: 'reject' }, { action: 'reject' }],
    ['/a%2Fb', { ...o, escapedSlashes: 'forward' }, { action: 'continue', path: '/a/b' }],
    ['/a%2fb', { ...o, escapedSlashes: 'redirect' }, { action: 'redirect', path: '/a/b' }],
    ['/a%2Fb', { ...o, escapedSlashes: 'keep' }, { action: 'continue', path: '/a%2Fb' }],
  ];
  for (const [p, opts, want] of cases) t.same(processPath(p, opts as never), want, p);
});

t.test('stat tags and renderings', async (t) => {
  const def = new TagProducer();
  t.same(def.extract('cluster.backend.upstream_rq_total'), { name: 'cluster.upstream_rq_total', tags: [['envoy.cluster_name', 'backend']] });
  t.same(def.extract('cluster.backend.upstream_rq_503'), {
    name: 'cluster.upstream_rq',
    tags: [
      ['envoy.response_code', '503'],
      ['envoy.cluster_name', 'backend'],
    ],
  });
  t.same(def.extract('http.ingress.downstream_rq_2xx'), {
    name: 'http.downstream_rq_xx',
    tags: [
      ['envoy.response_code_class', '2'],
      ['envoy.http_conn_manager_prefix', 'ingress'],
    ],
  });
  t.same(def.extract('listener.0.0.0.0_8080.downstream_cx_active'), {
    name: 'listener.downstream_cx_active',
    tags: [['envoy.listener_address', '0.0.0.0_8080']],
  });
  t.same(def.extract('listener.[__]_80.downstream_cx_total').tags, [['envoy.listener_address', '[__]_80']]);
  t.same(def.extract('server.live'), { name: 'server.live', tags: [] });
  // Istio's bootstrap: cluster names with dots
  const istio = new TagProducer([{ name: 'cluster_name', regex: '^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)' }], false);
  t.same(istio.extract('cluster.outbound|80||a.demo.svc.cluster.local.upstream_rq_total'), {
    name: 'cluster.upstream_rq_total',
    tags: [['cluster_name', 'outbound|80||a.demo.svc.cluster.local']],
  });
  t.throws(() => new TagProducer([{ name: 'bad', regex: '(' }]), /stats_tags: invalid regex for tag 'bad'/);
  // Istio's template spells one tag with a lookahead (`^listener(?=\.)`), which RE2 rejects: stats tags are
  // matched in linear time too, so the agent's bootstrap spells it as an optional group.
  t.throws(
    () => new TagProducer([{ name: 'http_conn_manager_listener_prefix', regex: '^listener(?=\\.).*?\\.http\\.((.*)\\.)' }], false),
    /stats_tags: invalid regex for tag 'http_conn_manager_listener_prefix': error parsing regexp: invalid or unsupported Perl syntax: `\(\?=`/,
  );
  // Istio's bootstrap tags with POSIX classes
  const istioTags = new TagProducer(
    [
      { name: 'cluster_name', regex: '^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)' },
      { name: 'response_code', regex: '_rq(_(\\d{3}))$' },
      { name: 'response_code_class', regex: '_rq(_(\\dxx))$' },
      { name: 'http_conn_manager_listener_prefix', regex: '^listener(?:\\..*?)?\\.http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
      { name: 'http_conn_manager_prefix', regex: '^http\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
      { name: 'listener_address', regex: '^listener\\.(((?:[_.[:digit:]]*|[_\\[\\]aAbBcCdDeEfF[:digit:]]*))\\.)' },
    ],
    false,
  );
  t.same(istioTags.extract('cluster.outbound|80||a.demo.svc.cluster.local.upstream_rq_2xx'), {
    name: 'cluster.upstream_rq',
    tags: [
      ['cluster_name', 'outbound|80||a.demo.svc.cluster.local'],
      ['response_code_class', '2xx'],
    ],
  });
  t.same(istioTags.extract('listener.0.0.0.0_8080.downstream_cx_active'), {
    name: 'listener.downstream_cx_active',
    tags: [['listener_address', '0.0.0.0_8080']],
  });
  const s = new StatsStore();
  s.counter('cluster.backend.upstream_rq_total').inc(3);
  s.counter('cluster.backend.upstream_rq_200').inc(2);
  s.gauge('server.live').set(1);
  s.counter('unused.counter');
  s.histogram('cluster.backend.upstream_rq_time').record(3);
  const prom = renderPrometheus(s, def, { usedOnly: false, filter: undefined });
  t.match(prom, /# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total\{envoy_cluster_name="backend"\} 3\n/);
  t.match(prom, /envoy_cluster_upstream_rq\{envoy_response_code="200",envoy_cluster_name="backend"\} 2/);
  t.match(prom, /# TYPE envoy_server_live gauge\nenvoy_server_live 1\n/);
  t.match(prom, /envoy_cluster_upstream_rq_time_bucket\{envoy_cluster_name="backend",le="5"\} 1\n/);
  t.match(prom, /envoy_cluster_upstream_rq_time_count\{envoy_cluster_name="backend"\} 1/);
  const text = renderStatsText(s, { usedOnly: true, filter: searcher('back(end)') });
  t.equal(text.split('\n')[0], 'cluster.backend.upstream_rq_200: 2');
  t.notMatch(text, /unused/);
  t.notMatch(text, /server\.live/);
});

t.test('stats store: a name stats_matcher rejects gets a null stat, unless the engine reads it', async (t) => {
  const s = new StatsStore((n) => n.startsWith('server.'));
  const shown = s.counter('server.ok');
  shown.inc();
  const a = s.scope('cluster.x.').counter('upstream_rq_total');
  const b = s.scope('cluster.y.').counter('upstream_rq_total');
  t.ok(isNullStat(a) && a === b, "Envoy's null counter: one shared, nothing per cluster");
  a.inc(5);
  a.value = 7; // what a merge of worker stats writes
  t.equal(b.value, 0, 'writes to a null stat are dropped');
  t.equal(b.used, false);
  const g = s.gauge('cluster.x.upstream_rq_pending_active', true);
  t.notOk(isNullStat(g), 'a stat the engine reads is its own');
  g.inc();
  g.inc();
  t.equal(g.value, 2, 'and counts');
  t.ok(isNullStat(s.histogram('cluster.x.upstream_rq_time')));
  s.histogram('cluster.x.upstream_rq_time').record(3);
  t.same(
    s.allCounters().map((c) => [c.name, c.value]),
    [['server.ok', 1]],
    'only shown stats are stored',
  );
  t.same(s.allGauges(), []);
  t.same(s.allHistograms(), []);
  t.equal(s.value('cluster.x.upstream_rq_pending_active'), undefined);
});

t.test('RE2 matching (linear time, Go syntax)', async (t) => {
  t.ok(fullMatcher('(?P<id>[0-9]+)')('123'));
  t.notOk(fullMatcher('[0-9]+')('123a'), 'full match');
  t.ok(fullMatcher('(?i)abc')('ABC'));
  t.ok(fullMatcher('[[:alpha:]]+\\z')('abc'));
  t.ok(fullMatcher('\\Qa.b\\E')('a.b'));
  t.notOk(fullMatcher('\\Qa.b\\E')('axb'));
  t.ok(fullMatcher('\\pL+')('héllo'), 'unicode classes');
  t.ok(fullMatcher('.')('😀'), 'one code point, as RE2 on UTF-8');
  t.notOk(fullMatcher('a.c')('a\nc'), 'dot excludes newline without (?s)');
  t.throws(() => fullMatcher('a(?=b)'), /error parsing regexp/);
  t.equal(globalReplacer('^/(a)/(b)$', '/\\2/\\1/$')('/a/b'), '/b/a/$');
  t.equal(globalReplacer('x*', '-')('abc'), '-a-b-c-', 'empty matches as RE2::GlobalReplace');
  t.equal(globalReplacer('a(b*)', '<\\1\\\\\\0>')('xabbyaz'), 'x<bb\\abb>y<\\a>z', 'groups and an escaped backslash');
  t.throws(() => globalReplacer('a', '\\1'), /names group \\1/);
});

t.test('substitution formats', async (t) => {
  const info = new StreamInfo(conn({ remoteAddress: '1.2.3.4', remotePort: 5 }));
  info.responseCode = 503;
  info.setFlag('UH');
  info.upstreamCluster = 'c';
  const req = new RequestHeaders('GET', '/p', 'a.com', 'http', { 'user-agent': 'curl/8' });
  const out = formatLog(
    compileFormat(
      '%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %RESPONSE_CODE% %RESPONSE_FLAGS% "%REQ(USER-AGENT)%" "%REQ(X-MISSING)%" %UPSTREAM_CLUSTER% %DOWNSTREAM_REMOTE_ADDRESS% %REQ(:AUTHORITY):1% 100%%',
      'f',
    ),
    { info, request: req },
  );
  t.equal(out, 'GET /p 503 UH "curl/8" "-" c 1.2.3.4:5 a 100%');
  t.throws(() => compileFormat('%NOT_A_THING%', 'f'), /Not supported field in StreamInfo: NOT_A_THING/);
  t.throws(() => compileFormat('%REQ(x', 'f'), /Couldn't find valid command/);
});

t.test('loopback addresses (Envoy isLoopbackAddress)', async (t) => {
  for (const a of ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1']) t.ok(isLoopback(a), a);
  for (const a of ['10.1.2.3', '192.168.1.1', '8.8.8.8', 'fd00::1', '::2']) t.notOk(isLoopback(a), a);
});

t.test('bootstrap loading', async (t) => {
  const dir = tempDir(t, 'mesh-bootstrap-');
  const yaml = `node: {id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", cluster: a}
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 15000}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: xds-grpc
      endpoints: [{lb_endpoints: [{endpoint: {address: {pipe: {path: ./etc/mesh/proxy/XDS}}}}]}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {http2_protocol_options: {}}
dynamic_resources:
  ads_config: {api_type: GRPC, transport_api_version: V3, grpc_services: [{envoy_grpc: {cluster_name: xds-grpc}}]}
  cds_config: {ads: {}}
  lds_config: {ads: {}}
`;
  const f = path.join(dir, 'envoy.yaml');
  writeFileSync(f, yaml);
  const b = loadBootstrap({ configPath: f, serviceCluster: 'override' }).bootstrap;
  t.equal(b.node?.cluster, 'override', '--service-cluster overrides node.cluster');
  t.equal(b.staticResources?.clusters[0]?.name, 'xds-grpc');
  const merged = loadBootstrap({ configPath: f, configYaml: 'static_resources: {clusters: [{name: extra, connect_timeout: 2s}]}' }).bootstrap;
  t.same(
    merged.staticResources?.clusters.map((c) => c.name),
    ['xds-grpc', 'extra'],
    '--config-yaml merges, repeated fields append',
  );
  const bad = path.join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ static_resources: { clusters: [{ name: 'x', conect_timeout: '1s' }] } }));
  t.throws(
    () => loadBootstrap({ configPath: bad }),
    new BootstrapError(`${bad}: static_resources.clusters[0].conect_timeout: unknown field in envoy.config.cluster.v3.Cluster`),
  );
  t.doesNotThrow(() => loadBootstrap({ configPath: bad, allowUnknownFields: true }), '--allow-unknown-static-fields');
  t.throws(
    () =>
      parseBootstrap(
        {
          static_resources: {
            listeners: [{ name: 'l', filter_chains: [{ filters: [{ name: 'x', typed_config: { '@type': 'type.googleapis.com/acme.Unknown' } }] }] }],
          },
        },
        'b.json',
      ),
    /b\.json: static_resources\.listeners\[0\]\.filter_chains\[0\]\.filters\[0\]\.typed_config: Didn't find a registered implementation for type: 'acme\.Unknown'/,
  );
  t.throws(
    () => parseBootstrap({ admin: { address: { socket_address: { address: '127.0.0.1', port_value: 'abc' } } } }, 'b.json'),
    /b\.json: .*port_value/,
  );
  t.throws(
    () =>
      parseBootstrap(
        {
          dynamic_resources: { ads_config: { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'nope' } }] }, lds_config: { ads: {} } },
        },
        'b.json',
      ),
    /ApiConfigSource must have a statically defined non-EDS cluster: 'nope' does not exist/,
  );
  t.throws(
    () => parseBootstrap({ dynamic_resources: { lds_config: { ads: {} } } }, 'b.json'),
    /ads config source used but dynamic_resources\.ads_config is not set/,
  );
  t.throws(() => loadBootstrap({ configPath: path.join(dir, 'missing.yaml') }), /unable to read file: .*missing\.yaml: ENOENT/);
});

t.test('bootstrap sections the engine does not act on are dropped when their types are unknown', async (t) => {
  const warnings: string[] = [];
  const b = parseBootstrap(
    {
      overload_manager: {
        resource_monitors: [
          {
            name: 'envoy.resource_monitors.global_downstream_max_connections',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
              max_active_downstream_connections: 2147483647,
            },
          },
        ],
      },
      stats_config: { use_all_default_tags: false },
    },
    'istio.json',
    false,
    warnings,
  );
  t.equal(b.overloadManager, undefined);
  t.equal(b.statsConfig?.useAllDefaultTags, false, 'supported sections are kept');
  t.match(
    warnings[0],
    /^istio\.json: overload_manager is not supported by this proxy and was ignored \(overload_manager\.resource_monitors\[0\]\.typed_config: Didn't find a registered implementation for type: 'envoy\.extensions\.resource_monitors\.downstream_connections\.v3\.DownstreamConnectionsConfig'\)/,
  );
});
