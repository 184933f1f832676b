// HTTP behaviour through the engine with real sockets: fault, CORS and RBAC filters (per-route
// configs too), retries, timeouts, circuit breakers, outlier detection, access logs, path
// normalisation, forwarded headers, rewrites and WebSocket upgrades.
import os from 'node:os';
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { JsonObject } from '@bufbuild/protobuf';
import { adminGet, backend, hcm, request, sock, startProxy, statValue, type RunningEngine, staticClusterJson } from './helpers';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

const FAULT = 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault';
const CORS = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors';
const CORS_POLICY = 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy';
const RBAC = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';

async function proxy(t: { teardown(f: () => unknown): void }, h: JsonObject, clusters: JsonObject[]): Promise<{ p: RunningEngine; port: number }> {
  const port = await freePort();
  const p = await startProxy({
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: { listeners: [{ name: 'l', address: sock('127.0.0.1', port), filter_chains: [{ filters: [h] }] }], clusters },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  return { p, port };
}

const vhost = (routes: JsonObject[], extra: JsonObject = {}) => ({ name: 'r', virtual_hosts: [{ name: 'v', domains: ['*'], routes, ...extra }] });

t.test('fault filter: per-route abort and delay', async (t) => {
  const b = await backend('b');
  t.teardown(() => b.close());
  const { p, port } = await proxy(
    t,
    hcm({
      httpFilters: [{ name: 'envoy.filters.http.fault', typed_config: { '@type': FAULT } }],
      routeConfig: vhost([
        {
          match: { prefix: '/abort' },
          route: { cluster: 'b' },
          typed_per_filter_config: {
            'envoy.filters.http.fault': { '@type': FAULT, abort: { http_status: 503, percentage: { numerator: 100, denominator: 'HUNDRED' } } },
          },
        },
        {
          match: { prefix: '/delay' },
          route: { cluster: 'b' },
          typed_per_filter_config: {
            'envoy.filters.http.fault': {
              '@type': FAULT,
              delay: { fixed_delay: '0.3s', percentage: { numerator: 1000000, denominator: 'MILLION' } },
            },
          },
        },
        {
          match: { prefix: '/never' },
          route: { cluster: 'b' },
          typed_per_filter_config: {
            'envoy.filters.http.fault': { '@type': FAULT, abort: { http_status: 500, percentage: { numerator: 0, denominator: 'HUNDRED' } } },
          },
        },
        { match: { prefix: '/' }, route: { cluster: 'b' } },
      ]),
    }),
    [staticClusterJson('b', [b.port])],
  );
  const a = await request(port, '/abort');
  t.equal(a.status, 503);
  t.equal(a.body, 'fault filter abort');
  t.equal(b.seen.length, 0, 'aborted requests never reach the backend');
  const start = Date.now();
  const d = await request(port, '/delay');
  t.equal(d.status, 200);
  t.ok(Date.now() - start >= 290, 'delayed by the fixed delay');
  t.equal((await request(port, '/never')).status, 200, '0% never aborts');
  t.equal((await request(port, '/plain')).status, 200, 'routes without per-route config are untouched');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'http.ingress.fault.aborts_injected'), 1);
  t.equal(statValue(stats, 'http.ingress.fault.delays_injected'), 1);
});

t.test('cors filter', async (t) => {
  const b = await backend('b');
  t.teardown(() => b.close());
  const { port } = await proxy(
    t,
    hcm({
      httpFilters: [{ name: 'envoy.filters.http.cors', typed_config: { '@type': CORS } }],
      routeConfig: vhost([
        {
          match: { prefix: '/' },
          route: { cluster: 'b' },
          typed_per_filter_config: {
            'envoy.filters.http.cors': {
              '@type': CORS_POLICY,
              allow_origin_string_match: [{ exact: 'https://app.example.com' }],
              allow_methods: 'GET,POST',
              allow_headers: 'x-token',
              expose_headers: 'x-backend',
              max_age: '60',
              allow_credentials: true,
            },
          },
        },
      ]),
    }),
    [staticClusterJson('b', [b.port])],
  );
  const pre = await request(port, '/x', {
    method: 'OPTIONS',
    headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST' },
  });
  t.equal(pre.status, 200);
  t.equal(pre.headers['access-control-allow-origin'], 'https://app.example.com');
  t.equal(pre.headers['access-control-allow-methods'], 'GET,POST');
  t.equal(pre.headers['access-control-allow-headers'], 'x-token');
  t.equal(pre.headers['access-control-max-age'], '60');
  t.equal(pre.headers['access-control-allow-credentials'], 'true');
  t.equal(pre.headers['access-control-expose-headers'], 'x-backend', 'Envoy 1.36 exposes headers on the preflight too');
  t.equal(b.seen.length, 0, 'the proxy answered the preflight itself');
  const simple = await request(port, '/x', { headers: { origin: 'https://app.example.com' } });
  t.equal(simple.headers['access-control-allow-origin'], 'https://app.example.com');
  t.equal(simple.headers['access-control-expose-headers'], 'x-backend');
  const other = await request(port, '/x', {
    method: 'OPTIONS',
    headers: { origin: 'https://evil.example.com', 'access-control-request-method': 'POST' },
  });
  t.equal(other.headers['access-control-allow-origin'], undefined, 'a foreign origin gets no CORS headers');
  t.equal(b.seen.length, 2, 'and its preflight is forwarded');
});

t.test('rbac filter', async (t) => {
  const b = await backend('b');
  t.teardown(() => b.close());
  const { p, port } = await proxy(
    t,
    hcm({
      httpFilters: [
        {
          name: 'envoy.filters.http.rbac',
          typed_config: {
            '@type': RBAC,
            rules: {
              action: 'DENY',
              policies: {
                'no-admin': {
                  permissions: [{ url_path: { path: { prefix: '/admin' } } }],
                  principals: [{ not_id: { header: { name: 'x-role', string_match: { exact: 'admin' } } } }],
                },
              },
            },
            shadow_rules: {
              action: 'ALLOW',
              policies: { gets: { permissions: [{ header: { name: ':method', string_match: { exact: 'GET' } } }], principals: [{ any: true }] } },
            },
          },
        },
      ],
      routeConfig: vhost([{ match: { prefix: '/' }, route: { cluster: 'b' } }]),
    }),
    [staticClusterJson('b', [b.port])],
  );
  const denied = await request(port, '/admin/users');
  t.equal(denied.status, 403);
  t.equal(denied.body, 'RBAC: access denied');
  t.equal((await request(port, '/admin/users', { headers: { 'x-role': 'admin' } })).status, 200);
  t.equal((await request(port, '/public')).status, 200);
  t.equal((await request(port, '/public', { method: 'DELETE' })).status, 200, 'shadow rules never block');
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'http.ingress.rbac.denied'), 1);
  t.equal(statValue(stats, 'http.ingress.rbac.allowed'), 3);
  t.equal(statValue(stats, 'http.ingress.rbac.shadow_denied'), 1);
});

t.test('retries, timeouts and connect failures', async (t) => {
  let calls = 0;
  const flaky = await backend('flaky', (req, res) => {
    calls++;
    if (req.url?.startsWith('/flaky') && calls % 3 !== 0) {
      res.statusCode = 503;
      res.end('busy');
      return;
    }
    if (req.url?.startsWith('/slow')) {
      setTimeout(() => res.end('slow'), 400);
      return;
    }
    res.end('ok');
  });
  t.teardown(() => flaky.close());
  const dead = await freePort();
  const { p, port } = await proxy(
    t,
    hcm({
      routeConfig: vhost([
        { match: { prefix: '/flaky' }, route: { cluster: 'flaky', retry_policy: { retry_on: '5xx', num_retries: 3 } } },
        { match: { prefix: '/noretry' }, route: { cluster: 'flaky' } },
        { match: { prefix: '/slow' }, route: { cluster: 'flaky', timeout: '0.1s' } },
        { match: { prefix: '/dead' }, route: { cluster: 'dead' } },
        {
          match: { prefix: '/mixed' },
          route: {
            cluster: 'mixed',
            retry_policy: {
              retry_on: 'connect-failure',
              num_retries: 2,
              retry_host_predicate: [
                {
                  name: 'envoy.retry_host_predicates.previous_hosts',
                  typed_config: { '@type': 'type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate' },
                },
              ],
            },
          },
        },
      ]),
    }),
    [
      staticClusterJson('flaky', [flaky.port]),
      staticClusterJson('dead', [dead]),
      staticClusterJson('mixed', [dead, flaky.port], { lb_policy: 'ROUND_ROBIN' }),
    ],
  );
  const r = await request(port, '/flaky');
  t.equal(r.status, 200, 'two 503s retried into a success');
  t.equal(r.body, 'ok');
  const slow = await request(port, '/slow');
  t.equal(slow.status, 504);
  t.equal(slow.body, 'upstream request timeout');
  const d = await request(port, '/dead');
  t.equal(d.status, 503);
  t.equal(d.body, 'upstream connect error or disconnect/reset before headers. reset reason: connection failure');
  for (let i = 0; i < 4; i++) t.equal((await request(port, '/mixed')).status, 200, `connect failure retried on the other host (${i})`);
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'cluster.flaky.upstream_rq_retry'), 2);
  t.equal(statValue(stats, 'cluster.flaky.upstream_rq_retry_success'), 1);
  t.equal(statValue(stats, 'cluster.flaky.upstream_rq_timeout'), 1);
  t.ok((statValue(stats, 'cluster.dead.upstream_cx_connect_fail') ?? 0) >= 1);
});

t.test('circuit breaker overflow and outlier ejection', async (t) => {
  const slow = await backend('slow', (_req, res) => setTimeout(() => res.end('done'), 300));
  const bad = await backend('bad', (_req, res) => {
    res.statusCode = 500;
    res.end('broken');
  });
  const good = await backend('good');
  t.teardown(() => Promise.all([slow.close(), bad.close(), good.close()]).then(() => undefined));
  const { p, port } = await proxy(
    t,
    hcm({
      routeConfig: vhost([
        { match: { prefix: '/slow' }, route: { cluster: 'limited' } },
        { match: { prefix: '/' }, route: { cluster: 'pair' } },
      ]),
    }),
    [
      staticClusterJson('limited', [slow.port], { circuit_breakers: { thresholds: [{ max_requests: 1 }] } }),
      staticClusterJson('pair', [bad.port, good.port], {
        lb_policy: 'ROUND_ROBIN',
        outlier_detection: { consecutive_5xx: 2, base_ejection_time: '30s', max_ejection_percent: 50, interval: '1s' },
      }),
    ],
  );
  const [a, b] = await Promise.all([request(port, '/slow'), request(port, '/slow')]);
  const statuses = [a.status, b.status].sort();
  t.same(statuses, [200, 503], 'one request over max_requests overflows');
  const overflowed = a.status === 503 ? a : b;
  t.equal(overflowed.headers['x-envoy-overloaded'], 'true');
  t.match(overflowed.body, /reset reason: overflow/);
  const codes: number[] = [];
  for (let i = 0; i < 12; i++) codes.push((await request(port, '/x')).status);
  t.same(codes.slice(-6), [200, 200, 200, 200, 200, 200], 'after two 500s the bad host is ejected');
  t.equal(codes.filter((c) => c === 500).length, 2);
  const clusters = (await adminGet(p, '/clusters')).body;
  t.match(clusters, new RegExp(`pair::127\\.0\\.0\\.1:${bad.port}::health_flags::/failed_outlier_check`));
  t.match(clusters, new RegExp(`pair::127\\.0\\.0\\.1:${good.port}::health_flags::healthy`));
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'cluster.pair.outlier_detection.ejections_enforced_consecutive_5xx'), 1);
  t.equal(statValue(stats, 'cluster.limited.upstream_rq_pending_overflow'), 1);
});

// ConnectionManagerUtility::mutateRequestHeaders / cleanInternalHeaders: a request not found internal loses
// Envoy's control headers even where use_remote_address is off (a sidecar's inbound), the three edge-only ones
// excepted; without use_remote_address only a single XFF address can make it internal; x-envoy-internal is the
// proxy's word alone
t.test('x-envoy-* sanitising without use_remote_address (a sidecar inbound): external unless one internal XFF address', async (t) => {
  const b = await backend('b');
  t.teardown(() => b.close());
  const { port } = await proxy(
    t,
    hcm({
      statPrefix: 'inbound',
      extra: { internal_address_config: { cidr_ranges: [{ address_prefix: '10.0.0.0', prefix_len: 8 }] } },
      routeConfig: vhost([{ match: { prefix: '/' }, route: { cluster: 'b' } }]),
    }),
    [staticClusterJson('b', [b.port])],
  );
  const control = {
    'x-envoy-ip-tags': 'office',
    'x-envoy-expected-rq-timeout-ms': '99',
    'x-envoy-upstream-rq-timeout-ms': '7',
    'x-envoy-internal': 'true',
    'x-envoy-downstream-service-node': 'caller',
  };
  await request(port, '/', { headers: control });
  let seen = b.seen.at(-1)!.headers;
  t.equal(seen['x-envoy-ip-tags'], undefined, 'external: control headers dropped');
  t.equal(seen['x-envoy-upstream-rq-timeout-ms'], undefined);
  t.equal(seen['x-envoy-expected-rq-timeout-ms'], '15000', "the router's own");
  t.equal(seen['x-envoy-internal'], undefined, "the client's x-envoy-internal dropped");
  t.equal(seen['x-envoy-downstream-service-node'], 'caller', 'not an edge request: edge-only headers kept');
  t.equal(seen['x-envoy-external-address'], undefined);
  await request(port, '/', { headers: { ...control, 'x-forwarded-for': '10.1.2.3' } });
  seen = b.seen.at(-1)!.headers;
  t.equal(seen['x-envoy-internal'], 'true', 'one internal XFF address: internal');
  t.equal(seen['x-envoy-ip-tags'], 'office', 'and keeps them');
  await request(port, '/', { headers: { ...control, 'x-forwarded-for': '10.1.2.3,10.4.5.6' } });
  t.equal(b.seen.at(-1)!.headers['x-envoy-internal'], undefined, 'two XFF addresses: external');
});

t.test('access log, path normalisation, forwarded headers and rewrites', async (t) => {
  const dir = tempDir(t, 'mesh-access-');
  const log = path.join(dir, 'access.log');
  const b = await backend('b');
  t.teardown(() => b.close());
  const { port } = await proxy(
    t,
    hcm({
      statPrefix: 'edge',
      extra: {
        use_remote_address: true,
        normalize_path: true,
        merge_slashes: true,
        server_name: 'istio-envoy',
        access_log: [
          {
            name: 'envoy.access_loggers.file',
            typed_config: { '@type': 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog', path: log },
          },
        ],
      },
      routeConfig: vhost([
        { match: { prefix: '/api/' }, route: { cluster: 'b', prefix_rewrite: '/v2/', host_rewrite_literal: 'backend.internal' } },
        { match: { prefix: '/' }, route: { cluster: 'b' } },
      ]),
    }),
    [staticClusterJson('b', [b.port])],
  );
  const r = await request(port, '/a/../b//c', { headers: { 'x-forwarded-for': '203.0.113.9', 'user-agent': 'probe/1' } });
  t.equal(r.body, 'b /b/c', 'dot segments removed and slashes merged before routing');
  t.equal(r.headers.server, 'istio-envoy');
  const seen = b.seen.at(-1)!;
  // for a loopback peer Envoy appends its own first non-loopback IPv4 address (LocalInfo's), 127.0.0.1 without one
  const own =
    Object.values(os.networkInterfaces())
      .flatMap((l) => l ?? [])
      .find((a) => a.family === 'IPv4' && !a.internal)?.address ?? '127.0.0.1';
  t.equal(seen.headers['x-forwarded-for'], `203.0.113.9,${own}`, 'use_remote_address appends the peer');
  // Envoy ≥ 1.33: with no internal_address_config no peer is internal, loopback included
  t.equal(seen.headers['x-envoy-internal'], undefined);
  t.equal(seen.headers['x-envoy-external-address'], '127.0.0.1');
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  t.match(String(seen.headers['x-request-id']), /^[0-9a-f-]{36}$/);
  t.equal(seen.headers['x-envoy-expected-rq-timeout-ms'], '15000');
  await request(port, '/api/items?x=1');
  const rw = b.seen.at(-1)!;
  t.equal(rw.url, '/v2/items?x=1');
  t.equal(rw.headers.host, 'backend.internal');
  t.equal(rw.headers['x-envoy-original-path'], '/api/items?x=1');
  const lines = await waitForValue(
    'access log lines',
    () => {
      try {
        const l = readFileSync(log, 'utf8').trim().split('\n');
        return l.length >= 2 ? l : undefined;
      } catch {
        return undefined;
      }
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.match(
    lines[0]!,
    new RegExp(
      String.raw`^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] "GET \/b\/c HTTP\/1\.1" 200 - 0 \d+ \d+ \d+ "203\.0\.113\.9,${own.replace(/\./g, '\\.')}" "probe\/1" "[0-9a-f-]{36}" "127\.0\.0\.1:\d+" "127\.0\.0\.1:\d+"$`,
    ),
  );
  t.match(lines[1]!, /"GET \/api\/items\?x=1 HTTP\/1\.1" 200/, 'the original path is logged');
});

t.test('WebSocket upgrade is spliced through when configured, refused otherwise', async (t) => {
  const ws = http.createServer();
  ws.on('upgrade', (req, socket: net.Socket) => {
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nx-path: ${req.url}\r\n\r\n`);
    socket.on('data', (d) => socket.write(`echo:${d}`));
  });
  await new Promise<void>((r) => ws.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    ws.closeAllConnections();
    ws.close();
  });
  const wsPort = (ws.address() as net.AddressInfo).port;
  const { port } = await proxy(
    t,
    hcm({
      extra: { upgrade_configs: [{ upgrade_type: 'websocket' }] },
      routeConfig: vhost([
        { match: { prefix: '/no' }, route: { cluster: 'ws', upgrade_configs: [{ upgrade_type: 'websocket', enabled: false }] } },
        { match: { prefix: '/' }, route: { cluster: 'ws' } },
      ]),
    }),
    [staticClusterJson('ws', [wsPort])],
  );
  const talk = (p: string) =>
    new Promise<string>((resolve, reject) => {
      const c = net.connect(port, '127.0.0.1', () => c.write(`GET ${p} HTTP/1.1\r\nhost: x\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\r\n`));
      let buf = '';
      c.on('data', (d) => {
        buf += d;
        if (buf.includes('\r\n\r\n') && !buf.includes('echo') && buf.startsWith('HTTP/1.1 101')) c.write('ping');
        if (buf.includes('echo:ping') || (buf.startsWith('HTTP/1.1 4') && buf.includes('\r\n\r\n'))) {
          c.destroy();
          resolve(buf);
        }
      });
      c.on('error', reject);
    });
  const ok = await talk('/chat');
  t.match(ok, /^HTTP\/1\.1 101 Switching Protocols/);
  t.match(ok, /x-path: \/chat/);
  t.match(ok, /echo:ping$/, 'bytes flow both ways after the upgrade');
  t.match(await talk('/no'), /^HTTP\/1\.1 403/, 'route disables the upgrade');
});

t.test('consistent hashing by header sticks a key to one host', async (t) => {
  const bs = await Promise.all(['h1', 'h2', 'h3'].map((n) => backend(n)));
  t.teardown(() => Promise.all(bs.map((b) => b.close())).then(() => undefined));
  const { port } = await proxy(
    t,
    hcm({ routeConfig: vhost([{ match: { prefix: '/' }, route: { cluster: 'ring', hash_policy: [{ header: { header_name: 'x-user' } }] } }]) }),
    [
      staticClusterJson(
        'ring',
        bs.map((b) => b.port),
        { lb_policy: 'RING_HASH' },
      ),
    ],
  );
  const hostFor = async (user: string) => (await request(port, '/', { headers: { 'x-user': user } })).body.split(' ')[0]!;
  const spread = new Set<string>();
  for (const user of ['ann', 'bob', 'cid', 'dan', 'eve', 'fay', 'gus', 'hal']) {
    const first = await hostFor(user);
    spread.add(first);
    for (let i = 0; i < 3; i++) t.equal(await hostFor(user), first, `${user} stays on ${first}`);
  }
  t.ok(spread.size >= 2, `keys spread over hosts (${[...spread].join(',')})`);
});
