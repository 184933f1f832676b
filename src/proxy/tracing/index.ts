// The tracing of an HttpConnectionManager, built from its proto: undefined when it has no `tracing`, so that an
// untraced HCM pays nothing per request.
import type { HttpConnectionManager } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import type { StatsScope } from '../stats/store';
import { localInfoOf, type LocalInfo } from '../common/local-info';
import type { ClusterCall } from '../common/cluster-call';
import { tracingOptionsOf } from './config';
import { HttpTracer } from './tracer';

export { HttpTracer, RequestTrace } from './tracer';

export interface TracingDeps {
  call: ClusterCall;
  local: LocalInfo | undefined;
  /** The engine's stats (tracers count under `tracing.<name>.`) and the HCM's (`http.<prefix>.tracing.*`). */
  stats: StatsScope;
  hcmStats: StatsScope;
  warn(message: string): void;
}

/** The HCM's tracer; undefined when the HCM has no `tracing`. `egress`: the listener's traffic_direction is OUTBOUND. */
export function httpTracerOf(proto: HttpConnectionManager, where: string, egress: boolean, d: TracingDeps): HttpTracer | undefined {
  const o = tracingOptionsOf(proto, where, egress);
  if (!o) return undefined;
  return new HttpTracer(o, { call: d.call, local: d.local ?? localInfoOf(undefined), stats: d.stats, warn: d.warn }, d.hcmStats);
}
