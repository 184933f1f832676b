// How a tracer reaches its collector: a request through the engine's own cluster manager (the HCM's
// upstreamCall), as Envoy's tracers use the cluster's async HTTP client; and the local facts every span carries.
import type { ClusterCall } from '../common/cluster-call';
import type { LocalInfo } from '../common/local-info';
import type { StatsScope } from '../stats/store';

/** What the tracers need of the engine. */
export interface TracerHost {
  call: ClusterCall;
  local: LocalInfo;
  /** The engine's root stats scope (tracers count under `tracing.<name>.`). */
  stats: StatsScope;
  warn(message: string): void;
}

/** The headers Envoy's async client adds to a collector request it makes itself. */
export function internalHeaders(local: LocalInfo): Record<string, string> {
  return { 'x-envoy-internal': 'true', 'x-forwarded-for': local.address };
}
