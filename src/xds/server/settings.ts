// Tunables of the ADS server and its gRPC listeners, with Istio's defaults, read from the daemon's env
// table (commands/env/shared.ts) and flags.
import * as os from 'node:os';
import type { ServerOptions } from '@grpc/grpc-js';
import { sharedEnv } from '../../../commands/env/shared';
import { EnvTable, type EnvVars } from '../../lib/env';
import type { XdsCacheSettings } from '../../discovery/push/xds-cache';
import type { XdsAuthSettings } from './auth';

export interface AdsSettings extends XdsAuthSettings {
  /** PILOT_DEBOUNCE_AFTER, ms. */
  debounceAfterMs: number;
  /** PILOT_DEBOUNCE_MAX, ms. */
  debounceMaxMs: number;
  /** PILOT_ENABLE_EDS_DEBOUNCE */
  enableEdsDebounce: boolean;
  /** PILOT_PUSH_THROTTLE: 0 chooses by machine size (resolvePushThrottle). */
  pushThrottle: number;
  /** MESH_DELTA_XDS: serve DeltaAggregatedResources. */
  deltaXds: boolean;
  /** Longest a response write may take before the stream is closed (0: no limit), ms. */
  sendTimeoutMs: number;
}

export const DEFAULT_ADS_SETTINGS: Readonly<AdsSettings> = {
  debounceAfterMs: 100,
  debounceMaxMs: 10_000,
  enableEdsDebounce: true,
  pushThrottle: 0,
  deltaXds: true,
  identityCheck: true,
  sendTimeoutMs: 0,
};

/** Istio's PILOT_PUSH_THROTTLE: a positive value is used as is; otherwise min(15 + 5 × cores, 100). */
export function resolvePushThrottle(configured: number, cores: number = os.availableParallelism()): number {
  if (configured > 0) return configured;
  return Math.min(15 + 5 * Math.max(1, cores), 100);
}

export function adsSettingsFromEnv(vars: EnvVars): AdsSettings {
  const env = new EnvTable(sharedEnv, vars);
  return {
    debounceAfterMs: env.duration('PILOT_DEBOUNCE_AFTER'),
    debounceMaxMs: env.duration('PILOT_DEBOUNCE_MAX'),
    enableEdsDebounce: env.bool('PILOT_ENABLE_EDS_DEBOUNCE'),
    pushThrottle: env.int('PILOT_PUSH_THROTTLE'),
    deltaXds: env.bool('MESH_DELTA_XDS'),
    identityCheck: env.bool('PILOT_ENABLE_XDS_IDENTITY_CHECK'),
    sendTimeoutMs: DEFAULT_ADS_SETTINGS.sendTimeoutMs,
  };
}

/** The xDS cache's switches (the cache itself: src/discovery/push/xds-cache.ts, used by the generators). */
export function xdsCacheSettingsFromEnv(vars: EnvVars): XdsCacheSettings {
  const env = new EnvTable(sharedEnv, vars);
  return {
    enabled: env.bool('PILOT_ENABLE_XDS_CACHE'),
    size: env.int('PILOT_XDS_CACHE_SIZE'),
    cds: env.bool('PILOT_ENABLE_CDS_CACHE'),
    rds: env.bool('PILOT_ENABLE_RDS_CACHE'),
    stats: env.bool('PILOT_XDS_CACHE_STATS'),
  };
}

/** Connection limits of the discovery gRPC listeners. */
export interface GrpcServerLimits {
  /** --keepaliveInterval, ms. */
  keepaliveIntervalMs: number;
  /** --keepaliveTimeout, ms. */
  keepaliveTimeoutMs: number;
  /** --keepaliveMaxServerConnectionAge, ms; Go's max duration (the default) means no limit. */
  maxConnectionAgeMs: number;
  /** Grace after the age limit before the connection is forced closed, ms (Istio: 10s). */
  maxConnectionAgeGraceMs: number;
  /** MESH_GPRC_MAXRECVMSGSIZE, bytes. */
  maxRecvMsgSize: number;
  /** MESH_GPRC_MAXSTREAMS */
  maxConcurrentStreams: number;
}

export const DEFAULT_GRPC_SERVER_LIMITS: Readonly<GrpcServerLimits> = {
  keepaliveIntervalMs: 30_000,
  keepaliveTimeoutMs: 10_000,
  maxConnectionAgeMs: Number.POSITIVE_INFINITY,
  maxConnectionAgeGraceMs: 10_000,
  maxRecvMsgSize: 4 * 1024 * 1024,
  maxConcurrentStreams: 100_000,
};

/** grpc-js treats ~(1 << 31) ms as "unlimited"; longer timers would overflow Node's setTimeout. */
const GRPC_UNLIMITED_MS = 2 ** 31 - 1;

/**
 * grpc-js server options for the limits. A duration at or beyond grpc-js's "unlimited" (2^31-1 ms, about
 * 24.8 days) is left unset, which is grpc-js's own "no limit": the flag default 2562047h47m16.854775807s is
 * Go's "forever".
 */
export function grpcServerOptions(limits: GrpcServerLimits): ServerOptions {
  const opts: ServerOptions = {
    'grpc.max_receive_message_length': limits.maxRecvMsgSize,
    'grpc.max_concurrent_streams': limits.maxConcurrentStreams,
  };
  if (limits.keepaliveIntervalMs > 0 && limits.keepaliveIntervalMs < GRPC_UNLIMITED_MS) {
    opts['grpc.keepalive_time_ms'] = Math.round(limits.keepaliveIntervalMs);
  }
  if (limits.keepaliveTimeoutMs > 0 && limits.keepaliveTimeoutMs < GRPC_UNLIMITED_MS) {
    opts['grpc.keepalive_timeout_ms'] = Math.round(limits.keepaliveTimeoutMs);
  }
  if (limits.maxConnectionAgeMs > 0 && limits.maxConnectionAgeMs < GRPC_UNLIMITED_MS) {
    opts['grpc.max_connection_age_ms'] = Math.round(limits.maxConnectionAgeMs);
    if (limits.maxConnectionAgeGraceMs > 0 && limits.maxConnectionAgeGraceMs < GRPC_UNLIMITED_MS) {
      opts['grpc.max_connection_age_grace_ms'] = Math.round(limits.maxConnectionAgeGraceMs);
    }
  }
  return opts;
}

/** Limits from the daemon's flags (durations in ms) and env table. */
export function grpcServerLimitsFrom(
  flags: { keepaliveIntervalMs: number; keepaliveTimeoutMs: number; keepaliveMaxServerConnectionAgeMs: number },
  vars: EnvVars,
): GrpcServerLimits {
  const env = new EnvTable(sharedEnv, vars);
  return {
    keepaliveIntervalMs: flags.keepaliveIntervalMs,
    keepaliveTimeoutMs: flags.keepaliveTimeoutMs,
    maxConnectionAgeMs: flags.keepaliveMaxServerConnectionAgeMs,
    maxConnectionAgeGraceMs: DEFAULT_GRPC_SERVER_LIMITS.maxConnectionAgeGraceMs,
    maxRecvMsgSize: env.int('MESH_GPRC_MAXRECVMSGSIZE'),
    maxConcurrentStreams: env.int('MESH_GPRC_MAXSTREAMS'),
  };
}
