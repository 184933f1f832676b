// A keyed work queue with Istio's controllers.Queue semantics: a key queued several times before it is
// handled is handled once; keys are handled one at a time; a failed reconcile is retried after a
// per-key exponential delay (client-go's item rate limiter) until it succeeds, a newer add arrives, or
// the attempts run out.
import type { Scope } from './log';

export interface ReconcileQueueOptions {
  name: string;
  reconcile: (key: string) => Promise<void>;
  log: Scope;
  /** Attempts before a key is dropped (Istio's WithMaxAttempts); default unlimited. */
  maxAttempts?: number;
  /** First retry delay, doubled per failure up to maxDelayMs. */
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class ReconcileQueue {
  private readonly queued = new Set<string>();
  private readonly attempts = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private running: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly o: ReconcileQueueOptions) {}

  add(key: string): void {
    if (this.stopped) return;
    const retry = this.timers.get(key);
    if (retry) {
      clearTimeout(retry);
      this.timers.delete(key);
    }
    this.queued.add(key);
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
      if (this.queued.size > 0 && !this.stopped) this.add(this.queued.values().next().value as string);
    });
  }

  /** Resolves once nothing is queued or being handled (retries waiting on a timer do not count). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
    this.queued.clear();
    await this.running;
  }

  private async drain(): Promise<void> {
    while (!this.stopped && this.queued.size > 0) {
      const key = this.queued.values().next().value as string;
      this.queued.delete(key);
      try {
        await this.o.reconcile(key);
        this.attempts.delete(key);
      } catch (e) {
        if (this.stopped) return;
        const n = (this.attempts.get(key) ?? 0) + 1;
        const max = this.o.maxAttempts ?? Infinity;
        if (n >= max) {
          this.o.log.error(`${this.o.name}: ${key}: ${(e as Error).message}; dropping after ${n} attempts`);
          this.attempts.delete(key);
          continue;
        }
        this.attempts.set(key, n);
        const delay = Math.min((this.o.baseDelayMs ?? 5) * 2 ** (n - 1), this.o.maxDelayMs ?? 60_000);
        this.o.log.warn(`${this.o.name}: ${key}: ${(e as Error).message}; retrying in ${delay}ms`);
        if (this.queued.has(key)) continue;
        const timer = setTimeout(() => {
          this.timers.delete(key);
          this.add(key);
        }, delay);
        timer.unref();
        this.timers.set(key, timer);
      }
    }
  }
}
