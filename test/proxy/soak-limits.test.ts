// What 1000 keep-alive connections opened at once need from the engine's listeners (issue 16, item 7): a listen
// backlog as Envoy's (tcp_backlog_size, else net.core.somaxconn; Node's default 511 makes the kernel drop SYNs and
// clients retry after 1, 3, 7 s), and connections accepted promptly while busy ones keep the engine's turns long
// (Node 20's libuv accepts one connection per turn; the HTTP/1 codec parks its work while a burst is accepted).
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import type { JsonObject } from '@bufbuild/protobuf';
import { AcceptPacer, acceptPacer, kernelSomaxconn, listenBacklog, type Parked } from '../../src/proxy/common/accept';
import { freePort } from '../helpers/ports';
import { hcm, sock, startProxy } from './helpers';
// @ts-expect-error plain JavaScript shared with scripts/bench/accept-pacer.mjs
import { BURST_CHILD } from '../../scripts/lib/burst-child.mjs';
import { waitForValue } from '../helpers/wait';

const routes = {
  name: 'r',
  virtual_hosts: [
    { name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'ok' } } }] },
  ],
};

async function proxy(t: { teardown(f: () => unknown): void }, listeners: Array<{ port: number; extra?: JsonObject }>) {
  const p = await startProxy({
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
    admin: { address: sock('127.0.0.1', 0) },
    static_resources: {
      listeners: listeners.map((l, i) => ({
        name: `l${i}`,
        address: sock('127.0.0.1', l.port),
        filter_chains: [{ filters: [hcm({ routeConfig: routes })] }],
        ...(l.extra ?? {}),
      })),
      clusters: [],
    },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  return p;
}

const nextTurn = () => new Promise<void>((r) => setImmediate(r));

t.test('listen backlog: tcp_backlog_size, else the kernel somaxconn (Envoy), not Node 511', async (t) => {
  t.equal(listenBacklog(64), 64);
  t.equal(listenBacklog(undefined), kernelSomaxconn());
  t.equal(listenBacklog(0), kernelSomaxconn(), '0 is "not set"');
  const ss = spawnSync('ss', ['-V']);
  if (ss.status !== 0) {
    t.pass("the listening sockets' backlog as ss reads it", { skip: 'ss (iproute2) is not installed' });
    return;
  }
  const [a, b] = [await freePort(), await freePort()];
  await proxy(t, [{ port: a }, { port: b, extra: { tcp_backlog_size: 64 } }]);
  // ss shows a listening socket's backlog in Send-Q
  const backlog = (port: number) => {
    const out = spawnSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' })
      .stdout.trim()
      .split(/\s+/);
    return Number(out[2]);
  };
  t.equal(backlog(a), kernelSomaxconn(), `the default listener's backlog is somaxconn (${kernelSomaxconn()})`);
  t.equal(backlog(b), 64, 'tcp_backlog_size is honoured');
});

t.test('accept pacer: parks after accepts in consecutive turns, releases in order when a turn has none', async (t) => {
  let now = 0;
  const p = new AcceptPacer(2, 50, 3, () => now);
  const order: string[] = [];
  const item = (name: string): Parked => ({ unpark: () => order.push(name) });
  p.accepted();
  await nextTurn();
  t.notOk(p.parking, 'one turn with an accept parks nothing (a lone new connection)');
  await nextTurn();
  p.accepted();
  await nextTurn();
  t.notOk(p.parking, 'the turn in between had no accept: the count started again');
  p.accepted();
  await nextTurn();
  t.ok(p.parking, 'second consecutive turn with an accept: parking');
  p.park(item('a'));
  p.park(item('b'));
  p.accepted();
  await nextTurn();
  t.ok(p.parking, 'still accepting: still parking');
  t.same(order, []);
  await nextTurn();
  t.notOk(p.parking, 'a turn without an accept ends parking');
  t.same(order, ['a', 'b'], 'parked work is handled in arrival order');

  // accepts that never stop: parked work waits at most maxMs…
  p.accepted();
  await nextTurn();
  p.accepted();
  await nextTurn();
  t.ok(p.parking);
  p.park(item('c'));
  now += 60;
  p.accepted();
  await nextTurn();
  t.notOk(p.parking, 'released after maxMs although accepts continue');
  t.same(order, ['a', 'b', 'c']);
  p.accepted();
  await nextTurn();
  t.ok(p.parking, 'and parks again on the next consecutive accept');
  // or at most maxAccepts accepts
  p.park(item('d'));
  p.accepted();
  await nextTurn();
  p.accepted();
  await nextTurn();
  t.ok(p.parking, 'two accepts while parking');
  p.accepted();
  await nextTurn();
  t.notOk(p.parking, 'released after the third accept (maxAccepts 3)');
  t.same(order, ['a', 'b', 'c', 'd']);
  p.accepted();
  await nextTurn();
  t.ok(p.parking);
  await nextTurn();
  t.notOk(p.parking);
});

/** A raw client that reads everything. */
function rawClient(t: { teardown(f: () => unknown): void }, port: number) {
  const s = net.connect(port, '127.0.0.1');
  let buf = '';
  let closed = false;
  s.setEncoding('latin1');
  s.on('data', (d: string) => (buf += d));
  s.on('close', () => (closed = true));
  s.on('error', () => undefined);
  t.teardown(() => s.destroy());
  return { s, text: () => buf, closed: () => closed };
}

t.test('HTTP/1 codec: bytes read while parking are handled in order afterwards', async (t) => {
  const port = await freePort();
  await proxy(t, [{ port }]);
  const a = rawClient(t, port);
  a.s.write('GET /first HTTP/1.1\r\nhost: x\r\n\r\n');
  await waitForValue('an answer before parking', () => a.text().includes('\r\n\r\nok'), { timeoutMs: 10_000, intervalMs: 20 });
  const b = rawClient(t, port);
  await new Promise<void>((r) => b.s.once('connect', () => r()));
  // let the accepts' turns pass, then park as a burst would
  for (let i = 0; i < 5; i++) await nextTurn();
  t.notOk(acceptPacer.parking);
  acceptPacer.parking = true;
  t.teardown(() => {
    if (acceptPacer.parking) acceptPacer.endOfTurn();
  });
  const before = a.text().length;
  a.s.write('GET /p1 HTTP/1.1\r\nhost: x\r\n\r\nGET /p2 HTTP/1.1\r\nhost: x\r\n\r\n');
  b.s.write('GET /b HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
  await waitForValue('both connections parked', () => acceptPacer.parked >= 2, { timeoutMs: 10_000, intervalMs: 20 });
  await new Promise((r) => setTimeout(r, 100));
  t.equal(a.text().length, before, 'nothing answered while parked');
  t.equal(b.text(), '');
  t.notOk(b.closed());
  acceptPacer.endOfTurn(); // a turn without accepts: the burst is over
  t.notOk(acceptPacer.parking);
  await waitForValue(
    'both pipelined requests answered',
    () =>
      (
        a
          .text()
          .slice(before)
          .match(/HTTP\/1\.1 200/g) ?? []
      ).length === 2,
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  await waitForValue('the connection: close request answered and closed', () => b.closed(), { timeoutMs: 10_000, intervalMs: 20 });
  t.match(
    b.text(),
    /^HTTP\/1\.1 200 OK\r\n[\s\S]*connection: close\r\n\r\nok$/,
    'the connection: close request answered, then its connection closed',
  );
});

/** Runs the burst child against a fresh engine; the slowest first answer of the new connections, and how many had one. */
async function burst(t: { teardown(f: () => unknown): void }): Promise<{ max: number; done: number }> {
  const port = await freePort();
  const p = await proxy(t, [{ port }]);
  const child = spawn(process.execPath, ['-e', BURST_CHILD, String(port), '300', '500'], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill());
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  await new Promise((r) => child.once('exit', r));
  await p.close();
  return JSON.parse(out.trim()) as { max: number; done: number };
}

t.test('a burst of new connections beside hundreds of busy ones: every new connection is answered', async (t) => {
  const r = await burst(t);
  t.equal(r.done, 500, `every new connection was answered (slowest first answer ${r.max} ms)`);
});
