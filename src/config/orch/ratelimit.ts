// Client-side throttling toward the orchestrator API: a token bucket with client-go's semantics
// (rest.Config QPS/Burst → flowcontrol.NewTokenBucketRateLimiter). The bucket starts full with
// `burst` tokens and refills at `qps` per second; a caller that finds it empty reserves the next
// token and waits for it, so waiters are served in arrival order and never exceed the rate.

/** client-go's defaults when QPS or Burst is left at 0. */
export const DEFAULT_QPS = 5;
export const DEFAULT_BURST = 10;

export interface RateLimiter {
  /** Resolves when a request may be sent; rejects if the limiter is closed while waiting. */
  take(): Promise<void>;
  close(): void;
}

export class RateLimiterClosedError extends Error {
  override name = 'RateLimiterClosedError';
  constructor() {
    super('orchestrator client closed');
  }
}

/** A limiter that never waits: QPS < 0 disables throttling, as in client-go. */
export class Unlimited implements RateLimiter {
  private closed = false;
  take(): Promise<void> {
    return this.closed ? Promise.reject(new RateLimiterClosedError()) : Promise.resolve();
  }
  close(): void {
    this.closed = true;
  }
}

export class TokenBucket implements RateLimiter {
  private tokens: number;
  private last: number;
  private closed = false;
  private readonly waiting = new Map<NodeJS.Timeout, (err?: Error) => void>();

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (!(qps > 0) || !Number.isFinite(qps)) throw new RangeError(`token bucket QPS must be a positive number, got ${qps}`);
    if (!Number.isInteger(burst) || burst < 1) throw new RangeError(`token bucket burst must be a positive integer, got ${burst}`);
    this.tokens = burst;
    this.last = now();
  }

  /** Milliseconds the caller must wait for its token (0 = go now); the token is taken either way. */
  reserve(): number {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.qps);
    this.last = t;
    this.tokens -= 1;
    return this.tokens >= 0 ? 0 : (-this.tokens / this.qps) * 1000;
  }

  take(): Promise<void> {
    if (this.closed) return Promise.reject(new RateLimiterClosedError());
    const wait = this.reserve();
    if (wait <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(timer);
        resolve();
      }, Math.ceil(wait));
      this.waiting.set(timer, (err) => (err ? reject(err) : resolve()));
    });
  }

  close(): void {
    this.closed = true;
    for (const [timer, settle] of this.waiting) {
      clearTimeout(timer);
      settle(new RateLimiterClosedError());
    }
    this.waiting.clear();
  }
}

/**
 * The limiter for --orchApiQPS/--orchApiBurst: QPS 0 means client-go's default (5), QPS < 0 no
 * limit; Burst 0 means the default (10).
 */
export function limiterFor(qps: number, burst: number): RateLimiter {
  if (Number.isNaN(qps)) throw new RangeError('--orchApiQPS must be a number');
  if (!Number.isInteger(burst) || burst < 0) throw new RangeError(`--orchApiBurst must be a non-negative integer, got ${burst}`);
  if (qps < 0) return new Unlimited();
  return new TokenBucket(qps === 0 ? DEFAULT_QPS : qps, burst === 0 ? DEFAULT_BURST : burst);
}
