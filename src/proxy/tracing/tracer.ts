// The tracing of one HttpConnectionManager, as Envoy's connection manager drives its tracer: the sampling
// decision packed into x-request-id (ConnectionManagerUtility::mutateTracingRequestHeader), one span per request
// (ActiveStream::traceRequest: decorator, x-envoy-decorator-operation, node_id and zone tags), context written
// into each upstream request or a child span per upstream request (spawn_upstream_span), and Envoy's standard
// tags when the request ends (HttpTracerUtility::finalizeDownstreamSpan / finalizeUpstreamSpan).
// Differs from Envoy on purpose: `verbose` adds no timing annotations (the engine keeps no per-byte timings);
// gRPC-specific tags are not set.
import type { RawHeaders, RequestHeaders } from '../codec/headers';
import type { RouteSelection } from '../route/types';
import type { Counter } from '../stats/store';
import type { DownstreamConnectionInfo, StreamInfo } from '../stream-info';
import { plainIp } from '../stream-info';
import type { TracerHost } from './collector';
import type { HeaderReader, HeaderWriter } from './propagation';
import type { CompiledCustomTag, TracingOptions } from './config';
import { OtelDriver } from './otel';
import { requestIdInteger, traceReasonOf, withTraceReason, type TraceReason } from './request-id';
import { nowUs, type TraceDriver, type TraceSpan } from './span';
import { ZipkinDriver } from './zipkin';

const DECORATOR = 'x-envoy-decorator-operation';

/** What the tracer reads of a request (the HCM's Stream). */
export interface TracedStream {
  readonly request: RequestHeaders;
  readonly info: StreamInfo;
  readonly connection: DownstreamConnectionInfo;
  route(): RouteSelection | undefined;
  trace: RequestTrace | undefined;
  /** Ingress with no span (no provider): the operation the response tells the caller (Envoy's decorated_operation_). */
  decorated?: string | undefined;
  /** Ingress: the request named its operation (x-envoy-decorator-operation), which a route picked again keeps. */
  operationNamed?: boolean;
}

/** Whether `x` (0…denominator-1) falls under `numerator` (Envoy's featureEnabled over a FractionalPercent). */
const under = (numerator: number, denominator: number, x: number) => x % denominator < numerator;

export class HttpTracer {
  private readonly driver: TraceDriver | undefined;
  private readonly stats: Record<TraceReason, Counter>;

  constructor(
    readonly o: TracingOptions,
    private readonly host: TracerHost,
    /** The HCM's stats scope (`http.<prefix>.`). */
    hcmStats: { counter(name: string): Counter },
  ) {
    const p = o.provider;
    this.driver = !p ? undefined : p.kind === 'zipkin' ? new ZipkinDriver(p, host) : new OtelDriver(p, host);
    const c = (n: string) => hcmStats.counter(`tracing.${n}`);
    this.stats = {
      sampling: c('random_sampling'),
      serviceForced: c('service_forced'),
      clientForced: c('client_enabled'),
      notTraceable: c('not_traceable'),
    };
  }

  /** The decision for this request, written into its x-request-id (mutateTracingRequestHeader). */
  decide(h: RequestHeaders): TraceReason {
    const o = this.o;
    if (!o.requestId.useRequestIdForTraceSampling) return 'sampling';
    const rid = h.get('x-request-id');
    const n = requestIdInteger(rid);
    if (n === undefined || rid === undefined) return 'notTraceable';
    const result = n % 10000;
    let reason = traceReasonOf(rid, o.requestId);
    if (reason === 'notTraceable') {
      if (h.has('x-client-trace-id') && under(o.clientSampling, 100, Math.floor(Math.random() * 100))) reason = 'clientForced';
      else if (h.has('x-envoy-force-trace')) reason = 'serviceForced';
      else if (under(o.randomSampling, 10000, result)) reason = 'sampling';
    }
    if (reason !== 'notTraceable' && !under(o.overallSampling, 10000, result)) reason = 'notTraceable';
    const next = withTraceReason(rid, reason, o.requestId);
    if (next !== rid) h.set('x-request-id', next);
    return reason;
  }

  /** ActiveStream::traceRequest: the decision, then the span (none without a tracer or with a malformed context). */
  onRequest(s: TracedStream): void {
    const reason = this.decide(s.request);
    this.stats[reason].inc();
    const d = this.driver;
    const o = this.o;
    const h = s.request;
    const egress = o.operation === 'egress';
    if (!d) {
      // Envoy's tracer without a provider starts a null span all the same, so the decorator header is still
      // written on egress and taken off on ingress, and ingress answers with the route's operation unless the
      // request named one (traceRequest, then encodeHeaders)
      const route = s.route()?.route;
      const decorator = route?.decoratorOperation;
      if (egress) {
        if (decorator && route.decoratorPropagate) h.set(DECORATOR, decorator);
      } else {
        const override = h.get(DECORATOR);
        if (override) s.operationNamed = true;
        else if (decorator) s.decorated = decorator;
        h.remove(DECORATOR);
      }
      return;
    }
    const operation = egress ? `egress ${h.authority}` : 'ingress';
    const traced = reason !== 'notTraceable';
    const startUs = Math.round((performance.timeOrigin + s.info.startHr) * 1000);
    const span = d.startSpan(egress ? 'client' : 'server', h, h.authority, operation, startUs, traced);
    if (!span) return;
    const route = s.route()?.route;
    const decorator = route?.decoratorOperation;
    if (decorator) span.name = decorator;
    let decorated = decorator || undefined;
    if (egress) {
      // the receiving side names its span after the sender's route
      if (decorator && route.decoratorPropagate) h.set(DECORATOR, decorator);
    } else {
      const override = h.get(DECORATOR);
      if (override !== undefined) {
        if (override) {
          span.name = override;
          decorated = undefined;
          s.operationNamed = true;
        }
        h.remove(DECORATOR);
      }
    }
    s.trace = new RequestTrace(this, d, span, egress ? undefined : decorated);
  }

  /**
   * A filter cleared the route cache and the route was picked again: since Envoy 1.36 the connection manager
   * refreshes its tracing (ActiveStream::refreshTracing, envoyproxy/envoy#40336), so the new route's decorator names
   * the span, goes upstream on egress (when it propagates) and answers the caller on ingress unless the caller
   * named the operation itself. A route without a decorator leaves what the first one wrote.
   */
  onRouteRefreshed(s: TracedStream, sel: RouteSelection | undefined): void {
    const route = sel?.route;
    const decorator = route?.decoratorOperation;
    if (!decorator || s.operationNamed) return;
    if (s.trace) s.trace.span.name = decorator;
    if (this.o.operation === 'egress') {
      if (route.decoratorPropagate) s.request.set(DECORATOR, decorator);
    } else if (s.trace) s.trace.decorated = decorator;
    else s.decorated = decorator;
  }

  /**
   * Response headers on their way out (ActiveStream::encodeHeaders), whether or not the request has a span:
   * ingress tells the caller its operation, egress keeps the callee's from the application.
   */
  onResponseHeaders(s: TracedStream, h: HeaderWriter & HeaderReader & { remove(name: string): void }): void {
    if (s.trace) s.trace.onResponseHeaders(h);
    else if (this.o.operation !== 'egress') {
      if (s.decorated) h.set(DECORATOR, s.decorated);
    } else h.remove(DECORATOR);
  }

  tag(span: TraceSpan, name: string, value: string): void {
    if (value || this.driver?.keepsEmptyTags) span.setTag(name, value);
  }

  /** finalizeDownstreamSpan: Envoy's standard tags, the custom tags, then the span goes to the collector. */
  finishDownstream(s: TracedStream, t: RequestTrace): void {
    for (const c of t.children) this.finishUpstream(s, c);
    const span = t.span;
    if (span.sampled) {
      // what Envoy's tracer sets when the span starts: only a reported span needs it
      this.tag(span, 'node_id', this.host.local.id);
      this.tag(span, 'zone', this.host.local.zone);
      span.endUs = nowUs();
      const h = s.request;
      const info = s.info;
      const rid = h.get('x-request-id');
      if (rid !== undefined) this.tag(span, 'guid:x-request-id', rid);
      this.tag(span, 'http.url', httpUrl(h, this.o.maxPathTagLength));
      this.tag(span, 'http.method', h.method);
      this.tag(span, 'downstream_cluster', h.get('x-envoy-downstream-service-cluster') ?? '-');
      this.tag(span, 'user_agent', h.get('user-agent') ?? '-');
      this.tag(span, 'http.protocol', info.protocol);
      this.tag(span, 'peer.address', plainIp(s.connection.remoteAddress));
      const ctid = h.get('x-client-trace-id');
      if (ctid !== undefined) this.tag(span, 'guid:x-client-trace-id', ctid);
      this.tag(span, 'request_size', String(info.bytesReceived));
      this.tag(span, 'response_size', String(info.bytesSent));
      this.commonTags(span, s);
    }
    t.driver.report(span);
  }

  /** finalizeUpstreamSpan for a child span of spawn_upstream_span. */
  finishUpstream(s: TracedStream, c: { span: TraceSpan; address: string; done: boolean }): void {
    const span = c.span;
    if (c.done) return;
    c.done = true;
    if (span.sampled) {
      span.endUs = nowUs();
      this.tag(span, 'http.protocol', s.info.protocol);
      if (c.address) {
        this.tag(span, 'upstream_address', c.address);
        this.tag(span, 'peer.address', c.address);
      }
      this.commonTags(span, s);
    }
    this.driver?.report(span);
  }

  /** setCommonTags: component, custom tags, status, flags, upstream cluster, error (the downstream span and its children alike). */
  private commonTags(span: TraceSpan, s: TracedStream): void {
    const info = s.info;
    this.tag(span, 'component', 'proxy');
    for (const c of this.o.customTags) {
      const v = customTagValue(c, s);
      if (v) span.setTag(c.tag, v);
    }
    this.tag(span, 'http.status_code', String(info.responseCode));
    this.tag(span, 'response_flags', info.flagString());
    if (info.upstreamCluster) {
      this.tag(span, 'upstream_cluster', info.upstreamCluster);
      this.tag(span, 'upstream_cluster.name', info.upstreamCluster);
    }
    if (info.responseCode === 0 || info.responseCode >= 500) this.tag(span, 'error', 'true');
  }

  release(): void {
    this.driver?.release();
  }
}

/** A traced request: its span, and the child spans of its upstream requests. */
export class RequestTrace {
  readonly children: Array<{ span: TraceSpan; address: string; done: boolean }> = [];

  constructor(
    private readonly tracer: HttpTracer,
    readonly driver: TraceDriver,
    readonly span: TraceSpan,
    /** Ingress: the decorator's operation, told to the caller in the response (unless the request named one). */
    public decorated: string | undefined,
  ) {}

  /**
   * Response headers on their way out (ActiveStream::encodeHeaders): ingress tells the caller its operation,
   * egress takes the name the callee gave and keeps the header from the application.
   */
  onResponseHeaders(h: HeaderWriter & HeaderReader & { remove(name: string): void }): void {
    if (this.tracer.o.operation === 'ingress') {
      if (this.decorated) h.set(DECORATOR, this.decorated);
      return;
    }
    const v = h.get(DECORATOR);
    if (v === undefined) return;
    if (v) this.span.name = v;
    h.remove(DECORATOR);
  }

  /** An upstream request is about to go: its headers get the context (of a new child span with spawn_upstream_span). */
  upstream(s: TracedStream, headers: RawHeaders, cluster: string, address: string, attempt: number): void {
    const w = { set: (k: string, v: string) => void (headers[k] = v) };
    if (!this.tracer.o.spawnUpstreamSpan) {
      this.driver.inject(this.span, w);
      return;
    }
    // an earlier attempt ends where the next one starts
    for (const c of this.children) this.tracer.finishUpstream(s, c);
    const child = this.driver.spawnChild(this.span, `router ${cluster} egress`, nowUs());
    if (attempt > 1) this.tracer.tag(child, 'retry.count', String(attempt - 1));
    this.children.push({ span: child, address, done: false });
    this.driver.inject(child, w);
  }
}

/** `<x-forwarded-proto>://<host><path>`, the path (x-envoy-original-path first) cut to max_path_tag_length. */
export function httpUrl(h: RequestHeaders, maxPath: number): string {
  const path = h.get('x-envoy-original-path') ?? h.path;
  return `${h.get('x-forwarded-proto') ?? ''}://${h.authority}${path.length > maxPath ? path.slice(0, maxPath) : path}`;
}

/** A custom tag's value for this request; '' when it has none (the tag is then not set). */
export function customTagValue(c: CompiledCustomTag, s: TracedStream): string {
  switch (c.kind) {
    case 'literal':
      return c.value;
    case 'header':
      return s.request.get(c.name) ?? c.defaultValue;
    case 'metadata': {
      let v: unknown;
      if (c.source === 'request') v = s.info.dynamicMetadata.get(c.key);
      else if (c.source === 'route') v = s.route()?.route.metadata?.[c.key];
      for (const p of c.path) v = v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[p] : undefined;
      if (v === undefined || v === null) return c.defaultValue;
      return typeof v === 'string' ? v : JSON.stringify(v);
    }
  }
}
