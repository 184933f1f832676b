// One downstream request inside an HTTP connection manager: the HttpStream filters see, the cached
// route, and the response side (local replies and proxied responses) with Envoy's response header
// rules (server header, request id, drain close, encoder filters).
import type http2 from 'node:http2';
import type net from 'node:net';
import type { JsonObject } from '@bufbuild/protobuf';
import type { FormatContext } from '../format/substitution';
import type { DynamicMetadata } from '../matchers/string';
import { selectRoute } from '../route/compile';
import type { RouteRequest, RouteSelection, WeightedClusterEntry } from '../route/types';
import type { DownstreamConnectionInfo, StreamInfo } from '../stream-info';
import type { HttpStream, LocalReply } from './filter-api';
import { HOP_BY_HOP, type RawHeaders, type RequestHeaders, ResponseHeaders } from '../codec/headers';
import type { ChainEntry, HcmOptions, HcmStats } from './hcm-config';
import type { RouteConfigProvider } from '../route/rds';
import type { ClusterManager } from '../upstream/cluster-manager';
import type { ResponseObserver } from '../codec/h1/server';
import type { HttpTracer, RequestTrace } from '../tracing';

/**
 * A downstream request: the engine's HTTP/1 codec's H1Request (plaintext HTTP/1.x; its body is a
 * BodySource), or Node's IncomingMessage (TLS HTTP/1.1) or Http2ServerRequest (body from its events).
 */
export interface DownstreamRequest {
  readonly method?: string;
  readonly url?: string;
  readonly headers: RawHeaders;
  readonly httpVersion: string;
  readonly httpVersionMajor: number;
  readonly socket: net.Socket;
  /** Known to have no body (HTTP/1 without Content-Length or Transfer-Encoding): no need to read it. */
  readonly bodyless?: boolean;
  /** Node's requests: the body's events (the codec's H1Request is a BodySource instead). */
  on?(ev: string, fn: (...a: any[]) => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

export interface DownstreamResponse {
  writeHead(status: number, headers?: RawHeaders): unknown;
  write(chunk: Buffer | string): boolean;
  end(chunk?: Buffer | string): unknown;
  addTrailers(t: RawHeaders): void;
  once(ev: string, cb: (...a: unknown[]) => void): unknown;
  on(ev: string, cb: (...a: unknown[]) => void): unknown;
  readonly headersSent: boolean;
  readonly writableEnded: boolean;
  readonly writableFinished: boolean;
  destroy?(e?: Error): unknown;
  stream?: http2.ServerHttp2Stream;
}

/** Per-connection state the HCM keeps (one per downstream connection). */
export interface ConnectionContext {
  info: DownstreamConnectionInfo;
  /** Listener is draining: HTTP/1 responses close the connection, HTTP/2 gets GOAWAY. */
  draining: () => boolean;
  goawaySent?: boolean;
  session?: http2.ServerHttp2Session;
  /** Whether the peer address is internal (computed once per connection). */
  internal?: boolean;
}

/** Envoy's HTTP → gRPC status mapping for local replies to gRPC requests. */
export function grpcStatusFor(http: number): number {
  switch (http) {
    case 400:
      return 13;
    case 401:
      return 16;
    case 403:
      return 7;
    case 404:
      return 12;
    case 429:
    case 502:
    case 503:
    case 504:
      return 14;
    default:
      return 2;
  }
}

const EMPTY_MAP = new Map<string, unknown>();

/** gRPC's grpc-message encoding: percent-encode '%' and bytes outside printable ASCII, nothing else. */
export function grpcMessage(s: string): string {
  let out = '';
  for (const b of Buffer.from(s, 'utf8'))
    out += b < 0x20 || b > 0x7e || b === 0x25 ? `%${b.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(b);
  return out;
}

/** What a stream needs of the connection manager serving it (HcmRuntime), without the stream depending on it. */
export interface StreamHcm {
  readonly stats: HcmStats;
  readonly options: HcmOptions;
  readonly filters: readonly ChainEntry[];
  readonly routes: RouteConfigProvider;
  readonly clusters: ClusterManager;
  readonly tracer: HttpTracer | undefined;
  onStreamDone(s: Stream): void;
}

export class Stream implements HttpStream, RouteRequest, ResponseObserver {
  private state: Map<string, unknown> | undefined;
  readonly random = Math.random();
  /** Filters whose decodeHeaders ran (their encoders see the response). */
  decoded = 0;
  weighted: WeightedClusterEntry | undefined;
  private cachedRoute: RouteSelection | undefined | null = null;
  /** The route cache was cleared since the route was last picked. */
  private routeCleared = false;
  /** Set when the response started (headers sent or local reply). */
  responded = false;
  /** Called once when the stream ends for any reason. */
  onDone: (() => void) | undefined;
  private done = false;
  downstreamClosed = false;
  readonly isGrpc: boolean;
  /** Upgrade type of an HTTP/1.1 upgrade request (`websocket`), else ''. */
  upgrade = '';
  /** What went downstream (access logs read %RESP(...)% from it). */
  responseHeaders: ResponseHeaders | undefined;
  /** The upstream's trailers, passed downstream (gRPC status). */
  responseTrailers: RawHeaders | undefined;
  /** The request's span (its HCM traces and the request has a trace context). */
  trace: RequestTrace | undefined = undefined;
  /** Ingress with no span: the route's operation for the response (HttpTracer.onRequest). */
  decorated: string | undefined = undefined;
  /** Ingress: the request named its own operation (HttpTracer.onRequest). */
  operationNamed = false;

  constructor(
    readonly hcm: StreamHcm,
    readonly request: RequestHeaders,
    readonly info: StreamInfo,
    readonly conn: ConnectionContext,
    readonly req: DownstreamRequest,
    readonly res: DownstreamResponse,
    readonly isH2: boolean,
  ) {
    this.isGrpc = (request.get('content-type') ?? '').startsWith('application/grpc');
  }

  get filterState(): Map<string, unknown> {
    return (this.state ??= new Map());
  }

  // RouteRequest
  get headers(): RequestHeaders {
    return this.request;
  }
  get dynamicMetadata(): DynamicMetadata {
    return this.info.dynamicMetadata;
  }
  get tlsPresented(): boolean {
    return this.conn.info.peerCertificatePresented;
  }
  get tlsValidated(): boolean {
    return this.conn.info.peerCertificateValidated;
  }
  get connection(): DownstreamConnectionInfo {
    return this.conn.info;
  }

  setDynamicMetadata(namespace: string, values: JsonObject): void {
    const cur = this.info.dynamicMetadata.get(namespace);
    this.info.dynamicMetadata.set(namespace, cur ? { ...cur, ...values } : { ...values });
  }

  route(): RouteSelection | undefined {
    if (this.cachedRoute === null) {
      const rc = this.hcm.routes.current();
      this.cachedRoute = rc ? selectRoute(rc, this) : undefined;
      if (this.routeCleared) {
        // picked again after a filter cleared the cache: the tracing follows the new route (refreshTracing)
        this.routeCleared = false;
        this.hcm.tracer?.onRouteRefreshed(this, this.cachedRoute);
      }
    }
    return this.cachedRoute;
  }

  clearRouteCache(): void {
    this.cachedRoute = null;
    this.routeCleared = true;
    this.weighted = undefined;
  }

  perFilterConfig<T>(filterName: string): T | undefined {
    const sel = this.route();
    if (!sel) return undefined;
    const w =
      this.weighted?.perFilterConfig.get(filterName) ??
      sel.route.perFilterConfig.get(filterName) ??
      sel.vhost.perFilterConfig.get(filterName) ??
      sel.config.perFilterConfig.get(filterName);
    return w?.config as T | undefined;
  }

  /** A filter is skipped when its per-route FilterConfig says disabled (or it is disabled and not enabled). */
  filterDisabled(name: string, disabledByDefault: boolean): boolean {
    const sel = this.route();
    const pf = sel
      ? ((this.weighted?.perFilterConfig ?? EMPTY_MAP).get(name) ??
        sel.route.perFilterConfig.get(name) ??
        sel.vhost.perFilterConfig.get(name) ??
        sel.config.perFilterConfig.get(name))
      : undefined;
    if (pf && typeof pf === 'object' && 'disabled' in (pf as object)) return (pf as { disabled: boolean }).disabled;
    return disabledByDefault;
  }

  formatContext(response?: ResponseHeaders): FormatContext {
    return { info: this.info, request: this.request, ...(response ? { response } : {}) };
  }

  /** Response headers on their way out: encoder filters, server header, request id, drain close. */
  private finalizeResponseHeaders(h: ResponseHeaders): void {
    const filters = this.hcm.filters;
    for (let i = this.decoded - 1; i >= 0; i--) filters[i]!.filter.encodeHeaders?.(this, h);
    const o = this.hcm.options;
    if (o.serverHeader === 'overwrite') h.set('server', o.serverName);
    else if (o.serverHeader === 'appendIfAbsent' && !h.has('server')) h.set('server', o.serverName);
    this.hcm.tracer?.onResponseHeaders(this, h);
    // Envoy returns the request id of a forced trace (mutateResponseHeaders) whatever the setting
    if (o.alwaysSetRequestIdInResponse || this.request.has('x-envoy-force-trace')) {
      const rid = this.request.get('x-request-id');
      if (rid) h.set('x-request-id', rid);
    }
    if (o.via) h.add('via', o.via);
    if (this.conn.draining()) {
      if (!this.isH2) h.set('connection', 'close');
      else if (!this.conn.goawaySent && this.conn.session) {
        this.conn.goawaySent = true;
        const s = this.conn.session;
        setImmediate(() => {
          if (!s.closed && !s.destroyed) s.goaway();
        });
      }
    }
  }

  responseHeader(name: string): string | undefined {
    return this.responseHeaders?.get(name);
  }

  /** HTTP/2 headers-only response that ends the stream (gRPC trailers-only). */
  sendHeadersOnly(h: ResponseHeaders): void {
    this.responded = true;
    this.responseHeaders = h;
    this.info.responseCode = h.status;
    this.finalizeResponseHeaders(h);
    if (this.downstreamClosed) return;
    if (this.isH2 && this.res.stream) this.res.stream.respond({ ...h.h, ':status': h.status } as http2.OutgoingHttpHeaders, { endStream: true });
    else {
      this.res.writeHead(h.status, h.h);
      this.res.end();
    }
  }

  /** Sends response headers (and nothing else). */
  sendHeaders(h: ResponseHeaders): void {
    this.responded = true;
    this.responseHeaders = h;
    this.info.responseCode = h.status;
    this.finalizeResponseHeaders(h);
    if (this.downstreamClosed) return;
    this.res.writeHead(h.status, h.h);
  }

  /** Envoy sendLocalReply: text/plain body, or a trailers-only gRPC response for gRPC requests. */
  sendLocalReply(r: LocalReply): void {
    if (this.responded) {
      // headers already went out: the only thing left is to reset the stream
      this.resetDownstream();
      return;
    }
    if (r.flag) this.info.setFlag(r.flag);
    this.info.responseCodeDetails = r.details ?? '';
    const body = r.body ?? '';
    const h = new ResponseHeaders(r.status);
    if (r.headers) for (const [k, v] of Object.entries(r.headers)) h.set(k.toLowerCase(), v);
    if (this.isGrpc) {
      h.status = 200;
      h.set('content-type', 'application/grpc');
      h.set('grpc-status', String(r.grpcStatus ?? grpcStatusFor(r.status)));
      if (body) h.set('grpc-message', grpcMessage(body));
      this.info.responseCode = 200;
      this.responded = true;
      this.responseHeaders = h;
      this.finalizeResponseHeaders(h);
      if (this.downstreamClosed) return this.finish();
      if (this.isH2 && this.res.stream) {
        this.res.stream.respond({ ':status': 200, ...h.h } as http2.OutgoingHttpHeaders, { endStream: true });
      } else {
        h.set('content-length', '0');
        this.res.writeHead(200, h.h);
        this.res.end();
      }
      this.info.responseCode = 200;
      return;
    }
    if (body) {
      h.set('content-type', 'text/plain');
      h.set('content-length', String(Buffer.byteLength(body)));
    } else if (!this.isH2 && r.status !== 204 && r.status !== 304) {
      // Envoy's local reply sets a length only for a body (Http::Utility::encodeLocalReply); its HTTP/1 codec
      // then adds `content-length: 0` to a response without one, HTTP/2 sends the end of stream alone
      h.set('content-length', '0');
    }
    this.sendHeaders(h);
    if (this.downstreamClosed) return this.finish();
    this.info.bytesSent += body ? Buffer.byteLength(body) : 0;
    if (this.request.method === 'HEAD') this.res.end();
    else this.res.end(body || undefined);
  }

  resetDownstream(): void {
    if (this.isH2 && this.res.stream && !this.res.stream.destroyed) this.res.stream.close(0x02);
    else this.req.socket?.destroy();
  }

  /** The response was handed to the connection completely. */
  responseFinished(): void {
    this.finish();
  }

  /** The downstream connection closed (after the response, or before it was complete). */
  responseClosed(): void {
    if (!this.res.writableFinished) {
      this.downstreamClosed = true;
      if (!this.responded) this.info.setFlag('DC');
      this.hcm.stats.rqRxReset.inc();
    }
    this.finish();
  }

  /** Called when the downstream response is complete or the stream is gone. */
  finish(): void {
    if (this.done) return;
    this.done = true;
    this.info.endHr = performance.now();
    this.onDone?.();
    this.hcm.onStreamDone(this);
  }
}

/** Copies upstream response headers for downstream: hop-by-hop and pseudo headers dropped. */
export function copyResponseHeaders(src: RawHeaders): RawHeaders {
  const out: RawHeaders = {};
  for (const k in src) {
    if (HOP_BY_HOP.has(k) || k.charCodeAt(0) === 58) continue;
    const v = src[k];
    if (v !== undefined) out[k] = v;
  }
  return out;
}
