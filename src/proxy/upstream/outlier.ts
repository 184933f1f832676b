// Outlier detection (Envoy's consecutive 5xx, consecutive gateway failure and consecutive local-origin
// failure detectors): results are reported per host; an ejected host leaves the healthy set for
// base_ejection_time × its ejection count (capped at max_ejection_time) and returns on the next
// interval tick after that.
import type { OutlierDetection } from '../../gen/envoy/config/cluster/v3/outlier_detection_pb';
import type { Counter, Gauge, StatsScope } from '../stats/store';
import { durationToMs } from '../common/duration';
import type { Host } from './host';

export interface OutlierConfig {
  consecutive5xx: number;
  enforcing5xx: number;
  consecutiveGatewayFailure: number;
  enforcingGatewayFailure: number;
  consecutiveLocalOriginFailure: number;
  enforcingLocalOriginFailure: number;
  splitExternalLocalOriginErrors: boolean;
  intervalMs: number;
  baseEjectionMs: number;
  maxEjectionMs: number;
  maxEjectionPercent: number;
}

export function outlierConfig(o: OutlierDetection): OutlierConfig {
  return {
    consecutive5xx: o.consecutive5xx ?? 5,
    enforcing5xx: o.enforcingConsecutive5xx ?? 100,
    consecutiveGatewayFailure: o.consecutiveGatewayFailure ?? 5,
    enforcingGatewayFailure: o.enforcingConsecutiveGatewayFailure ?? 0,
    consecutiveLocalOriginFailure: o.consecutiveLocalOriginFailure ?? 5,
    enforcingLocalOriginFailure: o.enforcingConsecutiveLocalOriginFailure ?? 100,
    splitExternalLocalOriginErrors: o.splitExternalLocalOriginErrors,
    intervalMs: durationToMs(o.interval) ?? 10_000,
    baseEjectionMs: durationToMs(o.baseEjectionTime) ?? 30_000,
    maxEjectionMs: durationToMs(o.maxEjectionTime) ?? 300_000,
    maxEjectionPercent: o.maxEjectionPercent ?? 10,
  };
}

/** Local-origin outcomes, mapped to HTTP codes when errors are not split (Envoy's mapping). */
export type LocalOrigin = 'connect_failed' | 'timeout' | 'reset' | 'success';

type Kind = 'consecutive_5xx' | 'consecutive_gateway_failure' | 'consecutive_local_origin_failure';

export class OutlierDetector {
  private timer: NodeJS.Timeout | undefined;
  private readonly active: Gauge;
  private readonly enforcedTotal: Counter;
  private readonly overflow: Counter;
  private readonly enforced: Record<Kind, Counter>;
  private readonly detected: Record<Kind, Counter>;

  constructor(
    readonly config: OutlierConfig,
    stats: StatsScope,
    private readonly hosts: () => readonly Host[],
    private readonly onChange: () => void,
    private readonly now: () => number = Date.now,
    private readonly random: () => number = Math.random,
  ) {
    const s = stats.scope('outlier_detection.');
    this.active = s.gauge('ejections_active');
    this.enforcedTotal = s.counter('ejections_enforced_total');
    this.overflow = s.counter('ejections_overflow');
    const kinds: Kind[] = ['consecutive_5xx', 'consecutive_gateway_failure', 'consecutive_local_origin_failure'];
    this.enforced = Object.fromEntries(kinds.map((k) => [k, s.counter(`ejections_enforced_${k}`)])) as Record<Kind, Counter>;
    this.detected = Object.fromEntries(kinds.map((k) => [k, s.counter(`ejections_detected_${k}`)])) as Record<Kind, Counter>;
    this.timer = setInterval(() => this.tick(), Math.max(10, config.intervalMs));
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** An HTTP response code from the host. */
  reportHttp(host: Host, code: number): void {
    if (code >= 500) {
      if (code === 502 || code === 503 || code === 504) {
        if (++host.consecutiveGatewayFailure === this.config.consecutiveGatewayFailure)
          this.eject(host, 'consecutive_gateway_failure', this.config.enforcingGatewayFailure);
      }
      if (++host.consecutive5xx === this.config.consecutive5xx) this.eject(host, 'consecutive_5xx', this.config.enforcing5xx);
    } else {
      host.consecutive5xx = 0;
      host.consecutiveGatewayFailure = 0;
    }
  }

  /** A locally originated outcome (connect failure, timeout, reset, or a successful connect). */
  reportLocal(host: Host, r: LocalOrigin): void {
    if (this.config.splitExternalLocalOriginErrors) {
      if (r === 'success') host.consecutiveLocalOriginFailure = 0;
      else if (++host.consecutiveLocalOriginFailure === this.config.consecutiveLocalOriginFailure) {
        this.eject(host, 'consecutive_local_origin_failure', this.config.enforcingLocalOriginFailure);
      }
      return;
    }
    if (r === 'success') return;
    this.reportHttp(host, r === 'timeout' ? 504 : 503);
  }

  private eject(host: Host, kind: Kind, enforcing: number): void {
    if (host.ejectedUntil > 0) return;
    this.detected[kind].inc();
    if (this.random() * 100 >= enforcing) return;
    const all = this.hosts();
    const ejected = all.filter((h) => h.ejectedUntil > 0).length;
    // Envoy always allows one ejection, then caps at max_ejection_percent of the hosts
    if (ejected > 0 && ((ejected + 1) * 100) / all.length > this.config.maxEjectionPercent) {
      this.overflow.inc();
      return;
    }
    host.ejections++;
    const ms = Math.min(this.config.baseEjectionMs * host.ejections, Math.max(this.config.baseEjectionMs, this.config.maxEjectionMs));
    host.ejectedUntil = this.now() + ms;
    this.active.set(ejected + 1);
    this.enforcedTotal.inc();
    this.enforced[kind].inc();
    this.onChange();
  }

  /** Interval work: return hosts whose ejection time passed; age the ejection multiplier. */
  tick(): void {
    const now = this.now();
    let changed = false;
    let active = 0;
    for (const h of this.hosts()) {
      if (h.ejectedUntil > 0 && h.ejectedUntil <= now) {
        h.ejectedUntil = 0;
        h.consecutive5xx = 0;
        h.consecutiveGatewayFailure = 0;
        h.consecutiveLocalOriginFailure = 0;
        changed = true;
      } else if (h.ejectedUntil === 0 && h.ejections > 0) {
        h.ejections--;
      }
      if (h.ejectedUntil > 0) active++;
    }
    this.active.set(active);
    if (changed) this.onChange();
  }
}
