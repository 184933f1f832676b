// The reporting buffer Envoy's tracers share in spirit (zipkin ReporterImpl, opentelemetry Tracer::sendSpan):
// spans wait until min_flush_spans (5) are pending or the flush timer (5000 ms) fires, then go out in one request.
// The timer does not keep the process alive.
import type { Counter } from '../stats/store';

export const MIN_FLUSH_SPANS = 5;
export const FLUSH_INTERVAL_MS = 5000;

export class SpanBatch<T> {
  private pending: T[] = [];
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly send: (items: T[]) => void,
    private readonly timerFlushed: Counter,
    private readonly spansSent: Counter,
  ) {
    this.timer = setInterval(() => {
      this.timerFlushed.inc();
      this.flush();
    }, FLUSH_INTERVAL_MS);
    this.timer.unref();
  }

  push(item: T): void {
    this.pending.push(item);
    if (this.pending.length >= MIN_FLUSH_SPANS) this.flush();
  }

  flush(): void {
    if (this.pending.length === 0) return;
    const items = this.pending;
    this.pending = [];
    this.spansSent.inc(items.length);
    this.send(items);
  }

  /** The HCM went away: what is pending still goes out, then the timer stops. */
  release(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
