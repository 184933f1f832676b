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

function schema(kind: Kind, plural: string, gvs: readonly GroupVersion[], clusterScoped = false): KindSchema {
  return { kind, plural, clusterScoped, apiVersions: gvs.map(apiVersionOf), watch: firstPerGroup(gvs) };
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
};

export const ALL_KINDS: readonly Kind[] = Object.keys(SCHEMAS) as Kind[];

/** The mesh configuration kinds (everything but the Kubernetes core/discovery objects). */
export const MESH_KINDS: readonly Kind[] = ALL_KINDS.filter((k) => SCHEMAS[k].watch[0]!.group.endsWith('.mesh.io'));

const BY_GVK = new Map<string, Kind>();
for (const s of Object.values(SCHEMAS)) for (const av of s.apiVersions) BY_GVK.set(`${av}|${s.kind}`, s.kind);

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
