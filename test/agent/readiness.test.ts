// Readiness decisions and the admin-API parsing they rest on, against a stub admin server speaking Envoy's
// formats: CDS/LDS update stats (success, rejection), server state, listeners that must accept
// connections (all for gateways, the virtual ones for sidecars), the DNS name-table gate, termination; and
// Istio's active-connection count for EXIT_ON_ZERO_ACTIVE_CONNECTIONS.
import t, { type Test } from 'tap';
import * as http from 'node:http';
import * as net from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  AdminClient,
  activeConnectionsFrom,
  knownAgentListeners,
  listenersFrom,
  parseStatsText,
  updateStatsFrom,
} from '../../src/agent/admin-client';
import { listenersToDial, ProxyReadiness } from '../../src/agent/readiness';
import { StatusServer } from '../../src/agent/status';
import { freePort } from '../helpers/ports';

interface StubState {
  stats: string;
  ready: [number, string];
  listeners: Array<{ name: string; address: string; port: number }>;
  prometheus: string;
  calls: string[];
}

async function stubAdmin(t: Test, s: StubState): Promise<AdminClient> {
  const srv = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    s.calls.push(`${req.method} ${url.pathname}${url.search}`);
    if (url.pathname === '/stats') {
      const re = new RegExp(url.searchParams.get('filter') ?? '');
      res.end(
        s.stats
          .split('\n')
          .filter((l) => l && re.test(l.split(':')[0]!))
          .map((l) => l + '\n')
          .join(''),
      );
    } else if (url.pathname === '/ready') {
      res.writeHead(s.ready[0]);
      res.end(s.ready[1]);
    } else if (url.pathname === '/listeners') {
      res.end(
        JSON.stringify({
          listener_statuses: s.listeners.map((l) => ({
            name: l.name,
            local_address: { socket_address: { address: l.address, port_value: l.port } },
          })),
        }),
      );
    } else if (url.pathname === '/stats/prometheus') {
      res.end(s.prometheus);
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => srv.close());
  return new AdminClient('127.0.0.1', (srv.address() as AddressInfo).port);
}

const stats = (cds: number, lds: number, cdsRej = 0, ldsRej = 0) =>
  `cluster_manager.cds.update_success: ${cds}\ncluster_manager.cds.update_rejected: ${cdsRej}\nlistener_manager.lds.update_success: ${lds}\nlistener_manager.lds.update_rejected: ${ldsRej}\nserver.state: 0`;

t.test('config received, LIVE, listeners bound', async (t) => {
  const s: StubState = { stats: stats(0, 0), ready: [503, 'PRE_INITIALIZING'], listeners: [], prometheus: '', calls: [] };
  const admin = await stubAdmin(t, s);
  let firstReady = 0;
  const r = new ProxyReadiness({ admin, nodeType: 'router', noProxy: false, onFirstReady: () => firstReady++ });
  await t.rejects(r.check(), {
    message: 'config not received from XDS server (is meshd running?): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected',
  });
  s.stats = stats(1, 0);
  await t.rejects(r.check(), {
    message: 'config not fully received from XDS server: cds updates: 1 successful, 0 rejected; lds updates: 0 successful, 0 rejected',
  });
  s.stats = stats(1, 0, 0, 2);
  await t.rejects(r.check(), { message: /^config received from XDS server, but was rejected: .*lds updates: 0 successful, 2 rejected$/ });
  s.stats = stats(1, 1);
  await t.rejects(r.check(), { message: 'server is not live, current state is: PRE_INITIALIZING' });
  s.ready = [200, 'LIVE\n'];
  const closed = await freePort();
  s.listeners = [{ name: '0.0.0.0_' + closed, address: '0.0.0.0', port: closed }];
  await t.rejects(r.check(), {
    message: `listener 0.0.0.0_${closed} on address 127.0.0.1:${closed} is still not listening: connect: connection refused`,
  });
  const bound = net.createServer();
  await new Promise<void>((res) => bound.listen(closed, '0.0.0.0', res));
  t.teardown(() => bound.close());
  await r.check();
  t.equal(firstReady, 1, 'startup recorded once');
  // Once passed, the proxy checks are cached (Istio caches them too): a later stats error does not matter.
  s.stats = '';
  const before = s.calls.length;
  await r.check();
  t.equal(s.calls.length, before, 'no admin calls once ready');
  t.equal(firstReady, 1);
  r.terminate('SIGTERM received');
  await t.rejects(r.check(), { message: 'server is terminated: SIGTERM received' });
});

t.test('sidecars dial only the virtual listeners', async (t) => {
  const ls = [
    { name: 'virtualOutbound', address: '0.0.0.0', port: 15001 },
    { name: '10.0.0.1_8080', address: '10.0.0.1', port: 8080 },
    { name: 'virtualInbound', address: '::', port: 15006 },
  ];
  t.same(
    listenersToDial(ls, 'sidecar').map((l) => `${l.host}:${l.port}`),
    ['127.0.0.1:15001', '::1:15006'],
  );
  t.same(
    listenersToDial(ls, 'router').map((l) => `${l.host}:${l.port}`),
    ['127.0.0.1:15001', '10.0.0.1:8080', '::1:15006'],
  );
});

t.test('DNS capture: not ready until the name table arrived; no proxy: agent alone', async (t) => {
  let table = false;
  const admin = new AdminClient('127.0.0.1', await freePort());
  const r = new ProxyReadiness({ admin, nodeType: 'sidecar', noProxy: true, nameTableReady: () => table });
  await t.rejects(r.check(), { message: 'mesh DNS capture is turned ON and DNS lookup table is not ready yet' });
  table = true;
  await r.check();
  t.pass('ready without asking a proxy');
});

t.test('admin API parsing', async (t) => {
  t.same(updateStatsFrom(stats(3, 2, 1, 0)), { cdsSuccess: 3, cdsRejected: 1, ldsSuccess: 2, ldsRejected: 0 });
  t.same(parseStatsText('a.b: 1\nbroken line\nc: x\n').bad, ['broken line', 'c: x']);
  const known = knownAgentListeners(15021, 15090);
  const text = [
    'http.agent.downstream_cx_active: 4',
    'listener.0.0.0.0_15021.downstream_cx_active: 1',
    'listener.0.0.0.0_15090.downstream_cx_active: 1',
    'listener.0.0.0.0_8080.downstream_cx_active: 2',
    'listener.0.0.0.0_8080.worker_0.downstream_cx_active: 2',
    'listener.10.0.0.1_9080.downstream_cx_active: 3',
    'listener.admin.downstream_cx_active: 1',
  ].join('\n');
  t.same(activeConnectionsFrom(text, known), { active: 5, warnings: [] }, 'listener stats only, without workers and the agent listeners');
  t.same(activeConnectionsFrom('', known), { active: -1, warnings: [] }, 'no stats at all: -1');
  t.same(listenersFrom('{"listener_statuses":[{"name":"l","local_address":{"socket_address":{"address":"0.0.0.0","port_value":80}}}]}'), [
    { name: 'l', address: '0.0.0.0', port: 80 },
  ]);
});

t.test('status server: ready, merged metrics, localhost-only POST endpoints', async (t) => {
  const s: StubState = { stats: stats(1, 1), ready: [200, 'LIVE'], listeners: [], prometheus: '# TYPE envoy_x gauge\nenvoy_x 7', calls: [] };
  const admin = await stubAdmin(t, s);
  let quit = 0;
  let drain = 0;
  const readiness = new ProxyReadiness({ admin, nodeType: 'router', noProxy: false });
  const server = new StatusServer({ port: 0, host: '127.0.0.1', readiness, admin, onQuit: () => quit++, onDrain: () => drain++ });
  const port = await server.start();
  t.teardown(() => server.stop());
  const get = async (p: string, method = 'GET', headers: Record<string, string> = {}) => {
    const r = await fetch(`http://127.0.0.1:${port}${p}`, { method, headers });
    return { status: r.status, body: await r.text(), type: r.headers.get('content-type') };
  };
  t.equal((await get('/healthz/ready')).status, 200);
  const m = await get('/stats/prometheus?usedonly', 'GET', { 'X-Prometheus-Scrape-Timeout-Seconds': '2' });
  t.equal(m.type, 'text/plain; version=0.0.4; charset=utf-8');
  t.match(m.body, /^# HELP /, 'agent metrics first');
  t.ok(m.body.endsWith('envoy_x 7\n'), 'then the proxy’s');
  t.ok(s.calls.includes('GET /stats/prometheus?usedonly'), 'the query is passed to the proxy');
  t.equal((await get('/quitquitquit')).status, 405);
  t.equal((await get('/drain', 'POST')).status, 200);
  t.equal((await get('/quitquitquit', 'POST')).status, 200);
  t.same([quit, drain], [1, 1]);
  const app = await get('/app-health/reviews/livez');
  t.equal(app.status, 400);
  t.equal(app.body, 'app prober config does not exists for /app-health/reviews/livez');
  t.equal((await get('/nope')).status, 404);
});

t.test('status server: a failed proxy scrape still serves the agent metrics and counts the failure', async (t) => {
  const admin = new AdminClient('127.0.0.1', await freePort());
  const readiness = new ProxyReadiness({ admin, nodeType: 'router', noProxy: false });
  const server = new StatusServer({ port: 0, host: '127.0.0.1', readiness, admin, onQuit: () => {}, onDrain: () => {} });
  const port = await server.start();
  t.teardown(() => server.stop());
  const r = await fetch(`http://127.0.0.1:${port}/stats/prometheus`);
  t.equal(r.status, 200);
  const body = await r.text();
  t.match(body, /^scrape_failures_total\{type="envoy"\} [1-9]/m);
  t.match(body, /^scrapes_total [1-9]/m);
  const ready = await fetch(`http://127.0.0.1:${port}/healthz/ready`);
  t.equal(ready.status, 503);
  t.match(
    await ready.text(),
    /^failed to get update stats from the proxy: Get "http:\/\/127\.0\.0\.1:\d+\/stats\?usedonly&filter=.*": dial tcp 127\.0\.0\.1:\d+: connect: connection refused/,
  );
});
