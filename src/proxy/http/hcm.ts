// envoy.filters.network.http_connection_manager: compiled once per listener update from its proto
// (options, HTTP filter chain, access logs, route source), then serving HTTP/1.1 and HTTP/2 connections
// handed over by the listener. Request processing follows Envoy's order: header sanitising and path
// normalisation, x-forwarded-*/x-request-id, decoder filters in chain order (each may stop with a local
// reply), then the router.
import { randomUUID } from 'node:crypto';
import http2 from 'node:http2';
import type net from 'node:net';
import type tls from 'node:tls';
import type { Registry } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import {
  HttpConnectionManager_CodecType,
  HttpConnectionManager_ServerHeaderTransformation,
  type HttpConnectionManager,
} from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RouterSchema } from '../../gen/envoy/extensions/filters/http/router/v3/router_pb';
import type { LoggerRegistry } from '../log';
import { ConfigError } from '../common/config-error';
import { durationToMs } from '../common/duration';
import type { RouteConfigProvider, RouteManager } from '../route/rds';
import { ResponseCodeStats, type Counter, type Gauge, type Histogram, type StatsScope, type StatsStore } from '../stats/store';
import { plainIp, StreamInfo } from '../stream-info';
import type { ClusterManager } from '../upstream/cluster-manager';
import { compileAccessLogs, type AccessLogger } from './access-log';
import { typeNameOf, type FilterFactoryContext, type HttpFilter, type HttpFilterRegistry, type LocalReply, type UpstreamCall, type UpstreamCallResult } from './filter-api';
import { HOP_BY_HOP, RequestHeaders, withRepeatedFields, type RawHeaders } from '../codec/headers';
import { pathOptionsOf, processPath, type EscapedSlashesAction } from './path';
import { Router } from './router';
import { clientCertDetailsOf, forwardClientCertOf, xfccAction, type ClientCertDetail, type ForwardClientCert } from './xfcc';
import { Stream, type ConnectionContext, type DownstreamRequest, type DownstreamResponse } from './stream';
import type { RequestPolicy } from '../codec/h1/parser';
import { H1Response, H1ServerConnection } from '../codec/h1/server';
import { unwrapTypedStruct } from './typed-struct';
import { cidrContains, isInternalAddress, parseCidr, parseIp } from '../common/cidr';
import { applyPeer, type TlsContext } from '../tls/context';
import { portStart } from '../route/vhost';

const kCtx = Symbol('mesh.connection');
const XFCC = 'x-forwarded-client-cert';

export interface TlsHooks {
  /** Returning false closes the connection (a network filter in front of the HCM refused it). */
  onHandshake(socket: tls.TLSSocket): boolean | void;
  onError(why: string): void;
}

export interface HcmDeps {
  stats: StatsStore;
  log: LoggerRegistry;
  clusters: ClusterManager;
  routes: RouteManager;
  filters: HttpFilterRegistry;
  typeRegistry: Registry;
  upstreamCall: (cluster: string, call: UpstreamCall) => Promise<UpstreamCallResult>;
}

export class HcmStats {
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly cxHttp1Total: Counter;
  readonly cxHttp2Total: Counter;
  readonly cxHttp1Active: Gauge;
  readonly cxHttp2Active: Gauge;
  readonly cxDestroy: Counter;
  readonly rqTotal: Counter;
  readonly rqActive: Gauge;
  readonly rqHttp1Total: Counter;
  readonly rqHttp2Total: Counter;
  readonly rqCompleted: Counter;
  readonly rqTime: Histogram;
  readonly codes: ResponseCodeStats;
  readonly rqRxReset: Counter;
  readonly noRoute: Counter;
  readonly noCluster: Counter;
  readonly rqDirectResponse: Counter;
  readonly rqRedirect: Counter;
  readonly rqTotalRouter: Counter;
  constructor(readonly scope: StatsScope) {
    const c = (n: string) => scope.counter(n);
    const g = (n: string) => scope.gauge(n);
    this.cxTotal = c('downstream_cx_total');
    this.cxActive = g('downstream_cx_active');
    this.cxHttp1Total = c('downstream_cx_http1_total');
    this.cxHttp2Total = c('downstream_cx_http2_total');
    this.cxHttp1Active = g('downstream_cx_http1_active');
    this.cxHttp2Active = g('downstream_cx_http2_active');
    this.cxDestroy = c('downstream_cx_destroy');
    this.rqTotal = c('downstream_rq_total');
    this.rqActive = g('downstream_rq_active');
    this.rqHttp1Total = c('downstream_rq_http1_total');
    this.rqHttp2Total = c('downstream_rq_http2_total');
    this.rqCompleted = c('downstream_rq_completed');
    this.rqTime = scope.histogram('downstream_rq_time');
    this.codes = new ResponseCodeStats(scope, 'downstream_rq', false);
    this.rqRxReset = c('downstream_rq_rx_reset');
    this.noRoute = c('no_route');
    this.noCluster = c('no_cluster');
    this.rqDirectResponse = c('rq_direct_response');
    this.rqRedirect = c('rq_redirect');
    this.rqTotalRouter = c('rq_total');
  }
}

export interface HcmOptions {
  serverName: string;
  serverHeader: 'overwrite' | 'appendIfAbsent' | 'passThrough';
  useRemoteAddress: boolean;
  xffNumTrustedHops: number;
  skipXffAppend: boolean;
  via: string;
  generateRequestId: boolean;
  preserveExternalRequestId: boolean;
  alwaysSetRequestIdInResponse: boolean;
  normalizePath: boolean;
  mergeSlashes: boolean;
  escapedSlashes: EscapedSlashesAction;
  stripPort: 'none' | 'any' | 'matching';
  stripTrailingHostDot: boolean;
  codec: 'auto' | 'http1' | 'http2';
  idleTimeoutMs: number;
  maxRequestHeadersKb: number;
  /** common_http_protocol_options.max_headers_count (Envoy's default 100), http_protocol_options.accept_http_10 and allow_custom_methods. */
  h1Policy: RequestPolicy;
  defaultHostForHttp10: string;
  upgradeTypes: ReadonlySet<string>;
  forwardClientCert: ForwardClientCert;
  clientCertDetails: readonly ClientCertDetail[];
}

interface ChainEntry {
  name: string;
  filter: HttpFilter;
  disabled: boolean;
}

/** Headers an edge proxy strips from external requests (Envoy's x-envoy-* sanitising). */
const EXTERNAL_STRIPPED = [
  'x-envoy-decorator-operation', 'x-envoy-downstream-service-cluster', 'x-envoy-downstream-service-node', 'x-envoy-expected-rq-timeout-ms',
  'x-envoy-force-trace', 'x-envoy-internal', 'x-envoy-ip-tags', 'x-envoy-max-retries', 'x-envoy-retry-grpc-on', 'x-envoy-retry-on',
  'x-envoy-upstream-alt-stat-name', 'x-envoy-upstream-rq-per-try-timeout-ms', 'x-envoy-upstream-rq-timeout-alt-response', 'x-envoy-upstream-rq-timeout-ms',
  'x-envoy-hedge-on-per-try-timeout',
];

export class HcmRuntime {
  readonly statPrefix: string;
  readonly stats: HcmStats;
  readonly options: HcmOptions;
  readonly filters: ChainEntry[];
  readonly routes: RouteConfigProvider;
  readonly accessLogs: AccessLogger[];
  readonly clusters: ClusterManager;
  readonly ready: Promise<void>;
  private readonly router: Router;
  private readonly h2: http2.Http2Server;
  private pendingSessionCtx: ConnectionContext | undefined;
  private readonly log;
  /** Envoy's internal-request test: internal_address_config ranges, else RFC 1918/loopback. */
  private isInternal: (ip: string) => boolean = isInternalAddress;

  constructor(
    readonly proto: HttpConnectionManager,
    readonly where: string,
    deps: HcmDeps,
    isStatic: boolean,
    /** Listener port, for strip_matching_host_port. */
    private readonly listenerPort: number,
  ) {
    this.log = deps.log.get('http');
    this.clusters = deps.clusters;
    if (!proto.statPrefix) throw new ConfigError(`${where}.stat_prefix: value length must be at least 1 characters`);
    this.statPrefix = proto.statPrefix;
    this.stats = new HcmStats(deps.stats.scope(`http.${proto.statPrefix}.`));
    const po = pathOptionsOf(proto);
    this.options = {
      serverName: proto.serverName || 'envoy',
      serverHeader:
        proto.serverHeaderTransformation === HttpConnectionManager_ServerHeaderTransformation.APPEND_IF_ABSENT ? 'appendIfAbsent'
          : proto.serverHeaderTransformation === HttpConnectionManager_ServerHeaderTransformation.PASS_THROUGH ? 'passThrough'
            : 'overwrite',
      useRemoteAddress: proto.useRemoteAddress ?? false,
      xffNumTrustedHops: proto.xffNumTrustedHops,
      skipXffAppend: proto.skipXffAppend,
      via: proto.via,
      generateRequestId: proto.generateRequestId ?? true,
      preserveExternalRequestId: proto.preserveExternalRequestId,
      alwaysSetRequestIdInResponse: proto.alwaysSetRequestIdInResponse,
      normalizePath: po.normalize,
      mergeSlashes: po.mergeSlashes,
      escapedSlashes: po.escapedSlashes,
      stripPort: proto.stripPortMode.case === 'stripAnyHostPort' && proto.stripPortMode.value ? 'any' : proto.stripMatchingHostPort ? 'matching' : 'none',
      stripTrailingHostDot: proto.stripTrailingHostDot,
      codec: proto.codecType === HttpConnectionManager_CodecType.HTTP1 ? 'http1' : proto.codecType === HttpConnectionManager_CodecType.HTTP2 ? 'http2' : 'auto',
      idleTimeoutMs: durationToMs(proto.commonHttpProtocolOptions?.idleTimeout) ?? 3_600_000,
      maxRequestHeadersKb: proto.maxRequestHeadersKb ?? 60,
      h1Policy: {
        acceptHttp10: proto.httpProtocolOptions?.acceptHttp10 ?? false,
        maxHeadersCount: proto.commonHttpProtocolOptions?.maxHeadersCount ?? 100,
        allowCustomMethods: proto.httpProtocolOptions?.allowCustomMethods ?? false,
      },
      defaultHostForHttp10: proto.httpProtocolOptions?.defaultHostForHttp10 ?? '',
      upgradeTypes: new Set(proto.upgradeConfigs.filter((u) => u.enabled !== false).map((u) => u.upgradeType.toLowerCase())),
      forwardClientCert: forwardClientCertOf(proto.forwardClientCertDetails),
      clientCertDetails: clientCertDetailsOf(proto.setCurrentClientCertDetails),
    };
    if (proto.localReplyConfig && (proto.localReplyConfig.mappers.length > 0 || proto.localReplyConfig.bodyFormat)) {
      throw new ConfigError(`${where}.local_reply_config: custom local replies are not supported`);
    }
    const iac = proto.internalAddressConfig;
    if (iac && iac.cidrRanges.length > 0) {
      const ranges = iac.cidrRanges.map((r, i) => parseCidr(r, `${where}.internal_address_config.cidr_ranges[${i}]`));
      this.isInternal = (ip) => ranges.some((c) => cidrContains(c, parseIp(ip)));
    }
    // HTTP filters, in chain order; the router must be the one terminal filter, last
    const filters: ChainEntry[] = [];
    const routerLog = deps.log.get('router');
    let routerOpts = { suppressEnvoyHeaders: false, respectExpectedRqTimeout: false, log: routerLog };
    proto.httpFilters.forEach((f, i) => {
      const fw = `${where}.http_filters[${i}]`;
      if (f.configType.case === 'configDiscovery') throw new ConfigError(`${fw}.config_discovery: extension config discovery (ECDS) is not supported`);
      let any = f.configType.case === 'typedConfig' ? f.configType.value : undefined;
      if (any) any = unwrapTypedStruct(any, deps.typeRegistry, fw);
      const factory = any ? deps.filters.forType(typeNameOf(any)) : deps.filters.forName(f.name);
      if (!factory) {
        // optional filters, and filters disabled by default (only per-route config could enable them), are skipped
        if (f.isOptional || f.disabled) {
          this.log.debug(`${fw}: ${f.isOptional ? 'optional' : 'disabled'} filter '${f.name}' is not supported by this proxy; skipped`);
          return;
        }
        throw new ConfigError(`Didn't find a registered implementation for name: '${f.name}'`);
      }
      const last = i === proto.httpFilters.length - 1;
      if (factory.terminal && !last) throw new ConfigError(`Error: terminal filter named ${f.name} of type ${factory.name} must be the last filter in a http filter chain.`);
      if (!factory.terminal && last) throw new ConfigError(`Error: non-terminal filter named ${f.name} of type ${factory.name} is the last filter in a http filter chain.`);
      if (factory.terminal) {
        const r = any ? anyUnpack(any, RouterSchema) : undefined;
        routerOpts = { suppressEnvoyHeaders: r?.suppressEnvoyHeaders ?? false, respectExpectedRqTimeout: r?.respectExpectedRqTimeout ?? false, log: routerLog };
        return;
      }
      const ctx: FilterFactoryContext = {
        statPrefix: proto.statPrefix,
        stats: this.stats.scope,
        log: deps.log,
        typeRegistry: deps.typeRegistry,
        upstream: deps.upstreamCall,
        where: fw,
        filterName: f.name,
      };
      filters.push({ name: f.name, filter: factory.create(any, ctx), disabled: f.disabled });
    });
    if (proto.httpFilters.length === 0) throw new ConfigError(`${where}.http_filters: at least one filter (the router) is required`);
    this.filters = filters;
    this.router = new Router(routerOpts);
    this.accessLogs = compileAccessLogs(proto.accessLog, where);
    const rs = proto.routeSpecifier;
    if (rs.case === 'rds') {
      const src = rs.value.configSource?.configSourceSpecifier.case;
      if (src !== 'ads') throw new ConfigError(`${where}.rds.config_source: only ADS is supported`);
      if (!rs.value.routeConfigName) throw new ConfigError(`${where}.rds.route_config_name: must not be empty`);
      this.routes = deps.routes.provider(rs.value.routeConfigName);
    } else if (rs.case === 'routeConfig') {
      this.routes = deps.routes.compileInline(rs.value, isStatic);
    } else if (rs.case === 'scopedRoutes') {
      throw new ConfigError(`${where}.scoped_routes: scoped routes are not supported`);
    } else {
      throw new ConfigError(`${where}: HttpConnectionManager needs rds or route_config`);
    }
    this.ready = this.routes.ready;
    // HTTP/1.x (plaintext or after TLS) is served by the engine's own codec (h1/server.ts), HTTP/2 by Node's servers
    const onRequest = (req: DownstreamRequest, res: DownstreamResponse) => this.onRequest(req, res);
    this.h2 = http2.createServer({ settings: { enablePush: false }, maxSessionMemory: 64 }, onRequest as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void);
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
    for (const s of this.secureServers.values()) s.close();
  }

  onStreamDone(s: Stream): void {
    const st = this.stats;
    st.rqActive.dec();
    st.rqCompleted.inc();
    if (s.info.responseCode > 0) st.codes.record(s.info.responseCode);
    st.rqTime.record(performance.now() - s.info.startHr);
    if (this.accessLogs.length > 0) {
      const ctx = { info: s.info, request: s.request, response: { get: (n: string) => s.responseHeader(n) } };
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
    let authority = ((isH2 ? raw[':authority'] ?? raw.host : raw.host) as string | undefined) ?? '';
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
      if (p >= 0 && (o.stripPort === 'any' || Number(headers.authority.slice(p + 1)) === this.listenerPort)) headers.authority = headers.authority.slice(0, p);
    }
    this.mutateRequestHeaders(s);
    this.runDecoders(s, 0);
  }

  /** Envoy ConnectionManagerUtility::mutateRequestHeaders: XFF, internal/external, XFP, request id. */
  private mutateRequestHeaders(s: Stream): void {
    const o = this.options;
    const h = s.request;
    const remote = plainIp(s.conn.info.remoteAddress);
    let internal: boolean;
    if (o.useRemoteAddress) {
      if (!o.skipXffAppend) {
        const xff = h.get('x-forwarded-for');
        h.set('x-forwarded-for', xff ? `${xff},${remote}` : remote);
      }
      internal = s.conn.internal ??= this.isInternal(remote);
      if (internal) h.set('x-envoy-internal', 'true');
      else {
        for (const k of EXTERNAL_STRIPPED) h.remove(k);
        h.set('x-envoy-external-address', remote);
      }
      h.set('x-forwarded-proto', s.conn.info.tls ? 'https' : 'http');
    } else {
      const xff = h.get('x-forwarded-for');
      const last = xff?.split(',').map((x) => x.trim()).filter(Boolean);
      internal = last ? last.length === 1 && this.isInternal(last[0]!) : (s.conn.internal ??= this.isInternal(remote));
      if (!h.has('x-forwarded-proto')) h.set('x-forwarded-proto', s.conn.info.tls ? 'https' : 'http');
    }
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
