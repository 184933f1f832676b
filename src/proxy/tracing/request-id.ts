// x-request-id as Envoy's UUID request-id extension (source/extensions/request_id/uuid/config.cc) reads and
// writes it: the trace reason packed into the UUID's version nibble (position 14: '9' sampled, 'a' forced by the
// service, 'b' forced by the client, '4' not traced) when pack_trace_reason is on, and the number its first 8 hex
// digits make, which stable sampling takes modulo 10000.

export type TraceReason = 'notTraceable' | 'sampling' | 'serviceForced' | 'clientForced';

/** envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig, defaults applied. */
export interface RequestIdOptions {
  packTraceReason: boolean;
  useRequestIdForTraceSampling: boolean;
}

export const DEFAULT_REQUEST_ID: RequestIdOptions = { packTraceReason: true, useRequestIdForTraceSampling: true };

const UUID_LENGTH = 36;
const TRACE_BYTE = 14;
const CHAR_OF: Record<TraceReason, string> = { sampling: '9', serviceForced: 'a', clientForced: 'b', notTraceable: '4' };

/** The reason packed in a request id (not traceable when packing is off or the id is no UUID). */
export function traceReasonOf(rid: string | undefined, o: RequestIdOptions): TraceReason {
  if (!o.packTraceReason || rid === undefined || rid.length !== UUID_LENGTH) return 'notTraceable';
  switch (rid.charCodeAt(TRACE_BYTE)) {
    case 0x39:
      return 'sampling';
    case 0x61:
      return 'serviceForced';
    case 0x62:
      return 'clientForced';
    default:
      return 'notTraceable';
  }
}

/** The request id with `reason` packed in; unchanged when packing is off or the id is no UUID. */
export function withTraceReason(rid: string, reason: TraceReason, o: RequestIdOptions): string {
  if (!o.packTraceReason || rid.length !== UUID_LENGTH) return rid;
  return rid.slice(0, TRACE_BYTE) + CHAR_OF[reason] + rid.slice(TRACE_BYTE + 1);
}

/** The first 8 hex digits of the request id as a number (Envoy's getInteger); undefined when they are not hex. */
export function requestIdInteger(rid: string | undefined): number | undefined {
  if (rid === undefined || rid.length < 8) return undefined;
  let n = 0;
  for (let i = 0; i < 8; i++) {
    const c = rid.charCodeAt(i);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
    if (d < 0) return undefined;
    n = n * 16 + d;
  }
  return n;
}
