// envoy.tracers.opentelemetry: W3C trace-context in and out, spans as Envoy's OpenTelemetry tracer makes them
// (source/extensions/tracers/opentelemetry/tracer.cc, opentelemetry_tracer_impl.cc) and exported as OTLP
// (opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest) over gRPC (TraceService/Export, envoy_grpc
// cluster) or HTTP (POST application/x-protobuf, http_service). A span's name is the operation (`ingress`,
// `egress <host>`, or the decorator); the resource says service.name; an http.status_code tag of 5xx (4xx on
// client spans) sets the span's status to ERROR.
// Differs from Envoy on purpose: resource detectors and samplers are ignored (config.ts says so once).
import { create, toBinary } from '@bufbuild/protobuf';
import { ExportTraceServiceRequestSchema } from '../../gen/opentelemetry/proto/collector/trace/v1/trace_service_pb';
import { Span_SpanKind, SpanSchema, Status_StatusCode, type Span } from '../../gen/opentelemetry/proto/trace/v1/trace_pb';
import { SpanBatch } from './batch';
import { internalHeaders, type TracerHost } from './collector';
import type { OtelOptions } from './config';
import { randomId128, randomId64 } from './ids';
import { extractW3c, hasTraceparent, injectW3c, type HeaderReader, type HeaderWriter } from './propagation';
import { TraceSpan, type SpanKind, type TraceDriver } from './span';

const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';
const DEFAULT_TIMEOUT_MS = 5000;

export class OtelDriver implements TraceDriver {
  readonly keepsEmptyTags = true;
  private readonly batch: SpanBatch<Span>;
  private readonly stats;

  constructor(
    private readonly o: OtelOptions,
    private readonly host: TracerHost,
  ) {
    const s = host.stats.scope('tracing.opentelemetry.');
    this.stats = { sent: s.counter(`${o.transport.kind}_reports_sent`), failed: s.counter(`${o.transport.kind}_reports_failed`) };
    this.batch = new SpanBatch((spans) => this.send(spans), s.counter('timer_flushed'), s.counter('spans_sent'));
    for (const why of o.ignored) host.warn(`opentelemetry tracer: ignoring ${why}`);
  }

  startSpan(kind: SpanKind, h: HeaderReader, _host: string, operation: string, startUs: number, traced: boolean): TraceSpan | undefined {
    let span: TraceSpan;
    if (!hasTraceparent(h)) span = new TraceSpan(randomId128(), randomId64(), kind, traced, startUs);
    else {
      let ctx;
      try {
        ctx = extractW3c(h);
      } catch {
        return undefined;
      }
      // the parent's sampled flag is kept
      span = new TraceSpan(ctx.traceId, randomId64(), kind, ctx.sampled, startUs);
      span.parentId = ctx.spanId;
      span.traceState = ctx.traceState;
    }
    span.name = operation;
    return span;
  }

  spawnChild(parent: TraceSpan, name: string, startUs: number): TraceSpan {
    const span = new TraceSpan(parent.traceId, randomId64(), 'client', parent.sampled, startUs);
    span.parentId = parent.spanId;
    span.traceState = parent.traceState;
    span.name = name;
    return span;
  }

  inject(span: TraceSpan, h: HeaderWriter): void {
    injectW3c(h, span.traceId, span.spanId, span.sampled, span.traceState);
  }

  report(span: TraceSpan): void {
    if (span.sampled) this.batch.push(otlpSpan(span));
  }

  release(): void {
    this.batch.release();
  }

  private send(spans: Span[]): void {
    const body = Buffer.from(toBinary(ExportTraceServiceRequestSchema, exportRequest(this.o.serviceName, this.host.local.version, spans)));
    const t = this.o.transport;
    const timeoutMs = t.timeoutMs || DEFAULT_TIMEOUT_MS;
    const local = internalHeaders(this.host.local);
    const call =
      t.kind === 'grpc'
        ? this.host.call(t.cluster, {
            method: 'POST',
            path: EXPORT_PATH,
            authority: t.authority,
            headers: {
              ...Object.fromEntries(t.metadata),
              'content-type': 'application/grpc',
              te: 'trailers',
              ...(t.timeoutMs ? { 'grpc-timeout': `${t.timeoutMs}m` } : {}),
              ...local,
            },
            body: grpcFrame(body),
            timeoutMs,
          })
        : this.host.call(t.cluster, {
            method: 'POST',
            path: t.path,
            authority: t.authority,
            headers: { ...Object.fromEntries(t.headers), 'content-type': 'application/x-protobuf', ...local },
            body,
            timeoutMs,
          });
    call.then(
      (r) => {
        const grpcStatus = r.headers['grpc-status'];
        const ok = t.kind === 'grpc' ? r.status === 200 && (grpcStatus === undefined || grpcStatus === '0') : r.status >= 200 && r.status < 300;
        (ok ? this.stats.sent : this.stats.failed).inc();
      },
      (e: Error) => {
        this.stats.failed.inc();
        this.host.warn(`opentelemetry: export to cluster '${t.cluster}' failed: ${e.message}`);
      },
    );
  }
}

/** gRPC's length-prefixed message: a zero compression byte, the length (big endian), the message. */
export function grpcFrame(msg: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head.writeUInt32BE(msg.length, 1);
  return Buffer.concat([head, msg]);
}

/** The span in OTLP: ids as bytes, times in nanoseconds, tags as string attributes. */
export function otlpSpan(s: TraceSpan): Span {
  const status = Number(s.tags.get('http.status_code') ?? 0);
  const error = status >= 500 || (s.kind === 'client' && status >= 400);
  return create(SpanSchema, {
    traceId: Buffer.from(s.traceId, 'hex'),
    spanId: Buffer.from(s.spanId, 'hex'),
    parentSpanId: s.parentId ? Buffer.from(s.parentId, 'hex') : new Uint8Array(0),
    traceState: s.traceState,
    name: s.name,
    kind: s.kind === 'client' ? Span_SpanKind.CLIENT : Span_SpanKind.SERVER,
    startTimeUnixNano: BigInt(s.startUs) * 1000n,
    endTimeUnixNano: BigInt(s.endUs) * 1000n,
    attributes: [...s.tags].map(([key, v]) => ({ key, value: { value: { case: 'stringValue' as const, value: v } } })),
    ...(error ? { status: { code: Status_StatusCode.ERROR } } : {}),
  });
}

/** One request: the resource (service.name) and Envoy's instrumentation scope (`envoy`, the proxy's version). */
export function exportRequest(serviceName: string, version: string, spans: Span[]) {
  return create(ExportTraceServiceRequestSchema, {
    resourceSpans: [
      {
        resource: { attributes: [{ key: 'service.name', value: { value: { case: 'stringValue', value: serviceName } } }] },
        scopeSpans: [{ scope: { name: 'envoy', version }, spans }],
      },
    ],
  });
}
