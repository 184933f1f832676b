// An incremental HTTP/1.1 message parser (RFC 9112) for the engine's own HTTP/1 codec: request heads
// downstream, response heads upstream, and Content-Length, chunked and (responses only) close-delimited
// bodies. It is strict where leniency lets a request be read two ways (request smuggling): CRLF line
// ends, no whitespace before a header colon, no obs-fold, no control characters in values, one
// Content-Length value, Transfer-Encoding and Content-Length not together, chunked last. Node's own
// parser (llhttp) is strict in the same places; this one exists because Node's http module, not
// parsing, is what limits a proxy's throughput (see BENCHMARKS.md).
// Request lines are judged as Envoy's codec (balsa_parser.cc, codec_impl.cc) judges them, and as early: a method
// outside Envoy's list (so `get`) is 400; a request-target balsa's isUrlValid refuses is 400; HTTP/1.0 and
// HTTP/0.9 are 426 unless accepted (Http1ProtocolOptions.accept_http_10), other versions 426 too; more than
// max_headers_count header lines is 431; a first byte that is a control or white-space character is 400 at once,
// and a request line is judged as soon as its line end arrives, not when the head is complete, so a peer that
// sends something that is not HTTP is answered and closed instead of held until the headers time-out.
// Differs on purpose: a request line ending in a bare LF is 400 (Envoy accepts bare LF line ends; this codec
// reads CRLF only, which keeps one reading of a message's framing).
import type { RawHeaders } from '../headers';

/** A malformed or unacceptable message; `status` is what a server answers (400, 431, 501). */
export class H1ParseError extends Error {
  override readonly name = 'H1ParseError';
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {
    super(reason);
  }
}

export interface MessageHead {
  /** Requests: method and request-target as sent. */
  method: string;
  target: string;
  /** Responses: status code and reason phrase. */
  status: number;
  reason: string;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  versionMinor: number;
  /** Lower-case names; a repeated header is an array of its values in order. */
  headers: RawHeaders;
  /** -1 when absent. */
  contentLength: number;
  chunked: boolean;
  /** The connection may carry another message after this one (version default and Connection). */
  keepAlive: boolean;
  /** Connection: upgrade with an Upgrade header (requests), the value of Upgrade lower-cased; else ''. */
  upgrade: string;
  /** Number of Host header lines (requests). */
  hostCount: number;
}

/** How the body that follows a head is delimited. */
export const enum BodyKind {
  None = 0,
  Length = 1,
  Chunked = 2,
  /** Until the connection closes (responses without length). */
  Eof = 3,
}

export interface ParserHandler {
  /**
   * A complete head. Returns how its body is delimited (see bodyKindFor*); a response's depends on the
   * request (HEAD) so the caller decides. Returning -1 skips the message (1xx informational responses).
   */
  onHead(head: MessageHead): BodyKind | -1;
  onBody(chunk: Buffer): void;
  onComplete(trailers: RawHeaders | undefined): void;
}

const enum State {
  Head = 0,
  Length = 1,
  ChunkSize = 2,
  ChunkData = 3,
  ChunkDataEnd = 4,
  Trailers = 5,
  Eof = 6,
  Done = 7,
  Error = 8,
}

const CRLF = Buffer.from('\r\n');
const CRLFCRLF = Buffer.from('\r\n\r\n');
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Control characters other than HTAB (RFC 9110 field-value), DEL included. */
const BAD_VALUE = /[\x00-\x08\x0a-\x1f\x7f]/;
/** request-target: visible characters (obs-text allowed), no whitespace or controls. */
const BAD_TARGET = /[\x00-\x20\x7f]/;
const DIGITS = /^\d{1,15}$/;
/** The request methods Envoy's HTTP/1 codec accepts (balsa_parser.cc isMethodValid, http-parser's list). */
const METHODS: ReadonlySet<string> = new Set([
  'ACL',
  'BIND',
  'CHECKOUT',
  'CONNECT',
  'COPY',
  'DELETE',
  'GET',
  'HEAD',
  'LINK',
  'LOCK',
  'MERGE',
  'MKACTIVITY',
  'MKCALENDAR',
  'MKCOL',
  'MOVE',
  'MSEARCH',
  'NOTIFY',
  'OPTIONS',
  'PATCH',
  'POST',
  'PROPFIND',
  'PROPPATCH',
  'PURGE',
  'PUT',
  'REBIND',
  'REPORT',
  'SEARCH',
  'SOURCE',
  'SUBSCRIBE',
  'TRACE',
  'UNBIND',
  'UNLINK',
  'UNLOCK',
  'UNSUBSCRIBE',
]);
/** Path and query characters balsa's isUrlValid allows: HTAB, FF and visible ASCII (no obs-text). */
const PATH_QUERY = /^[\t\f!-~]*$/;
/** Authority characters it allows (alphanumerics and sub-delims, ':', '@', '[', ']', '%', '.', '-', '_', '~'). */
const AUTHORITY = /^[A-Za-z0-9!$%&'()*+,\-.:;=@[\]_~]*$/;

/** What a server accepts beyond the message syntax (an HCM's settings; a client reading responses uses none). */
export interface RequestPolicy {
  /** Http1ProtocolOptions.accept_http_10: HTTP/1.0 and 0.9 requests are served, else answered 426. */
  acceptHttp10: boolean;
  /** HttpProtocolOptions.max_headers_count: more header lines than this is 431. */
  maxHeadersCount: number;
  /** Http1ProtocolOptions.allow_custom_methods: any token is a method, not only Envoy's list. */
  allowCustomMethods: boolean;
}

/** No policy: every version this parser reads, any number of headers, any token as method (unit tests, tools). */
export const LENIENT: RequestPolicy = { acceptHttp10: true, maxHeadersCount: Infinity, allowCustomMethods: true };

/** Envoy's isUrlValid: origin form or '*', absolute form (scheme://authority[path]), authority form for CONNECT. */
function urlValid(target: string, isConnect: boolean): boolean {
  if (target.length === 0) return false;
  const c = target.charCodeAt(0);
  if (c === 47 || c === 42) return PATH_QUERY.test(target.slice(1)); // '/' or '*'
  let rest = target;
  if (!isConnect) {
    const m = /^[A-Za-z]+:\/\//.exec(target);
    if (!m) return false;
    rest = target.slice(m[0].length);
  }
  let split = rest.search(/[/?]/);
  if (split < 0) split = rest.length;
  const host = rest.slice(0, split);
  return AUTHORITY.test(host) && !host.includes('@@') && PATH_QUERY.test(rest.slice(split));
}
const MAX_CHUNK_LINE = 4096;

function trimOws(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 32 || s.charCodeAt(a) === 9)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 32 || s.charCodeAt(b - 1) === 9)) b--;
  return a === 0 && b === s.length ? s : s.slice(a, b);
}

function addHeader(h: RawHeaders, name: string, value: string): void {
  const prev = h[name];
  if (prev === undefined) h[name] = value;
  else if (typeof prev === 'string') h[name] = [prev, value];
  else prev.push(value);
}

/** Lower-case comma-separated tokens of a header value (Connection, Transfer-Encoding). */
export function headerTokens(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  const s = typeof v === 'string' ? v : v.join(',');
  const out: string[] = [];
  for (const part of s.split(',')) {
    const t = trimOws(part).toLowerCase();
    if (t) out.push(t);
  }
  return out;
}

/** Parses header lines `lines[from..]` into `h`; returns facts the framing needs. */
function parseFields(text: string, from: number, h: RawHeaders, head: MessageHead | undefined, maxCount = Infinity): void {
  let pos = from;
  const n = text.length;
  let count = 0;
  let te: string | undefined;
  let conn: string | undefined;
  let hasUpgrade = false;
  while (pos < n) {
    let eol = text.indexOf('\r\n', pos);
    if (eol < 0) eol = n;
    const c0 = text.charCodeAt(pos);
    if (c0 === 32 || c0 === 9) throw new H1ParseError(400, 'obsolete line folding in a header');
    if (++count > maxCount) throw new H1ParseError(431, `more than ${maxCount} headers`);
    const colon = text.indexOf(':', pos);
    if (colon <= pos || colon > eol) throw new H1ParseError(400, 'header line without a name and colon');
    const rawName = text.slice(pos, colon);
    if (!TOKEN.test(rawName)) throw new H1ParseError(400, `invalid header name '${rawName.slice(0, 64)}'`);
    const value = trimOws(text.slice(colon + 1, eol));
    if (BAD_VALUE.test(value)) throw new H1ParseError(400, `invalid character in the value of header '${rawName}'`);
    const name = rawName.toLowerCase();
    pos = eol + 2;
    if (name === '__proto__') continue;
    if (head) {
      switch (name) {
        case 'content-length': {
          if (!DIGITS.test(value)) throw new H1ParseError(400, `invalid content-length '${value.slice(0, 32)}'`);
          const len = Number(value);
          if (head.contentLength >= 0 && head.contentLength !== len) throw new H1ParseError(400, 'conflicting content-length headers');
          if (head.contentLength >= 0) continue; // a repeated identical value counts once
          head.contentLength = len;
          break;
        }
        case 'transfer-encoding':
          te = te === undefined ? value : `${te},${value}`;
          break;
        case 'connection':
          conn = conn === undefined ? value : `${conn},${value}`;
          break;
        case 'host':
          head.hostCount++;
          break;
        case 'upgrade':
          hasUpgrade = true;
          break;
      }
    }
    addHeader(h, name, value);
  }
  if (!head) return;
  if (te !== undefined) {
    const codings = headerTokens(te);
    if (codings.length === 0 || codings[codings.length - 1] !== 'chunked')
      throw new H1ParseError(400, `transfer-encoding '${te.slice(0, 64)}' does not end with chunked`);
    if (codings.length > 1) throw new H1ParseError(501, `unsupported transfer-encoding '${te.slice(0, 64)}'`);
    if (head.contentLength >= 0) throw new H1ParseError(400, 'both content-length and transfer-encoding');
    head.chunked = true;
  }
  let close = false;
  let keepAlive = false;
  let upgradeToken = false;
  if (conn !== undefined) {
    for (const t of headerTokens(conn)) {
      if (t === 'close') close = true;
      else if (t === 'keep-alive') keepAlive = true;
      else if (t === 'upgrade') upgradeToken = true;
    }
  }
  head.keepAlive = !close && (head.versionMinor === 1 || keepAlive);
  if (upgradeToken && hasUpgrade) {
    const u = h['upgrade'];
    head.upgrade = (typeof u === 'string' ? u : u![0]!).toLowerCase();
  }
}

function newHead(): MessageHead {
  return {
    method: '',
    target: '',
    status: 0,
    reason: '',
    versionMinor: 1,
    headers: {},
    contentLength: -1,
    chunked: false,
    keepAlive: true,
    upgrade: '',
    hostCount: 0,
  };
}

function version(s: string): number {
  if (s === 'HTTP/1.1') return 1;
  if (s === 'HTTP/1.0') return 0;
  throw new H1ParseError(s.startsWith('HTTP/') ? 505 : 400, `unsupported HTTP version '${s.slice(0, 16)}'`);
}

/** Envoy's verdict on a request's HTTP version: 1.1 is served, 1.0 only when accepted, any other HTTP/x.y is 426. */
function requestVersion(s: string, policy: RequestPolicy): number {
  if (s === 'HTTP/1.1') return 1;
  if (!/^HTTP\/\d\.\d$/.test(s)) throw new H1ParseError(400, `malformed HTTP version '${s.slice(0, 16)}'`);
  if (!policy.acceptHttp10) throw new H1ParseError(426, `HTTP/1.1 required, got '${s}'`);
  return version(s);
}

/** Judges a request line (without its CRLF) into `head`; throws the status Envoy answers it with. */
function parseRequestLine(line: string, head: MessageHead, policy: RequestPolicy): void {
  const sp1 = line.indexOf(' ');
  if (sp1 <= 0) throw new H1ParseError(400, 'malformed request line');
  head.method = line.slice(0, sp1);
  if (!(policy.allowCustomMethods ? TOKEN.test(head.method) : METHODS.has(head.method)))
    throw new H1ParseError(400, `invalid method '${head.method.slice(0, 32)}'`);
  const sp2 = line.indexOf(' ', sp1 + 1);
  if (sp2 < 0) {
    // HTTP/0.9: a method and a target, no version
    throw new H1ParseError(policy.acceptHttp10 ? 400 : 426, 'HTTP/0.9 request');
  }
  head.target = line.slice(sp1 + 1, sp2);
  if (BAD_TARGET.test(head.target) || !urlValid(head.target, head.method === 'CONNECT')) throw new H1ParseError(400, 'invalid request target');
  head.versionMinor = requestVersion(line.slice(sp2 + 1), policy);
}

/** Parses a request head (without the final empty line). Exported for tests. */
export function parseRequestHead(text: string, policy: RequestPolicy = LENIENT): MessageHead {
  const head = newHead();
  let eol = text.indexOf('\r\n');
  if (eol < 0) eol = text.length;
  parseRequestLine(text.slice(0, eol), head, policy);
  parseFields(text, eol + 2, head.headers, head, policy.maxHeadersCount);
  return head;
}

/**
 * Judges the start of a request head not complete yet, as Envoy does before the end of the head: a first byte that
 * is a control or white-space character, and a complete request line. Returns whether the request line was judged.
 */
function checkPartialRequest(buf: Buffer, off: number, policy: RequestPolicy): boolean {
  const c = buf[off]!;
  // a lone CR or LF before the request line: Envoy skips it, this codec waits for what follows
  if (c === 13 || c === 10) return false;
  if (c <= 0x20) throw new H1ParseError(400, 'a request does not start with a method');
  const lf = buf.indexOf(10, off);
  if (lf < 0) return false;
  if (lf === off || buf[lf - 1] !== 13) throw new H1ParseError(400, 'request line not ended by CRLF');
  parseRequestLine(buf.toString('latin1', off, lf - 1), newHead(), policy);
  return true;
}

/** Parses a response head (without the final empty line). Exported for tests. */
export function parseResponseHead(text: string): MessageHead {
  const head = newHead();
  let eol = text.indexOf('\r\n');
  if (eol < 0) eol = text.length;
  const sp1 = text.indexOf(' ');
  if (sp1 <= 0 || sp1 > eol) throw new H1ParseError(400, 'malformed status line');
  head.versionMinor = version(text.slice(0, sp1));
  const code = text.slice(sp1 + 1, sp1 + 4);
  if (!/^[1-9]\d\d$/.test(code)) throw new H1ParseError(400, 'malformed status code');
  head.status = Number(code);
  const rest = text.slice(sp1 + 4, eol);
  if (rest.length > 0 && rest.charCodeAt(0) !== 32) throw new H1ParseError(400, 'malformed status line');
  head.reason = rest.slice(1);
  if (BAD_VALUE.test(head.reason)) throw new H1ParseError(400, 'invalid character in the reason phrase');
  parseFields(text, eol + 2, head.headers, head);
  return head;
}

/** A request's body delimitation (RFC 9112 §6.3). */
export function bodyKindForRequest(h: MessageHead): BodyKind {
  if (h.chunked) return BodyKind.Chunked;
  return h.contentLength > 0 ? BodyKind.Length : BodyKind.None;
}

/** A response's body delimitation given the request method (RFC 9112 §6.3); -1 for 1xx (skipped). */
export function bodyKindForResponse(h: MessageHead, requestMethod: string): BodyKind | -1 {
  if (h.status < 200) return -1;
  if (requestMethod === 'HEAD' || h.status === 204 || h.status === 304) return BodyKind.None;
  if (h.chunked) return BodyKind.Chunked;
  if (h.contentLength >= 0) return h.contentLength > 0 ? BodyKind.Length : BodyKind.None;
  return BodyKind.Eof;
}

/**
 * Feed it bytes with execute(); it calls the handler for each head, body chunk (zero-copy views of the
 * input) and message end. pause() (typically from onComplete or onHead) stops it after the current
 * callback; bytes it has not consumed stay buffered until resume().
 */
export class H1Parser {
  private state = State.Head;
  private buf: Buffer | undefined;
  private off = 0;
  /** Where the search for the end of the head resumes. */
  private scanned = 0;
  private remaining = 0;
  private paused = false;
  private readonly isRequest: boolean;
  /** The message in progress keeps the connection open afterwards. */
  keepAlive = true;
  /** Bytes of the current body delivered (for close-delimited and diagnostics). */
  bodyBytes = 0;

  /** The request line of the head in progress was judged already (the head is still incomplete). */
  private lineChecked = false;

  constructor(
    kind: 'request' | 'response',
    private readonly handler: ParserHandler,
    private readonly maxHeadBytes: number,
    private readonly policy: RequestPolicy = LENIENT,
  ) {
    this.isRequest = kind === 'request';
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** A head or body is partially received. */
  get inMessage(): boolean {
    return this.state !== State.Head || (this.buf !== undefined && this.off < this.buf.length);
  }

  /** Bytes received but not consumed (after pause(), or an incomplete head). */
  takeRemaining(): Buffer {
    const b = this.buf && this.off < this.buf.length ? this.buf.subarray(this.off) : Buffer.alloc(0);
    this.buf = undefined;
    this.off = 0;
    return b;
  }

  pause(): void {
    this.paused = true;
  }

  /** Continues with buffered bytes. */
  resume(): void {
    this.paused = false;
    if (this.state === State.Done) this.state = State.Head;
    this.run();
  }

  execute(data: Buffer): void {
    if (this.state === State.Error) return;
    if (this.buf && this.off < this.buf.length) {
      this.buf = Buffer.concat([this.buf.subarray(this.off), data]);
      this.scanned = Math.max(0, this.scanned - this.off);
    } else {
      this.buf = data;
      this.scanned = 0;
    }
    this.off = 0;
    if (!this.paused) this.run();
  }

  /** The peer closed its side: completes a close-delimited body; an incomplete message is an error. */
  finish(): void {
    if (this.state === State.Eof) {
      this.state = State.Done;
      this.handler.onComplete(undefined);
      return;
    }
    if (this.state !== State.Head && this.state !== State.Done && this.state !== State.Error) {
      this.state = State.Error;
      throw new H1ParseError(400, 'connection closed in the middle of a message');
    }
  }

  private fail(e: unknown): never {
    this.state = State.Error;
    this.buf = undefined;
    throw e;
  }

  private run(): void {
    while (!this.paused) {
      const buf = this.buf;
      if (this.state === State.Done) this.state = State.Head;
      if (this.state === State.Eof) {
        if (buf && this.off < buf.length) {
          const chunk = this.off === 0 ? buf : buf.subarray(this.off);
          this.buf = undefined;
          this.off = 0;
          this.bodyBytes += chunk.length;
          this.handler.onBody(chunk);
        }
        return;
      }
      if (!buf || this.off >= buf.length) {
        this.buf = undefined;
        this.off = 0;
        return;
      }
      switch (this.state) {
        case State.Head:
          if (!this.readHead(buf)) return;
          break;
        case State.Length: {
          const n = Math.min(this.remaining, buf.length - this.off);
          const chunk = this.off === 0 && n === buf.length ? buf : buf.subarray(this.off, this.off + n);
          this.off += n;
          this.remaining -= n;
          this.bodyBytes += n;
          if (this.remaining === 0) this.state = State.Done;
          this.handler.onBody(chunk);
          if (this.state === State.Done) this.complete(undefined);
          break;
        }
        case State.ChunkSize:
          if (!this.readChunkSize(buf)) return;
          break;
        case State.ChunkData: {
          const n = Math.min(this.remaining, buf.length - this.off);
          const chunk = buf.subarray(this.off, this.off + n);
          this.off += n;
          this.remaining -= n;
          this.bodyBytes += n;
          if (this.remaining === 0) this.state = State.ChunkDataEnd;
          this.handler.onBody(chunk);
          break;
        }
        case State.ChunkDataEnd:
          if (!this.readChunkDataEnd(buf)) return;
          break;
        case State.Trailers:
          if (!this.readTrailers(buf)) return;
          break;
        default:
          return;
      }
    }
  }

  /** A chunk-size line (extensions checked, not used); false when more bytes are needed. */
  private readChunkSize(buf: Buffer): boolean {
    const eol = buf.indexOf(CRLF, this.off);
    if (eol < 0) {
      if (buf.length - this.off > MAX_CHUNK_LINE) this.fail(new H1ParseError(400, 'chunk size line too long'));
      return false;
    }
    const line = buf.toString('latin1', this.off, eol);
    this.off = eol + 2;
    const semi = line.indexOf(';');
    const hex = trimOws(semi >= 0 ? line.slice(0, semi) : line);
    if (!/^[0-9a-fA-F]{1,12}$/.test(hex)) this.fail(new H1ParseError(400, 'invalid chunk size'));
    if (semi >= 0 && BAD_VALUE.test(line.slice(semi))) this.fail(new H1ParseError(400, 'invalid chunk extension'));
    const size = parseInt(hex, 16);
    if (size === 0) {
      this.state = State.Trailers;
      this.scanned = this.off;
    } else {
      this.remaining = size;
      this.state = State.ChunkData;
    }
    return true;
  }

  /** The CRLF after a chunk's data; false when more bytes are needed. */
  private readChunkDataEnd(buf: Buffer): boolean {
    if (buf.length - this.off < 2) {
      if (buf[this.off] !== 13) this.fail(new H1ParseError(400, 'chunk data not followed by CRLF'));
      return false;
    }
    if (buf[this.off] !== 13 || buf[this.off + 1] !== 10) this.fail(new H1ParseError(400, 'chunk data not followed by CRLF'));
    this.off += 2;
    this.state = State.ChunkSize;
    return true;
  }

  /** The trailer section after the last chunk; false when more bytes are needed. */
  private readTrailers(buf: Buffer): boolean {
    if (buf.length - this.off >= 2 && buf[this.off] === 13 && buf[this.off + 1] === 10) {
      this.off += 2;
      this.state = State.Done;
      this.complete(undefined);
      return true;
    }
    const end = buf.indexOf(CRLFCRLF, Math.max(this.off, this.scanned - 3));
    if (end < 0) {
      this.scanned = buf.length;
      if (buf.length - this.off > this.maxHeadBytes) this.fail(new H1ParseError(431, 'trailers too large'));
      if (buf.length - this.off >= 2 && buf[this.off] === 13 && buf[this.off + 1] !== 10) this.fail(new H1ParseError(400, 'malformed trailers'));
      return false;
    }
    const trailers: RawHeaders = {};
    try {
      parseFields(buf.toString('latin1', this.off, end), 0, trailers, undefined);
    } catch (e) {
      this.fail(e);
    }
    this.off = end + 4;
    this.state = State.Done;
    this.complete(trailers);
    return true;
  }

  private complete(trailers: RawHeaders | undefined): void {
    this.handler.onComplete(trailers);
  }

  /** Parses a head when it is complete; false when more bytes are needed. */
  private readHead(buf: Buffer): boolean {
    // empty lines before a request line are ignored (RFC 9112 §2.2)
    while (this.isRequest && buf.length - this.off >= 2 && buf[this.off] === 13 && buf[this.off + 1] === 10) this.off += 2;
    if (this.off >= buf.length) return true;
    const end = buf.indexOf(CRLFCRLF, Math.max(this.off, this.scanned - 3));
    if (end < 0) {
      this.scanned = buf.length;
      if (this.isRequest && !this.lineChecked) {
        try {
          this.lineChecked = checkPartialRequest(buf, this.off, this.policy);
        } catch (e) {
          this.fail(e);
        }
      }
      if (buf.length - this.off > this.maxHeadBytes) this.fail(new H1ParseError(431, 'headers too large'));
      return false;
    }
    if (end - this.off > this.maxHeadBytes) this.fail(new H1ParseError(431, 'headers too large'));
    this.lineChecked = false;
    let head: MessageHead;
    try {
      const text = buf.toString('latin1', this.off, end);
      head = this.isRequest ? parseRequestHead(text, this.policy) : parseResponseHead(text);
    } catch (e) {
      this.fail(e);
    }
    this.off = end + 4;
    this.scanned = this.off;
    this.keepAlive = head.keepAlive;
    this.bodyBytes = 0;
    const kind = this.handler.onHead(head);
    if (this.state === State.Error) return false;
    switch (kind) {
      case -1:
        this.state = State.Head;
        break;
      case BodyKind.None:
        this.state = State.Done;
        this.complete(undefined);
        break;
      case BodyKind.Length:
        this.remaining = head.contentLength;
        this.state = State.Length;
        break;
      case BodyKind.Chunked:
        this.state = State.ChunkSize;
        break;
      case BodyKind.Eof:
        this.keepAlive = false;
        this.state = State.Eof;
        break;
    }
    return true;
  }
}
