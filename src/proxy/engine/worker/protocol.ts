// Messages between the engine's main thread and its worker threads (src/proxy/engine/worker/pool.ts and
// thread.ts). xDS travels as the encoded Envoy messages the engine decodes anyway; the rest is control.
import type { EngineOptions } from '../options';
import type { StatsSnapshot } from './merge';

/** The engine options a worker starts with (the serialisable part of the main thread's). */
export type WorkerEngineOptions = Pick<
  EngineOptions,
  | 'logLevel'
  | 'componentLogLevel'
  | 'logFormat'
  | 'concurrency'
  | 'drainTimeS'
  | 'drainStrategy'
  | 'parentShutdownTimeS'
  | 'localAddressIpVersion'
  | 'xdsBackoff'
>;

export interface WorkerData {
  id: number;
  /** envoy.config.bootstrap.v3.Bootstrap, encoded. */
  bootstrap: Uint8Array;
  options: WorkerEngineOptions;
}

export type ToWorker =
  | { t: 'xds'; key: string; delta: boolean; bytes: Uint8Array }
  | { t: 'fd'; req: number; fd?: number; error?: string }
  /** `full`: send the names and tags of tagged stats again (the main thread missed an answer, or this worker is new). */
  | { t: 'stats'; req: number; full: boolean }
  | { t: 'drain'; graceful: boolean; inboundOnly: boolean }
  | { t: 'healthcheck'; fail: boolean }
  | { t: 'reset_counters' }
  | { t: 'logging'; query: string }
  | { t: 'close' }
  | { t: 'crash' };

export type FromWorker =
  | { t: 'log'; line: string }
  | { t: 'fd'; req: number; key: string; listener: string }
  | { t: 'stats'; req: number; snapshot: StatsSnapshot }
  | { t: 'live' }
  | { t: 'closed' };
