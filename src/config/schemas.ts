// Which apiVersion/kind pairs name which Kind, and how the orchestrator API serves each Kind.
// Our groups (networking.mesh.io, security.mesh.io) are accepted beside Istio's so that Istio YAML
// applies unchanged; every networking kind takes all three Istio versions so that old manifests
// migrate without edits (EnvoyFilter, ProxyConfig, Telemetry and WasmPlugin: the versions Istio serves).
import type { Kind } from './types';

export interface GroupVersion {
  /** API group; '' for the core group (`v1`). */
  group: string;
  version: string;
}

export interface KindSchema {
  kind: Kind;
  /** Lower-case plural resource name, as in REST paths (`virtualservices`). */
  plural: string;
  clusterScoped: boolean;
  /** The kind as manifests write it, when it differs from our Kind (`Gateway` for KubernetesGateway). */
  objectKind: string;
  /** Every accepted apiVersion, ours first. */
  apiVersions: readonly string[];
  /** The group/version to list and watch per API group, ours first (one entry per group). */
  watch: readonly GroupVersion[];
}

const NETWORKING_GROUPS: readonly GroupVersion[] = [
  { group: 'networking.mesh.io', version: 'v1' },
  { group: 'networking.istio.io', version: 'v1' },
  { group: 'networking.istio.io', version: 'v1beta1' },
  { group: 'networking.istio.io', version: 'v1alpha3' },
];
const SECURITY_GROUPS: readonly GroupVersion[] = [
  { group: 'security.mesh.io', version: 'v1' },
  { group: 'security.istio.io', version: 'v1' },
  { group: 'security.istio.io', version: 'v1beta1' },
];
// Kinds Istio serves at one version only (and ours at the matching one).
const ENVOY_FILTER_GROUPS: readonly GroupVersion[] = [
  { group: 'networking.mesh.io', version: 'v1alpha3' },
  { group: 'networking.istio.io', version: 'v1alpha3' },
];
const PROXY_CONFIG_GROUPS: readonly GroupVersion[] = [
  { group: 'networking.mesh.io', version: 'v1beta1' },
  { group: 'networking.istio.io', version: 'v1beta1' },
];
const TELEMETRY_GROUPS: readonly GroupVersion[] = [
  { group: 'telemetry.mesh.io', version: 'v1' },
  { group: 'telemetry.istio.io', version: 'v1' },
  { group: 'telemetry.istio.io', version: 'v1alpha1' },
];
const EXTENSIONS_GROUPS: readonly GroupVersion[] = [
  { group: 'extensions.mesh.io', version: 'v1alpha1' },
  { group: 'extensions.istio.io', version: 'v1alpha1' },
];
// The Kubernetes Gateway API (v1.3.0 standard channel): the versions its CRDs serve, storage version first.
const GATEWAY_API_GROUPS: readonly GroupVersion[] = [
  { group: 'gateway.networking.k8s.io', version: 'v1' },
  { group: 'gateway.networking.k8s.io', version: 'v1beta1' },
];
const GATEWAY_API_V1: readonly GroupVersion[] = [{ group: 'gateway.networking.k8s.io', version: 'v1' }];
const GATEWAY_API_V1BETA1: readonly GroupVersion[] = [{ group: 'gateway.networking.k8s.io', version: 'v1beta1' }];
// Alpha kinds, served when PILOT_ENABLE_ALPHA_GATEWAY_API is on (experimental channel, v1.3.0).
const GATEWAY_API_V1ALPHA2: readonly GroupVersion[] = [{ group: 'gateway.networking.k8s.io', version: 'v1alpha2' }];
const CORE: readonly GroupVersion[] = [{ group: '', version: 'v1' }];
const DISCOVERY: readonly GroupVersion[] = [{ group: 'discovery.k8s.io', version: 'v1' }];

export function apiVersionOf(gv: GroupVersion): string {
  return gv.group === '' ? gv.version : `${gv.group}/${gv.version}`;
}

/** One group/version per group: the first listed, which is the newest we accept. */
function firstPerGroup(gvs: readonly GroupVersion[]): GroupVersion[] {
  const seen = new Set<string>();
  return gvs.filter((gv) => (seen.has(gv.group) ? false : (seen.add(gv.group), true)));
}

function schema(kind: Kind, plural: string, gvs: readonly GroupVersion[], clusterScoped = false, objectKind: string = kind): KindSchema {
  return { kind, objectKind, plural, clusterScoped, apiVersions: gvs.map(apiVersionOf), watch: firstPerGroup(gvs) };
}

export const SCHEMAS: Readonly<Record<Kind, KindSchema>> = {
  Gateway: schema('Gateway', 'gateways', NETWORKING_GROUPS),
  VirtualService: schema('VirtualService', 'virtualservices', NETWORKING_GROUPS),
  DestinationRule: schema('DestinationRule', 'destinationrules', NETWORKING_GROUPS),
  ServiceEntry: schema('ServiceEntry', 'serviceentries', NETWORKING_GROUPS),
  WorkloadEntry: schema('WorkloadEntry', 'workloadentries', NETWORKING_GROUPS),
  WorkloadGroup: schema('WorkloadGroup', 'workloadgroups', NETWORKING_GROUPS),
  Sidecar: schema('Sidecar', 'sidecars', NETWORKING_GROUPS),
  RequestAuthentication: schema('RequestAuthentication', 'requestauthentications', SECURITY_GROUPS),
  AuthorizationPolicy: schema('AuthorizationPolicy', 'authorizationpolicies', SECURITY_GROUPS),
  PeerAuthentication: schema('PeerAuthentication', 'peerauthentications', SECURITY_GROUPS),
  EnvoyFilter: schema('EnvoyFilter', 'envoyfilters', ENVOY_FILTER_GROUPS),
  ProxyConfig: schema('ProxyConfig', 'proxyconfigs', PROXY_CONFIG_GROUPS),
  Telemetry: schema('Telemetry', 'telemetries', TELEMETRY_GROUPS),
  WasmPlugin: schema('WasmPlugin', 'wasmplugins', EXTENSIONS_GROUPS),
  Service: schema('Service', 'services', CORE),
  EndpointSlice: schema('EndpointSlice', 'endpointslices', DISCOVERY),
  Pod: schema('Pod', 'pods', CORE),
  Namespace: schema('Namespace', 'namespaces', CORE, true),
  Secret: schema('Secret', 'secrets', CORE),
  GatewayClass: schema('GatewayClass', 'gatewayclasses', GATEWAY_API_GROUPS, true),
  KubernetesGateway: schema('KubernetesGateway', 'gateways', GATEWAY_API_GROUPS, false, 'Gateway'),
  HTTPRoute: schema('HTTPRoute', 'httproutes', GATEWAY_API_GROUPS),
  GRPCRoute: schema('GRPCRoute', 'grpcroutes', GATEWAY_API_V1),
  ReferenceGrant: schema('ReferenceGrant', 'referencegrants', GATEWAY_API_V1BETA1),
  TLSRoute: schema('TLSRoute', 'tlsroutes', GATEWAY_API_V1ALPHA2),
  TCPRoute: schema('TCPRoute', 'tcproutes', GATEWAY_API_V1ALPHA2),
};

export const ALL_KINDS: readonly Kind[] = Object.keys(SCHEMAS) as Kind[];

/** The Gateway API kinds (gateway.networking.k8s.io). */
export const GATEWAY_API_KINDS: readonly Kind[] = ALL_KINDS.filter((k) => SCHEMAS[k].watch[0]!.group === 'gateway.networking.k8s.io');

/** The mesh configuration kinds (everything but the Kubernetes core/discovery objects): Istio's and the Gateway API's. */
export const MESH_KINDS: readonly Kind[] = ALL_KINDS.filter((k) => SCHEMAS[k].watch[0]!.group.endsWith('.mesh.io') || GATEWAY_API_KINDS.includes(k));

// Keyed by the kind as written and by our Kind name (objects re-tagged with our Kind by the orchestrator source).
const BY_GVK = new Map<string, Kind>();
for (const s of Object.values(SCHEMAS))
  for (const av of s.apiVersions) {
    BY_GVK.set(`${av}|${s.objectKind}`, s.kind);
    BY_GVK.set(`${av}|${s.kind}`, s.kind);
  }

/** The kind as manifests write it (`Gateway` for KubernetesGateway). */
export function objectKindOf(kind: Kind): string {
  return SCHEMAS[kind].objectKind;
}

/** The Kind named by an apiVersion and kind as written in a manifest, or undefined when we do not serve it. */
export function kindOf(apiVersion: string, kind: string): Kind | undefined {
  return BY_GVK.get(`${apiVersion}|${kind}`);
}

export function isKind(kind: string): kind is Kind {
  return Object.prototype.hasOwnProperty.call(SCHEMAS, kind);
}

/** `virtualservices` for VirtualService. */
export function pluralOf(kind: Kind): string {
  return SCHEMAS[kind].plural;
}

/** The Kind whose plural resource name is given, if any. */
export function kindOfPlural(plural: string): Kind | undefined {
  return ALL_KINDS.find((k) => SCHEMAS[k].plural === plural);
}

export function isClusterScoped(kind: Kind): boolean {
  return SCHEMAS[kind].clusterScoped;
}

/** The apiVersion we write for a kind (ours). */
export function preferredApiVersion(kind: Kind): string {
  return SCHEMAS[kind].apiVersions[0]!;
}
