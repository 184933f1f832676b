// The live cluster as analysis input (istioctl analyze's AddRunningKubeSourceWithRevision, Istio 1.26
// pkg/config/analysis/local/istiod_analyze.go): every analyzable kind listed once, cluster-wide (the
// namespace only filters messages, as in Istio: a VirtualService's host may live in another namespace),
// mesh kinds in our API groups and Istio's, those labelled for another revision left out
// (config.ObjectInRevision), Secrets without Helm releases and service-account tokens, ConfigMaps of the
// system namespace only, and the mesh configuration from its ConfigMap (`mesh`, `mesh-<rev>`).
// Differs on purpose: one LIST per collection instead of informers (meshctl reads once and exits), and a
// remote cluster's objects join the local ones where the local cluster has none of the same name
// (Istio keeps them in separate stores that only its multicluster analyzers read).
import type { OrchClient } from '../../config/orch/client';
import { collectionPath, SECRETS_FIELD_SELECTOR } from '../../config/orch/resources';
import { MESH_KINDS, SCHEMAS } from '../../config/schemas';
import type { AnalysisMeshConfig, Resource } from '../../analysis/model';
import { analyzedNamespace, ORCH_INPUTS, toResource } from '../../analysis/resource';
import { parseMeshConfig } from '../../analysis/run';
import { apiStatus } from '../orch';

/** Revision labels, ours first (Istio's accepted beside it). */
const REV_LABELS = ['mesh.io/rev', 'istio.io/rev'];

/** config.RevisionMatch: unlabelled objects belong to every revision; `default` = no revision asked. */
export function inRevision(labels: Readonly<Record<string, string>> | undefined, revision: string): boolean {
  const own = REV_LABELS.map((l) => labels?.[l]).find((v) => v !== undefined && v !== '');
  if (!own) return true;
  if (revision === '' || revision === 'default') return own === 'default' || revision === '';
  return own === revision;
}

/** The mesh ConfigMap's name for a revision (istio, istio-<rev> in Istio). */
export function meshConfigMapName(revision: string): string {
  return revision === '' || revision === 'default' ? 'mesh' : `mesh-${revision}`;
}

export interface LiveCluster {
  resources: Resource[];
  /** From the mesh ConfigMap; undefined when there is none (analysis then uses the defaults). */
  mesh?: AnalysisMeshConfig;
  /** Collections the server does not serve (a CRD not installed), for --verbose. */
  missing: string[];
}

interface Collection {
  kind: string;
  apiVersion: string;
  path: string;
  query?: Record<string, string>;
  mesh: boolean;
}

/** What to list, given the group/versions the server serves (from /api and /apis). */
export function collections(served: ReadonlySet<string>, meshNamespace: string): Collection[] {
  const out: Collection[] = [];
  for (const i of ORCH_INPUTS) {
    const [group, version] = i.apiVersion.includes('/') ? i.apiVersion.split('/') : ['', i.apiVersion];
    // Istio watches only the mesh's own ConfigMaps (isIstioConfigMap in the system namespace).
    const ns = i.kind === 'ConfigMap' ? meshNamespace : undefined;
    const query = i.kind === 'Secret' ? { fieldSelector: SECRETS_FIELD_SELECTOR } : undefined;
    out.push({ kind: i.kind, apiVersion: i.apiVersion, path: collectionPath(group!, version!, i.plural, ns), query, mesh: false });
  }
  for (const kind of MESH_KINDS) {
    const s = SCHEMAS[kind];
    for (const gv of s.watch) {
      // The newest version of the group this kind has that the server serves.
      const version = s.apiVersions
        .filter((av) => av.startsWith(`${gv.group}/`))
        .map((av) => av.slice(gv.group.length + 1))
        .find((v) => served.has(`${gv.group}/${v}`));
      if (!version) continue;
      out.push({ kind, apiVersion: `${gv.group}/${version}`, path: collectionPath(gv.group, version, s.plural), mesh: true });
    }
  }
  return out;
}

async function servedGroupVersions(client: OrchClient): Promise<Set<string>> {
  const apis = (await client.getJson('/apis')) as { groups?: Array<{ versions?: Array<{ groupVersion: string }> }> };
  const out = new Set<string>(['v1']);
  for (const g of apis.groups ?? []) for (const v of g.versions ?? []) out.add(v.groupVersion);
  return out;
}

async function list(client: OrchClient, c: Collection): Promise<Array<Record<string, any>> | undefined> {
  try {
    const l = (await client.getJson(c.path, c.query)) as { items?: Array<Record<string, any>> };
    return l.items ?? [];
  } catch (e) {
    // A group/version listed by discovery whose resource this server lacks (an older CRD set).
    if (apiStatus(e) === 404) return undefined;
    throw e;
  }
}

/** Reads one cluster. `cluster` names it in resources' sources (`orchestrator:<cluster>`). */
export async function readCluster(client: OrchClient, o: { meshNamespace: string; revision: string; cluster: string }): Promise<LiveCluster> {
  const served = await servedGroupVersions(client);
  const wanted = collections(served, o.meshNamespace);
  const lists = await Promise.all(wanted.map((c) => list(client, c)));
  const resources: Resource[] = [];
  const missing: string[] = [];
  let meshText: string | undefined;
  const cmName = meshConfigMapName(o.revision);
  wanted.forEach((c, i) => {
    const items = lists[i];
    if (items === undefined) {
      missing.push(`${c.kind} (${c.apiVersion})`);
      return;
    }
    for (const item of items) {
      const labels = item.metadata?.labels as Record<string, string> | undefined;
      if (c.mesh && !inRevision(labels, o.revision)) continue;
      if (item.metadata) delete item.metadata.managedFields;
      if (c.kind === 'ConfigMap' && item.metadata?.name === cmName && typeof item.data?.mesh === 'string') meshText = item.data.mesh;
      const conv = toResource({ ...item, apiVersion: c.apiVersion, kind: c.kind }, 'default', { source: `orchestrator:${o.cluster}` });
      if ('resource' in conv && analyzedNamespace(conv.resource)) resources.push(conv.resource);
    }
  });
  let mesh: AnalysisMeshConfig | undefined;
  if (meshText !== undefined) {
    try {
      mesh = parseMeshConfig(meshText);
    } catch {
      // Istio logs and analyzes with the defaults; so do we (the ConfigMap's own analyzers report it).
    }
  }
  return { resources, mesh, missing };
}

/** Remote clusters' objects join where the local cluster has none of the same kind, namespace and name. */
export function mergeRemote(local: readonly Resource[], remote: readonly Resource[]): Resource[] {
  const key = (r: Resource) => `${r.kind}/${r.namespace}/${r.name}`;
  const seen = new Set(local.map(key));
  return [...local, ...remote.filter((r) => !seen.has(key(r)))];
}
