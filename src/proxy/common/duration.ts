// google.protobuf.Duration as the engine's timers take it: milliseconds (Envoy's PROTOBUF_GET_MS_OR_DEFAULT).
import type { Duration } from '@bufbuild/protobuf/wkt';

export function durationToMs(d: Duration | undefined): number | undefined {
  if (!d) return undefined;
  return Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6);
}
