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

/** kubelabels.CanonicalService: the workload's canonical service name and revision, with Istio's fallbacks. */
export function canonicalService(labels: Readonly<Record<string, string>>, workloadName: string): { name: string; revision: string } {
  const name =
    labels['service.mesh.io/canonical-name'] ??
    labels['service.istio.io/canonical-name'] ??
    labels['app.kubernetes.io/name'] ??
    labels['app'] ??
    workloadName;
  const revision =
    labels['service.mesh.io/canonical-revision'] ??
    labels['service.istio.io/canonical-revision'] ??
    labels['app.kubernetes.io/version'] ??
    labels['version'] ??
    'latest';
  return { name, revision };
}

/**
 * Istio's compressed telemetry metadata `workload;namespace;canonical name;canonical revision;cluster`
 * (the default revision `latest` left empty): the stats filter labels destination_* with it when the server
 * has no sidecar or the request never reached it.
 */
export function workloadTelemetryLabel(e: Endpoint): string {
  const workload = e.workloadName ?? '';
  const cs = canonicalService(e.labels, workload);
  return [workload, e.namespace, cs.name, cs.revision === 'latest' ? '' : cs.revision, e.clusterId ?? ''].join(';');
}

/**
 * Istio AppendLbEndpointMetadata: an endpoint whose workload has a sidecar says so in
 * `envoy.transport_socket_match` metadata, which the cluster's `tlsMode-istio` transport socket match selects;
 * with PILOT_ENABLE_TELEMETRY_LABEL and PILOT_ENDPOINT_TELEMETRY_LABEL it also carries `istio.workload`.
 * (Istio leaves out the tlsMode too when either flag is off; here it stays: auto mTLS needs it.)
 */
export function endpointMetadata(e: Endpoint, telemetryLabel = false): { filterMetadata: { [k: string]: { [f: string]: string } } } | undefined {
  const mode = endpointTlsMode(e.labels);
  const md: { [k: string]: { [f: string]: string } } = {};
  if (mode !== TLS_MODE_DISABLED) md['envoy.transport_socket_match'] = { tlsMode: mode };
  if (telemetryLabel) md['istio'] = { workload: workloadTelemetryLabel(e) };
  return Object.keys(md).length ? { filterMetadata: md } : undefined;
}

export interface EndpointOptions {
  sendUnhealthy: boolean;
  drainingLabel: string;
  /** EDS needs IP addresses; DNS clusters' inline assignments may carry hostnames. */
  requireIp: boolean;
  /** PILOT_ENABLE_TELEMETRY_LABEL && PILOT_ENDPOINT_TELEMETRY_LABEL: `istio.workload` endpoint metadata. */
  telemetryLabel?: boolean;
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
    const metadata = endpointMetadata(e, opts.telemetryLabel);
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
