// What a started engine offers its starter (the agent, `pilot-agent proxy`, a worker thread, tests): its
// state as the agent watches it (Envoy's server states), its stats and loggers, and the admin API's actions.
import type { LoggerRegistry } from '../log';
import type { StatsStore } from '../stats/store';

/** What the admin API does to the engine, also done in each worker thread on the main thread's word. */
export interface EngineControl {
  drainListeners(o: { graceful: boolean; inboundOnly: boolean }): void;
  healthcheck(fail: boolean): void;
  resetCounters(): void;
  /** Brings server.* gauges (uptime, memory, total_connections) up to date. */
  refreshStats(): void;
}

export type ServerState = 'LIVE' | 'DRAINING' | 'PRE_INITIALIZING' | 'INITIALIZING';

export interface Engine {
  /** Where the admin API listens (undefined without admin in the bootstrap). */
  readonly adminAddress: { host: string; port: number } | undefined;
  readonly stats: StatsStore;
  readonly loggers: LoggerRegistry;
  state(): ServerState;
  /** Resolves when the server is LIVE (CDS/LDS applied, listeners serving). */
  readonly initialized: Promise<void>;
  /** The port a listener is bound to (0 in a bootstrap means an ephemeral port), by listener name. */
  listenerPort(name: string): number | undefined;
  /** Resolves with the exit code when /quitquitquit or close() ends the engine. */
  readonly exited: Promise<number>;
  close(code?: number): Promise<void>;
  readonly control: EngineControl;
  /** Worker threads running besides the main thread (0 with concurrency 1). */
  workerThreads(): number;
}
