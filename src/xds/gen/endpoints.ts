// ClusterLoadAssignments (Istio EndpointBuilder): endpoints of a service port, filtered by subset
// labels, grouped by locality, with weights and health. Unhealthy endpoints are left out unless
// PILOT_SEND_UNHEALTHY_ENDPOINTS, terminating ones always; endpoints labelled with PILOT_DRAINING_LABEL
// are sent DRAINING. Endpoints with a sidecar carry the tlsMode metadata auto mTLS matches on.
import { create } from '@bufbuild/protobuf';
import { HealthStatus } from '../../gen/envoy/config/core/v3/health_check_pb';
import { ClusterLoadAssignmentSchema, type ClusterLoadAssignment } from '../../gen/envoy/config/endpoint/v3/endpoint_pb';
import type { LocalityLbEndpoints } from '../../gen/envoy/config/endpoint/v3/endpoint_components_pb';
import { isIp } from '../../discovery/host';
import type { Endpoint } from '../../discovery/model';
import { endpointTlsMode, TLS_MODE_DISABLED } from '../../discovery/labels';

/**
 * Istio AppendLbEndpointMetadata: an endpoint whose workload has a sidecar says so in
 * `envoy.transport_socket_match` metadata, which the cluster's `tlsMode-istio` transport socket match selects.
 */
export function endpointMetadata(e: Endpoint): { filterMetadata: { [k: string]: { tlsMode: string } } } | undefined {
  const mode = endpointTlsMode(e.labels);
  return mode === TLS_MODE_DISABLED ? undefined : { filterMetadata: { 'envoy.transport_socket_match': { tlsMode: mode } } };
}

export interface EndpointOptions {
  sendUnhealthy: boolean;
  drainingLabel: string;
  /** EDS needs IP addresses; DNS clusters' inline assignments may carry hostnames. */
  requireIp: boolean;
}

function splitLocality(l: string | undefined): { region: string; zone: string; subZone: string } {
  const [region = '', zone = '', subZone = ''] = (l ?? '').split('/');
  return { region, zone, subZone };
}

function healthOf(e: Endpoint, opts: EndpointOptions): HealthStatus | undefined {
  if (opts.drainingLabel && e.labels[opts.drainingLabel] !== undefined) return HealthStatus.DRAINING;
  switch (e.healthStatus) {
    case 'Healthy':
      return HealthStatus.HEALTHY;
    case 'Draining':
      return HealthStatus.DRAINING;
    case 'UnHealthy':
      return opts.sendUnhealthy ? HealthStatus.UNHEALTHY : undefined;
    case 'Terminating':
      // Never sent, not even with PILOT_SEND_UNHEALTHY_ENDPOINTS (Istio): a rollout replacing one pod
      // must count as fully healthy, not half.
      return undefined;
  }
}

/** Locality groups of endpoints, in first-seen order (stable for identical inputs). */
export function localityLbEndpoints(endpoints: readonly Endpoint[], opts: EndpointOptions): LocalityLbEndpoints[] {
  const groups = new Map<string, { locality: string | undefined; eps: LocalityLbEndpoints['lbEndpoints']; weight: number }>();
  const seen = new Set<string>();
  for (const e of endpoints) {
    if (opts.requireIp && !isIp(e.address)) continue;
    const health = healthOf(e, opts);
    if (health === undefined) continue;
    // the same address:port twice (two WorkloadEntries, a Pod also selected by a ServiceEntry) is one endpoint
    const key = `${e.address}:${e.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const loc = e.locality ?? '';
    let g = groups.get(loc);
    if (!g) {
      g = { locality: e.locality, eps: [], weight: 0 };
      groups.set(loc, g);
    }
    const weight = e.weight && e.weight > 0 ? e.weight : 1;
    g.weight += weight;
    const metadata = endpointMetadata(e);
    g.eps.push({
      hostIdentifier: {
        case: 'endpoint',
        value: {
          address: {
            address: { case: 'socketAddress', value: { address: e.address, portSpecifier: { case: 'portValue', value: e.port } } },
          },
        },
      },
      healthStatus: health,
      loadBalancingWeight: weight,
      ...(metadata ? { metadata } : {}),
    } as LocalityLbEndpoints['lbEndpoints'][number]);
  }
  return [...groups.values()].map(
    (g) =>
      ({
        locality: splitLocality(g.locality),
        lbEndpoints: g.eps,
        loadBalancingWeight: g.weight,
      }) as LocalityLbEndpoints,
  );
}

export function clusterLoadAssignment(clusterName: string, endpoints: readonly Endpoint[], opts: EndpointOptions): ClusterLoadAssignment {
  return create(ClusterLoadAssignmentSchema, { clusterName, endpoints: localityLbEndpoints(endpoints, opts) });
}
