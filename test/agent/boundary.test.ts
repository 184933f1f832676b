// The agent's fault boundary in one process: entry points answer a fault with their fallback, the fault is
// counted and the subsystem restarted after a backoff, a subsystem that keeps failing is disabled (unless
// essential), the subsystem's context follows what its start creates (a UDP socket's handler), and the
// test-only MESH_TEST_FAULT list is checked. The last line (uncaughtException / unhandledRejection) is shown
// with the built agent in test/e2e/agent-fault-containment.test.ts.
import dgram from 'node:dgram';
import t from 'tap';
import { FaultBoundary, parseTestFaults, subsystemFaults, type SubsystemControl } from '../../src/agent/boundary';
import { waitFor } from '../helpers/wait';

async function faults(name: string): Promise<number> {
  return (await subsystemFaults.get()).values.find((v) => v.labels.subsystem === name)?.value ?? 0;
}

function control(o: Partial<SubsystemControl> = {}): SubsystemControl & { restarts: number; disables: number } {
  const c = {
    restarts: 0,
    disables: 0,
    restart: async () => void c.restarts++,
    disable: async () => void c.disables++,
    ...o,
  };
  return c;
}

t.test('an entry point that throws or rejects is answered by its fallback, counted, and its subsystem restarted', async (t) => {
  const b = new FaultBoundary({ restartDelayMs: 1 });
  t.teardown(() => b.close());
  const c = control();
  b.register('dns', c);
  const before = await faults('dns');
  const sync = b.entry(
    'dns',
    (x: number) =>
      x > 1
        ? x
        : (() => {
            throw new Error('bad');
          })(),
    (e, x) => -x,
  );
  t.equal(sync(2), 2, 'no fault: the entry answers');
  t.equal(sync(1), -1, 'a throw: the fallback answers with the same arguments');
  const async = b.entry(
    'dns',
    async (x: number): Promise<number | string> => {
      if (x === 0) throw new Error('bad');
      return x;
    },
    async (e) => e.message,
  );
  t.equal(await async(0), 'bad', 'a rejection: the fallback answers');
  t.equal((await faults('dns')) - before, 2, 'both counted');
  await waitFor(
    () => `restarts ${c.restarts}`,
    () => c.restarts === 1,
    { timeoutMs: 2000, intervalMs: 50 },
  );
  t.equal(c.restarts, 1, 'two faults before the restart ran: one restart');
  t.equal(b.state('dns'), 'running');
});

t.test('a subsystem that keeps failing is disabled; an essential one is only restarted', async (t) => {
  const b = new FaultBoundary({ restartDelayMs: 1, maxRestartDelayMs: 2, maxFaults: 3 });
  t.teardown(() => b.close());
  const dns = control();
  const status = control({ essential: true });
  b.register('dns', dns);
  b.register('status', status);
  for (let i = 0; i < 4; i++) {
    b.fault('dns', new Error(`dns ${i}`));
    b.fault('status', new Error(`status ${i}`));
    await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(b.state('dns'), 'disabled', 'the fourth fault within the window disables it');
  t.equal(dns.disables, 1);
  t.equal(dns.restarts, 3);
  t.equal(status.disables, 0, 'the status server is never disabled');
  t.equal(status.restarts, 4);
  b.fault('dns', new Error('again'));
  await new Promise((r) => setTimeout(r, 20));
  t.equal(dns.restarts, 3, 'a disabled subsystem is not restarted');
});

t.test('a restart that fails is a fault too: the budget ends in disabling it', async (t) => {
  const b = new FaultBoundary({ restartDelayMs: 1, maxRestartDelayMs: 2, maxFaults: 2 });
  t.teardown(() => b.close());
  const c = control({
    restart: async () => {
      throw new Error('address in use');
    },
  });
  b.register('sds', c);
  b.fault('sds', new Error('first'));
  await waitFor(
    () => `state ${b.state('sds')}`,
    () => b.state('sds') === 'disabled',
    { timeoutMs: 2000, intervalMs: 50 },
  );
  t.equal(c.disables, 1);
});

t.test("what a subsystem's start creates carries the subsystem: a UDP socket's message handler", async (t) => {
  const b = new FaultBoundary();
  const sock = b.run('dns', () => dgram.createSocket('udp4'));
  t.teardown(() => sock.close());
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  const seen = new Promise<string | undefined>((r) => sock.once('message', () => r(b.current())));
  const client = dgram.createSocket('udp4');
  client.send('x', sock.address().port, '127.0.0.1', () => client.close());
  t.equal(await seen, 'dns');
  t.equal(b.current(), undefined, 'outside, no subsystem');
});

t.test('MESH_TEST_FAULT names subsystems, with :entry or :escape', async (t) => {
  t.same(parseTestFaults('dns, status:entry,xds-proxy:escape'), [
    { subsystem: 'dns', at: 'escape' },
    { subsystem: 'status', at: 'entry' },
    { subsystem: 'xds-proxy', at: 'escape' },
  ]);
  t.same(parseTestFaults(''), []);
  t.throws(
    () => parseTestFaults('dns,engine'),
    /MESH_TEST_FAULT: "engine" is not <subsystem>\[:entry\|:escape\] \(subsystems: dns, sds, health, xds-proxy, status, metrics\)/,
  );
  t.throws(() => parseTestFaults('dns:later'), /"dns:later"/);
});
