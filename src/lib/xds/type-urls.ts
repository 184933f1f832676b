// Facts about xDS resource types that the control plane, the agent, the engine and meshctl share: the type URLs
// themselves, short names for logs, metric labels, which types are "wildcard" (client receives the full set),
// and Istio's push order (pilot/pkg/model/typeurl.go, pilot/pkg/xds/v3/model.go).

export const TYPE_URL = {
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  endpoint: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  secret: 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret',
  /** Istio's DNS name table (NDS), for agents that capture DNS. */
  nameTable: 'type.googleapis.com/istio.networking.nds.v1.NameTable',
  /** Envoy's VHDS (delta only): the virtual hosts of route configurations that name a `vhds` source. */
  virtualHost: 'type.googleapis.com/envoy.config.route.v3.VirtualHost',
  /** Envoy's ECDS: extension configs (Istio's WasmPlugin filters). */
  extensionConfig: 'type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig',
} as const;

export type TypeUrl = (typeof TYPE_URL)[keyof typeof TYPE_URL];

/** Istio's HealthInformation probe type: carried on the ADS stream but not a resource subscription. */
export const HEALTH_INFO_TYPE_URL = 'type.googleapis.com/istio.v1.HealthInformation';

const SHORT: Readonly<Record<string, string>> = {
  [TYPE_URL.cluster]: 'CDS',
  [TYPE_URL.endpoint]: 'EDS',
  [TYPE_URL.listener]: 'LDS',
  [TYPE_URL.route]: 'RDS',
  [TYPE_URL.secret]: 'SDS',
  [TYPE_URL.nameTable]: 'NDS',
  [TYPE_URL.virtualHost]: 'VHDS',
};

/** `CDS`, `EDS`, … for logs (Istio's GetShortType); the type URL itself for others. */
export function shortType(typeUrl: string): string {
  return SHORT[typeUrl] ?? typeUrl;
}

/** `cds`, `eds`, … for metric labels (Istio's GetMetricType); the type URL itself for others. */
export function metricType(typeUrl: string): string {
  const s = SHORT[typeUrl];
  return s ? s.toLowerCase() : typeUrl;
}

/**
 * Listener and Cluster are wildcard types: a response carries the complete set and a missing resource means
 * it was removed. Endpoints, routes and secrets are requested by name and may be sent partially.
 * Unknown types get wildcard semantics, as in Istio.
 */
export function isWildcardType(typeUrl: string): boolean {
  return !(typeUrl === TYPE_URL.endpoint || typeUrl === TYPE_URL.route || typeUrl === TYPE_URL.secret);
}

/** Istio's PushOrder: clusters before their endpoints, listeners before their routes; virtual hosts after their route configurations. */
export const PUSH_ORDER: readonly string[] = [
  TYPE_URL.cluster,
  TYPE_URL.endpoint,
  TYPE_URL.listener,
  TYPE_URL.route,
  TYPE_URL.virtualHost,
  TYPE_URL.secret,
];

/** The given types in push order; unknown types follow, sorted for determinism. */
export function orderTypes(typeUrls: Iterable<string>): string[] {
  const set = new Set(typeUrls);
  const known = PUSH_ORDER.filter((t) => set.has(t));
  const rest = [...set].filter((t) => !PUSH_ORDER.includes(t)).sort();
  return [...known, ...rest];
}

/**
 * The service hostname an EDS resource (cluster name) is for: `outbound|80|v1|reviews.ns.svc.cluster.local`
 * → `reviews.ns.svc.cluster.local` (Istio's ParseSubsetKey). Names of another shape are their own host.
 */
export function clusterHostname(clusterName: string): string {
  const parts = clusterName.split('|');
  if (parts.length === 4 && parts[3]) return parts[3];
  return clusterName;
}

const GRPC_CODE_NAMES = [
  'OK',
  'Canceled',
  'Unknown',
  'InvalidArgument',
  'DeadlineExceeded',
  'NotFound',
  'AlreadyExists',
  'PermissionDenied',
  'ResourceExhausted',
  'FailedPrecondition',
  'Aborted',
  'OutOfRange',
  'Unimplemented',
  'Internal',
  'Unavailable',
  'DataLoss',
  'Unauthenticated',
];

/** Go's codes.Code String(): Istio labels reject metrics and logs NACKs with it. */
export function grpcCodeName(code: number): string {
  return GRPC_CODE_NAMES[code] ?? `Code(${code})`;
}
