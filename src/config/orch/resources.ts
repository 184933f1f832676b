// What the orchestrator source lists and watches, as data: the registry collections (fixed
// group/version) and the mesh CRD groups (whose served versions are found by discovery). Pure.
import { MESH_KINDS, SCHEMAS } from '../schemas';
import type { Kind } from '../types';

/** A collection the registry reads; Node is watched for locality only (it is not a Kind). */
export interface RegistryResource {
  kind: Kind | 'Node';
  group: string;
  version: string;
  plural: string;
  clusterScoped: boolean;
  /** Istio's `type` label of pilot_k8s_reg_events for this collection. */
  metricType: string;
}

export const REGISTRY_RESOURCES: readonly RegistryResource[] = [
  { kind: 'Namespace', group: '', version: 'v1', plural: 'namespaces', clusterScoped: true, metricType: 'Namespaces' },
  { kind: 'Service', group: '', version: 'v1', plural: 'services', clusterScoped: false, metricType: 'Services' },
  { kind: 'EndpointSlice', group: 'discovery.k8s.io', version: 'v1', plural: 'endpointslices', clusterScoped: false, metricType: 'EndpointSlice' },
  { kind: 'Pod', group: '', version: 'v1', plural: 'pods', clusterScoped: false, metricType: 'Pods' },
  { kind: 'Node', group: '', version: 'v1', plural: 'nodes', clusterScoped: true, metricType: 'Nodes' },
  // gateway and DestinationRule credentials (Istio's credentials controller)
  { kind: 'Secret', group: '', version: 'v1', plural: 'secrets', clusterScoped: false, metricType: 'Secrets' },
];

/**
 * Istio's SecretsFieldSelector: Helm release records and service-account tokens are never credentials
 * and are the bulk of a cluster's Secrets.
 */
export const SECRETS_FIELD_SELECTOR = 'type!=helm.sh/release.v1,type!=kubernetes.io/service-account-token';

/** One API group of mesh CRDs: the versions we accept, newest first, and its kinds. */
export interface CrdGroup {
  group: string;
  versions: readonly string[];
  kinds: readonly Kind[];
}

/** Our groups and Istio's, ours first, from the accepted apiVersions of every mesh kind. */
export function crdGroups(): CrdGroup[] {
  const groups = new Map<string, { versions: string[]; kinds: Kind[] }>();
  for (const kind of MESH_KINDS) {
    for (const av of SCHEMAS[kind].apiVersions) {
      const slash = av.indexOf('/');
      if (slash < 0) continue;
      const group = av.slice(0, slash);
      const version = av.slice(slash + 1);
      const g = groups.get(group) ?? { versions: [], kinds: [] };
      if (!g.versions.includes(version)) g.versions.push(version);
      if (!g.kinds.includes(kind)) g.kinds.push(kind);
      groups.set(group, g);
    }
  }
  return [...groups].map(([group, g]) => ({ group, versions: g.versions, kinds: g.kinds }));
}

/**
 * Rank of an API group for a kind that exists in more than one (ours before Istio's): when the same
 * Kind/namespace/name is present in both, the lower rank is the one served.
 */
export function groupRank(kind: Kind, group: string): number {
  const i = SCHEMAS[kind].watch.findIndex((gv) => gv.group === group);
  return i < 0 ? Number.MAX_SAFE_INTEGER : i;
}

/** REST path of a collection, scoped to `namespace` for namespaced resources when given. */
export function collectionPath(group: string, version: string, plural: string, namespace?: string): string {
  const base = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  return namespace !== undefined ? `${base}/namespaces/${encodeURIComponent(namespace)}/${plural}` : `${base}/${plural}`;
}

/** Locality of a node from its topology labels (Istio's getPodLocality inputs). */
export interface NodeLocality {
  region: string;
  zone: string;
  subzone: string;
}

const REGION_LABELS = ['topology.kubernetes.io/region', 'failure-domain.beta.kubernetes.io/region'];
const ZONE_LABELS = ['topology.kubernetes.io/zone', 'failure-domain.beta.kubernetes.io/zone'];
const SUBZONE_LABELS = ['topology.mesh.io/subzone', 'topology.istio.io/subzone'];

export function nodeLocalityOf(labels: Readonly<Record<string, string>> | undefined): NodeLocality {
  const first = (keys: readonly string[]): string => {
    for (const k of keys) {
      const v = labels?.[k];
      if (v) return v;
    }
    return '';
  };
  return { region: first(REGION_LABELS), zone: first(ZONE_LABELS), subzone: first(SUBZONE_LABELS) };
}

/** `region/zone/subzone`, or '' when the node has no topology labels (Istio's locality string). */
export function localityString(l: NodeLocality | undefined): string {
  if (!l || (!l.region && !l.zone && !l.subzone)) return '';
  return `${l.region}/${l.zone}/${l.subzone}`;
}
