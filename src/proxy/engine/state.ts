// The engine's stats store as the bootstrap's stats_config shapes it (tags, stats matcher), and the server's
// own state with the server.* gauges Envoy keeps: PRE_INITIALIZING → INITIALIZING → LIVE, reported DRAINING
// while /healthcheck/fail holds (Envoy's Server::InstanceImpl state and its server stats).
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { compileListStringMatcher } from '../matchers/string';
import { StatsStore, type Gauge, type StatsScope } from '../stats/store';
import { TagProducer } from '../stats/tags';
import type { ServerState } from './types';

/** The stats store (with stats_matcher applied) and the tag producer of stats_config. */
export function engineStats(bootstrap: Bootstrap): { stats: StatsStore; tags: TagProducer } {
  const sc = bootstrap.statsConfig;
  const tags = new TagProducer(
    (sc?.statsTags ?? []).map((t) => ({
      name: t.tagName,
      ...(t.tagValue.case === 'regex' ? { regex: t.tagValue.value } : {}),
      ...(t.tagValue.case === 'fixedValue' ? { fixedValue: t.tagValue.value } : {}),
    })),
    sc?.useAllDefaultTags ?? true,
  );
  const sm = sc?.statsMatcher?.statsMatcher;
  let visible: ((name: string) => boolean) | undefined;
  if (sm?.case === 'rejectAll' && sm.value) visible = () => false;
  else if (sm?.case === 'inclusionList') visible = compileListStringMatcher(sm.value, 'stats_config.stats_matcher.inclusion_list');
  else if (sm?.case === 'exclusionList') {
    const m = compileListStringMatcher(sm.value, 'stats_config.stats_matcher.exclusion_list');
    visible = (n) => !m(n);
  }
  return { stats: new StatsStore(visible), tags };
}

const STATE_CODE: Readonly<Record<ServerState, number>> = { LIVE: 0, DRAINING: 1, PRE_INITIALIZING: 2, INITIALIZING: 3 };

/** The server's state and the server.* gauges. */
export class ServerStatus {
  readonly scope: StatsScope;
  private state: ServerState = 'PRE_INITIALIZING';
  private failed = false;
  private readonly gLive: Gauge;
  private readonly gState: Gauge;
  private readonly gUptime: Gauge;
  private readonly gConcurrency: Gauge;
  private readonly gMemAllocated: Gauge;
  private readonly gMemHeap: Gauge;
  private readonly gMemPhysical: Gauge;
  private readonly gTotalConnections: Gauge;

  constructor(
    stats: StatsStore,
    private readonly startTime: number,
    concurrency: number,
    restartEpoch: number,
  ) {
    const server = (this.scope = stats.scope('server.'));
    this.gLive = server.gauge('live');
    this.gState = server.gauge('state');
    this.gUptime = server.gauge('uptime');
    this.gConcurrency = server.gauge('concurrency');
    this.gMemAllocated = server.gauge('memory_allocated');
    this.gMemHeap = server.gauge('memory_heap_size');
    this.gMemPhysical = server.gauge('memory_physical_size');
    this.gTotalConnections = server.gauge('total_connections');
    const gCertExpiry = server.gauge('days_until_first_cert_expiring');
    const gEpoch = server.gauge('hot_restart_epoch');
    server.gauge('version').set(0);
    this.gConcurrency.set(concurrency);
    gEpoch.set(restartEpoch);
    gCertExpiry.set(2147483647);
    this.set('PRE_INITIALIZING');
  }

  /** The state reported: a LIVE server whose health check was failed reports DRAINING. */
  effective(): ServerState {
    return this.state === 'LIVE' && this.failed ? 'DRAINING' : this.state;
  }

  set(s: ServerState): void {
    this.state = s;
    this.gState.set(STATE_CODE[this.effective()]);
    this.gLive.set(this.effective() === 'LIVE' ? 1 : 0);
  }

  /** /healthcheck/fail and /healthcheck/ok. */
  failHealth(fail: boolean): void {
    this.failed = fail;
    this.set(this.state);
  }

  get healthFailed(): boolean {
    return this.failed;
  }

  /** Worker threads could not be started: one thread serves. */
  singleThreaded(): void {
    this.gConcurrency.set(1);
  }

  uptimeS(): number {
    return Math.floor((Date.now() - this.startTime) / 1000);
  }

  /** Brings uptime, memory and total_connections up to date. */
  refresh(activeConnections: number): void {
    this.gUptime.set(this.uptimeS());
    const m = process.memoryUsage();
    this.gMemAllocated.set(m.heapUsed);
    this.gMemHeap.set(m.heapTotal);
    this.gMemPhysical.set(m.rss);
    this.gTotalConnections.set(activeConnections);
  }
}
