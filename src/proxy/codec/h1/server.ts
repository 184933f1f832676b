// The downstream side of the engine's HTTP/1.1 codec: one H1ServerConnection per plaintext connection
// the HTTP connection manager accepts. Requests are handled one at a time (pipelined ones wait in the
// parser's buffer), each as an H1Request (headers, and the body as a BodySource its reader pulls from)
// and an H1Response (writeHead/write/end with the framing HTTP/1.1 needs: Content-Length, chunked or
// close-delimited). What a response writes in one turn of the event loop leaves in one socket write.
// Behaviour kept from Node's http server, which this replaces on plaintext connections: a Date header,
// 100 Continue for `Expect: 100-continue`, Connection: close/keep-alive handling for HTTP/1.0 and 1.1,
// a request body nobody read is discarded after the response, CONNECT without an upgrade closes the
// connection, and a head not complete within 60 s gets 408. While a burst of connections is being accepted, the bytes
// a connection reads are parked and handled, in order, once the burst is in (see common/accept.ts).
import { STATUS_CODES } from 'node:http';
import type net from 'node:net';
import { acceptPacer, type Parked } from '../../common/accept';
import type { RawHeaders } from '../headers';
import { BodySource, type FlowControl } from './body';
import { bodyKindForRequest, BodyKind, H1ParseError, H1Parser, type MessageHead, type ParserHandler, type RequestPolicy } from './parser';

export interface H1ServerOptions {
  maxHeadBytes: number;
  /** accept_http_10 and max_headers_count of the HCM. */
  policy: RequestPolicy;
  /** Http1ProtocolOptions.default_host_for_http_10: the Host of an HTTP/1.0 request without one ('' = 400). */
  defaultHostForHttp10: string;
  /** A request head arrived; `upgrade` is the Upgrade protocol of an upgrade request, else ''. */
  onRequest(req: H1Request, res: H1Response, upgrade: string): void;
}

const HEADERS_TIMEOUT_MS = 60_000;

/** Whether a response with this status describes a body (not 1xx, 204 or 304). */
const headOfBody = (status: number) => status >= 200 && status !== 204 && status !== 304;
/** Parked bytes of one connection above which it stops reading until they are handled. */
const PARK_HIGH_WATER = 64 * 1024;
/** Response bytes gathered before they are written without waiting for the end of the turn. */
const FLUSH_AT = 16 * 1024;
const BAD_NAME = /[^!#$%&'*+\-.^_`|~0-9A-Za-z]/;
/** What Node's http module refuses in a header value (controls other than HTAB, and anything above 0xff). */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

let cachedDate: string | undefined;
/** The Date header value, computed at most once a second as Node's http server does. */
function dateHeader(): string {
  if (cachedDate === undefined) {
    cachedDate = new Date().toUTCString();
    setTimeout(() => (cachedDate = undefined), 1000 - new Date().getMilliseconds()).unref();
  }
  return cachedDate;
}

/** Connections whose current head has been arriving for a while: checked for the 60 s headers timeout. */
const slowHeads = new Set<H1ServerConnection>();
let slowHeadTimer: NodeJS.Timeout | undefined;
function watchHead(c: H1ServerConnection): void {
  slowHeads.add(c);
  slowHeadTimer ??= setInterval(() => {
    const now = Date.now();
    for (const x of slowHeads) x.checkHeadTimeout(now);
    if (slowHeads.size === 0) {
      clearInterval(slowHeadTimer);
      slowHeadTimer = undefined;
    }
  }, 5_000).unref();
}

/** A request as the HCM sees it: Node IncomingMessage's fields, and the body to read() (a BodySource). */
export class H1Request extends BodySource {
  readonly method: string;
  readonly url: string;
  readonly headers: RawHeaders;
  readonly httpVersion: string;
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor: number;
  /** No body follows the head (no Content-Length or Transfer-Encoding): nothing to read. */
  readonly bodyless: boolean;

  constructor(
    head: MessageHead,
    readonly socket: net.Socket,
    conn: FlowControl,
  ) {
    super(conn);
    this.method = head.method;
    this.url = head.target;
    this.headers = head.headers;
    this.httpVersionMinor = head.versionMinor;
    this.httpVersion = head.versionMinor === 1 ? '1.1' : '1.0';
    this.bodyless = bodyKindForRequest(head) === BodyKind.None;
  }
}

/** Envoy answers an HTTP/1.0 request in HTTP/1.0 (accept_http_10), everything else in HTTP/1.1. */
function statusLine(status: number, versionMinor: number): string {
  return `HTTP/1.${versionMinor === 0 ? 0 : 1} ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
}

/** What the HTTP connection manager hears of a response's fate (no events on the request path). */
export interface ResponseObserver {
  /** The response was handed to the socket completely. */
  responseFinished(): void;
  /** The connection closed before that. */
  responseClosed(): void;
}

function flushTick(r: H1Response): void {
  r.flushScheduled = false;
  r.flush();
}

/** The response to one H1Request: the subset of Node's ServerResponse the engine uses. */
export class H1Response {
  observer: ResponseObserver | undefined;
  /** 'close'/'finish'/'drain' listeners added with on()/once() (Node ServerResponse compatibility). */
  private listeners: Array<{ ev: string; fn: () => void; once: boolean }> | undefined;
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  writableFinished = false;
  /** The connection stays open after this response (HTTP/1.1 default, HTTP/1.0 keep-alive, no close). */
  shouldKeepAlive: boolean;
  private head: string | undefined;
  private out: Array<string | Buffer> = [];
  private outBytes = 0;
  flushScheduled = false;
  private chunked = false;
  private noBody = false;
  private hasLength = false;
  private trailers: RawHeaders | undefined;
  /** The response's headers were given but not yet serialised (framing still open). */
  private pendingHeaders: RawHeaders | undefined;
  detached = false;
  /** The connection failed under this response: nothing more is written (its 'close' still comes). */
  broken = false;

  constructor(
    readonly req: H1Request,
    private readonly conn: H1ServerConnection,
    keepAlive: boolean,
  ) {
    this.shouldKeepAlive = keepAlive;
  }

  on(ev: string, fn: () => void): this {
    (this.listeners ??= []).push({ ev, fn, once: false });
    return this;
  }

  once(ev: string, fn: () => void): this {
    (this.listeners ??= []).push({ ev, fn, once: true });
    return this;
  }

  emit(ev: 'close' | 'finish' | 'drain'): void {
    if (ev === 'finish') this.observer?.responseFinished();
    else if (ev === 'close') this.observer?.responseClosed();
    const ls = this.listeners;
    if (!ls) return;
    for (const l of [...ls]) {
      if (l.ev !== ev) continue;
      if (l.once) ls.splice(ls.indexOf(l), 1);
      l.fn();
    }
  }

  get socket(): net.Socket {
    return this.conn.socket;
  }

  writeHead(status: number, headers?: RawHeaders): this {
    if (this.headersSent || this.pendingHeaders) throw new Error('writeHead: headers already sent');
    this.statusCode = status;
    this.pendingHeaders = headers ?? {};
    this.noBody = this.req.method === 'HEAD' || status === 204 || status === 304 || (status >= 100 && status < 200);
    return this;
  }

  /** Serialises the head once the framing is known (at the first body write, or end with the body length). */
  private serializeHead(endLength: number | undefined): void {
    const h = this.pendingHeaders ?? {};
    this.pendingHeaders = undefined;
    this.headersSent = true;
    let s = statusLine(this.statusCode, this.req.httpVersionMinor);
    let hasDate = false;
    let close = !this.shouldKeepAlive;
    for (const k in h) {
      const v = h[k];
      if (v === undefined) continue;
      if (BAD_NAME.test(k) || k.length === 0) continue;
      switch (k) {
        case 'content-length':
          this.hasLength = true;
          break;
        case 'date':
          hasDate = true;
          break;
        case 'transfer-encoding':
          continue; // framing is this codec's business
        case 'connection': {
          const lv = (typeof v === 'string' ? v : v.join(',')).toLowerCase();
          if (lv.includes('close')) close = true;
          continue; // re-added below from the decision
        }
      }
      if (typeof v === 'string') {
        if (BAD_VALUE.test(v)) continue;
        s += `${k}: ${v}\r\n`;
      } else {
        for (const x of v) if (!BAD_VALUE.test(x)) s += `${k}: ${x}\r\n`;
      }
    }
    if (!hasDate) s += `date: ${dateHeader()}\r\n`;
    if (!this.noBody && !this.hasLength) {
      if (endLength !== undefined && this.trailers === undefined) {
        s += `content-length: ${endLength}\r\n`;
        this.hasLength = true;
      } else if (this.req.httpVersionMinor === 1) {
        s += 'transfer-encoding: chunked\r\n';
        this.chunked = true;
      } else {
        close = true; // HTTP/1.0 without a length: the end of the connection ends the body
      }
    } else if (this.req.method === 'HEAD' && !this.hasLength && this.req.httpVersionMinor === 1 && headOfBody(this.statusCode)) {
      // as Envoy's HTTP/1 codec: a HEAD response without a length says `chunked`, as the GET's would (RFC 9110
      // 9.3.2), though no body follows
      s += 'transfer-encoding: chunked\r\n';
    }
    if (close) {
      this.shouldKeepAlive = false;
      s += 'connection: close\r\n';
    } else if (this.req.httpVersionMinor === 0) {
      s += 'connection: keep-alive\r\n';
    }
    this.head = `${s}\r\n`;
    this.outBytes += this.head.length;
  }

  write(chunk: Buffer | string): boolean {
    if (this.writableEnded || this.detached || this.broken) return false;
    if (!this.headersSent) {
      if (!this.pendingHeaders) this.writeHead(this.statusCode);
      this.serializeHead(undefined);
    }
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (buf.length === 0 || this.noBody) return true;
    this.pushBody(buf);
    if (this.outBytes >= FLUSH_AT) this.flush();
    else if (!this.flushScheduled) {
      this.flushScheduled = true;
      process.nextTick(flushTick, this);
    }
    return !this.conn.socket.writableNeedDrain;
  }

  private pushOut(p: string | Buffer): void {
    this.out.push(p);
    this.outBytes += p.length; // strings here are latin1: one byte per character
  }

  private pushBody(buf: Buffer): void {
    if (this.chunked) {
      this.pushOut(`${buf.length.toString(16)}\r\n`);
      this.pushOut(buf);
      this.pushOut('\r\n');
    } else this.pushOut(buf);
  }

  addTrailers(t: RawHeaders): void {
    this.trailers = t;
  }

  end(chunk?: Buffer | string): this {
    if (this.writableEnded || this.detached || this.broken) return this;
    if (!this.headersSent) {
      if (!this.pendingHeaders) this.writeHead(this.statusCode);
      const body = chunk === undefined ? undefined : typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      this.serializeHead(this.noBody ? undefined : (body?.length ?? 0));
      if (body && body.length > 0 && !this.noBody) {
        this.pushBody(body);
      }
    } else if (chunk !== undefined) {
      this.write(chunk);
    }
    if (this.chunked) {
      let last = '0\r\n';
      if (this.trailers) {
        for (const k in this.trailers) {
          const v = this.trailers[k];
          if (v === undefined || BAD_NAME.test(k)) continue;
          for (const x of typeof v === 'string' ? [v] : v) if (!BAD_VALUE.test(x)) last += `${k}: ${x}\r\n`;
        }
      }
      this.pushOut(`${last}\r\n`);
    }
    this.writableEnded = true;
    this.flush();
    this.writableFinished = true;
    this.emit('finish');
    this.conn.responseDone(this);
    return this;
  }

  /** Writes what was gathered in one socket write. */
  flush(): void {
    const socket = this.conn.socket;
    const head = this.head;
    const out = this.out;
    if (head === undefined && out.length === 0) return;
    this.head = undefined;
    if (!socket.writable) {
      this.out = [];
      this.outBytes = 0;
      return;
    }
    if (out.length === 0) socket.write(head!, 'latin1');
    else if (head === undefined && out.length === 1) {
      const only = out[0]!;
      if (typeof only === 'string') socket.write(only, 'latin1');
      else socket.write(only);
    } else {
      const buf = Buffer.allocUnsafe(this.outBytes);
      let off = head === undefined ? 0 : buf.write(head, 0, 'latin1');
      for (const p of out) off += typeof p === 'string' ? buf.write(p, off, 'latin1') : p.copy(buf, off);
      socket.write(off === buf.length ? buf : buf.subarray(0, off));
    }
    this.out = [];
    this.outBytes = 0;
  }

  destroy(): void {
    this.conn.socket.destroy();
  }

  /** Hands the socket over (upgrades): the codec stops reading and writing it. */
  detachSocket(): void {
    this.detached = true;
    this.conn.detach();
  }
}

/** One downstream HTTP/1.1 connection. */
export class H1ServerConnection implements ParserHandler, FlowControl, Parked {
  private readonly parser: H1Parser;
  private req: H1Request | undefined;
  private res: H1Response | undefined;
  private reqComplete = false;
  private executing = false;
  private resumeWanted = false;
  private readingPaused = false;
  private peerEnded = false;
  private closed = false;
  private upgrading = false;
  headStartedAt = 0;
  /** HTTP/1.x of the request whose head was read: what a protocol error found after the head is answered in. */
  private versionMinor = 1;
  /** Bytes read while the accept pacer parks work, not yet handled (in arrival order). */
  private parked: Buffer[] | undefined;
  private parkedBytes = 0;
  /** The peer's end arrived behind parked bytes. */
  private parkedEnd = false;
  /** Reading stopped because too much is parked. */
  private parkPaused = false;

  private readonly onData = (d: Buffer) => {
    if (this.parked !== undefined || acceptPacer.parking) this.park(d);
    else this.feed(d);
  };
  private readonly onEnd = () => {
    if (this.parked !== undefined) this.parkedEnd = true;
    else this.peerEnd();
  };
  private readonly onClose = () => this.gone();
  private readonly onDrain = () => this.res?.emit('drain');

  constructor(
    readonly socket: net.Socket,
    private readonly opts: H1ServerOptions,
  ) {
    this.parser = new H1Parser('request', this, opts.maxHeadBytes, opts.policy);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('drain', this.onDrain);
  }

  private park(d: Buffer): void {
    if (this.parked === undefined) {
      this.parked = [d];
      acceptPacer.park(this);
    } else this.parked.push(d);
    this.parkedBytes += d.length;
    if (this.parkedBytes >= PARK_HIGH_WATER && !this.parkPaused) {
      this.parkPaused = true;
      this.socket.pause();
    }
  }

  /** The accept burst is over: what was parked is handled now, then the peer's end if it came. */
  unpark(): void {
    const chunks = this.parked;
    if (chunks === undefined) return;
    while (chunks.length > 0 && !this.closed) this.feed(chunks.shift()!);
    this.parked = undefined;
    this.parkedBytes = 0;
    if (this.closed) return;
    if (this.parkPaused) {
      this.parkPaused = false;
      if (!this.readingPaused) this.socket.resume();
    }
    if (this.parkedEnd) {
      this.parkedEnd = false;
      this.peerEnd();
    }
  }

  private feed(d: Buffer): void {
    this.executing = true;
    try {
      this.parser.execute(d);
    } catch (e) {
      this.executing = false;
      this.protocolError(e);
      return;
    }
    this.executing = false;
    this.afterExecute();
  }

  private afterExecute(): void {
    while (this.resumeWanted && !this.closed) {
      this.resumeWanted = false;
      this.executing = true;
      try {
        this.parser.resume();
      } catch (e) {
        this.executing = false;
        this.protocolError(e);
        return;
      }
      this.executing = false;
    }
    // a head still incomplete after this read: watched for the headers timeout
    if (!this.req && !this.closed && this.parser.inMessage) {
      if (this.headStartedAt === 0) {
        this.headStartedAt = Date.now();
        watchHead(this);
      }
    } else if (this.headStartedAt !== 0) {
      this.headStartedAt = 0;
      slowHeads.delete(this);
    }
  }

  checkHeadTimeout(now: number): void {
    if (this.headStartedAt === 0 || this.closed) {
      slowHeads.delete(this);
      return;
    }
    if (now - this.headStartedAt < HEADERS_TIMEOUT_MS) return;
    slowHeads.delete(this);
    this.headStartedAt = 0;
    if (this.socket.writable) this.socket.end('HTTP/1.1 408 Request Timeout\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
    this.socket.destroySoon();
    this.closed = true;
  }

  onHead(head: MessageHead): BodyKind {
    this.versionMinor = head.versionMinor;
    if (head.hostCount > 1) throw new H1ParseError(400, 'more than one host header');
    if (head.versionMinor === 0 && head.hostCount === 0) {
      // Envoy: an accepted HTTP/1.0 request needs a Host, or default_host_for_http_10
      if (!this.opts.defaultHostForHttp10) throw new H1ParseError(400, 'HTTP/1.0 request without a host');
      head.headers['host'] = this.opts.defaultHostForHttp10;
      head.hostCount = 1;
    }
    const req = new H1Request(head, this.socket, this);
    const upgrade = head.upgrade;
    const res = new H1Response(req, this, head.keepAlive && !upgrade);
    this.req = req;
    this.res = res;
    this.reqComplete = false;
    if (head.method === 'CONNECT') {
      // no CONNECT support on HTTP/1.1 (Node's server without a 'connect' listener closes too)
      this.parser.pause();
      this.socket.destroy();
      return BodyKind.None;
    }
    if (upgrade) {
      // the bytes after the head belong to the upgraded protocol
      this.upgrading = true;
      this.parser.pause();
      this.opts.onRequest(req, res, upgrade);
      return BodyKind.None;
    }
    const expect = head.headers['expect'];
    if (typeof expect === 'string' && expect.toLowerCase() === '100-continue' && head.versionMinor === 1 && !req.bodyless) {
      this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    }
    this.opts.onRequest(req, res, '');
    return bodyKindForRequest(head);
  }

  onBody(chunk: Buffer): void {
    this.req?.push(chunk);
  }

  onComplete(trailers: RawHeaders | undefined): void {
    if (this.upgrading) return;
    const req = this.req;
    if (!req) return;
    this.reqComplete = true;
    req.pushEnd(trailers);
    if (this.res && this.res.writableEnded) this.nextRequest();
    else this.parser.pause();
  }

  /** The response is complete: the next request may be read, or the connection ends. */
  responseDone(res: H1Response): void {
    if (res !== this.res) return;
    if (!res.shouldKeepAlive || this.peerEnded) {
      this.closed = true;
      this.parser.pause();
      this.socket.end();
      return;
    }
    if (!this.reqComplete) {
      // the rest of the request body is read and dropped, then the next request is parsed
      this.req?.discard();
      return;
    }
    this.nextRequest();
    if (this.parser.isPaused) {
      if (this.executing) this.resumeWanted = true;
      else {
        this.resumeWanted = true;
        this.afterExecute();
      }
    }
  }

  private nextRequest(): void {
    if (this.req && !this.req.complete) return;
    this.req = undefined;
    this.res = undefined;
    this.reqComplete = false;
    this.versionMinor = 1;
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
      if (!this.parkPaused) this.socket.resume();
    }
  }

  private peerEnd(): void {
    this.peerEnded = true;
    try {
      this.parser.finish();
    } catch {
      // an incomplete request: nothing to answer
      this.socket.destroy();
      return;
    }
    if (!this.req) this.socket.end();
  }

  private gone(): void {
    this.closed = true;
    this.parked = undefined;
    slowHeads.delete(this);
    const res = this.res;
    const req = this.req;
    this.res = undefined;
    this.req = undefined;
    this.socket.removeListener('data', this.onData);
    this.socket.removeListener('end', this.onEnd);
    this.socket.removeListener('drain', this.onDrain);
    if (req && !req.complete) req.fail('downstream connection closed');
    if (res && !res.detached) res.emit('close');
  }

  /** Stops using the socket (upgrade splice); bytes read past the head are put back. */
  detach(): void {
    this.closed = true;
    this.socket.removeListener('data', this.onData);
    this.socket.removeListener('end', this.onEnd);
    this.socket.removeListener('close', this.onClose);
    this.socket.removeListener('drain', this.onDrain);
    slowHeads.delete(this);
    const rest = this.parser.takeRemaining();
    // parked bytes follow what the parser held (the new owner resumes reading, see router.ts)
    const more = this.parked;
    this.parked = undefined;
    this.parkPaused = false;
    const all = more && more.length > 0 ? Buffer.concat([rest, ...more]) : rest;
    if (all.length > 0) this.socket.unshift(all);
  }

  private protocolError(e: unknown): void {
    this.closed = true;
    this.parser.pause();
    const socket = this.socket;
    // the response in progress, if any, can no longer be written
    if (this.res) this.res.broken = true;
    if (!(e instanceof H1ParseError) || (this.res && this.res.headersSent) || !socket.writable) {
      socket.destroy();
      return;
    }
    const text = STATUS_CODES[e.status] ?? 'Bad Request';
    socket.end(
      `HTTP/1.${this.versionMinor} ${e.status} ${text}\r\ncontent-length: ${text.length}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n${text}`,
    );
  }
}
