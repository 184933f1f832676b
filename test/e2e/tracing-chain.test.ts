// Distributed tracing across gateway → A → B on static bootstraps of the shape istiod 1.26 sends (HCM `tracing`
// with envoy.tracers.zipkin, 128-bit trace ids, no shared span context, random/client/overall sampling; the
// gateway with spawn_upstream_span; sidecar listeners with traffic_direction INBOUND/OUTBOUND; route decorators).
// Three data-plane processes (the built engine, and the real Envoy where installed, on the same files), two apps
// that propagate the trace headers as Istio asks applications to, and a real Zipkin v2 collector (HTTP, JSON
// arrays, 202). Checked: one trace, parent ids chained gateway server → gateway client → A server → A client →
// B server, span kinds and names, the sampling decision carried in x-b3-sampled and x-request-id, 0 % sampling
// reporting nothing, x-client-trace-id and x-envoy-force-trace forcing a trace; and the engine's spans carrying
// the same tags as Envoy's.
import t, { type Test } from 'tap';
import http from 'node:http';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing, type DataPlane } from '../helpers/envoy';
import { loopback, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePorts } from '../helpers/ports';
import { httpGet, type Reply } from '../helpers/gateway';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** A Zipkin v2 span as the collector receives it. */
interface ZSpan {
  traceId: string;
  id: string;
  parentId?: string;
  kind: 'CLIENT' | 'SERVER';
  name?: string;
  timestamp: number;
  duration: number;
  localEndpoint: { serviceName?: string; ipv4?: string; port: number };
  tags?: Record<string, string>;
}

/** A Zipkin collector: POST /api/v2/spans with a JSON array, answered 202 (Zipkin's answer). */
async function zipkinCollector(t: Test): Promise<{ port: number; spans: ZSpan[]; hosts: string[] }> {
  const spans: ZSpan[] = [];
  const hosts: string[] = [];
  const srv = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/api/v2/spans' && req.headers['content-type'] === 'application/json') {
        spans.push(...(JSON.parse(body) as ZSpan[]));
        hosts.push(req.headers.host ?? '');
        res.writeHead(202);
      } else res.writeHead(400);
      res.end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return { port: (srv.address() as { port: number }).port, spans, hosts };
}

const PROPAGATED = [
  'x-request-id',
  'x-b3-traceid',
  'x-b3-spanid',
  'x-b3-parentspanid',
  'x-b3-sampled',
  'x-b3-flags',
  'b3',
  'traceparent',
  'tracestate',
];

/** An app: B answers with the headers it got; A calls `next` (its outbound listener) passing the trace headers on. */
async function app(t: Test, next?: number): Promise<{ port: number; seen: http.IncomingHttpHeaders[] }> {
  const seen: http.IncomingHttpHeaders[] = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.headers);
    if (!next) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.headers));
      return;
    }
    const headers: Record<string, string> = { host: 'b.default.svc.cluster.local' };
    for (const k of PROPAGATED) if (typeof req.headers[k] === 'string') headers[k] = req.headers[k] as string;
    const up = http.request({ host: '127.0.0.1', port: next, path: req.url, headers, agent: false }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => {
      res.writeHead(502);
      res.end();
    });
    up.end();
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => srv.close(() => r())));
  return { port: (srv.address() as { port: number }).port, seen };
}

interface ListenerSpec {
  name: string;
  port: number;
  direction?: 'INBOUND' | 'OUTBOUND';
  cluster: string;
  decorator: string;
  spawnUpstreamSpan?: boolean;
}

/** The HCM tracing block istiod's zipkinConfig/configureSampling write. */
function tracing(sampling: number, spawn: boolean): object {
  return {
    provider: {
      name: 'envoy.tracers.zipkin',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.config.trace.v3.ZipkinConfig',
        collector_cluster: 'zipkin',
        collector_endpoint: '/api/v2/spans',
        collector_endpoint_version: 'HTTP_JSON',
        collector_hostname: 'zipkin.istio-system.svc.cluster.local',
        trace_id_128bit: true,
        shared_span_context: false,
      },
    },
    client_sampling: { value: 100 },
    random_sampling: { value: sampling },
    overall_sampling: { value: 100 },
    custom_tags: [
      { tag: 'istio.canonical_service', literal: { value: 'chain' } },
      { tag: 'x-tenant', request_header: { name: 'x-tenant', default_value: 'none' } },
    ],
    ...(spawn ? { spawn_upstream_span: true } : {}),
  };
}

function bootstrap(node: string, admin: number, listeners: ListenerSpec[], clusters: object[], sampling: number): object {
  return {
    node: { id: `sidecar~127.0.0.1~${node}.default~default.svc.cluster.local`, cluster: `${node}.default` },
    admin: { address: loopback(admin) },
    static_resources: {
      listeners: listeners.map((l) => ({
        name: l.name,
        address: loopback(l.port),
        ...(l.direction ? { traffic_direction: l.direction } : {}),
        filter_chains: [
          {
            filters: [
              {
                name: 'envoy.filters.network.http_connection_manager',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                  stat_prefix: l.name,
                  // Envoy 1.36 counts no address as internal unless told (x-envoy-force-trace is honoured on internal requests only)
                  internal_address_config: {
                    cidr_ranges: [
                      { address_prefix: '127.0.0.0', prefix_len: 8 },
                      { address_prefix: '10.0.0.0', prefix_len: 8 },
                    ],
                  },
                  tracing: tracing(sampling, l.spawnUpstreamSpan ?? false),
                  request_id_extension: {
                    typed_config: {
                      '@type': 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig',
                      use_request_id_for_trace_sampling: true,
                    },
                  },
                  route_config: {
                    name: l.name,
                    virtual_hosts: [
                      {
                        name: 'all',
                        domains: ['*'],
                        routes: [{ match: { prefix: '/' }, route: { cluster: l.cluster }, decorator: { operation: l.decorator } }],
                      },
                    ],
                  },
                  http_filters: [
                    {
                      name: 'envoy.filters.http.router',
                      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                    },
                  ],
                },
              },
            ],
          },
        ],
      })),
      clusters,
    },
  };
}

interface Chain {
  get: (p: string, h?: Record<string, string>) => Promise<Reply>;
  /** The gateway's counters whose names contain `tracing` (admin /stats). */
  tracingStats: () => Promise<Record<string, number>>;
}

/** gateway → A (inbound → app A → outbound) → B (inbound → app B), all tracing to `zipkin` with `sampling` %. */
async function startChain(t: Test, plane: DataPlane, zipkin: number, sampling: number): Promise<Chain> {
  const appB = await app(t);
  // every port at once, all different (listeners and admins are bound later, one process after the other)
  const { bIn, aIn, aOut, gw, bAdmin, aAdmin, gwAdmin } = await freePorts('bIn', 'aIn', 'aOut', 'gw', 'bAdmin', 'aAdmin', 'gwAdmin');
  const admins: Record<string, number> = { b: bAdmin, a: aAdmin, ingressgateway: gwAdmin };
  const appA = await app(t, aOut);
  const z = loopbackCluster('zipkin', zipkin);
  const run = async (name: string, listeners: ListenerSpec[], clusters: object[], port: number) => {
    const r = await runStatic(t, plane, bootstrap(name, admins[name]!, listeners, [...clusters, z], sampling), port, '/ready');
    if ('refused' in r) throw new Error(`${plane} refused the ${name} bootstrap:\n${r.refused}`);
  };
  await run(
    'b',
    [{ name: 'inbound', port: bIn, direction: 'INBOUND', cluster: 'app', decorator: 'b.default.svc.cluster.local:80/*' }],
    [loopbackCluster('app', appB.port)],
    bIn,
  );
  await run(
    'a',
    [
      { name: 'inbound', port: aIn, direction: 'INBOUND', cluster: 'app', decorator: 'a.default.svc.cluster.local:80/*' },
      { name: 'outbound', port: aOut, direction: 'OUTBOUND', cluster: 'outbound|80||b', decorator: 'b.default.svc.cluster.local:80/*' },
    ],
    [loopbackCluster('app', appA.port), loopbackCluster('outbound|80||b', bIn)],
    aIn,
  );
  await run(
    'ingressgateway',
    [{ name: 'gateway', port: gw, cluster: 'outbound|80||a', decorator: 'a.default.svc.cluster.local:80/*', spawnUpstreamSpan: true }],
    [loopbackCluster('outbound|80||a', aIn)],
    gw,
  );
  const tracingStats = async () => {
    const text = (await httpGet(gwAdmin, '/stats?filter=tracing')).body;
    return Object.fromEntries(text.split('\n').flatMap((l) => (/^(\S+): (\d+)$/.exec(l) ? [[l.split(': ')[0]!, Number(l.split(': ')[1])]] : [])));
  };
  return { get: (p, h) => httpGet(gw, p, h), tracingStats };
}

/** What B's app saw of the trace of one request. */
function seenByB(body: string): Record<string, string> {
  return JSON.parse(body) as Record<string, string>;
}

const ROLES = ['gateway server', 'gateway client', 'A server', 'A client', 'B server'] as const;

/** The spans of one trace ordered gateway server → B server by following parent ids; fails on any gap. */
function chainOf(t: Test, spans: ZSpan[]): ZSpan[] {
  const root = spans.filter((s) => !s.parentId);
  t.equal(root.length, 1, 'one root span');
  const out: ZSpan[] = [];
  let cur = root[0];
  while (cur) {
    out.push(cur);
    const id: string = cur.id;
    const kids = spans.filter((s) => s.parentId === id);
    t.ok(kids.length <= 1, `one child of ${id}`);
    cur = kids[0];
  }
  return out;
}

t.test('tracing: gateway → A → B, parentage, sampling, forced traces (engine and Envoy, Zipkin)', { timeout: 240_000 }, async (t) => {
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);
  const tagsByPlane = new Map<DataPlane, string[][]>();
  for (const plane of dataPlanes()) {
    const z = await zipkinCollector(t);
    const sampled = await startChain(t, plane, z.port, 100);
    const unsampled = await startChain(t, plane, z.port, 0);

    const full = await sampled.get('/hello?x=1', { 'user-agent': 'tracing-test', 'x-tenant': 'blue' });
    t.equal(full.status, 200, `${plane}: the request went through`);
    const b = seenByB(full.body);
    t.equal(b['x-b3-sampled'], '1', `${plane}: B is told the trace is sampled`);
    t.match(b['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-9[0-9a-f]{3}-/, `${plane}: x-request-id carries "sampled" (9)`);
    t.notOk(b['x-envoy-decorator-operation'], `${plane}: the decorator header stops at the inbound proxy`);
    t.equal(full.headers['x-envoy-decorator-operation'], 'a.default.svc.cluster.local:80/*', `${plane}: the gateway tells the client its operation`);
    const none = await unsampled.get('/quiet');
    const bNone = seenByB(none.body);
    t.equal(bNone['x-b3-sampled'], '0', `${plane}: at 0 % B is told not sampled`);
    t.match(bNone['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-4/, `${plane}: x-request-id carries "not traced" (4)`);
    const client = await unsampled.get('/client', { 'x-client-trace-id': 'ctid-1' });
    // x-envoy-force-trace counts on internal requests only (Envoy strips it from external ones): one XFF hop in 10/8
    const forced = await unsampled.get('/forced', { 'x-envoy-force-trace': 'true', 'x-forwarded-for': '10.1.2.3' });
    t.match(seenByB(client.body)['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-b/, `${plane}: x-client-trace-id forces a trace (b)`);
    t.match(seenByB(forced.body)['x-request-id'], /^[0-9a-f]{8}-[0-9a-f]{4}-a/, `${plane}: x-envoy-force-trace forces a trace (a)`);
    t.equal(forced.headers['x-request-id'], seenByB(forced.body)['x-request-id'], `${plane}: a forced trace's request id comes back`);
    t.notOk(full.headers['x-request-id'], `${plane}: other request ids do not`);

    // the reporters flush every 5 s (or at 5 spans)
    const traceOf = (body: string) => seenByB(body)['x-b3-traceid']!;
    const want = [traceOf(full.body), traceOf(client.body), traceOf(forced.body)];
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && want.some((id) => z.spans.filter((s) => s.traceId === id).length < 5))
      await new Promise((r) => setTimeout(r, 200));
    await new Promise((r) => setTimeout(r, 500));
    t.ok(
      z.hosts.every((h) => h === 'zipkin.istio-system.svc.cluster.local'),
      `${plane}: reports name the collector_hostname`,
    );
    t.equal(z.spans.filter((s) => s.traceId === traceOf(none.body)).length, 0, `${plane}: nothing reported at 0 %`);
    t.equal(traceOf(full.body).length, 32, `${plane}: 128-bit trace ids`);

    const chain = chainOf(
      t,
      z.spans.filter((s) => s.traceId === traceOf(full.body)),
    );
    t.same(
      chain.map((s) => [s.kind, s.localEndpoint.serviceName, s.name]),
      [
        ['SERVER', 'ingressgateway.default', 'a.default.svc.cluster.local:80/*'],
        ['CLIENT', 'ingressgateway.default', 'router outbound|80||a egress'],
        ['SERVER', 'a.default', 'a.default.svc.cluster.local:80/*'],
        ['CLIENT', 'a.default', 'b.default.svc.cluster.local:80/*'],
        ['SERVER', 'b.default', 'b.default.svc.cluster.local:80/*'],
      ],
      `${plane}: ${ROLES.join(' → ')}: kinds, services, names`,
    );
    t.equal(chain.at(-1)!.id, b['x-b3-spanid'], `${plane}: B's app is told B's server span`);
    const rid = b['x-request-id'];
    t.ok(
      chain.every(
        (s, i) => (i === 1 || s.tags?.['guid:x-request-id'] === rid) && s.tags?.['istio.canonical_service'] === 'chain' && s.localEndpoint.port === 0,
      ),
      `${plane}: every span has the custom tag, every span but the router's child the request id`,
    );
    t.same(
      chain.map((s) => [s.tags?.['http.status_code'], s.tags?.['x-tenant'] ?? '(none)', s.tags?.['upstream_cluster']]),
      [
        ['200', 'blue', 'outbound|80||a'],
        ['200', 'blue', 'outbound|80||a'],
        ['200', 'blue', 'app'],
        ['200', 'none', 'outbound|80||b'],
        ['200', 'none', 'app'],
      ],
      `${plane}: status, header tag (its default where app A did not pass x-tenant on), upstream cluster`,
    );
    t.equal(chain[0]!.tags?.['http.url'], `http://127.0.0.1:${chain[0]!.tags?.['http.url']?.split(':')[2]?.split('/')[0]}/hello?x=1`);
    t.equal(chain[0]!.tags?.['user_agent'], 'tracing-test');
    for (const [what, body, tag] of [
      ['x-client-trace-id', client.body, 'guid:x-client-trace-id'],
      ['x-envoy-force-trace', forced.body, undefined],
    ] as const) {
      const spans = z.spans.filter((s) => s.traceId === traceOf(body));
      t.equal(spans.length, 5, `${plane}: ${what} at 0 %: all five spans reported`);
      if (tag) t.equal(spans.find((s) => !s.parentId)?.tags?.[tag], 'ctid-1', `${plane}: ${tag} tag`);
    }
    tagsByPlane.set(
      plane,
      chain.map((s) => Object.keys(s.tags ?? {}).sort()),
    );
    // Envoy's tracing stats: the HCM's decisions (http.<prefix>.tracing.*) and the Zipkin reporter's (tracing.zipkin.*)
    const st = await unsampled.tracingStats();
    t.equal(st['http.gateway.tracing.client_enabled'], 1, `${plane}: one decision forced by the client`);
    t.equal(st['http.gateway.tracing.service_forced'], 1, `${plane}: one forced by x-envoy-force-trace`);
    t.equal(st['http.gateway.tracing.random_sampling'], 0, `${plane}: none sampled at 0 %`);
    t.ok(st['http.gateway.tracing.not_traceable']! >= 1, `${plane}: the rest not traceable`);
    t.ok(
      st['tracing.zipkin.spans_sent']! >= 4 && st['tracing.zipkin.reports_sent']! >= 1,
      `${plane}: spans and reports sent (${JSON.stringify(st)})`,
    );
  }
  const engine = tagsByPlane.get('engine');
  const envoy = tagsByPlane.get('envoy');
  if (engine && envoy) t.same(engine, envoy, 'the engine sets the tags Envoy sets, span by span');
});
