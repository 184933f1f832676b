// The router (envoy.filters.http.router): route → cluster → host → upstream request, with Envoy's
// header handling (x-forwarded-proto, x-envoy-expected-rq-timeout-ms, x-envoy-original-path, attempt
// count), route timeout and per-try timeout, retries with jittered back-off, circuit breakers,
// outlier reporting, and the local replies Envoy makes when upstreams fail.
import { upstreamIdentities } from '../tls/identities';
import { tlsVerifyFailure } from '../tls/failure-reason';
import { applyRequestOps, applyResponseOps } from '../route/header-ops';
import { pickWeighted, redirectLocation, rewritePath } from '../route/action';
import type { ForwardAction, MirrorPolicy, RetryPolicy, RouteSelection } from '../route/types';
import { hash32, type LbContext } from '../upstream/lb';

const NO_LB_CONTEXT: LbContext = {};
import type { Host } from '../upstream/host';
import type { UpstreamCluster } from '../upstream/cluster';
import { APPLICATION_PROTOCOLS_KEY, type ApplicationProtocolsFor } from '../stream-info';
import {
  connectUpstream,
  readyEvent,
  startUpstreamRequest,
  type BodySink,
  type UpstreamBody,
  type UpstreamCallbacks,
  type UpstreamFailure,
  type UpstreamRequestHandle,
  type UpstreamResponse,
} from '../upstream/pool';
import { pendingOn } from '../upstream/host-pools';
import { plainIp } from '../stream-info';
import { joinHostPort } from '../../lib/hostport';
import { HOP_BY_HOP, ResponseHeaders, type RawHeaders, type RequestHeaders } from '../codec/headers';
import { copyResponseHeaders, type DownstreamRequest, type Stream } from './stream';
import { BodySource, type BodyReader } from '../codec/h1/body';
import type { StreamInfo } from '../stream-info';
import type { RouterOptions } from './hcm-config';
import { routeHostRewrite, updateAuthority } from './authority';

const RETRIABLE_4XX = 409;
const BODY_BUFFER_LIMIT = 1024 * 1024;
const GRPC_RETRY: Record<string, number> = { cancelled: 1, 'deadline-exceeded': 4, internal: 13, 'resource-exhausted': 8, unavailable: 14 };

/** Downstream request body, buffered (up to a limit) when a retry may need to replay it. */
class RequestBody implements BodyReader {
  private chunks: Buffer[] | undefined = [];
  private size = 0;
  ended = false;
  /** when the whole request had arrived downstream (Envoy's downstream_request_complete_time_) */
  completedAt: number | undefined;
  private sink: BodySink | undefined;
  private paused = false;
  private complete: Array<(body: Buffer | undefined) => void> | undefined;

  constructor(
    private readonly src: DownstreamRequest,
    buffer: boolean,
    private readonly info: StreamInfo,
  ) {
    if (!buffer) this.chunks = undefined;
    if (src.bodyless) {
      // nothing will come: the upstream request ends with its head
      this.ended = true;
      this.completedAt = performance.now();
      return;
    }
    if (src instanceof BodySource) src.read(this);
    else {
      src.on!('data', (c: Buffer) => this.onData(c));
      src.on!('end', () => this.onEnd());
    }
  }

  onData(c: Buffer): void {
    this.info.bytesReceived += c.length;
    this.info.grpcMessages?.request.feed(c);
    if (this.chunks) {
      this.size += c.length;
      if (this.size > BODY_BUFFER_LIMIT) this.chunks = undefined;
      else this.chunks.push(c);
    }
    if (this.sink && !this.sink.write(c) && !this.paused) {
      this.paused = true;
      this.src.pause();
      this.sink.once('drain', () => {
        this.paused = false;
        this.src.resume();
      });
    }
  }

  onEnd(): void {
    this.ended = true;
    this.completedAt = performance.now();
    this.sink?.end();
    const waiting = this.complete;
    this.complete = undefined;
    for (const cb of waiting ?? []) cb(this.chunks && Buffer.concat(this.chunks));
  }

  /** `cb` gets the whole body once it has arrived, or undefined when it outgrew the buffer. */
  whenComplete(cb: (body: Buffer | undefined) => void): void {
    if (this.ended) cb(this.chunks && Buffer.concat(this.chunks));
    else (this.complete ??= []).push(cb);
  }

  /** The downstream connection went away: the stream's end takes care of the upstream request. */
  onAbort(): void {}

  /** Whether the whole body so far can be replayed. */
  get replayable(): boolean {
    return this.chunks !== undefined;
  }

  attach(sink: BodySink): void {
    this.sink = sink;
    if (this.chunks) for (const c of this.chunks) sink.write(c);
    if (this.ended) sink.end();
  }

  detach(): void {
    this.sink = undefined;
    if (this.paused) {
      this.paused = false;
      this.src.resume();
    }
  }
}

function retryOnFailure(p: RetryPolicy, kind: UpstreamFailure | 'per_try_timeout', refused: boolean): boolean {
  const on = p.retryOn;
  switch (kind) {
    case 'connect_failure':
      return on.has('connect-failure') || on.has('5xx') || on.has('gateway-error') || on.has('reset');
    case 'reset':
      return on.has('reset') || on.has('5xx') || (refused && on.has('refused-stream'));
    case 'per_try_timeout':
      return on.has('5xx') || on.has('gateway-error') || on.has('reset');
    default:
      return false;
  }
}

function retryOnResponse(p: RetryPolicy, status: number, headers: RawHeaders): boolean {
  const on = p.retryOn;
  if (status >= 500 && on.has('5xx')) return true;
  if ((status === 502 || status === 503 || status === 504) && on.has('gateway-error')) return true;
  if (status === RETRIABLE_4XX && on.has('retriable-4xx')) return true;
  if (on.has('retriable-status-codes') && p.retriableStatusCodes.has(status)) return true;
  const gs = headers['grpc-status'];
  if (gs !== undefined) {
    const code = Number(Array.isArray(gs) ? gs[0] : gs);
    for (const [name, c] of Object.entries(GRPC_RETRY)) if (c === code && on.has(name)) return true;
  }
  return false;
}

/** grpc-timeout header (`10S`, `200m`…) in ms. */
function grpcTimeoutMs(v: string | undefined): number | undefined {
  if (!v) return undefined;
  const m = /^(\d{1,8})([HMSmun])$/.exec(v);
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 0.001, n: 0.000001 };
  return n * unit[m[2]!]!;
}

export class Router {
  constructor(private readonly opts: RouterOptions) {}

  route(s: Stream): void {
    const sel = s.route();
    const hcm = s.hcm;
    if (!sel) {
      hcm.stats.noRoute.inc();
      s.sendLocalReply({ status: 404, flag: 'NR', details: 'route_not_found' });
      return;
    }
    const route = sel.route;
    s.info.routeName = route.name;
    const a = route.action;
    if (a.kind === 'direct') {
      hcm.stats.rqDirectResponse.inc();
      this.applyResponseHeaderOps(s, sel, undefined);
      const h = new ResponseHeaders(a.status);
      this.applyResponseHeaderOps(s, sel, h);
      if (a.body) {
        h.set('content-type', 'text/plain');
        h.set('content-length', String(a.body.length));
      } else h.set('content-length', '0');
      s.info.responseCodeDetails = 'direct_response';
      s.sendHeaders(h);
      s.info.bytesSent += a.body?.length ?? 0;
      if (s.request.method === 'HEAD' || !a.body) s.res.end();
      else s.res.end(a.body);
      return;
    }
    if (a.kind === 'redirect') {
      hcm.stats.rqRedirect.inc();
      const loc = redirectLocation(a, s.request, route.prefixLength(s));
      const h = new ResponseHeaders(a.status, { location: loc, 'content-length': '0' });
      this.applyResponseHeaderOps(s, sel, h);
      s.info.responseCodeDetails = 'direct_response';
      s.sendHeaders(h);
      s.res.end();
      return;
    }
    if (a.kind === 'nonForwarding') {
      hcm.stats.noRoute.inc();
      s.sendLocalReply({ status: 404, flag: 'NR', details: 'route_not_found' });
      return;
    }
    this.forward(s, sel, a);
  }

  applyResponseHeaderOps(s: Stream, sel: RouteSelection, h: ResponseHeaders | undefined): void {
    if (!h) return;
    const ctx = s.formatContext(h);
    const order = sel.config.mostSpecificHeaderMutationsWins
      ? [sel.config.headerOps, sel.vhost.headerOps, sel.route.headerOps, s.weighted?.headerOps]
      : [s.weighted?.headerOps, sel.route.headerOps, sel.vhost.headerOps, sel.config.headerOps];
    for (const ops of order) applyResponseOps(ops, h, ctx);
  }

  private clusterName(s: Stream, a: ForwardAction): string | undefined {
    const spec = a.cluster;
    if (spec.kind === 'cluster') return spec.name;
    if (spec.kind === 'header') return s.request.get(spec.header);
    let r = s.random;
    if (spec.randomHeader) {
      const v = s.request.get(spec.randomHeader);
      if (v !== undefined && /^\d+$/.test(v)) r = (Number(v) % spec.total) / spec.total;
    }
    const e = pickWeighted(spec, r);
    if (!e) return undefined;
    s.weighted = e;
    return e.name.startsWith('%header:') ? s.request.get(e.name.slice(8)) : e.name;
  }

  private forward(s: Stream, sel: RouteSelection, a: ForwardAction): void {
    const hcm = s.hcm;
    const name = this.clusterName(s, a);
    const cluster = name ? hcm.clusters.get(name) : undefined;
    if (!cluster) {
      hcm.stats.noCluster.inc();
      s.sendLocalReply({ status: a.clusterNotFoundCode, flag: 'NC', details: 'cluster_not_found' });
      return;
    }
    s.info.upstreamCluster = cluster.name;
    const req = s.request;
    if (this.opts.log.enabled('debug')) this.opts.log.debug(`cluster '${cluster.name}' match for URL '${req.path}'`);
    // finalizeRequestHeaders. A weighted cluster's own (WeightedClusterEntry): its header mutations, then its
    // host_rewrite_literal as a plain set. The route's: header mutations (route → vhost → route config by
    // default, the route config winning), the Host, then the path.
    const fctx = s.formatContext();
    const w = s.weighted;
    const keepOld = !this.opts.suppressEnvoyHeaders;
    const mostSpecific = sel.config.mostSpecificHeaderMutationsWins;
    if (mostSpecific)
      for (const ops of [sel.config.headerOps, sel.vhost.headerOps, sel.route.headerOps, w?.headerOps]) applyRequestOps(ops, req, fctx);
    else applyRequestOps(w?.headerOps, req, fctx);
    if (w?.hostRewriteLiteral) req.authority = w.hostRewriteLiteral;
    if (!mostSpecific) for (const ops of [sel.route.headerOps, sel.vhost.headerOps, sel.config.headerOps]) applyRequestOps(ops, req, fctx);
    const newHost = routeHostRewrite(a.hostRewrite, req);
    if (newHost) updateAuthority(req, newHost, a.appendXForwardedHost, keepOld);
    const newPath = rewritePath(a.pathRewrite, req.path, sel.route.prefixLength(s));
    if (newPath !== undefined) {
      if (keepOld) req.set('x-envoy-original-path', req.path);
      req.path = newPath;
      req.pathChanged();
    }
    // timeouts
    let timeoutMs = a.timeoutMs;
    if (a.maxGrpcTimeoutMs !== undefined && s.isGrpc) {
      const g = grpcTimeoutMs(req.get('grpc-timeout'));
      if (g !== undefined) timeoutMs = a.maxGrpcTimeoutMs > 0 ? Math.min(g, a.maxGrpcTimeoutMs) : g;
    }
    const hdrTimeout = req.get('x-envoy-upstream-rq-timeout-ms');
    if (hdrTimeout !== undefined && /^\d+$/.test(hdrTimeout)) timeoutMs = Number(hdrTimeout);
    if (this.opts.respectExpectedRqTimeout) {
      const exp = req.get('x-envoy-expected-rq-timeout-ms');
      if (exp !== undefined && /^\d+$/.test(exp)) timeoutMs = Number(exp);
    }
    req.remove('x-envoy-upstream-rq-timeout-ms');
    if (s.upgrade) {
      const allowed = a.upgradeTypes.get(s.upgrade) ?? hcm.options.upgradeTypes.has(s.upgrade);
      if (!allowed) {
        s.sendLocalReply({ status: 403, details: 'upgrade_failed' });
        return;
      }
      // Envoy routes an upgrade as any request (the router's headers included), then joins the two connections
      const extra: Record<string, string> = {};
      if (!this.opts.suppressEnvoyHeaders) {
        if (timeoutMs > 0) extra['x-envoy-expected-rq-timeout-ms'] = String(timeoutMs);
        if (sel.vhost.includeRequestAttemptCount) extra['x-envoy-attempt-count'] = '1';
      }
      spliceUpgrade(s, cluster, timeoutMs, extra);
      return;
    }
    let retry = sel.route.action.kind === 'route' ? (a.retry ?? sel.vhost.retry) : undefined;
    const hdrRetryOn = req.get('x-envoy-retry-on');
    const hdrMax = req.get('x-envoy-max-retries');
    if (hdrRetryOn || hdrMax) {
      const base: RetryPolicy = retry ?? {
        retryOn: new Set(),
        numRetries: 1,
        perTryTimeoutMs: 0,
        retriableStatusCodes: new Set(),
        avoidPreviousHosts: false,
        hostSelectionRetryMaxAttempts: 1,
        baseIntervalMs: 25,
        maxIntervalMs: 250,
      };
      retry = {
        ...base,
        retryOn: hdrRetryOn ? new Set([...base.retryOn, ...hdrRetryOn.split(',').map((x) => x.trim())]) : base.retryOn,
        numRetries: hdrMax && /^\d+$/.test(hdrMax) ? Number(hdrMax) : base.numRetries,
      };
      req.remove('x-envoy-retry-on');
      req.remove('x-envoy-max-retries');
    }
    const mirrors = a.mirrors.length === 0 ? a.mirrors : a.mirrors.filter((m) => m.fraction >= 1 || Math.random() < m.fraction);
    const exchange = new UpstreamExchange(this, s, sel, cluster, timeoutMs, retry, this.opts, a, mirrors.length > 0);
    if (mirrors.length > 0) this.mirror(req, s.req.bodyless === true, mirrors, timeoutMs, exchange);
    exchange.start();
  }

  /**
   * Envoy's shadowing (router.cc, ShadowWriter): a copy of the request as the router forwards it, its host with
   * `-shadow` appended, to each sampled mirror cluster; the answer is dropped and never delays the request.
   * Differs on purpose: the copy is sent once the whole body has arrived (Envoy streams it) and not at all when
   * the body outgrows the 1 MiB replay buffer.
   */
  private mirror(req: RequestHeaders, bodyless: boolean, mirrors: readonly MirrorPolicy[], timeoutMs: number, exchange: UpstreamExchange): void {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.h as RawHeaders)) {
      if (v === undefined || HOP_BY_HOP.has(k) || k === 'content-length' || k === 'host') continue;
      headers[k] = typeof v === 'string' ? v : v.join(',');
    }
    const head = { method: req.method, path: req.path, authority: req.authority };
    exchange.whenBodyComplete((body) => {
      if (body === undefined && !bodyless) {
        this.opts.log.debug(`mirror of ${head.path} not sent: its body outgrew the replay buffer`);
        return;
      }
      if (body && body.length > 0) headers['content-length'] = String(body.length);
      for (const m of mirrors) {
        const call = {
          ...head,
          authority: m.hostSuffix ? shadowHost(head.authority) : head.authority,
          headers,
          body,
          timeoutMs: timeoutMs || 15_000,
        };
        this.opts.upstreamCall(m.cluster, call).catch((e: Error) => this.opts.log.debug(`mirror to '${m.cluster}' failed: ${e.message}`));
      }
    });
  }
}

/** Envoy's shadowAppendedHost: `-shadow` after the host name, before any port. */
export function shadowHost(authority: string): string {
  const m = /^(.*?)(:\d+)?$/.exec(authority)!;
  if (authority.startsWith('[')) {
    const end = authority.indexOf(']');
    return `${authority.slice(0, end + 1)}-shadow${authority.slice(end + 1)}`;
  }
  return `${m[1]}-shadow${m[2] ?? ''}`;
}

/** One request forwarded upstream, across its attempts; it reads the response body it forwards. */
class UpstreamExchange implements BodyReader {
  private attempt = 0;
  private current: UpstreamRequestHandle | undefined;
  private currentHost: Host | undefined;
  private tried: Set<Host> | undefined;
  private globalTimer: NodeJS.Timeout | undefined;
  private perTryTimer: NodeJS.Timeout | undefined;
  private readonly body: RequestBody;
  private finished = false;
  private readonly start0 = performance.now();
  private attemptActive = false;
  private readonly protocol: 'http1' | 'http2';
  private respHost: Host | undefined;
  private respStatus = 0;
  private respBody: UpstreamBody | undefined;
  private respIsHead = false;
  private respPaused = false;

  constructor(
    private readonly router: Router,
    private readonly s: Stream,
    private readonly sel: RouteSelection,
    private readonly cluster: UpstreamCluster,
    private readonly timeoutMs: number,
    private readonly retry: RetryPolicy | undefined,
    private readonly opts: RouterOptions,
    private readonly action: ForwardAction,
    mirrored = false,
  ) {
    this.protocol = cluster.protocol === 'downstream' ? (s.isH2 ? 'http2' : 'http1') : cluster.protocol;
    this.body = new RequestBody(s.req, mirrored || (!!retry && retry.numRetries > 0), s.info);
    s.onDone = () => this.cleanup();
  }

  /** The request's whole body once it has arrived (undefined when over the buffer limit). */
  whenBodyComplete(cb: (body: Buffer | undefined) => void): void {
    this.body.whenComplete(cb);
  }

  start(): void {
    if (this.timeoutMs > 0) {
      this.globalTimer = setTimeout(() => this.onGlobalTimeout(), this.timeoutMs);
    }
    this.send();
  }

  private cleanup(): void {
    this.finished = true;
    if (this.globalTimer) clearTimeout(this.globalTimer);
    if (this.perTryTimer) clearTimeout(this.perTryTimer);
    if (!this.s.responded || !this.s.res.writableFinished) this.current?.abort();
    if (this.currentHost) this.endAttempt(this.currentHost);
  }

  private pickHost(): Host | undefined {
    const c = this.cluster;
    if (c.type === 'ORIGINAL_DST') {
      const hdr = c.useHttpHeaderForOriginalDst ? this.s.request.get(c.useHttpHeaderForOriginalDst) : undefined;
      const dst = hdr
        ? parseHostPort(hdr, 0)
        : (this.s.conn.info.originalDestination ?? parseHostPort(this.s.request.authority, this.s.conn.info.tls ? 443 : 80));
      if (!dst || dst.port === 0) return undefined;
      return c.originalDstHost(dst.address, dst.port);
    }
    const avoid = this.retry?.avoidPreviousHosts ? this.tried : undefined;
    const hash = this.hash();
    if (!avoid && hash === undefined) return c.chooseHost(NO_LB_CONTEXT);
    const ctx: LbContext = {};
    if (avoid) ctx.avoid = avoid;
    if (hash !== undefined) ctx.hash = hash;
    return c.chooseHost(ctx);
  }

  private hashValue: number | null | undefined = null;
  private hash(): number | undefined {
    if (this.hashValue === null) {
      this.hashValue = undefined;
      if (this.cluster.lb.opts.policy === 'RING_HASH' || this.cluster.lb.opts.policy === 'MAGLEV') {
        // Envoy combines the hashes of the policies that produce a value; none → a random host
        let h: number | undefined;
        for (const p of this.action.hashPolicies) {
          let v: string | undefined;
          if (p.kind === 'header') v = this.s.request.get(p.name);
          else if (p.kind === 'query') v = this.s.request.queryParam(p.name);
          else if (p.kind === 'sourceIp') v = this.s.conn.info.remoteAddress;
          else {
            const m = new RegExp(`(?:^|;\\s*)${p.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}=([^;]*)`).exec(this.s.request.get('cookie') ?? '');
            v = m?.[1];
          }
          if (v === undefined) continue;
          const x = hash32(v);
          h = h === undefined ? x : (((h << 1) | (h >>> 31)) ^ x) >>> 0;
          if (p.terminal) break;
        }
        this.hashValue = h;
      }
    }
    return this.hashValue;
  }

  private send(): void {
    const s = this.s;
    const c = this.cluster;
    const cs = c.stats;
    const host = this.pickHost();
    if (!host) {
      cs.noneHealthy.inc();
      this.fail(503, 'no healthy upstream', 'UH', 'no_healthy_upstream');
      return;
    }
    // circuit breakers
    if (
      c.rqActive >= c.thresholds.maxRequests ||
      (this.protocol === 'http1' &&
        c.thresholds.maxPendingRequests < 1e9 &&
        c.cxActive >= c.thresholds.maxConnections &&
        pendingOn(host) >= c.thresholds.maxPendingRequests)
    ) {
      cs.rqPendingOverflow.inc();
      c.updateCircuitBreakerGauges();
      this.fail(503, 'upstream connect error or disconnect/reset before headers. reset reason: overflow', 'UO', 'overflow', {
        'x-envoy-overloaded': 'true',
      });
      return;
    }
    this.attempt++;
    s.info.attemptCount = this.attempt;
    (this.tried ??= new Set()).add(host);
    this.currentHost = host;
    this.attemptActive = true;
    s.info.upstreamHost = host.key;
    s.info.upstreamHostMetadata = host.metadata;
    c.rqActive++;
    host.stats.rqActive++;
    host.stats.rqTotal++;
    cs.rqTotal.inc();
    cs.rqActive.inc();
    c.updateCircuitBreakerGauges();
    const req = s.request;
    // auto_host_rewrite: the chosen host's name, written into the request itself (UpstreamRequest::onPoolReady), so
    // a retry to another host appends and keeps what the previous attempt wrote
    if (this.action.hostRewrite.kind === 'auto' && host.hostname)
      updateAuthority(req, host.hostname, this.action.appendXForwardedHost, !this.opts.suppressEnvoyHeaders);
    const headers: RawHeaders = {};
    const src = req.h;
    for (const k in src) {
      if (HOP_BY_HOP.has(k) && !(k === 'te' && src[k] === 'trailers')) continue;
      const v = src[k];
      if (v !== undefined) headers[k] = v;
    }
    if (!this.opts.suppressEnvoyHeaders) {
      const expected = expectedTimeoutMs(this.timeoutMs, this.retry?.perTryTimeoutMs ?? 0);
      if (expected > 0) headers['x-envoy-expected-rq-timeout-ms'] = String(expected);
      if (this.sel.vhost.includeRequestAttemptCount) headers['x-envoy-attempt-count'] = String(this.attempt);
    }
    if (s.trace) s.trace.upstream(s, headers, c.name, host.key, this.attempt);
    const attemptNo = this.attempt;
    const alpnFor = this.s.filterState.get(APPLICATION_PROTOCOLS_KEY) as ApplicationProtocolsFor | undefined;
    const alpn = alpnFor?.(this.protocol, c.metadata);
    const source = this.s.conn.info.upstreamSource;
    const handle = startUpstreamRequest(
      c,
      host,
      this.protocol,
      { method: req.method, path: req.path, authority: req.authority, scheme: c.transportFor(host).tls ? 'https' : 'http', headers },
      new Attempt(this, attemptNo, host),
      alpn || source ? { alpnOverride: alpn, source } : undefined,
    );
    this.current = handle;
    this.body.attach(handle.body);
    const ptt = this.retry?.perTryTimeoutMs ?? 0;
    if (ptt > 0) {
      this.perTryTimer = setTimeout(() => this.onPerTryTimeout(attemptNo, host), ptt);
    }
  }

  private endAttempt(host: Host): void {
    if (!this.attemptActive) return;
    this.attemptActive = false;
    const c = this.cluster;
    c.rqActive--;
    host.stats.rqActive--;
    c.stats.rqActive.dec();
    if (this.perTryTimer) clearTimeout(this.perTryTimer);
    this.perTryTimer = undefined;
    c.updateCircuitBreakerGauges();
  }

  private canRetry(): boolean {
    const r = this.retry;
    if (!r || this.attempt > r.numRetries || this.finished) return false;
    if (!this.body.replayable) return false;
    if (this.cluster.retriesActive >= this.cluster.thresholds.maxRetries) {
      this.cluster.stats.rqRetryOverflow.inc();
      return false;
    }
    return true;
  }

  private scheduleRetry(): void {
    const r = this.retry!;
    this.cluster.stats.rqRetry.inc();
    this.cluster.retriesActive++;
    this.body.detach();
    const ceiling = Math.min(r.maxIntervalMs, r.baseIntervalMs * 2 ** (this.attempt - 1));
    const delay = Math.floor(Math.random() * ceiling);
    setTimeout(() => {
      this.cluster.retriesActive--;
      if (this.finished || this.s.downstreamClosed) return;
      this.send();
    }, delay);
  }

  private onPerTryTimeout(attemptNo: number, host: Host): void {
    if (attemptNo !== this.attempt || this.finished) return;
    this.cluster.stats.rqPerTryTimeout.inc();
    host.stats.rqTimeout++;
    this.current?.abort();
    this.endAttempt(host);
    this.cluster.outlier?.reportLocal(host, 'timeout');
    if (this.retry && retryOnFailure(this.retry, 'per_try_timeout', false) && this.canRetry()) {
      this.scheduleRetry();
      return;
    }
    this.s.info.setFlag('UT');
    this.fail(504, 'upstream request timeout', undefined, 'upstream_per_try_timeout');
  }

  /** Envoy's route timeout runs until the response is complete: after headers it resets the stream. */
  private onGlobalTimeout(): void {
    if (this.finished) return;
    this.cluster.stats.rqTimeout.inc();
    if (this.currentHost) this.currentHost.stats.rqTimeout++;
    this.current?.abort();
    if (this.currentHost) this.endAttempt(this.currentHost);
    this.s.info.setFlag('UT');
    this.fail(504, 'upstream request timeout', undefined, 'upstream_response_timeout');
  }

  onError(attemptNo: number, host: Host, kind: UpstreamFailure, detail: string): void {
    if (attemptNo !== this.attempt || this.finished) return;
    this.endAttempt(host);
    host.stats.rqError++;
    if (kind === 'reset') this.cluster.outlier?.reportLocal(host, 'reset');
    // a certificate that fails verification: Envoy's words for it (a remote connection failure with BoringSSL's text)
    const tlsFailure = kind === 'connect_failure' ? tlsVerifyFailure(detail) : undefined;
    this.s.info.upstreamTransportFailureReason = tlsFailure ?? detail;
    const refused = detail === 'refused stream';
    if (this.retry && retryOnFailure(this.retry, kind, refused) && this.canRetry()) {
      this.scheduleRetry();
      return;
    }
    const reason = tlsFailure
      ? 'remote connection failure'
      : kind === 'connect_failure'
        ? 'connection failure'
        : refused
          ? 'remote refused stream reset'
          : 'connection termination';
    const flag = kind === 'connect_failure' ? 'UF' : 'UC';
    if (this.attempt > 1) this.s.info.setFlag('URX');
    const prefix = this.attempt > 1 ? 'retried and the latest reset reason: ' : 'reset reason: ';
    // Envoy Router::Filter::onUpstreamReset: the transport failure reason follows the reset reason when there is one
    const transport = tlsFailure ? `, transport failure reason: ${tlsFailure}` : '';
    this.fail(
      503,
      `upstream connect error or disconnect/reset before headers. ${prefix}${reason}${transport}`,
      flag,
      `upstream_reset_before_response_started{${reason.replace(/ /g, '_')}${tlsFailure ? `|${tlsFailure.replace(/ /g, '_')}` : ''}}`,
    );
  }

  private fail(status: number, body: string, flag: string | undefined, details: string, headers?: Record<string, string>): void {
    if (this.finished) return;
    this.finished = true;
    if (this.globalTimer) clearTimeout(this.globalTimer);
    this.body.detach();
    this.s.sendLocalReply({ status, body, ...(flag ? { flag } : {}), details, ...(headers ? { headers } : {}) });
  }

  onResponse(attemptNo: number, host: Host, r: UpstreamResponse): void {
    if (attemptNo !== this.attempt || this.finished) {
      r.body.discard();
      return;
    }
    const c = this.cluster;
    if (this.perTryTimer) clearTimeout(this.perTryTimer);
    if (r.socket) this.s.info.upstreamTls = upstreamIdentities(r.socket, host.key);
    c.outlier?.reportHttp(host, r.status);
    if (this.retry && retryOnResponse(this.retry, r.status, r.headers) && this.canRetry()) {
      r.body.discard();
      this.endAttempt(host);
      host.stats.rqError++;
      c.stats.codes.record(r.status);
      this.scheduleRetry();
      return;
    }
    if (this.attempt > 1) c.stats.rqRetrySuccess.inc();
    const s = this.s;
    // Envoy's %RESPONSE_CODE_DETAILS% for a response that came from the upstream
    s.info.responseCodeDetails = 'via_upstream';
    if (r.socket?.localAddress) s.info.upstreamLocalAddress = joinHostPort(plainIp(r.socket.localAddress), r.socket.localPort ?? 0);
    const h = new ResponseHeaders(r.status, copyResponseHeaders(r.headers));
    // as Envoy's router: the time since the whole request arrived, and only when it had (not on a response that
    // starts while the request still streams, as a bidirectional gRPC call's does)
    const since = this.body.completedAt;
    if (!this.opts.suppressEnvoyHeaders && since !== undefined) h.set('x-envoy-upstream-service-time', String(Math.round(performance.now() - since)));
    if (this.sel.vhost.includeAttemptCountInResponse) h.set('x-envoy-attempt-count', String(this.attempt));
    this.router.applyResponseHeaderOps(s, this.sel, h);
    if (r.endStream) {
      // trailers-only (gRPC errors): the headers end the stream downstream too
      s.sendHeadersOnly(h);
      r.body.discard();
      this.finished = true;
      if (this.globalTimer) clearTimeout(this.globalTimer);
      this.endAttempt(host);
      c.stats.codes.record(r.status);
      c.stats.rqCompleted.inc();
      c.stats.rqTime.record(performance.now() - this.start0);
      host.stats.rqSuccess++;
      return;
    }
    s.sendHeaders(h);
    this.respHost = host;
    this.respStatus = r.status;
    this.respBody = r.body;
    this.respIsHead = s.request.method === 'HEAD';
    r.body.read(this);
  }

  // BodyReader: the upstream response body on its way downstream

  onData(chunk: Buffer): void {
    const s = this.s;
    s.info.bytesSent += chunk.length;
    s.info.grpcMessages?.response.feed(chunk);
    if (s.downstreamClosed || this.respIsHead) return;
    if (!s.res.write(chunk) && !this.respPaused) {
      this.respPaused = true;
      this.respBody!.pause();
      s.res.once('drain', () => {
        this.respPaused = false;
        this.respBody!.resume();
      });
    }
  }

  onEnd(trailers: RawHeaders | undefined): void {
    const host = this.respHost!;
    const c = this.cluster;
    if (this.globalTimer) clearTimeout(this.globalTimer);
    this.finished = true;
    this.endAttempt(host);
    const code = this.respStatus;
    c.stats.codes.record(code);
    c.stats.rqCompleted.inc();
    c.stats.rqTime.record(performance.now() - this.start0);
    if (code >= 500) host.stats.rqError++;
    else host.stats.rqSuccess++;
    const s = this.s;
    s.responseTrailers = trailers;
    if (s.downstreamClosed) return;
    if (trailers) {
      for (const _ in trailers) {
        s.res.addTrailers(trailers);
        break;
      }
    }
    s.res.end();
  }

  onAbort(): void {
    if (this.finished) return;
    this.finished = true;
    const host = this.respHost!;
    this.endAttempt(host);
    host.stats.rqError++;
    this.s.info.setFlag('UC');
    this.s.resetDownstream();
  }
}

/** One attempt's callbacks (an earlier attempt's late answer is told apart by its number). */
class Attempt implements UpstreamCallbacks {
  constructor(
    private readonly ex: UpstreamExchange,
    private readonly no: number,
    private readonly host: Host,
  ) {}
  onResponse(r: UpstreamResponse): void {
    this.ex.onResponse(this.no, this.host, r);
  }
  onError(kind: UpstreamFailure, detail: string): void {
    this.ex.onError(this.no, this.host, kind, detail);
  }
}

/**
 * An allowed HTTP/1.1 upgrade (WebSocket): the request goes to the upstream as it came (with its
 * Upgrade/Connection headers), then the two sockets are spliced; the upstream's 101 goes back verbatim.
 */
function spliceUpgrade(s: Stream, cluster: UpstreamCluster, timeoutMs: number, extra: Record<string, string>): void {
  const host =
    cluster.type === 'ORIGINAL_DST'
      ? (() => {
          const d = s.conn.info.originalDestination ?? parseHostPort(s.request.authority, 80);
          return d ? cluster.originalDstHost(d.address, d.port) : undefined;
        })()
      : cluster.chooseHost({});
  if (!host) {
    cluster.stats.noneHealthy.inc();
    s.sendLocalReply({ status: 503, body: 'no healthy upstream', flag: 'UH', details: 'no_healthy_upstream' });
    return;
  }
  s.info.upstreamHost = host.key;
  cluster.stats.rqTotal.inc();
  host.stats.rqTotal++;
  const source = s.conn.info.upstreamSource;
  const up = connectUpstream(cluster, host, undefined, source ? { source } : undefined);
  const down = s.req.socket as import('node:net').Socket;
  let connected = false;
  const timer =
    timeoutMs > 0
      ? setTimeout(() => {
          if (!connected) up.destroy(new Error('upstream request timeout'));
        }, timeoutMs)
      : undefined;
  up.once(readyEvent(up), () => {
    connected = true;
    if (timer) clearTimeout(timer);
    const r = s.request;
    let head = `${r.method} ${r.path} HTTP/1.1\r\nhost: ${r.authority}\r\nconnection: Upgrade\r\nupgrade: ${s.req.headers.upgrade}\r\n`;
    for (const k in r.h) {
      if (HOP_BY_HOP.has(k)) continue;
      const v = r.h[k];
      for (const x of Array.isArray(v) ? v : v === undefined ? [] : [v]) head += `${k}: ${x}\r\n`;
    }
    for (const [k, v] of Object.entries(extra)) head += `${k}: ${v}\r\n`;
    up.write(`${head}\r\n`);
    s.responded = true;
    (s.res as unknown as { detachSocket(sock: unknown): void }).detachSocket(down);
    up.once('data', (d: Buffer) => {
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(d.subarray(0, 16).toString('latin1'));
      s.info.responseCode = m ? Number(m[1]) : 0;
    });
    up.on('data', (d: Buffer) => (s.info.bytesSent += d.length));
    down.on('data', (d: Buffer) => (s.info.bytesReceived += d.length));
    up.pipe(down);
    down.pipe(up);
    down.resume();
  });
  const done = () => {
    up.destroy();
    down.destroy();
    s.finish();
  };
  up.once('error', (e: Error) => {
    if (timer) clearTimeout(timer);
    if (!connected) {
      s.info.upstreamTransportFailureReason = e.message;
      s.sendLocalReply({
        status: 503,
        body: 'upstream connect error or disconnect/reset before headers. reset reason: connection failure',
        flag: 'UF',
        details: 'upstream_reset_before_response_started{connection_failure}',
      });
      return;
    }
    done();
  });
  up.once('close', () => {
    if (connected) done();
  });
  down.once('close', () => up.destroy());
}

/** `host:port`, `[v6]:port` or a bare host with a default port; undefined for names needing DNS. */
export function parseHostPort(v: string, defaultPort: number): { address: string; port: number } | undefined {
  let host = v;
  let port = defaultPort;
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(v);
  if (m) {
    host = m[1]!;
    if (m[2]) port = Number(m[2]);
  } else {
    const i = v.lastIndexOf(':');
    if (i > 0 && v.indexOf(':') === i) {
      host = v.slice(0, i);
      port = Number(v.slice(i + 1));
    }
  }
  host = plainIp(host);
  if (host === 'localhost') host = '127.0.0.1';
  return { address: host, port };
}

/**
 * The x-envoy-expected-rq-timeout-ms value (Envoy FilterUtility::finalTimeout and setTimeoutHeaders, no hedging): the
 * per-try time-out when there is one shorter than the route's (or the route has none), else the route's; 0 sends
 * no header.
 */
export function expectedTimeoutMs(globalMs: number, perTryMs: number): number {
  const perTry = perTryMs > 0 && (globalMs === 0 || perTryMs < globalMs) ? perTryMs : 0;
  return perTry || globalMs;
}
