// Istio's push debouncing: changes arriving close together are merged into one push. A push goes out once
// no change arrived for `afterMs` (quiet period) or `maxMs` after the first merged change (cap), whichever
// comes first. Incremental EDS requests skip debouncing when `enableEds` is false.
import type { PushRequest } from '../types';
import { mergePushRequests } from './push-request';

export interface DebounceSettings {
  /** PILOT_DEBOUNCE_AFTER: quiet period before a push, ms. */
  afterMs: number;
  /** PILOT_DEBOUNCE_MAX: longest a change waits, ms. */
  maxMs: number;
  /** PILOT_ENABLE_EDS_DEBOUNCE: debounce incremental (EDS-only) requests too. */
  enableEds: boolean;
}

export interface DebouncedPush {
  /** Requests merged into this push. */
  events: number;
  /** ms from the first merged request to dispatch. */
  waitedMs: number;
  /** false when the request bypassed debouncing (EDS with enableEds off). */
  debounced: boolean;
}

export class Debouncer<P> {
  private pending: PushRequest<P> | undefined;
  private events = 0;
  private firstAt = 0;
  private lastAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly settings: DebounceSettings,
    private readonly dispatch: (req: PushRequest<P>, info: DebouncedPush) => void,
    private readonly now: () => number = Date.now,
  ) {}

  submit(req: PushRequest<P>): void {
    if (this.stopped) return;
    if (!this.settings.enableEds && !req.full) {
      this.dispatch(req, { events: 1, waitedMs: 0, debounced: false });
      return;
    }
    const t = this.now();
    this.lastAt = t;
    if (this.events === 0) {
      this.firstAt = t;
      this.arm(this.settings.afterMs);
    }
    this.events++;
    this.pending = this.pending ? mergePushRequests(this.pending, req) : req;
  }

  /** Requests waiting to be merged into the next push. */
  pendingEvents(): number {
    return this.events;
  }

  /** Drops any pending merge and ignores later submissions. */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.pending = undefined;
    this.events = 0;
  }

  private arm(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.fire(), Math.max(0, ms));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    if (!this.pending) return;
    const t = this.now();
    const sinceFirst = t - this.firstAt;
    const quiet = t - this.lastAt;
    if (sinceFirst >= this.settings.maxMs || quiet >= this.settings.afterMs) {
      const req = this.pending;
      const events = this.events;
      this.pending = undefined;
      this.events = 0;
      this.dispatch(req, { events, waitedMs: sinceFirst, debounced: true });
      return;
    }
    // Still changing: wait out the rest of the quiet period, but never past the cap.
    this.arm(Math.min(this.settings.afterMs - quiet, this.settings.maxMs - sinceFirst));
  }
}
