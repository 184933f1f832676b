// Files into analysis resources (Istio's file.KubeSource for analyze): each document converted by
// analysis/resource.ts, which the daemon's analysis controller shares.
import type { AnalysisMeshConfig, Resource } from '../../analysis/model';
import { analyzedNamespace, toResource } from '../../analysis/resource';
import { readObjects, type SourceObject } from '../documents';

export interface LoadResult {
  resources: Resource[];
  /** One line per document that could not be read, naming the file and document. */
  errors: string[];
  /** Documents of kinds no analyzer reads (reported with --verbose). */
  skipped: string[];
}

function addObject(so: SourceObject, defaultNamespace: string, out: LoadResult): void {
  const where = `${so.source}${so.document}`;
  const c = toResource(so.value, defaultNamespace, {
    source: so.source,
    document: so.document,
    line: so.line,
    origin: { file: so.source, line: so.line, lineOf: so.lineOf },
  });
  if ('resource' in c) out.resources.push(c.resource);
  else if ('skipped' in c) out.skipped.push(`${where}: ${c.skipped}`);
  else for (const e of c.errors) out.errors.push(`error processing ${where} (line ${so.line}): ${e}`);
}

/** Reads one file's resources. */
export function loadResources(text: string, file: string, defaultNamespace: string): LoadResult {
  const out: LoadResult = { resources: [], errors: [], skipped: [] };
  const read = readObjects(text, file);
  for (const e of read.errors) out.errors.push(`error processing ${e.source}${e.document} (line ${e.line}): ${e.message}`);
  for (const so of read.objects) addObject(so, defaultNamespace, out);
  out.resources = out.resources.filter(analyzedNamespace);
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
