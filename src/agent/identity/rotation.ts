// When to renew the workload certificate and how to pace retries. Pure: time and randomness come in.
import { formatDurationMs } from '../../lib/duration';

export interface Lifetime {
  /** Milliseconds since the epoch. */
  createdAt: number;
  expiresAt: number;
}

/**
 * Istio's rotateTime: renew when `graceRatio` (± up to `jitter`, to spread a fleet) of the lifetime is left;
 * never negative. A ratio of 0 is Istio's "no rotation" switch and yields undefined.
 */
export function rotationDelayMs(
  l: Lifetime,
  now: number,
  graceRatio: number,
  jitter: number,
  random: () => number = Math.random,
): number | undefined {
  if (graceRatio === 0) return undefined;
  const sign = random() < 0.5 ? -1 : 1;
  const ratio = Math.min(1, Math.max(0, graceRatio + random() * jitter * sign));
  const grace = ratio * (l.expiresAt - l.createdAt);
  return Math.max(0, Math.round(l.expiresAt - grace - now));
}

/** Istio's default exponential backoff (cenkalti: 500 ms, ×1.5, ±50 %, at most 60 s). */
export const RETRY = { initialMs: 500, multiplier: 1.5, maxMs: 60_000, randomization: 0.5 };

/**
 * The wait before retry `attempt` (0-based) after a failed issuance. While the current certificate is still
 * valid, the wait is capped at half the time it has left, so the last tries land before it expires.
 */
export function retryDelayMs(attempt: number, timeLeftMs: number | undefined, random: () => number = Math.random): number {
  const base = Math.min(RETRY.maxMs, RETRY.initialMs * RETRY.multiplier ** attempt);
  let d = base * (1 + RETRY.randomization * (2 * random() - 1));
  if (timeLeftMs !== undefined && timeLeftMs > 0) d = Math.min(d, Math.max(100, timeLeftMs / 2));
  return Math.max(1, Math.round(d));
}

/** "expires in 41s" / "expired 3s ago", for logs. */
export function timeLeftText(timeLeftMs: number): string {
  const s = formatDurationMs(Math.abs(Math.round(timeLeftMs / 1000) * 1000));
  return timeLeftMs >= 0 ? `expires in ${s}` : `expired ${s} ago`;
}
