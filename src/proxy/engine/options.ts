// What the engine is started with: Envoy's command-line options (the ones the engine honours) and what its
// starter provides — log writer, filter registry, xDS back-off, the original-destination source, and, in a
// worker thread, the links to the main thread. The agent and `pilot-agent proxy` fill it; so does a worker.
import type { HttpFilterRegistry } from '../http/filter-api';
import type { LogLevel } from '../log';
import type { GrpcMux } from '../xds/grpc-mux';
import type { OriginalDstSource } from '../../native/original-dst';

export interface EngineOptions {
  logLevel?: LogLevel;
  componentLogLevel?: string;
  logFormat?: string;
  /** Where log lines go (default stderr). */
  logWriter?: (line: string) => void;
  concurrency?: number;
  drainTimeS?: number;
  drainStrategy?: 'gradual' | 'immediate';
  parentShutdownTimeS?: number;
  localAddressIpVersion?: 'v4' | 'v6';
  allowUnknownStaticFields?: boolean;
  disableHotRestart?: boolean;
  baseId?: number;
  restartEpoch?: number;
  configPath?: string;
  configYaml?: string;
  serviceCluster?: string;
  serviceNode?: string;
  /** Replaces the bootstrap's admin address (tests use 127.0.0.1:0). */
  adminAddress?: { host: string; port: number };
  /** HTTP filter registry (default: the built-in filters plus whatever was registered there). */
  filters?: HttpFilterRegistry;
  /** Start-up warnings to log (bootstrap sections that were ignored). */
  warnings?: readonly string[];
  /** xDS reconnect backoff (Envoy: 500 ms base, 30 s max). */
  xdsBackoff?: { baseMs: number; maxMs: number };
  /**
   * How captured connections' original destinations are read: default the native addon
   * (SO_ORIGINAL_DST); `false` runs without it (destinations guessed from Host / SNI), as where the
   * addon could not be built.
   */
  originalDst?: OriginalDstSource | false;
  /** Set by an engine worker thread (src/proxy/engine/worker/thread.ts): what the main thread provides. */
  worker?: WorkerSide;
}

/** An engine worker thread's links to the main thread. */
export interface WorkerSide {
  id: number;
  /** A relay mux was made for a config source: `ads`, or the static cluster of an SDS stream. */
  registerMux(key: string, mux: GrpcMux): void;
  /** A descriptor of the main thread's socket for a listener address key. */
  sharedSocket(key: string, listener: string): Promise<number>;
}
