// The listening sockets of the listener manager, by address: bound once and kept across listener updates (a
// changed listener takes its predecessor's socket, as Envoy's listener update does), released at the end of an
// LDS update unless a new listener took the address over, and shared with engine worker threads by descriptor.
import net from 'node:net';
import { ipFamily } from '../../lib/ip';
import type { OriginalDstSource } from '../../native/original-dst';
import type { Logger } from '../log';
import type { ListenerRuntime } from './listener';

export interface BoundSocket {
  key: string;
  server: net.Server;
  /** The runtime new connections go to (set it with attachTarget). */
  target: ListenerRuntime | undefined;
  /**
   * Connections accepted while no listener version could take them: an engine worker's first version still
   * warming on a socket the main thread already serves, or an LDS update between releasing the socket and a
   * new listener taking it over. Envoy's workers accept only on warm listeners; a thread listening on a
   * shared descriptor cannot refuse what the kernel hands it, so it holds the connection until a version is
   * ready (destroying it reset a client's request: a late worker under load did exactly that).
   */
  held: Set<net.Socket>;
  port: number;
  /** IP_TRANSPARENT is set (kept while the socket lives: a listener update reuses the socket). */
  transparent?: boolean;
}

/** Directs a socket's new connections, and those it held meanwhile, to a listener runtime. */
export function attachTarget(b: BoundSocket, rt: ListenerRuntime): void {
  b.target = rt;
  for (const s of b.held) if (!s.destroyed) rt.onConnection(s);
  b.held.clear();
}

function closeServer(b: BoundSocket): void {
  b.server.close();
  for (const s of b.held) s.destroy();
  b.held.clear();
}

export function addressKey(a: { host: string; port: number; pipe?: string }): string {
  return a.pipe ? `pipe:${a.pipe}` : `${a.host}:${a.port}`;
}

function errnoText(e: NodeJS.ErrnoException): string {
  switch (e.code) {
    case 'EADDRINUSE':
      return 'Address already in use';
    case 'EACCES':
      return 'Permission denied';
    case 'EADDRNOTAVAIL':
      return 'Cannot assign requested address';
    default:
      return e.message;
  }
}

export interface SocketOptions {
  log: Logger;
  originalDst: OriginalDstSource | undefined;
  originalDstMissing?: string | undefined;
  /** Engine worker: a descriptor of the main thread's socket for an address key (`host:port`, `pipe:path`). */
  sharedSocket?: ((key: string, listener: string) => Promise<number>) | undefined;
}

export class ListenerSockets {
  private readonly sockets = new Map<string, BoundSocket>();
  /**
   * Sockets of listeners an LDS update removed, closed when the update is applied unless a new listener
   * of the same update takes the address over (a renamed listener): closing and binding again would fail
   * while engine workers still hold the old socket (they apply the update after this thread).
   */
  private releasing: Map<string, BoundSocket> | undefined;
  /** Engine workers waiting for the main thread to bind an address. */
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(private readonly o: SocketOptions) {}

  /** Binds (or reuses) the socket for a runtime's address; undefined for bind_to_port false. */
  async bind(rt: ListenerRuntime, name: string, reuse?: BoundSocket): Promise<BoundSocket | undefined> {
    if (!rt.bindToPort) return undefined;
    const key = addressKey(rt.address);
    if (reuse && reuse.key === key) return reuse;
    const released = this.releasing?.get(key);
    if (released) {
      this.releasing!.delete(key);
      this.makeTransparent(released, rt);
      return released;
    }
    const existing = this.sockets.get(key);
    if (existing)
      throw new Error(`error adding listener: '${name}' has duplicate address '${rt.address.host}:${rt.address.port}' as existing listener`);
    const bound: BoundSocket = { key, server: net.createServer(), target: undefined, held: new Set(), port: rt.address.port };
    bound.server.on('connection', (sock: net.Socket) => {
      const t = bound.target;
      if (t) return t.onConnection(sock);
      bound.held.add(sock);
      sock.once('close', () => bound.held.delete(sock));
    });
    bound.server.on('error', (e) => this.o.log.warn(`listener ${name}: ${e.message}`));
    const addr = rt.address;
    const shared = this.o.sharedSocket ? await this.o.sharedSocket(key, name) : undefined;
    // the main thread set the socket's options (IP_TRANSPARENT) before sharing it
    if (shared !== undefined) bound.transparent = true;
    await new Promise<void>((resolve, reject) => {
      const onErr = (e: NodeJS.ErrnoException) => reject(new Error(`cannot bind '${addr.pipe ?? `${addr.host}:${addr.port}`}': ${errnoText(e)}`));
      bound.server.once('error', onErr);
      // an IPv6 listener takes IPv4 connections only with ipv4_compat, as in Envoy
      // the backlog as Envoy's (tcp_backlog_size, else somaxconn), not Node's 511
      const listening = () => {
        bound.server.removeListener('error', onErr);
        const a = bound.server.address();
        if (a && typeof a === 'object') bound.port = a.port;
        resolve();
      };
      // a descriptor is listened on again with the same backlog (Node takes it as an argument then)
      if (shared !== undefined) bound.server.listen({ fd: shared }, rt.backlog, listening);
      else if (addr.pipe) bound.server.listen({ path: addr.pipe, backlog: rt.backlog }, listening);
      else
        bound.server.listen(
          { host: addr.host, port: addr.port, backlog: rt.backlog, ...(ipFamily(addr.host) === 6 ? { ipv6Only: !addr.ipv4Compat } : {}) },
          listening,
        );
    });
    try {
      this.makeTransparent(bound, rt);
    } catch (e) {
      closeServer(bound);
      throw e;
    }
    this.sockets.set(key, bound);
    const waiting = this.waiters.get(key);
    this.waiters.delete(key);
    for (const w of waiting ?? []) w();
    return bound;
  }

  /**
   * Main thread: a new descriptor of the socket bound to an address key, for an engine worker, once this
   * thread has bound it (the worker applies the same LDS response, possibly first). Throws when the
   * address is not bound within `waitMs` (this thread rejected the listener) or cannot be duplicated.
   */
  async share(key: string, dup: (fd: number) => number, waitMs: number): Promise<number> {
    if (!this.sockets.has(key)) {
      await new Promise<void>((resolve, reject) => {
        let set = this.waiters.get(key);
        if (!set) this.waiters.set(key, (set = new Set()));
        const done = () => {
          clearTimeout(t);
          resolve();
        };
        const t = setTimeout(() => {
          set!.delete(done);
          reject(new Error(`the main thread has no socket bound to '${key}'`));
        }, waitMs);
        t.unref();
        set.add(done);
      });
    }
    const fd = (this.sockets.get(key)?.server as unknown as { _handle?: { fd?: number } } | undefined)?._handle?.fd;
    if (typeof fd !== 'number' || fd < 0) throw new Error(`the socket bound to '${key}' has no file descriptor`);
    return dup(fd);
  }

  /** TPROXY: a `transparent` listener's socket must accept connections addressed to any IP (IP_TRANSPARENT). */
  makeTransparent(bound: BoundSocket, rt: ListenerRuntime): void {
    const addr = rt.address;
    if (rt.proto.transparent !== true || addr.pipe || bound.transparent) return;
    const why = this.o.originalDst
      ? this.o.originalDst.setTransparent(bound.server, ipFamily(addr.host) === 6)
      : `the native addon is not loaded (${this.o.originalDstMissing ?? 'unknown reason'})`;
    if (why) throw new Error(`cannot set transparent on '${addr.host}:${addr.port}': ${why}`);
    bound.transparent = true;
  }

  close(b: BoundSocket | undefined): void {
    if (!b) return;
    if (this.releasing && !this.releasing.has(b.key) && this.sockets.get(b.key) === b) {
      // an LDS update is being applied: a new listener may take this address over
      b.target = undefined;
      this.releasing.set(b.key, b);
      return;
    }
    if (this.sockets.get(b.key) === b) this.sockets.delete(b.key);
    closeServer(b);
  }

  /** An LDS update begins: sockets closed meanwhile wait for a new listener of the same update. */
  beginUpdate(): void {
    this.releasing = new Map();
  }

  /** The update is applied: what no new listener took over closes. */
  endUpdate(): void {
    for (const b of this.releasing?.values() ?? []) this.close(b);
    this.releasing = undefined;
  }

  /** The socket is the one bound to its address (a listener's socket may have been replaced). */
  isBound(b: BoundSocket): boolean {
    return this.sockets.get(b.key) === b;
  }

  closeAll(): void {
    for (const b of this.sockets.values()) closeServer(b);
    this.sockets.clear();
  }
}
