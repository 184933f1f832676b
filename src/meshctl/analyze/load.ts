// Files into analysis resources (Istio's file.KubeSource for analyze): mesh kinds through the config
// model, the orchestrator objects the analyzers read kept as written, other kinds skipped; a kind or
// version unknown in one of mesh's API groups is a parse error, not foreign YAML to skip.
import { convertObject } from '../../config/parse';
import { isClusterScoped, kindOf, MESH_KINDS, SCHEMAS } from '../../config/schemas';
import { isObject } from '../../config/values';
import { readObjects, type SourceObject } from '../documents';
import type { AnalysisMeshConfig, Resource } from './model';

/** Orchestrator kinds the analyzers read from files (apiVersion → kind → cluster-scoped). */
const ORCH_KINDS: Readonly<Record<string, Readonly<Record<string, boolean>>>> = {
  v1: { Namespace: true, Service: false, Pod: false, Secret: false, ConfigMap: false },
  'apps/v1': { Deployment: false },
  'discovery.k8s.io/v1': { EndpointSlice: false },
  'admissionregistration.k8s.io/v1': { MutatingWebhookConfiguration: true, ValidatingWebhookConfiguration: true },
};

/** Namespaces injection ignores; their resources are not analyzed (inject.IgnoredNamespaces). */
const IGNORED_NAMESPACES = new Set(['kube-system', 'kube-public', 'kube-node-lease', 'local-path-storage']);

const MESH_GROUPS: ReadonlySet<string> = new Set(
  Object.values(SCHEMAS).flatMap((s) => s.apiVersions.filter((av) => av.includes('/')).map((av) => av.slice(0, av.indexOf('/')))),
);

export interface LoadResult {
  resources: Resource[];
  /** One line per document that could not be read, naming the file and document. */
  errors: string[];
  /** Documents of kinds no analyzer reads (reported with --verbose). */
  skipped: string[];
}

function strMap(v: unknown): Record<string, string> {
  if (!isObject(v)) return {};
  return Object.fromEntries(Object.entries(v).filter(([, x]) => typeof x === 'string')) as Record<string, string>;
}

function toResource(so: SourceObject, defaultNamespace: string, out: LoadResult): void {
  const o = so.value;
  const where = `${so.source}${so.document}`;
  const apiVersion = typeof o.apiVersion === 'string' ? o.apiVersion : '';
  const kind = typeof o.kind === 'string' ? o.kind : '';
  if (!apiVersion || !kind) {
    out.errors.push(`error processing ${where} (line ${so.line}): unable to parse resource with no group, version and kind`);
    return;
  }
  const m = isObject(o.metadata) ? o.metadata : {};
  const origin = { file: so.source, line: so.line, lineOf: so.lineOf };
  const meshKind = kindOf(apiVersion, kind);
  if (meshKind && MESH_KINDS.includes(meshKind)) {
    const withNs = !isClusterScoped(meshKind) && !m.namespace ? { ...o, metadata: { ...m, namespace: defaultNamespace } } : o;
    const conv = convertObject(withNs, { source: so.source, document: so.document, line: so.line });
    if (!conv.config) {
      for (const e of conv.errors) out.errors.push(`error processing ${where} (line ${so.line}): ${e.field ? `${e.field}: ` : ''}${e.message}`);
      return;
    }
    const c = conv.config;
    out.resources.push({ kind: meshKind, name: c.meta.name, namespace: c.meta.namespace, labels: c.meta.labels, annotations: c.meta.annotations, object: o, config: c, origin });
    return;
  }
  const clusterScoped = ORCH_KINDS[apiVersion]?.[kind];
  if (clusterScoped === undefined) {
    const group = apiVersion.includes('/') ? apiVersion.slice(0, apiVersion.indexOf('/')) : '';
    const version = apiVersion.slice(apiVersion.indexOf('/') + 1);
    if (MESH_GROUPS.has(group)) out.errors.push(`error processing ${where} (line ${so.line}): failed finding schema for group/version/kind: ${group}/${version}/${kind}`);
    else out.skipped.push(`${where}: ${apiVersion} ${kind}`);
    return;
  }
  const name = typeof m.name === 'string' ? m.name : '';
  if (!name) {
    out.errors.push(`error processing ${where} (line ${so.line}): metadata.name: name is required`);
    return;
  }
  const namespace = clusterScoped ? '' : typeof m.namespace === 'string' && m.namespace ? m.namespace : defaultNamespace;
  out.resources.push({ kind, name, namespace, labels: strMap(m.labels), annotations: strMap(m.annotations), object: o, origin });
}

/** Reads one file's resources. */
export function loadResources(text: string, file: string, defaultNamespace: string): LoadResult {
  const out: LoadResult = { resources: [], errors: [], skipped: [] };
  const read = readObjects(text, file);
  for (const e of read.errors) out.errors.push(`error processing ${e.source}${e.document} (line ${e.line}): ${e.message}`);
  for (const so of read.objects) toResource(so, defaultNamespace, out);
  out.resources = out.resources.filter((r) => !IGNORED_NAMESPACES.has(r.kind === 'Namespace' ? r.name : r.namespace));
  return out;
}

/** The stand-ins for files-only analysis: an ingress gateway pod and its Service in the system namespace. */
export function defaultResources(mesh: AnalysisMeshConfig, meshNamespace: string): Resource[] {
  if (mesh.ingressControllerMode === 'OFF') return [];
  const text = `apiVersion: v1
kind: Pod
metadata:
  labels:
    mesh: ingressgateway
  name: ${mesh.ingressService}-dummypod
  namespace: ${meshNamespace}
spec:
  containers:
    - name: mesh-proxy
      image: mesh/proxyv2
---
apiVersion: v1
kind: Service
metadata:
  name: ${mesh.ingressService}
  namespace: ${meshNamespace}
spec:
  ports:
  - name: http2
    nodePort: 31380
    port: 80
    protocol: TCP
    targetPort: 80
  - name: https
    nodePort: 31390
    port: 443
    protocol: TCP
    targetPort: 443
  - name: tcp
    nodePort: 31400
    port: 31400
    protocol: TCP
    targetPort: 31400
  - name: tls
    nodePort: 31447
    port: 15443
    protocol: TCP
    targetPort: 15443
  selector:
    mesh: ingressgateway
`;
  return loadResources(text, 'internal-ingress', meshNamespace).resources.map((r) => ({ ...r, synthetic: true }));
}

