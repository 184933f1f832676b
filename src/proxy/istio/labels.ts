// Istio's standard metric labels and their values (istio/proxy release-1.26
// source/extensions/filters/http/istio_stats/istio_stats.cc: populatePeerInfo, populateFlagsAndConnectionSecurity
// and log()): the order is the order Istio pushes the tags, which is the order Prometheus output shows them.
// Pure functions: the stats filters gather the facts, these turn them into values.
import type { Workload } from './workload';

/** `source` on outbound (client) listeners, `destination` on inbound, `waypoint` for SERVER_GATEWAY. */
export type Reporter = 'source' | 'destination' | 'waypoint';

/** The 19 labels that describe the two workloads and the service, between `reporter` and the protocol. */
export const PEER_LABELS = [
  'source_workload',
  'source_canonical_service',
  'source_canonical_revision',
  'source_workload_namespace',
  'source_principal',
  'source_app',
  'source_version',
  'source_cluster',
  'destination_workload',
  'destination_workload_namespace',
  'destination_principal',
  'destination_app',
  'destination_version',
  'destination_service',
  'destination_canonical_service',
  'destination_canonical_revision',
  'destination_service_name',
  'destination_service_namespace',
  'destination_cluster',
] as const;

/** Every standard label (Istio's all_tags_), for tags_to_remove and dimension overrides. */
export const STANDARD_LABELS: ReadonlySet<string> = new Set([
  'reporter',
  ...PEER_LABELS,
  'request_protocol',
  'response_code',
  'grpc_response_status',
  'response_flags',
  'connection_security_policy',
]);

export interface PeerFacts {
  reporter: Reporter;
  /** This proxy (node metadata). */
  local: Workload;
  /** The other side: downstream peer on inbound/waypoint, upstream peer (or endpoint labels) on outbound. */
  peer: Workload | undefined;
  /** Waypoint only: the upstream endpoint's workload. */
  endpointPeer?: Workload | undefined;
  /** URI SAN of the peer certificate ('' when none). */
  peerSan: string;
  /** URI SAN of our own certificate on the connection ('' when none). */
  localSan: string;
  /** Destination service host (cluster metadata `istio.services[0].host`, or the Host header), '' when unknown. */
  serviceHost: string;
  serviceName: string;
  serviceNamespace: string;
}

const U = 'unknown';
const or = (v: string | undefined, d: string): string => (v ? v : d);

/** `<domain>/ns/<namespace>/sa/<sa>` → namespace (Istio getNamespace). */
export function sanNamespace(san: string): string {
  const i = san.indexOf('/ns/');
  if (i < 0) return '';
  const rest = san.slice(i + 4);
  const j = rest.indexOf('/');
  return j < 0 ? rest : rest.slice(0, j);
}

/** The values of PEER_LABELS, in that order. */
export function peerLabelValues(f: PeerFacts): string[] {
  const { local: l, peer: p } = f;
  // the client side falls back to the identity workload discovery gave the peer
  const peerSan = f.reporter === 'source' ? f.peerSan || p?.identity || '' : f.peerSan;
  const peerNs = or(sanNamespace(peerSan), p?.namespace ?? '');
  if (f.reporter === 'source') {
    return [
      l.workload,
      l.service,
      l.revision,
      l.namespace,
      or(f.localSan, U),
      l.app,
      l.version,
      l.cluster,
      or(p?.workload, U),
      or(peerNs, U),
      or(peerSan, U),
      or(p?.app, U),
      or(p?.version, U),
      or(f.serviceHost, U),
      or(p?.service, U),
      or(p?.revision, 'latest'),
      or(f.serviceName, U),
      or(f.serviceNamespace, or(peerNs, U)),
      or(p?.cluster, U),
    ];
  }
  const source = [
    or(p?.workload, U),
    or(p?.service, U),
    or(p?.revision, 'latest'),
    or(peerNs, U),
    or(f.peerSan, U),
    or(p?.app, U),
    or(p?.version, U),
    or(p?.cluster, U),
  ];
  if (f.reporter === 'waypoint') {
    const e = f.endpointPeer;
    return [
      ...source,
      or(e?.workload, U),
      or(e?.namespace, U),
      or(e?.identity, U),
      or(e?.app, U),
      or(e?.version, U),
      or(f.serviceHost, U),
      or(e?.service, U),
      or(e?.revision, U),
      or(f.serviceName, U),
      or(f.serviceNamespace, U),
      or(e?.cluster, U),
    ];
  }
  return [
    ...source,
    l.workload,
    l.namespace,
    or(f.localSan, U),
    l.app,
    l.version,
    or(f.serviceHost, l.service),
    l.service,
    l.revision,
    or(f.serviceName, l.service),
    l.namespace,
    l.cluster,
  ];
}

/**
 * connection_security_policy: inbound/waypoint know it (mutual_tls when both our and the peer's certificate
 * carry a URI SAN, else none); the client side never does (`unknown`), as in Istio.
 */
export function securityPolicy(f: Pick<PeerFacts, 'reporter' | 'peerSan' | 'localSan'>): string {
  if (f.reporter === 'source') return U;
  return f.peerSan && f.localSan ? 'mutual_tls' : 'none';
}

/** Well-known clusters Istio names the service after, and the route names of its catch-all routes. */
const NAMED_CLUSTERS: ReadonlySet<string> = new Set([
  'BlackHoleCluster',
  'PassthroughCluster',
  'InboundPassthroughCluster',
  'InboundPassthroughClusterIpv4',
  'InboundPassthroughClusterIpv6',
]);

export interface ServiceFacts {
  host: string;
  name: string;
  namespace: string;
}

/**
 * destination_service{,_name,_namespace}: the Host header (unless disable_host_header_fallback), replaced by
 * the first of the cluster's `istio.services`; the catch-all routes and clusters name themselves.
 */
export function serviceOf(
  hostHeader: string | undefined,
  routeName: string,
  clusterName: string,
  clusterService: ServiceFacts | undefined,
  disableHostHeaderFallback: boolean,
): ServiceFacts {
  let host = '';
  let name = '';
  let namespace = '';
  if (!disableHostHeaderFallback && hostHeader) host = name = hostHeader;
  if (routeName === 'block_all') name = 'BlackHoleCluster';
  else if (routeName === 'allow_any') name = 'PassthroughCluster';
  else if (NAMED_CLUSTERS.has(clusterName)) name = clusterName;
  else if (clusterService) {
    if (clusterService.host) host = clusterService.host;
    if (clusterService.namespace) namespace = clusterService.namespace;
    name = clusterService.name || host.slice(0, host.indexOf('.') < 0 ? host.length : host.indexOf('.'));
  }
  return { host, name, namespace };
}
