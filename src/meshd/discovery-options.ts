// The push context's options from the discovery daemon's flags, meshConfig file and environment (Istio's
// features.* read by pilot/pkg/model and the networking core).
import { CommandError, type RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { readMeshConfig, watchMeshConfig } from '../config/meshconfig';
import type { PushContextOptions } from '../discovery/push-context';

/** Read before anything starts, so a bad meshConfig file is the first error; the trust domain comes from the identity. */
export function pushOptions(ctx: RunContext, env: EnvTable): PushContextOptions {
  let mesh;
  try {
    mesh = readMeshConfig(ctx.flags['meshConfig'] as string);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  return {
    pathNormalization: mesh.pathNormalization,
    meshTelemetry: mesh.telemetry,
    domain: ctx.flags['domain'] as string,
    clusterId: ctx.flags['clusterID'] as string,
    rootNamespace: ctx.flags['namespace'] as string,
    scopeGatewayToNamespace: env.bool('PILOT_SCOPE_GATEWAY_TO_NAMESPACE'),
    sendUnhealthyEndpoints: env.bool('PILOT_SEND_UNHEALTHY_ENDPOINTS'),
    drainingLabel: env.string('PILOT_DRAINING_LABEL'),
    http10: env.bool('PILOT_HTTP10'),
    enable100Continue: env.bool('ENABLE_100_CONTINUE_HEADERS'),
    routeCollapse: env.bool('PILOT_ENABLE_ROUTE_COLLAPSE_OPTIMIZATION'),
    dnsJitterMs: env.duration('PILOT_DNS_JITTER_DURATION'),
    metadataExchange: env.bool('PILOT_ENABLE_METADATA_EXCHANGE'),
    disableMxAlpn: env.bool('PILOT_DISABLE_MX_ALPN'),
    alpnFilter: env.bool('PILOT_ENABLE_ALPN_FILTER'),
    ipAutoallocate: env.bool('PILOT_ENABLE_IP_AUTOALLOCATE'),
    ...telemetryOptions(env),
  };
}

/** The telemetry switches of the environment (Istio pilot/pkg/features/telemetry.go). */
export function telemetryOptions(env: EnvTable): PushContextOptions {
  const sampling = env.float('PILOT_TRACE_SAMPLING');
  const labels = env.string('PILOT_MX_ADDITIONAL_LABELS');
  return {
    // Istio: out of [0, 100] is warned about and read as 1
    traceSampling: sampling >= 0 && sampling <= 100 ? sampling : 1,
    enableTelemetryLabel: env.bool('PILOT_ENABLE_TELEMETRY_LABEL'),
    endpointTelemetryLabel: env.bool('PILOT_ENDPOINT_TELEMETRY_LABEL'),
    spawnUpstreamSpanForGateway: env.bool('PILOT_SPAWN_UPSTREAM_SPAN_FOR_GATEWAY'),
    mxAdditionalLabels: labels
      ? labels
          .split(',')
          .map((l) => l.trim())
          .filter((l) => l !== '')
      : [],
  };
}

/**
 * Watches --meshConfig for the fields push contexts read (telemetry, path normalization) and hands their new
 * values to `onChange`, so proxies get them without a restart; a version that cannot be read is warned about
 * and the previous one keeps serving (watchMeshConfig). Answers the stop function.
 */
export function watchPushOptions(ctx: RunContext, onChange: (changes: Partial<PushContextOptions>) => void): () => void {
  const file = ctx.flags['meshConfig'] as string;
  let initial;
  try {
    initial = readMeshConfig(file);
  } catch {
    return () => {};
  }
  return watchMeshConfig(file, initial, (m) => onChange({ meshTelemetry: m.telemetry, pathNormalization: m.pathNormalization }));
}
