// `--concurrency 2`: the built gateway runs its engine as two workers (the main thread and one worker
// thread) on the same listening socket. Shown from outside, with Envoy's per-worker listener stats
// (`listener.<address>.worker_<N>.downstream_cx_total`): both workers take connections, /stats sums
// their counters, a VirtualService edit reaches both, a worker that dies is started again and counted,
// and /drain_listeners closes the socket in every worker (a worker still holding it would accept).
import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { built } from '../helpers/binary';
import { rawHead } from '../helpers/raw-http';
import { prefixRouteConfig } from '../helpers/mesh-yaml';
import { startGateway, type GatewayPorts, type GatewayRig } from '../helpers/gateway';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const config = (p: GatewayPorts, prefix: string): string => prefixRouteConfig(p, prefix, 'a.example.com');

async function stats(admin: number): Promise<Map<string, number>> {
  const text = await fetch(`http://127.0.0.1:${admin}/stats`).then((r) => r.text());
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([^:]+): (-?\d+)$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]));
  }
  return out;
}

/** Connections (one request each) per worker, from the per-worker listener counters. */
function perWorker(s: Map<string, number>, port: number): number[] {
  const out: number[] = [];
  for (const [k, v] of s) {
    const m = new RegExp(`^listener\\.0\\.0\\.0\\.0_${port}\\.worker_(\\d+)\\.downstream_cx_total$`).exec(k);
    if (m) out[Number(m[1])] = v;
  }
  return out;
}

/**
 * Requests, each on a new connection, until every worker took at least one (the kernel gives each
 * connection to whichever thread accepts first); resolves with how many were sent.
 */
async function untilBothServe(t: Tap, gw: GatewayRig, host: string, p: string, want: number, before: number[]): Promise<number> {
  let sent = 0;
  for (;;) {
    for (let i = 0; i < 20; i++) {
      const r = await gw.get(p, { host });
      sent++;
      if (r.status !== want) {
        t.fail(`request ${sent}: ${p} answered ${r.status}, expected ${want}`);
        return sent;
      }
    }
    const now = perWorker(await stats(gw.ports.admin), gw.ports.gw);
    if ((now[0] ?? 0) > (before[0] ?? 0) && (now[1] ?? 0) > (before[1] ?? 0)) return sent;
    if (sent >= 2000) {
      t.fail(`after ${sent} connections, not every worker took one: before ${JSON.stringify(before)}, now ${JSON.stringify(now)}`);
      return sent;
    }
  }
}

type Tap = Pick<typeof t, 'fail'>;

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
}

t.test('two engine workers share the gateway listener, its config, stats, restarts and drain', async (t) => {
  let ports: GatewayPorts | undefined;
  const gw = await startGateway(t, {
    config: (p) => {
      ports = p;
      return config(p, '/one');
    },
    agentArgs: ['--concurrency', '2'],
    // Istio's stats matcher hides listener and service cluster stats unless asked for
    proxyConfig: { proxyStatsMatcher: { inclusionPrefixes: ['listener.', 'cluster.outbound'] } },
    agentEnv: { MESH_ENGINE_WORKER_TEST_HOOKS: 'true' },
  });
  const admin = ports!.admin;
  const cxTotal = `listener.0.0.0.0_${ports!.gw}.downstream_cx_total`;
  await waitFor(
    () => gw.agentOut(),
    async () => (await gw.get('/one', { host: 'a.example.com' })).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );

  let s = await stats(admin);
  t.equal(s.get('server.concurrency'), 2, 'server.concurrency is the --concurrency given');
  const info = (await fetch(`http://127.0.0.1:${admin}/server_info`).then((r) => r.json())) as { command_line_options: { concurrency: number } };
  t.equal(info.command_line_options.concurrency, 2);

  // both workers take connections; the listener's counter is the sum of both
  const before = perWorker(s, ports!.gw);
  const totalBefore = s.get(cxTotal) ?? 0;
  const sent = await untilBothServe(t, gw, 'a.example.com', '/one', 200, before);
  s = await stats(admin);
  const after = perWorker(s, ports!.gw);
  t.equal(s.get(cxTotal)! - totalBefore, sent, `/stats counts every connection once across both workers (${sent} sent)`);
  t.equal((after[0] ?? 0) + (after[1] ?? 0), s.get(cxTotal), 'worker_0 + worker_1 = the listener total');
  t.ok((s.get(`cluster.outbound|80||backend.demo.svc.cluster.local.upstream_rq_200`) ?? 0) >= sent, 'upstream counters are summed too');
  t.equal(
    s.get('listener_manager.lds.update_success'),
    s.get('listener_manager.lds.update_attempt'),
    "config counters are the main thread's, not one per worker",
  );

  // a VirtualService edit reaches both workers: every connection, whichever worker takes it, routes by it
  fs.writeFileSync(path.join(gw.configDir, 'mesh.yaml'), config(ports!, '/two'));
  await waitFor(
    () => `the edit did not arrive:\n${gw.agentOut()}`,
    async () => (await gw.get('/two', { host: 'a.example.com' })).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  // a worker that had not applied the edit would answer one of these 404
  await untilBothServe(t, gw, 'a.example.com', '/two', 200, perWorker(await stats(admin), ports!.gw));
  await untilBothServe(t, gw, 'a.example.com', '/one', 404, perWorker(await stats(admin), ports!.gw));

  // /reset_counters reaches every worker: each worker's counters start again from zero (a worker left out
  // would keep its count, and the listener total would not be zero)
  t.equal((await fetch(`http://127.0.0.1:${admin}/reset_counters`, { method: 'POST' })).status, 200);
  const reset = await stats(admin);
  t.same(
    perWorker(reset, ports!.gw).map((n) => n ?? 0),
    [0, 0],
    "both workers' connection counters are zero",
  );
  t.equal(reset.get(cxTotal), 0, 'the listener total is zero');
  t.equal(reset.get('server.concurrency'), 2, 'gauges are kept (Envoy resets counters only)');

  // /healthcheck/fail reaches every worker: with the server failing health checks, Envoy's drain manager closes
  // HTTP/1 connections after their response (drainClose), whichever worker serves them; /healthcheck/ok ends it
  const closes = async (want: boolean): Promise<void> => {
    const before = perWorker(await stats(admin), ports!.gw);
    let seen = 0;
    for (let i = 0; i < 2000; i++) {
      // a keep-alive request on a new connection (Node's client would ask to close)
      const head = await rawHead(ports!.gw, 'GET /two HTTP/1.1\r\nhost: a.example.com\r\n\r\n');
      if (head.status !== 200 || (head.headers['connection'] === 'close') !== want) {
        t.fail(`request ${i + 1}: ${JSON.stringify(head)}, expected 200 ${want ? 'with' : 'without'} connection: close`);
        return;
      }
      seen++;
      const now = perWorker(await stats(admin), ports!.gw);
      if ((now[0] ?? 0) > (before[0] ?? 0) && (now[1] ?? 0) > (before[1] ?? 0)) break;
    }
    t.pass(`${seen} responses from both workers, ${want ? 'each' : 'none'} with connection: close`);
  };
  await closes(false);
  t.equal((await fetch(`http://127.0.0.1:${admin}/healthcheck/fail`, { method: 'POST' })).status, 200);
  await closes(true);
  t.equal((await fetch(`http://127.0.0.1:${admin}/healthcheck/ok`, { method: 'POST' })).status, 200);
  await closes(false);
  s = await stats(admin);

  // /logging reaches every worker: with the router logger at debug, each request's cluster line is logged by
  // whichever worker served it (a worker left at the default level would log none of its requests)
  t.equal((await fetch(`http://127.0.0.1:${admin}/logging?router=debug`, { method: 'POST' })).status, 200);
  const mark = gw.agentOut().length;
  const logged = await untilBothServe(t, gw, 'a.example.com', '/two', 200, perWorker(await stats(admin), ports!.gw));
  const lines = () =>
    (
      gw
        .agentOut()
        .slice(mark)
        .match(/cluster 'outbound\|80\|\|backend\.demo\.svc\.cluster\.local' match for URL '\/two'/g) ?? []
    ).length;
  await waitFor(
    () => `${lines()} of ${logged} requests logged`,
    () => lines() >= logged,
    { timeoutMs: 10_000, intervalMs: 50 },
  ).catch(() => undefined);
  t.equal(lines(), logged, `every one of ${logged} requests, served by both workers, logged its cluster at debug`);
  t.equal((await fetch(`http://127.0.0.1:${admin}/logging?router=info`, { method: 'POST' })).status, 200);
  const quiet = gw.agentOut().length;
  await untilBothServe(t, gw, 'a.example.com', '/two', 200, perWorker(await stats(admin), ports!.gw));
  t.notMatch(gw.agentOut().slice(quiet), /match for URL/, 'back at info in every worker: none logged');

  // a worker that dies is started again, counted, and serves with the current config
  t.equal(s.get('server.worker_restarts') ?? 0, 0);
  const crash = await fetch(`http://127.0.0.1:${admin}/mesh/crash_worker?id=1`, { method: 'POST' });
  t.equal(crash.status, 200);
  await waitFor(
    () => `no restart counted:\n${gw.agentOut()}`,
    async () => (await stats(admin)).get('server.worker_restarts') === 1,
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.match(gw.agentOut(), /engine worker 1 exited with code 1; starting it again/);
  // the new worker 1 starts its stats from zero and takes connections again, with the edited routes
  await waitFor(
    () => `worker 1 did not come back:\n${gw.agentOut()}`,
    async () => perWorker(await stats(admin), ports!.gw)[1] !== undefined,
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  await untilBothServe(t, gw, 'a.example.com', '/two', 200, perWorker(await stats(admin), ports!.gw));

  // drain: the socket stops accepting in both workers (one worker still listening would take the connection)
  t.equal(await refused(ports!.gw), false, 'accepting before the drain');
  const drain = await fetch(`http://127.0.0.1:${admin}/drain_listeners`, { method: 'POST' });
  t.equal(drain.status, 200);
  await waitFor(
    () => `the gateway port still accepts after /drain_listeners:\n${gw.agentOut()}`,
    () => refused(ports!.gw),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  let accepted = 0;
  for (let i = 0; i < 20; i++) if (!(await refused(ports!.gw))) accepted++;
  t.equal(accepted, 0, 'no worker accepts any of 20 connections after the drain');
  t.equal((await fetch(`http://127.0.0.1:${admin}/ready`)).status, 200, 'the admin API still answers');

  // /quitquitquit ends the engine with its workers (a worker thread left running would keep the agent alive)
  t.equal((await fetch(`http://127.0.0.1:${admin}/quitquitquit`, { method: 'POST' })).status, 200);
  await waitFor(
    () => `the engine did not stop after /quitquitquit:\n${gw.agentOut()}`,
    () => refused(admin),
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.pass('the admin port closed after /quitquitquit');
});
