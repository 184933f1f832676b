// The listener manager's sockets: a connection the kernel hands over while no listener version can take it
// (an engine worker's first version still warming on a socket the main thread already serves) waits for
// one instead of being reset, and goes with the socket when it closes unclaimed.
import net from 'node:net';
import t from 'tap';
import { attachTarget, ListenerSockets } from '../../src/proxy/listener/sockets';
import type { ListenerRuntime } from '../../src/proxy/listener/listener';
import { LoggerRegistry } from '../../src/proxy/log';

const log = new LoggerRegistry('off', () => undefined).get('config');

/** The part of a listener runtime the sockets use, answering each connection with one line. */
function runtime(reply: string): ListenerRuntime {
  return {
    bindToPort: true,
    address: { host: '127.0.0.1', port: 0 },
    backlog: 128,
    proto: {},
    onConnection: (s: net.Socket) => s.end(reply),
  } as unknown as ListenerRuntime;
}

/** Connects, sends a line, and resolves with what came back, or the error that ended the connection. */
function exchange(port: number): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const c = net.connect(port, '127.0.0.1', () => c.write('hello\n'));
    c.on('data', (d) => (got += d));
    c.on('error', (e: NodeJS.ErrnoException) => resolve(`error ${e.code}`));
    c.on('close', () => resolve(got));
  });
}

function accepted(sockets: { server: net.Server }): Promise<void> {
  return new Promise((r) => sockets.server.once('connection', () => setImmediate(r)));
}

t.test('a connection accepted before any listener version is ready waits for one', async (t) => {
  const sockets = new ListenerSockets({ log, originalDst: undefined });
  t.teardown(() => sockets.closeAll());
  const rt = runtime('served\n');
  const bound = (await sockets.bind(rt, 'l'))!;
  const reply = exchange(bound.port);
  await accepted(bound);
  t.equal(bound.held.size, 1, 'held while nothing can take it');
  attachTarget(bound, rt);
  t.equal(await reply, 'served\n', 'served once a version is attached, not reset');
  t.equal(bound.held.size, 0);
  t.equal(await exchange(bound.port), 'served\n', 'later connections go straight to the version');
});

t.test('a held connection goes when its socket closes unclaimed', async (t) => {
  const sockets = new ListenerSockets({ log, originalDst: undefined });
  const bound = (await sockets.bind(runtime('never\n'), 'l'))!;
  const reply = exchange(bound.port);
  await accepted(bound);
  sockets.close(bound);
  t.not(await reply, 'never\n', 'closed, not served');
  t.equal(bound.held.size, 0);
});

t.test('a held connection the client gave up on is forgotten', async (t) => {
  const sockets = new ListenerSockets({ log, originalDst: undefined });
  t.teardown(() => sockets.closeAll());
  const bound = (await sockets.bind(runtime('x\n'), 'l'))!;
  const c = net.connect(bound.port, '127.0.0.1');
  await accepted(bound);
  t.equal(bound.held.size, 1);
  c.destroy();
  await new Promise((r) => setTimeout(r, 100));
  t.equal(bound.held.size, 0, 'dropped on close');
});
