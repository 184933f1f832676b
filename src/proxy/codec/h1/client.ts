// The upstream side of the engine's HTTP/1.1 codec: a keep-alive connection pool per host (what Node's
// http.Agent did for the engine, without its per-request ClientRequest/IncomingMessage streams). A
// request takes the most recently used idle connection, else opens one while the pool is under its
// connection limit, else waits in the pool's queue. A connection goes back to the pool when its
// response was read completely, the request was written completely and neither side said close; idle
// connections close after the idle timeout or when the server closes them.
import type net from 'node:net';
import type { RawHeaders } from '../headers';
import { BodySource, type FlowControl } from './body';
import { bodyKindForResponse, BodyKind, H1ParseError, H1Parser, type MessageHead, type ParserHandler } from './parser';

export type ClientFailure = 'connect_failure' | 'reset';

export interface ClientCallbacks {
  /** Response head; the body follows on `body` ('data', 'end', 'aborted'). `socket`: the connection it came on. */
  onResponse(status: number, headers: RawHeaders, body: BodySource, socket?: net.Socket): void;
  /** No response: the connection could not be made, or failed before a response head. */
  onError(kind: ClientFailure, detail: string): void;
}

export interface PoolOptions {
  /** Opens a connection (connect timeout, TLS and stats are the caller's). */
  connect(): net.Socket & { meshConnected?: () => boolean };
  maxConnections: number;
  /** 0 = never. */
  idleTimeoutMs: number;
  maxResponseHeadBytes: number;
  /** A request started waiting for a connection / stopped waiting. */
  onQueued?(): void;
  onDequeued?(): void;
}

/**
 * Methods sent without body framing when none was written (Envoy's HeaderUtility::requestShouldHaveNoBody); any
 * other headers-only request says Content-Length: 0, as Envoy's HTTP/1 codec writes it.
 */
const NO_DEFAULT_BODY = new Set(['GET', 'HEAD', 'DELETE', 'TRACE', 'CONNECT']);
const BAD_NAME = /[^!#$%&'*+\-.^_`|~0-9A-Za-z]/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const PENDING_HIGH_WATER = 64 * 1024;

/** One request on the pool: the request body sink the router writes into (`body`), and abort(). */
export class H1Exchange {
  conn: H1ClientConnection | undefined;
  /** Request bytes written before a connection was assigned. */
  private pendingOut: Array<string | Buffer> | undefined;
  private pendingBytes = 0;
  private headSent = false;
  private chunked = false;
  private hasLength: boolean;
  ended = false;
  /** The request was completely handed to the socket. */
  written = false;
  aborted = false;
  responded = false;
  response: BodySource | undefined;
  private drainWaiters: Array<() => void> | undefined;
  private needDrain = false;

  constructor(
    readonly pool: H1Pool,
    readonly method: string,
    readonly path: string,
    readonly headers: RawHeaders,
    readonly cb: ClientCallbacks,
  ) {
    this.hasLength = headers['content-length'] !== undefined;
  }

  /** Where the request body is written: this exchange. */
  get body(): this {
    return this;
  }

  private head(extra: string): string {
    let s = `${this.method} ${this.path} HTTP/1.1\r\n`;
    const h = this.headers;
    for (const k in h) {
      const v = h[k];
      if (v === undefined || k === 'transfer-encoding' || k === 'connection' || BAD_NAME.test(k)) continue;
      if (typeof v === 'string') {
        if (!BAD_VALUE.test(v)) s += `${k}: ${v}\r\n`;
      } else for (const x of v) if (!BAD_VALUE.test(x)) s += `${k}: ${x}\r\n`;
    }
    return `${s}${extra}\r\n`;
  }

  private out(p: string | Buffer): boolean {
    const c = this.conn;
    if (c) return c.write(p);
    (this.pendingOut ??= []).push(p);
    this.pendingBytes += p.length;
    if (this.pendingBytes >= PENDING_HIGH_WATER) this.needDrain = true;
    return !this.needDrain;
  }

  /** Request body bytes (the head goes first, chunked unless the request has a Content-Length). */
  write(chunk: Buffer | string): boolean {
    if (this.ended || this.aborted) return false;
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (!this.headSent) {
      this.headSent = true;
      this.chunked = !this.hasLength;
      this.out(this.head(this.chunked ? 'transfer-encoding: chunked\r\n' : ''));
    }
    if (buf.length === 0) return true;
    if (this.chunked) {
      this.out(`${buf.length.toString(16)}\r\n`);
      this.out(buf);
      return this.out('\r\n');
    }
    return this.out(buf);
  }

  end(chunk?: Buffer | string): void {
    if (this.ended || this.aborted) return;
    const last = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (!this.headSent && last && last.length > 0 && !this.hasLength) {
      // the whole body is known: sent with its length, as Node's client does
      this.headSent = true;
      this.out(this.head(`content-length: ${last.length}\r\n`));
      this.out(last);
    } else if (last && last.length > 0) this.write(last);
    this.ended = true;
    if (!this.headSent) {
      this.headSent = true;
      this.out(this.head(this.hasLength || NO_DEFAULT_BODY.has(this.method) ? '' : 'content-length: 0\r\n'));
    } else if (this.chunked) this.out('0\r\n\r\n');
    if (this.conn) this.conn.requestWritten();
  }

  once(ev: string, fn: () => void): this {
    if (ev === 'drain') (this.drainWaiters ??= []).push(fn);
    return this;
  }

  /** The socket (or the assignment of one) drained what this request wrote. */
  drained(): void {
    this.needDrain = false;
    const w = this.drainWaiters;
    if (!w) return;
    this.drainWaiters = undefined;
    for (const f of w) f();
  }

  /** Bound to a connection: what was written so far goes out. */
  assign(conn: H1ClientConnection): void {
    this.conn = conn;
    const p = this.pendingOut;
    this.pendingOut = undefined;
    this.pendingBytes = 0;
    if (p) {
      if (p.length === 1) conn.write(p[0]!);
      else {
        conn.socket.cork();
        for (const x of p) conn.write(x);
        conn.socket.uncork();
      }
    }
    if (this.ended) conn.requestWritten();
    if (this.needDrain && !conn.socket.writableNeedDrain) this.drained();
  }

  /** No callbacks after this; the connection (if any) is closed, not reused. */
  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    if (this.conn) this.conn.abortExchange(this);
    else this.pool.dequeue(this);
    this.response?.discard();
  }
}

/** One upstream connection; it carries one exchange at a time. */
export class H1ClientConnection implements ParserHandler, FlowControl {
  readonly parser: H1Parser;
  ex: H1Exchange | undefined;
  idleSince = 0;
  private responseDone = false;
  private closed = false;
  private readingPaused = false;

  constructor(
    readonly socket: net.Socket & { meshConnected?: () => boolean },
    private readonly pool: H1Pool,
    maxHeadBytes: number,
  ) {
    this.parser = new H1Parser('response', this, maxHeadBytes);
    socket.on('data', (d: Buffer) => {
      try {
        this.parser.execute(d);
      } catch (e) {
        this.failed(e instanceof H1ParseError ? `protocol error: ${e.message}` : (e as Error).message);
      }
    });
    socket.on('end', () => {
      try {
        this.parser.finish();
      } catch {
        // an incomplete response; the close below reports it
      }
      socket.destroy();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => this.failed(e.code ? `${e.code}: ${e.message}` : e.message));
    socket.on('close', () => this.failed('connection closed'));
    socket.on('drain', () => this.ex?.drained());
  }

  write(p: string | Buffer): boolean {
    // a connection given up on (the response ended first, or it failed) takes no more request bytes
    if (this.closed) return true;
    return typeof p === 'string' ? this.socket.write(p, 'latin1') : this.socket.write(p);
  }

  start(ex: H1Exchange): void {
    this.ex = ex;
    this.responseDone = false;
    ex.assign(this);
  }

  requestWritten(): void {
    const ex = this.ex;
    if (!ex) return;
    ex.written = true;
    if (this.responseDone) this.release();
  }

  onHead(head: MessageHead): BodyKind | -1 {
    const ex = this.ex;
    if (!ex) throw new H1ParseError(400, 'response without a request');
    const kind = bodyKindForResponse(head, ex.method);
    if (kind === -1) return -1; // 1xx: the final response follows
    ex.responded = true;
    const body = new BodySource(this);
    ex.response = body;
    if (!ex.aborted) ex.cb.onResponse(head.status, head.headers, body, this.socket);
    return kind;
  }

  onBody(chunk: Buffer): void {
    this.ex?.response?.push(chunk);
  }

  onComplete(trailers: RawHeaders | undefined): void {
    const ex = this.ex;
    if (!ex) return;
    this.responseDone = true;
    // the next response may only come for the next request
    this.parser.pause();
    // the connection's fate first, so that a request the end of this body sets off (a pipelined
    // downstream request) can have it
    if (ex.written) this.release();
    else {
      // the response ended before the request did: the upstream is not left with half a request
      this.ex = undefined;
      this.close();
    }
    ex.response?.pushEnd(trailers);
  }

  /** The exchange is over: back to the pool when the connection can carry another request. */
  private release(): void {
    const ex = this.ex;
    this.ex = undefined;
    if (this.readingPaused) this.resumeReading();
    if (this.closed) return;
    if (!this.parser.keepAlive || (ex && ex.aborted)) {
      this.close();
      return;
    }
    this.parser.resume();
    this.pool.released(this);
  }

  abortExchange(ex: H1Exchange): void {
    if (this.ex !== ex) return;
    this.ex = undefined;
    this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.destroy();
    this.pool.gone(this);
  }

  private failed(detail: string): void {
    const ex = this.ex;
    this.ex = undefined;
    if (!this.closed) {
      this.closed = true;
      this.socket.destroy();
      this.pool.gone(this);
    }
    if (!ex || ex.aborted) return;
    if (!ex.responded) ex.cb.onError(this.socket.meshConnected?.() ? 'reset' : 'connect_failure', detail);
    else if (!this.responseDone) ex.response?.fail(detail);
  }

  pauseReading(): void {
    if (!this.readingPaused) {
      this.readingPaused = true;
      this.socket.pause();
    }
  }

  resumeReading(): void {
    if (this.readingPaused) {
      this.readingPaused = false;
      this.socket.resume();
    }
  }
}

/** The HTTP/1.1 connections to one upstream host. */
export class H1Pool {
  private readonly idle: H1ClientConnection[] = [];
  private readonly queue: H1Exchange[] = [];
  private count = 0;
  private closing = false;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly opts: PoolOptions) {}

  /** Requests waiting for a connection. */
  get pending(): number {
    return this.queue.length;
  }

  /** Connections open (busy and idle). */
  get connections(): number {
    return this.count;
  }

  request(method: string, path: string, headers: RawHeaders, cb: ClientCallbacks): H1Exchange {
    const ex = new H1Exchange(this, method, path, headers, cb);
    const c = this.idle.pop();
    if (c) c.start(ex);
    else if (this.count < this.opts.maxConnections) this.open().start(ex);
    else {
      this.queue.push(ex);
      this.opts.onQueued?.();
    }
    return ex;
  }

  private open(): H1ClientConnection {
    this.count++;
    return new H1ClientConnection(this.opts.connect(), this, this.opts.maxResponseHeadBytes);
  }

  dequeue(ex: H1Exchange): void {
    const i = this.queue.indexOf(ex);
    if (i >= 0) {
      this.queue.splice(i, 1);
      this.opts.onDequeued?.();
    }
  }

  /** A connection finished an exchange and can carry another. */
  released(c: H1ClientConnection): void {
    if (this.closing) {
      c.close();
      return;
    }
    const next = this.queue.shift();
    if (next) {
      this.opts.onDequeued?.();
      c.start(next);
      return;
    }
    c.idleSince = performance.now();
    this.idle.push(c);
    if (this.opts.idleTimeoutMs > 0 && !this.idleTimer) this.scheduleIdleCheck(this.opts.idleTimeoutMs);
  }

  /** A connection closed (either side). */
  gone(c: H1ClientConnection): void {
    this.count--;
    const i = this.idle.indexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
    // a queued request gets the connection slot that freed up
    if (!this.closing && this.queue.length > 0 && this.count < this.opts.maxConnections) {
      const next = this.queue.shift()!;
      this.opts.onDequeued?.();
      this.open().start(next);
    }
  }

  /** Idle connections are in last-used order: the oldest are at the front. */
  private scheduleIdleCheck(ms: number): void {
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      const now = performance.now();
      const limit = this.opts.idleTimeoutMs;
      while (this.idle.length > 0 && now - this.idle[0]!.idleSince >= limit) this.idle[0]!.close();
      if (this.idle.length > 0) this.scheduleIdleCheck(Math.max(1, limit - (now - this.idle[0]!.idleSince)));
    }, ms);
    this.idleTimer.unref();
  }

  /** Idle connections close now, busy ones after their exchange; queued requests fail. */
  close(): void {
    this.closing = true;
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    for (const c of [...this.idle]) c.close();
    for (const ex of this.queue.splice(0)) {
      this.opts.onDequeued?.();
      ex.cb.onError('reset', 'connection pool closed');
    }
  }
}
