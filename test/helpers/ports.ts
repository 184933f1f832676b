// Loopback ports for tests that must name a port before the listener starts (a config that carries it, a
// daemon restarted on the same port). Tests inside their own network namespaces bind fixed ports instead.
import type http from 'node:http';
import * as net from 'node:net';
import type { Test } from 'tap';

/** A port nothing listens on right now (bound and released; the tests bind it again at once). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * One free port per name, all different: `await freePorts('admin', 'status')` → `{ admin, status }`. A port is
 * released as soon as it is found, so the kernel may offer it again for the next name; that one is asked again.
 */
export async function freePorts<K extends string>(...names: K[]): Promise<Record<K, number>> {
  const ports = {} as Record<K, number>;
  const taken = new Set<number>();
  for (const n of names) {
    let p = await freePort();
    while (taken.has(p)) p = await freePort();
    taken.add(p);
    ports[n] = p;
  }
  return ports;
}

/**
 * Free ports held open (listening) until `release()`: while a daemon started in between binds its own
 * ephemeral ports (port 0), the kernel cannot hand it one of these, which a plain freePort only makes unlikely
 * (the claim-routing rig once saw the daemon's ControlZ take the port the gateway's Envoy admin was given).
 */
export async function reservePorts<K extends string>(...names: K[]): Promise<{ ports: Record<K, number>; release(): Promise<void> }> {
  const held: net.Server[] = [];
  const ports = {} as Record<K, number>;
  for (const n of names) {
    const s = net.createServer();
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(0, '127.0.0.1', () => resolve());
    });
    held.push(s);
    ports[n] = (s.address() as net.AddressInfo).port;
  }
  return { ports, release: () => Promise.all(held.map((s) => new Promise<void>((r) => s.close(() => r())))).then(() => undefined) };
}

/**
 * Listens on an ephemeral loopback port for the rest of the test, closing the server and its open connections at
 * teardown (a proxy's pooled keep-alive connections would keep close() waiting); `extra` ends what the server does
 * not track itself (HTTP/2 sessions, raw sockets).
 */
export async function serveForTest(t: Test, server: net.Server, extra?: () => void): Promise<number> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        server.close(() => r());
        extra?.();
        (server as Partial<http.Server>).closeAllConnections?.();
      }),
  );
  return (server.address() as net.AddressInfo).port;
}
