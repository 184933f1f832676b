// envoy.filters.network.http_connection_manager: compiled once per listener update from its proto
// (options, HTTP filter chain, access logs, route source), then serving HTTP/1.1 and HTTP/2 connections
// handed over by the listener. Request processing follows Envoy's order: header sanitising and path
// normalisation, x-forwarded-*/x-request-id, decoder filters in chain order (each may stop with a local
// reply), then the router.
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import type net from 'node:net';
import type tls from 'node:tls';
import type { HttpConnectionManager } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { ConfigError } from '../common/config-error';
import { isLoopback } from '../common/cidr';
import { localInfoOf } from '../common/local-info';
import { HOP_BY_HOP, RequestHeaders, withRepeatedFields, type RawHeaders } from '../codec/headers';
import { H1Response, H1ServerConnection } from '../codec/h1/server';
import type { RouteConfigProvider } from '../route/rds';
import { portStart } from '../route/vhost';
import { plainIp, StreamInfo } from '../stream-info';
import { applyPeer, type TlsContext } from '../tls/context';
import type { ClusterManager } from '../upstream/cluster-manager';
import { compileAccessLogs, type AccessLogger } from '../accesslog';
import type { HttpFilter, LocalReply } from './filter-api';
import {
  compileHttpFilters,
  HcmStats,
  hcmOptionsOf,
  internalAddressTest,
  routeProviderOf,
  type ChainEntry,
  type HcmDeps,
  type HcmOptions,
} from './hcm-config';
import { processPath } from './path';
import { Router } from './router';
import { Stream, type ConnectionContext, type DownstreamRequest, type DownstreamResponse } from './stream';
import { xfccAction } from './xfcc';
import { httpTracerOf, type HttpTracer } from '../tracing';

const kCtx = Symbol('mesh.connection');
const XFCC = 'x-forwarded-client-cert';

export interface TlsHooks {
  /** Returning false closes the connection (a network filter in front of the HCM refused it). */
  onHandshake(socket: tls.TLSSocket): boolean | void;
  onError(why: string): void;
}

/** Headers stripped only from an edge request (external, use_remote_address): cleanInternalHeaders. */
const EDGE_STRIPPED = ['x-envoy-decorator-operation', 'x-envoy-downstream-service-cluster', 'x-envoy-downstream-service-node'];
/**
 * Headers stripped from every request not found internal, edge or not (cleanInternalHeaders): a sidecar's
 * inbound (no use_remote_address, no trusted XFF) strips them too.
 */
const EXTERNAL_STRIPPED = [
  'x-envoy-retriable-status-codes',
  'x-envoy-retriable-header-names',
  'x-envoy-expected-rq-timeout-ms',
  'x-envoy-force-trace',
  'x-envoy-ip-tags',
  'x-envoy-original-url',
  'x-envoy-max-retries',
  'x-envoy-retry-grpc-on',
  'x-envoy-retry-on',
  'x-envoy-upstream-alt-stat-name',
  'x-envoy-upstream-rq-per-try-timeout-ms',
  'x-envoy-upstream-rq-timeout-alt-response',
  'x-envoy-upstream-rq-timeout-ms',
  'x-envoy-hedge-on-per-try-timeout',
];

export class HcmRuntime {
  readonly statPrefix: string;
  readonly stats: HcmStats;
  readonly options: HcmOptions;
  readonly filters: ChainEntry[];
  readonly routes: RouteConfigProvider;
  readonly accessLogs: AccessLogger[];
  /** Filters told when a stream completes (Istio's stats filter), before the access logs. */
  private readonly completers: HttpFilter[];
  readonly clusters: ClusterManager;
  /** undefined when the HCM has no `tracing`: nothing per request then. */
  readonly tracer: HttpTracer | undefined;
  readonly ready: Promise<void>;
  private readonly router: Router;
  private readonly h2: http2.Http2Server;
  private pendingSessionCtx: ConnectionContext | undefined;
  private readonly log;
  /** Envoy's internal-request test: internal_address_config ranges; without them no address is internal (Envoy ≥ 1.33). */
  private isInternal: (ip: string) => boolean = () => false;
  /** What Envoy appends to x-forwarded-for for a loopback peer (ConnectionManagerConfig::localAddress). */
  private readonly localAddress: string;

  constructor(
    readonly proto: HttpConnectionManager,
    readonly where: string,
    deps: HcmDeps,
    isStatic: boolean,
    /** Listener port, for strip_matching_host_port. */
    private readonly listenerPort: number,
    /** The listener's traffic_direction is OUTBOUND (Envoy's egress operation for tracing). */
    egress = false,
  ) {
    this.log = deps.log.get('http');
    this.localAddress = (deps.local ?? localInfoOf(undefined)).address;
    this.clusters = deps.clusters;
    if (!proto.statPrefix) throw new ConfigError(`${where}.stat_prefix: value length must be at least 1 characters`);
    this.statPrefix = proto.statPrefix;
    this.stats = new HcmStats(deps.stats.scope(`http.${proto.statPrefix}.`));
    this.options = hcmOptionsOf(proto, where);
    const internal = internalAddressTest(proto, where);
    if (internal) this.isInternal = internal;
    const chain = compileHttpFilters(proto, where, deps, this.stats.scope, this.log);
    this.filters = chain.filters;
    this.completers = chain.filters.map((c) => c.filter).filter((f) => f.onStreamComplete !== undefined);
    this.router = new Router(chain.router);
    this.accessLogs = compileAccessLogs(proto.accessLog, where, { call: deps.upstreamCall });
    this.tracer = httpTracerOf(proto, where, egress, {
      call: deps.upstreamCall,
      local: deps.local,
      stats: deps.stats.scope(''),
      hcmStats: this.stats.scope,
      warn: (m) => this.log.warn(m),
    });
    this.routes = routeProviderOf(proto, where, deps.routes, isStatic);
    this.ready = this.routes.ready;
    // HTTP/1.x (plaintext or after TLS) is served by the engine's own codec (h1/server.ts), HTTP/2 by Node's servers
    const onRequest = (req: DownstreamRequest, res: DownstreamResponse) => this.onRequest(req, res);
    this.h2 = http2.createServer(
      { settings: { enablePush: false }, maxSessionMemory: 64 },
      onRequest as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    this.h2.on('session', (session: http2.ServerHttp2Session) => {
      const ctx = this.pendingSessionCtx;
      if (ctx) {
        (session as unknown as Record<symbol, unknown>)[kCtx] = ctx;
        ctx.session = session;
      }
    });
    this.h2.on('sessionError', () => {});
  }

  /** Per TLS context, a Node secure HTTP/2 server (HTTP/1.1 allowed) that terminates TLS for this HCM. */
  private readonly secureServers = new Map<TlsContext, http2.Http2SecureServer>();
  private readonly pendingTls = new WeakMap<net.Socket, { ctx: ConnectionContext; hooks: TlsHooks }>();

  /**
   * Terminates TLS with the chain's context, then serves HTTP/2 or HTTP/1.1 as ALPN decided. Node's
   * HTTP/2 server only runs on TLS sockets it made itself, so TLS is done by a secure server per context
   * (its HTTP/1.1 fallback is not used: see secureServerFor).
   */
  serveTls(socket: net.Socket, ctx: ConnectionContext, tlsCtx: TlsContext, hooks: TlsHooks): void {
    let srv: http2.Http2SecureServer;
    try {
      srv = this.secureServerFor(tlsCtx);
    } catch (e) {
      // material that does not load fails this connection, not the process
      hooks.onError((e as Error).message);
      this.log.warn(`${this.where}: ${(e as Error).message}`);
      socket.destroy();
      return;
    }
    this.pendingTls.set(socket, { ctx, hooks });
    srv.emit('connection', socket);
  }

  private secureServerFor(tlsCtx: TlsContext): http2.Http2SecureServer {
    let srv = this.secureServers.get(tlsCtx);
    if (srv) return srv;
    const o = tlsCtx.secureOptions();
    const onRequest = (req: DownstreamRequest, res: DownstreamResponse) => this.onRequest(req, res);
    srv = http2.createSecureServer(
      {
        ...o,
        allowHTTP1: true,
        ALPNProtocols: tlsCtx.alpn.length > 0 ? tlsCtx.alpn : ['http/1.1'],
        settings: { enablePush: false },
      } as http2.SecureServerOptions,
      onRequest as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    const server = srv;
    tlsCtx.onChange(() => {
      try {
        server.setSecureContext(tlsCtx.secureOptions());
      } catch (e) {
        this.log.warn(`${this.where}: new TLS material rejected: ${(e as Error).message}`);
      }
    });
    // A finished handshake: HTTP/1.1 (ALPN http/1.1, or none) goes to the engine's own codec as on plaintext
    // connections — the same keep-alive, limits and per-request cost — and only what Node's secure server
    // would run as HTTP/2 goes to Node's handler (installed by createSecureServer, taken out here so that
    // it never sees the HTTP/1.1 connections).
    const nodeHandlers = srv.listeners('secureConnection') as Array<(t: tls.TLSSocket) => void>;
    srv.removeAllListeners('secureConnection');
    srv.on('secureConnection', (t: tls.TLSSocket) => {
      const raw = (t as unknown as { _parent?: net.Socket })._parent;
      const p = raw ? this.pendingTls.get(raw) : undefined;
      if (!p) {
        t.destroy();
        return;
      }
      const info = p.ctx.info;
      info.tls = true;
      info.alpn = typeof t.alpnProtocol === 'string' ? t.alpnProtocol : '';
      const sn = (t as unknown as { servername?: string | false }).servername;
      if (sn) info.serverName = sn;
      const v = tlsCtx.verifyPeer(t);
      if (v.error) {
        p.hooks.onError(v.error);
        t.destroy();
        return;
      }
      applyPeer(info, v.peer);
      if (p.hooks.onHandshake(t) === false) {
        t.destroy();
        return;
      }
      // Node's rule (http2 connectionListener): no ALPN or http/1.1 is HTTP/1.1, anything else HTTP/2
      if (t.alpnProtocol === false || t.alpnProtocol === 'http/1.1') {
        this.serveConnection(t, p.ctx, false);
        return;
      }
      this.countConnection(t, true);
      (t as unknown as Record<symbol, unknown>)[kCtx] = p.ctx;
      this.pendingSessionCtx = p.ctx;
      try {
        for (const f of nodeHandlers) f.call(server, t);
      } finally {
        this.pendingSessionCtx = undefined;
      }
    });
    srv.on('tlsClientError', (e: Error, s: tls.TLSSocket) => {
      const raw = (s as unknown as { _parent?: net.Socket })._parent;
      const p = raw ? this.pendingTls.get(raw) : undefined;
      p?.hooks.onError(e.message);
    });
    srv.on('session', (session: http2.ServerHttp2Session) => {
      const ctx = this.pendingSessionCtx;
      if (ctx) {
        (session as unknown as Record<symbol, unknown>)[kCtx] = ctx;
        ctx.session = session;
      }
    });
    srv.on('sessionError', () => {});
    this.secureServers.set(tlsCtx, srv);
    return srv;
  }

  private countConnection(socket: net.Socket, h2: boolean): void {
    if (this.options.idleTimeoutMs > 0) socket.setTimeout(this.options.idleTimeoutMs, () => socket.destroy());
    const st = this.stats;
    st.cxTotal.inc();
    st.cxActive.inc();
    (h2 ? st.cxHttp2Total : st.cxHttp1Total).inc();
    const act = h2 ? st.cxHttp2Active : st.cxHttp1Active;
    act.inc();
    socket.once('close', () => {
      st.cxActive.dec();
      act.dec();
      st.cxDestroy.inc();
    });
  }

  /** Hands a plaintext downstream connection (its first bytes back in its buffer) to HTTP. */
  serveConnection(socket: net.Socket, ctx: ConnectionContext, h2: boolean): void {
    this.countConnection(socket, h2);
    (socket as unknown as Record<symbol, unknown>)[kCtx] = ctx;
    if (h2) {
      this.pendingSessionCtx = ctx;
      this.h2.emit('connection', socket);
      this.pendingSessionCtx = undefined;
    } else {
      new H1ServerConnection(socket, {
        maxHeadBytes: this.options.maxRequestHeadersKb * 1024,
        policy: this.options.h1Policy,
        defaultHostForHttp10: this.options.defaultHostForHttp10,
        onRequest: (req, res, upgrade) => this.onRequest(req, res, upgrade, ctx),
      });
      // the listener paused the socket while inspecting its first bytes (now back in its buffer)
      if (socket.isPaused()) socket.resume();
    }
  }

  release(): void {
    this.routes.release();
    this.tracer?.release();
    for (const s of this.secureServers.values()) s.close();
  }

  onStreamDone(s: Stream): void {
    const st = this.stats;
    st.rqActive.dec();
    st.rqCompleted.inc();
    if (s.info.responseCode > 0) st.codes.record(s.info.responseCode);
    st.rqTime.record(performance.now() - s.info.startHr);
    for (const f of this.completers) f.onStreamComplete!(s);
    if (s.trace) this.tracer!.finishDownstream(s, s.trace);
    if (this.accessLogs.length > 0) {
      const ctx = { info: s.info, request: s.request, response: { get: (n: string) => s.responseHeader(n) }, filterState: s.filterState };
      for (const l of this.accessLogs) l(ctx);
    }
  }

  private contextOf(req: DownstreamRequest, isH2: boolean): ConnectionContext | undefined {
    if (isH2) {
      const session = (req as http2.Http2ServerRequest).stream?.session as unknown as Record<symbol, ConnectionContext> | undefined;
      return session?.[kCtx];
    }
    return (req.socket as unknown as Record<symbol, ConnectionContext>)[kCtx];
  }

  private onRequest(req: DownstreamRequest, res: DownstreamResponse, upgrade = '', connCtx?: ConnectionContext): void {
    const isH2 = req.httpVersionMajor === 2;
    const ctx = connCtx ?? this.contextOf(req, isH2);
    if (!ctx) {
      res.writeHead(500);
      res.end();
      return;
    }
    const st = this.stats;
    st.rqTotal.inc();
    st.rqActive.inc();
    (isH2 ? st.rqHttp2Total : st.rqHttp1Total).inc();
    st.rqTotalRouter.inc();
    const raw = isH2 ? withRepeatedFields(req.headers as RawHeaders, (req as http2.Http2ServerRequest).rawHeaders) : (req.headers as RawHeaders);
    const h: RawHeaders = {};
    for (const k in raw) {
      if (k.charCodeAt(0) === 58 || k === 'host') continue;
      if (HOP_BY_HOP.has(k) && !(k === 'te' && raw[k] === 'trailers')) continue;
      h[k] = raw[k];
    }
    let authority = ((isH2 ? (raw[':authority'] ?? raw.host) : raw.host) as string | undefined) ?? '';
    let path = req.url ?? '/';
    if (!isH2 && path.charCodeAt(0) !== 47 && /^https?:\/\//i.test(path)) {
      // absolute-form request target: the URL's authority wins (RFC 9112 §3.2.2)
      try {
        const u = new URL(path);
        authority = u.host;
        path = `${u.pathname}${u.search}`;
      } catch {
        // left as is; normalisation rejects it
      }
    }
    const scheme = isH2 ? ((raw[':scheme'] as string | undefined) ?? (ctx.info.tls ? 'https' : 'http')) : ctx.info.tls ? 'https' : 'http';
    const info = new StreamInfo(ctx.info);
    info.protocol = isH2 ? 'HTTP/2' : req.httpVersion === '1.0' ? 'HTTP/1.0' : 'HTTP/1.1';
    const headers = new RequestHeaders(req.method ?? 'GET', path, authority, scheme, h);
    const s = new Stream(this, headers, info, ctx, req, res, isH2);
    s.upgrade = upgrade;
    if (res instanceof H1Response) res.observer = s;
    else {
      res.on('close', () => s.responseClosed());
      res.on('finish', () => s.responseFinished());
    }
    const o = this.options;
    if (!authority && !isH2 && req.httpVersion !== '1.0') {
      s.sendLocalReply({ status: 400, body: 'missing required header: host', details: 'missing_host_header' });
      return;
    }
    // path normalisation; a fragment or a relative target is refused whatever the settings (Envoy
    // maybeNormalizePath and its codec), `OPTIONS *` and CONNECT are left alone
    if (req.method !== 'CONNECT' && !(req.method === 'OPTIONS' && headers.path === '*')) {
      const r = processPath(headers.path, { normalize: o.normalizePath, mergeSlashes: o.mergeSlashes, escapedSlashes: o.escapedSlashes });
      if (r.action === 'reject') {
        s.sendLocalReply({ status: 400, details: 'path_normalization_failed' });
        return;
      }
      if (r.action === 'redirect') {
        s.sendLocalReply({ status: 307, headers: { location: r.path }, details: 'path_normalization_redirect' });
        return;
      }
      headers.path = r.path;
    }
    if (o.stripTrailingHostDot) headers.authority = headers.authority.replace(/\.(?=(:\d+)?$)/, '');
    if (o.stripPort !== 'none') {
      const p = portStart(headers.authority);
      if (p >= 0 && (o.stripPort === 'any' || Number(headers.authority.slice(p + 1)) === this.listenerPort))
        headers.authority = headers.authority.slice(0, p);
    }
    this.mutateRequestHeaders(s);
    if (this.tracer) this.tracer.onRequest(s);
    this.runDecoders(s, 0);
  }

  /** Envoy ConnectionManagerUtility::mutateRequestHeaders: XFF, internal/external, XFP, request id. */
  private mutateRequestHeaders(s: Stream): void {
    const o = this.options;
    const h = s.request;
    const remote = plainIp(s.conn.info.remoteAddress);
    // only the proxy says a request is internal
    h.remove('x-envoy-internal');
    let internal: boolean;
    const xff = h.get('x-forwarded-for');
    if (o.useRemoteAddress) {
      if (!o.skipXffAppend) {
        // Envoy appends its own address (LocalInfo's, the first non-loopback IPv4) for a loopback peer
        const hop = isLoopback(remote) ? this.localAddress : remote;
        h.set('x-forwarded-for', xff ? `${xff},${hop}` : hop);
      }
      // the peer's address is trusted only when it came with no XFF of its own (allow_trusted_address_checks)
      internal = xff === undefined && (s.conn.internal ??= this.isInternal(remote));
      if (!internal) {
        for (const k of EDGE_STRIPPED) h.remove(k);
        h.set('x-envoy-external-address', remote);
      }
      h.set('x-forwarded-proto', s.conn.info.tls ? 'https' : 'http');
    } else {
      // the XFF extension: a single address in XFF is the client's; without XFF the request is external
      const last = xff
        ?.split(',')
        .map((x) => x.trim())
        .filter(Boolean);
      internal = last !== undefined && last.length === 1 && this.isInternal(last[0]!);
      if (!h.has('x-forwarded-proto')) h.set('x-forwarded-proto', s.conn.info.tls ? 'https' : 'http');
    }
    if (internal) h.set('x-envoy-internal', 'true');
    else for (const k of EXTERNAL_STRIPPED) h.remove(k);
    const xfcc = xfccAction(o.forwardClientCert, o.clientCertDetails, s.conn.info);
    if (xfcc.kind === 'remove') h.remove(XFCC);
    else if (xfcc.kind === 'set') h.set(XFCC, xfcc.value);
    else if (xfcc.kind === 'append') {
      const prev = h.get(XFCC);
      h.set(XFCC, prev ? `${prev},${xfcc.value}` : xfcc.value);
    }
    if (o.via) h.add('via', o.via);
    const edge = o.useRemoteAddress && !internal;
    if (edge && !o.preserveExternalRequestId) h.remove('x-request-id');
    if (o.generateRequestId && !h.has('x-request-id')) h.set('x-request-id', randomUUID());
  }

  runDecoders(s: Stream, from: number): void {
    const filters = this.filters;
    for (let i = from; i < filters.length; i++) {
      const f = filters[i]!;
      if (s.filterDisabled(f.name, f.disabled)) continue;
      s.decoded = i + 1;
      let r: LocalReply | undefined | Promise<LocalReply | undefined>;
      try {
        r = f.filter.decodeHeaders(s);
      } catch (e) {
        this.log.error(`filter ${f.name} failed: ${(e as Error).message}`);
        s.sendLocalReply({ status: 500, details: 'filter_failed' });
        return;
      }
      if (r instanceof Promise) {
        r.then(
          (x) => {
            if (s.downstreamClosed) return;
            if (x) s.sendLocalReply(x);
            else this.runDecoders(s, i + 1);
          },
          (e: Error) => {
            this.log.error(`filter ${f.name} failed: ${e.message}`);
            if (!s.downstreamClosed) s.sendLocalReply({ status: 500, details: 'filter_failed' });
          },
        );
        return;
      }
      if (r) {
        s.sendLocalReply(r);
        return;
      }
    }
    this.router.route(s);
  }
}
