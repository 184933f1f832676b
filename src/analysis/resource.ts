// Objects into analysis resources, one conversion for files (`meshctl analyze`) and the cluster (the
// daemon's analysis controller): mesh kinds through the config model, the orchestrator objects the
// analyzers read kept as written, other kinds skipped; a kind or version unknown in one of mesh's API
// groups is an error, not foreign YAML to skip.
import { convertObject } from '../config/parse';
import { isClusterScoped, kindOf, MESH_KINDS, SCHEMAS } from '../config/schemas';
import { isObject } from '../config/values';
import type { Origin, Resource } from './model';

/** An orchestrator collection the analyzers read. */
export interface OrchInput {
  kind: string;
  apiVersion: string;
  plural: string;
  clusterScoped: boolean;
}

/** Orchestrator kinds the analyzers read (Istio's analyzer inputs outside its config groups). */
export const ORCH_INPUTS: readonly OrchInput[] = [
  { kind: 'Namespace', apiVersion: 'v1', plural: 'namespaces', clusterScoped: true },
  { kind: 'Service', apiVersion: 'v1', plural: 'services', clusterScoped: false },
  { kind: 'Pod', apiVersion: 'v1', plural: 'pods', clusterScoped: false },
  { kind: 'Secret', apiVersion: 'v1', plural: 'secrets', clusterScoped: false },
  { kind: 'ConfigMap', apiVersion: 'v1', plural: 'configmaps', clusterScoped: false },
  { kind: 'Deployment', apiVersion: 'apps/v1', plural: 'deployments', clusterScoped: false },
  { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', plural: 'endpointslices', clusterScoped: false },
  {
    kind: 'MutatingWebhookConfiguration',
    apiVersion: 'admissionregistration.k8s.io/v1',
    plural: 'mutatingwebhookconfigurations',
    clusterScoped: true,
  },
  {
    kind: 'ValidatingWebhookConfiguration',
    apiVersion: 'admissionregistration.k8s.io/v1',
    plural: 'validatingwebhookconfigurations',
    clusterScoped: true,
  },
];

const ORCH_KINDS: ReadonlyMap<string, OrchInput> = new Map(ORCH_INPUTS.map((i) => [`${i.apiVersion}|${i.kind}`, i]));

/** Namespaces injection ignores; their resources are not analyzed (inject.IgnoredNamespaces). */
const IGNORED_NAMESPACES = new Set(['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage']);

/** Whether analysis looks at `r` at all: not in a namespace injection ignores. */
export function analyzedNamespace(r: Pick<Resource, 'kind' | 'name' | 'namespace'>): boolean {
  return !IGNORED_NAMESPACES.has(r.kind === 'Namespace' ? r.name : r.namespace);
}

const MESH_GROUPS: ReadonlySet<string> = new Set(
  Object.values(SCHEMAS).flatMap((s) => s.apiVersions.filter((av) => av.includes('/')).map((av) => av.slice(0, av.indexOf('/')))),
);

function strMap(v: unknown): Record<string, string> {
  if (!isObject(v)) return {};
  return Object.fromEntries(Object.entries(v).filter(([, x]) => typeof x === 'string')) as Record<string, string>;
}

export type Converted = { resource: Resource } | { errors: string[] } | { skipped: string };

/**
 * One object as an analysis resource. `where` names it in errors (file and document, or the cluster);
 * objects without a namespace get `defaultNamespace`.
 */
export function toResource(
  o: Record<string, unknown>,
  defaultNamespace: string,
  where: { source: string; document?: string; line?: number; origin?: Origin },
): Converted {
  const apiVersion = typeof o.apiVersion === 'string' ? o.apiVersion : '';
  const kind = typeof o.kind === 'string' ? o.kind : '';
  if (!apiVersion || !kind) return { errors: ['unable to parse resource with no group, version and kind'] };
  const m = isObject(o.metadata) ? o.metadata : {};
  const origin = where.origin ? { origin: where.origin } : {};
  const meshKind = kindOf(apiVersion, kind);
  if (meshKind && MESH_KINDS.includes(meshKind)) {
    const withNs = !isClusterScoped(meshKind) && !m.namespace ? { ...o, metadata: { ...m, namespace: defaultNamespace } } : o;
    const conv = convertObject(withNs, {
      source: where.source,
      ...(where.document !== undefined ? { document: where.document } : {}),
      ...(where.line !== undefined ? { line: where.line } : {}),
    });
    if (!conv.config) return { errors: conv.errors.map((e) => `${e.field ? `${e.field}: ` : ''}${e.message}`) };
    const c = conv.config;
    return {
      resource: {
        kind: meshKind,
        name: c.meta.name,
        namespace: c.meta.namespace,
        labels: c.meta.labels,
        annotations: c.meta.annotations,
        object: o,
        config: c,
        ...origin,
      },
    };
  }
  const input = ORCH_KINDS.get(`${apiVersion}|${kind}`);
  if (!input) {
    const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
    const version = apiVersion.slice(apiVersion.indexOf('/') + 1);
    if (MESH_GROUPS.has(group)) return { errors: [`failed finding schema for group/version/kind: ${group}/${version}/${kind}`] };
    return { skipped: `${apiVersion} ${kind}` };
  }
  const name = typeof m.name === 'string' ? m.name : '';
  if (!name) return { errors: ['metadata.name: name is required'] };
  const namespace = input.clusterScoped ? '' : typeof m.namespace === 'string' && m.namespace ? m.namespace : defaultNamespace;
  return { resource: { kind, name, namespace, labels: strMap(m.labels), annotations: strMap(m.annotations), object: o, ...origin } };
}
