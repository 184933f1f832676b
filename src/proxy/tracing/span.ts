// One span of one proxy hop as the engine's tracers keep it until it is reported, and what the tracers have in
// common (Envoy's Tracing::Driver and Span interfaces, envoy/tracing/trace_driver.h): start a span from a
// request's trace context, spawn a child for an upstream request, write the context into upstream headers,
// report a finished span.
import type { HeaderReader, HeaderWriter } from './propagation';

export type SpanKind = 'server' | 'client';

const NO_TAGS: ReadonlyMap<string, string> = new Map();

export class TraceSpan {
  name = '';
  parentId = '';
  traceState = '';
  /** Zipkin: this server span shares its id with the client span that sent the request. */
  shared = false;
  endUs = 0;
  /** Made on the first tag: a sampled-out span never gets one. */
  private tagMap: Map<string, string> | undefined;

  constructor(
    readonly traceId: string,
    readonly spanId: string,
    readonly kind: SpanKind,
    readonly sampled: boolean,
    /** Microseconds since the epoch. */
    readonly startUs: number,
  ) {}

  setTag(name: string, value: string): void {
    (this.tagMap ??= new Map()).set(name, value);
  }

  get tags(): ReadonlyMap<string, string> {
    return this.tagMap ?? NO_TAGS;
  }
}

/** Microseconds since the epoch, with the monotonic clock's sub-millisecond part. */
export function nowUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** A tracer (envoy.tracers.*): how it reads and writes trace context and what it does with a finished span. */
export interface TraceDriver {
  /**
   * The span of a request at this hop, child of the context its headers carry (or a new trace); undefined when
   * the context is malformed (Envoy then has a null span: nothing is traced or propagated).
   */
  startSpan(kind: SpanKind, h: HeaderReader, host: string, operation: string, startUs: number, traced: boolean): TraceSpan | undefined;
  /** A client span for one upstream request (spawn_upstream_span). */
  spawnChild(parent: TraceSpan, name: string, startUs: number): TraceSpan;
  inject(span: TraceSpan, h: HeaderWriter): void;
  /** Whether an empty tag value is kept (Zipkin drops it). */
  readonly keepsEmptyTags: boolean;
  /** Queues a finished span for the collector (sampled ones only). */
  report(span: TraceSpan): void;
  release(): void;
}
