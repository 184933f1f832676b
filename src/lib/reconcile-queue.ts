// A keyed work queue with Istio's controllers.Queue semantics: a key queued several times before it is
// handled is handled once; keys are handled one at a time; a failed reconcile is retried after a
// per-key exponential delay (client-go's item rate limiter) until it succeeds, a newer add arrives, or
// the attempts run out.
import type { Scope } from './log';
import { defineGauge, defineHistogram } from './metrics';

// Istio's pkg/queue metrics (label queueID), published only with MESH_ENABLE_CONTROLLER_QUEUE_METRICS.
const QUEUE_BUCKETS = [0.01, 0.1, 0.2, 0.5, 1, 3, 5];
const depth = defineGauge<'queueID'>({ name: 'pilot_worker_queue_depth', help: 'Depth of the controller queues', labelNames: ['queueID'] });
const latency = defineHistogram<'queueID'>({
  name: 'pilot_worker_queue_latency',
  help: 'Latency before the item is processed',
  labelNames: ['queueID'],
  buckets: QUEUE_BUCKETS,
});
const workDuration = defineHistogram<'queueID'>({
  name: 'pilot_worker_queue_duration',
  help: 'Time taken to process an item',
  labelNames: ['queueID'],
  buckets: QUEUE_BUCKETS,
});
let metricsEnabled = false;

/** MESH_ENABLE_CONTROLLER_QUEUE_METRICS (Istio's ISTIO_ENABLE_CONTROLLER_QUEUE_METRICS, default off). */
export function enableQueueMetrics(on: boolean): void {
  metricsEnabled = on;
}

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
  /** Queued keys and when each was first queued (for pilot_worker_queue_latency). */
  private readonly queued = new Map<string, number>();
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
    if (!this.queued.has(key)) this.queued.set(key, performance.now());
    this.recordDepth();
    this.running ??= this.drain().finally(() => {
      this.running = undefined;
      if (this.queued.size > 0 && !this.stopped) this.add(this.queued.keys().next().value as string);
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
      const [key, queuedAt] = this.queued.entries().next().value as [string, number];
      this.queued.delete(key);
      this.recordDepth();
      const started = performance.now();
      if (metricsEnabled) latency.observe({ queueID: this.o.name }, (started - queuedAt) / 1000);
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
      } finally {
        if (metricsEnabled) workDuration.observe({ queueID: this.o.name }, (performance.now() - started) / 1000);
      }
    }
  }

  private recordDepth(): void {
    if (metricsEnabled) depth.set({ queueID: this.o.name }, this.queued.size);
  }
}
