// Timestamps: UTC with microseconds, `2026-11-22T04:00:00.000000Z`, the layout of Istio's formatDate.

import { performance } from 'node:perf_hooks';

/** Returns the current time as microseconds since the Unix epoch. */
export type TimeSource = () => number;

/**
 * Wall-clock milliseconds from Date.now(); the microsecond digits come from the monotonic high-resolution
 * clock, kept inside the wall-clock millisecond so the result never disagrees with Date by a millisecond.
 */
export const systemTimeSource: TimeSource = () => {
  const wallUs = Date.now() * 1000;
  const us = Math.floor((performance.timeOrigin + performance.now()) * 1000);
  if (us >= wallUs && us < wallUs + 1000) return us;
  return wallUs + (((us % 1000) + 1000) % 1000);
};

let cachedSecond = NaN;
let cachedPrefix = '';

/** Formats epoch microseconds as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (UTC). */
export function formatTimestamp(epochMicros: number): string {
  const us = Math.floor(epochMicros);
  const second = Math.floor(us / 1_000_000);
  if (second !== cachedSecond) {
    // toISOString gives `YYYY-MM-DDTHH:MM:SS.mmmZ`; keep the part up to the seconds.
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, 19);
    cachedSecond = second;
  }
  const frac = us - second * 1_000_000;
  return `${cachedPrefix}.${String(frac).padStart(6, '0')}Z`;
}
