// Istio's WorkloadHealthChecker.PerformApplicationHealthCheck: after the initial delay, probe every period;
// report healthy after `successThreshold` successes in a row and unhealthy after `failureThreshold` failures
// in a row, each only when the state changes. The proxy's own readiness is probed first (Istio's
// EnvoyProber), so a workload whose proxy is not ready is not reported healthy.
import { registerScope } from '../../lib/log';
import { aggregate, proberFor, type Prober, type ReadinessProbe } from './probe';
import { UNGUARDED, type Guard } from '../boundary';

const log = registerScope('healthcheck', 'Health Checks performed by Istio-Agent');

export interface ProbeEvent {
  healthy: boolean;
  /** Why not, when unhealthy. */
  message?: string;
}

/** Istio's resolveDefaultHost: the workload's first IP address, or localhost without one. */
export function defaultProbeHost(ipAddresses: readonly string[]): string {
  return ipAddresses[0] ?? 'localhost';
}

export class WorkloadHealthChecker {
  private readonly prober: Prober;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private numSuccess = 0;
  private numFail = 0;
  private last: 'undefined' | 'healthy' | 'unhealthy' = 'undefined';
  private readonly guard: Guard;

  constructor(
    private readonly probe: ReadinessProbe,
    o: { ipAddresses: readonly string[]; proxyReady?: () => Promise<string | undefined>; guard?: Guard },
  ) {
    this.guard = o.guard ?? UNGUARDED;
    const app = proberFor(probe.method, defaultProbeHost(o.ipAddresses));
    this.prober = o.proxyReady ? aggregate([() => o.proxyReady!(), app]) : app;
  }

  start(callback: (e: ProbeEvent) => void): void {
    log.info(`starting health check for ${this.probe.method.kind} in ${this.probe.initialDelayMs / 1000}s`);
    // A faulty probe round ends the rounds (the agent's boundary restarts the checker).
    const tick = this.guard.entry(
      'health',
      async (): Promise<void> => {
        if (this.stopped) return;
        await this.check(callback);
        if (!this.stopped) this.timer = setTimeout(() => void tick(), this.probe.periodMs);
      },
      async () => undefined,
    );
    this.timer = setTimeout(() => void tick(), this.probe.initialDelayMs);
  }

  private async check(callback: (e: ProbeEvent) => void): Promise<void> {
    let why: string | undefined;
    try {
      why = await this.prober(this.probe.timeoutMs);
    } catch (e) {
      why = (e as Error).message;
    }
    if (this.stopped) return;
    if (why === undefined) {
      log.debug('probe completed with healthy status');
      this.numSuccess++;
      this.numFail = 0;
      if (this.numSuccess === this.probe.successThreshold && this.last !== 'healthy') {
        log.info('success threshold hit, marking as healthy');
        callback({ healthy: true });
        this.numSuccess = 0;
        this.last = 'healthy';
      }
    } else {
      log.debug(`probe completed with unhealthy status: ${why}`);
      this.numFail++;
      this.numSuccess = 0;
      if (this.numFail === this.probe.failureThreshold && this.last !== 'unhealthy') {
        log.info(`failure threshold hit, marking as unhealthy: ${why}`);
        this.numFail = 0;
        callback({ healthy: false, message: why });
        this.last = 'unhealthy';
      }
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
