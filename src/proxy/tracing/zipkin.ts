// envoy.tracers.zipkin: B3 context in and out, spans as Envoy's Zipkin tracer makes them
// (source/extensions/tracers/zipkin/tracer.cc, zipkin_tracer_impl.cc) and reported as Zipkin v2 JSON
// (span_buffer.cc JsonV2Serializer) to collector_endpoint through collector_cluster, 202 counting as sent.
// A span's name starts as the request's host (the decorator or x-envoy-decorator-operation renames it); its
// localEndpoint is the node's cluster and the proxy's address with port 0.
// Differs from Envoy on purpose: only HTTP_JSON; the W3C fallback of trace_context_option is not offered.
import { SpanBatch } from './batch';
import { internalHeaders, type TracerHost } from './collector';
import type { ZipkinOptions } from './config';
import { randomId64 } from './ids';
import { b3Sampled, extractB3, injectB3, type HeaderReader, type HeaderWriter } from './propagation';
import { TraceSpan, type SpanKind, type TraceDriver } from './span';

const REQUEST_TIMEOUT_MS = 5000;

export class ZipkinDriver implements TraceDriver {
  readonly keepsEmptyTags = false;
  private readonly batch: SpanBatch<object>;
  private readonly stats;

  constructor(
    private readonly o: ZipkinOptions,
    private readonly host: TracerHost,
  ) {
    const s = host.stats.scope('tracing.zipkin.');
    this.stats = {
      reportsSent: s.counter('reports_sent'),
      reportsDropped: s.counter('reports_dropped'),
      reportsFailed: s.counter('reports_failed'),
      reportsSkipped: s.counter('reports_skipped_no_cluster'),
    };
    this.batch = new SpanBatch((spans) => this.send(spans), s.counter('timer_flushed'), s.counter('spans_sent'));
  }

  startSpan(kind: SpanKind, h: HeaderReader, host: string, _operation: string, startUs: number, traced: boolean): TraceSpan | undefined {
    const headerSampled = b3Sampled(h);
    let ctx;
    try {
      ctx = extractB3(h, headerSampled ?? traced);
    } catch {
      return undefined;
    }
    let span: TraceSpan;
    if (!ctx) {
      // a new trace: the root span's id is the low half of the trace id
      const id = randomId64();
      span = new TraceSpan(this.o.traceId128 ? randomId64() + id : id, id, kind, headerSampled ?? traced, startUs);
    } else if (kind === 'client' || !this.o.sharedSpanContext) {
      span = new TraceSpan(ctx.traceId, randomId64(), kind, ctx.sampled, startUs);
      span.parentId = ctx.spanId;
    } else {
      // shared span context: the server side of the sender's client span, same id
      span = new TraceSpan(ctx.traceId, ctx.spanId, kind, ctx.sampled, startUs);
      span.parentId = ctx.parentId;
    }
    // every server span is flagged shared when the context is shared (the serializer's rule)
    span.shared = kind === 'server' && this.o.sharedSpanContext;
    span.name = host;
    return span;
  }

  spawnChild(parent: TraceSpan, name: string, startUs: number): TraceSpan {
    const span = new TraceSpan(parent.traceId, randomId64(), 'client', parent.sampled, startUs);
    span.parentId = parent.spanId;
    span.name = name;
    return span;
  }

  inject(span: TraceSpan, h: HeaderWriter): void {
    injectB3(h, span.traceId, span.spanId, span.parentId, span.sampled);
  }

  report(span: TraceSpan): void {
    if (span.sampled) this.batch.push(zipkinJson(span, this.host.local.cluster, this.host.local.address));
  }

  release(): void {
    this.batch.release();
  }

  private send(spans: object[]): void {
    const o = this.o;
    this.host
      .call(o.cluster, {
        method: 'POST',
        path: o.endpoint,
        authority: o.hostname,
        headers: {
          'content-type': 'application/json',
          ...internalHeaders(this.host.local),
          'x-envoy-expected-rq-timeout-ms': String(REQUEST_TIMEOUT_MS),
        },
        body: Buffer.from(JSON.stringify(spans)),
        timeoutMs: REQUEST_TIMEOUT_MS,
      })
      .then(
        (r) => (r.status === 202 ? this.stats.reportsSent : this.stats.reportsDropped).inc(),
        (e: Error) => {
          if (/^cluster '.*' not found$/.test(e.message)) this.stats.reportsSkipped.inc();
          else this.stats.reportsFailed.inc();
          this.host.warn(`zipkin: report to cluster '${o.cluster}' failed: ${e.message}`);
        },
      );
  }
}

/** One Zipkin v2 span (https://zipkin.io/zipkin-api/#/default/post_spans) as Envoy's JsonV2Serializer writes it. */
export function zipkinJson(s: TraceSpan, serviceName: string, ipv4: string): object {
  const tags: Record<string, string> = {};
  for (const [k, v] of s.tags) tags[k] = v;
  return {
    traceId: s.traceId,
    ...(s.parentId ? { parentId: s.parentId } : {}),
    id: s.spanId,
    kind: s.kind === 'client' ? 'CLIENT' : 'SERVER',
    ...(s.name ? { name: s.name } : {}),
    timestamp: s.startUs,
    duration: Math.max(0, s.endUs - s.startUs),
    localEndpoint: { ...(serviceName ? { serviceName } : {}), ipv4, port: 0 },
    ...(s.tags.size > 0 ? { tags } : {}),
    annotations: [{ timestamp: s.endUs, value: s.kind === 'client' ? 'cr' : 'ss' }],
    ...(s.shared ? { shared: true } : {}),
  };
}
