// Trace context on the wire, as Envoy's tracers read and write it: B3 multi-header and the single `b3` header
// (source/extensions/tracers/zipkin/span_context_extractor.cc, ZipkinSpan::injectContext) and W3C trace-context
// `traceparent`/`tracestate` (source/extensions/tracers/opentelemetry/span_context_extractor.cc, Span::injectContext).
// Pure functions over a header getter/setter; a malformed header is an error (Envoy then traces nothing).

/** What a request says about the span that sent it. */
export interface SpanContext {
  /** 16 or 32 lower-case hex digits. */
  traceId: string;
  /** The sender's span id, 16 hex digits. */
  spanId: string;
  /** The sender's parent (B3 only); '' when none. */
  parentId: string;
  sampled: boolean;
  /** W3C tracestate, joined; '' when none. */
  traceState: string;
}

export interface HeaderReader {
  get(name: string): string | undefined;
}
export interface HeaderWriter {
  set(name: string, value: string): void;
}

export class TraceHeaderError extends Error {
  override name = 'TraceHeaderError';
}

const B3 = 'b3';
const X_TRACE = 'x-b3-traceid';
const X_SPAN = 'x-b3-spanid';
const X_PARENT = 'x-b3-parentspanid';
const X_SAMPLED = 'x-b3-sampled';

/** A B3 id of at most 16 hex digits as Envoy prints it back (uint64 → 16 digits, lower case). */
function hex64(s: string, what: string): string {
  if (s.length === 0 || s.length > 16 || !/^[0-9a-fA-F]+$/.test(s)) throw new TraceHeaderError(`Invalid ${what} ${s}`);
  return s.toLowerCase().padStart(16, '0');
}

/** A B3 trace id: 64 or 128 bits; a 128-bit id whose high half is zero prints as 64 bits (Zipkin's traceIdAsHexString). */
function b3TraceId(s: string): string {
  if (s.length === 32) {
    const high = hex64(s.slice(0, 16), 'traceid_high');
    const low = hex64(s.slice(16), 'traceid');
    return high === '0000000000000000' ? low : high + low;
  }
  return hex64(s, 'trace_id');
}

function samplingFlag(c: string): boolean | undefined {
  if (c === '0') return false;
  if (c === '1' || c === 'd') return true;
  return undefined;
}

/** The sampling decision B3 headers carry, if any (SpanContextExtractor::extractSampled). */
export function b3Sampled(h: HeaderReader): boolean | undefined {
  const b3 = h.get(B3);
  if (b3 !== undefined) {
    const at: Record<number, number> = { 1: 0, 35: 34, 51: 50, 52: 34, 68: 50 };
    const pos = at[b3.length];
    return pos === undefined ? undefined : samplingFlag(b3[pos]!);
  }
  const s = h.get(X_SAMPLED);
  if (s === undefined) return undefined;
  return s === '1' || s === 'true';
}

/** The B3 context of a request (single header first), undefined when it has none; throws on a malformed one. */
export function extractB3(h: HeaderReader, sampled: boolean): SpanContext | undefined {
  const b3 = h.get(B3);
  if (b3 !== undefined) return extractB3Single(b3, sampled);
  const tid = h.get(X_TRACE);
  const sid = h.get(X_SPAN);
  if (tid === undefined || sid === undefined) return undefined;
  const parent = h.get(X_PARENT);
  return {
    traceId: b3TraceId(tid),
    spanId: hex64(sid, 'span id'),
    parentId: parent ? hex64(parent, 'parent span id') : '',
    sampled,
    traceState: '',
  };
}

/** `{trace}-{span}[-{flag}[-{parent}]]`, or a lone sampling flag (no context). */
function extractB3Single(b3: string, sampled: boolean): SpanContext | undefined {
  if (b3.length === 0) throw new TraceHeaderError('Invalid input: empty');
  if (b3.length === 1) {
    if (samplingFlag(b3) !== undefined) return undefined;
    throw new TraceHeaderError(`Invalid input: invalid sampling flag ${b3}`);
  }
  const parts = b3.split('-');
  if (parts.length < 2 || parts.length > 4) throw new TraceHeaderError('Invalid input: truncated');
  const [tid, sid, flag, parent] = parts as [string, string, string | undefined, string | undefined];
  if (tid.length !== 16 && tid.length !== 32) throw new TraceHeaderError(`Invalid input: invalid trace id ${tid}`);
  if (sid.length !== 16) throw new TraceHeaderError(`Invalid input: invalid span id ${sid}`);
  if (flag !== undefined && (flag.length !== 1 || samplingFlag(flag) === undefined))
    throw new TraceHeaderError(`Invalid input: invalid sampling flag ${flag}`);
  if (parent !== undefined && parent.length !== 16) throw new TraceHeaderError(`Invalid input: invalid parent id ${parent}`);
  return {
    traceId: b3TraceId(tid),
    spanId: hex64(sid, 'span id'),
    parentId: parent ? hex64(parent, 'parent id') : '',
    sampled,
    traceState: '',
  };
}

/** B3 multi-header context of the span a request goes out under (x-b3-sampled always set). */
export function injectB3(h: HeaderWriter, traceId: string, spanId: string, parentId: string, sampled: boolean): void {
  h.set(X_TRACE, traceId);
  h.set(X_SPAN, spanId);
  if (parentId) h.set(X_PARENT, parentId);
  h.set(X_SAMPLED, sampled ? '1' : '0');
}

const TRACEPARENT = 'traceparent';
const TRACESTATE = 'tracestate';
const W3C = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** Whether a request carries a traceparent at all (a malformed one then means no span). */
export function hasTraceparent(h: HeaderReader): boolean {
  return h.get(TRACEPARENT) !== undefined;
}

/** The W3C context of a request; throws on a malformed traceparent (Envoy: a null span). */
export function extractW3c(h: HeaderReader): SpanContext {
  const v = h.get(TRACEPARENT) ?? '';
  const m = W3C.exec(v);
  if (!m) throw new TraceHeaderError(v.length !== 55 ? 'Invalid traceparent header length' : 'Invalid traceparent field');
  const [, version, traceId, spanId, flags] = m as unknown as [string, string, string, string, string];
  if (version === 'ff') throw new TraceHeaderError('Invalid traceparent version');
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) throw new TraceHeaderError('Invalid traceparent field: all zeros');
  return { traceId, spanId, parentId: '', sampled: (parseInt(flags, 16) & 1) === 1, traceState: h.get(TRACESTATE) ?? '' };
}

/** W3C headers of the span a request goes out under. */
export function injectW3c(h: HeaderWriter, traceId: string, spanId: string, sampled: boolean, traceState: string): void {
  h.set(TRACEPARENT, `00-${traceId}-${spanId}-${sampled ? '01' : '00'}`);
  if (traceState) h.set(TRACESTATE, traceState);
}
