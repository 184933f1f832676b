// The push context's options from the discovery daemon's flags, meshConfig file and environment (Istio's
// features.* read by pilot/pkg/model and the networking core).
import { CommandError, type RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { readMeshConfig } from '../config/meshconfig';
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
  };
}
