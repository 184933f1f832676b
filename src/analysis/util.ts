// Helpers the analyzers share, after Istio's pkg/config/analysis/analyzers/util: label selectors,
// host names scoped by exportTo, the host → ServiceEntry map (Services included), mesh membership.
import { labelSelectorMatches as selectorMatchesLabels, type LabelSelectorLike } from '../config/meshconfig';
import { isObject } from '../config/values';
import type { FieldPath } from './model';
import { type AnalysisContext, fullName, type Resource, specOf } from './model';

export const MESH_GATEWAY = 'mesh';
export const EXPORT_ALL = '*';
export const EXPORT_LOCAL = '.';
export const PROXY_CONTAINER = 'mesh-proxy';
export const INJECTION_LABEL = 'mesh-injection';
export const REVISION_LABEL = 'mesh.io/rev';
export const SIDECAR_INJECT = 'sidecar.mesh.io/inject';
export const DATAPLANE_MODE_LABEL = 'mesh.io/dataplane-mode';
export const AMBIENT_REDIRECTION = 'ambient.mesh.io/redirection';
export const INJECTOR_CONFIGMAP = 'mesh-sidecar-injector';
const CLUSTER_LOCAL = 'svc.cluster.local';

/** The line of `path` in `r`, when the field is a scalar written in a file (Istio's util.ErrorLine). */
export function lineOf(r: Resource, path: FieldPath): number | undefined {
  return r.origin?.lineOf(path);
}

// --- label selectors (k8s.io/apimachinery labels.SelectorFromSet)

/** `a=1,b=2`, keys sorted; '' for no labels. */
export function selectorString(set: Readonly<Record<string, string>> | undefined): string {
  return Object.keys(set ?? {})
    .sort()
    .map((k) => `${k}=${set![k]}`)
    .join(',');
}

/** Every pair of `set` is in `labels`; an empty set matches everything. */
export function setMatches(set: Readonly<Record<string, string>> | undefined, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(set ?? {})) if (labels[k] !== v) return false;
  return true;
}

/** util.ExtractLabelFromSelectorString: the first key of `a=1,b=2`. */
export function firstSelectorKey(s: string): string {
  const i = s.indexOf('=');
  return i < 0 ? '' : s.slice(0, i);
}

/** metav1.LabelSelectorAsSelector(...).Matches; an absent selector matches everything, a malformed one nothing. */
export function labelSelectorMatches(sel: unknown, labels: Readonly<Record<string, string>>): boolean {
  if (sel === undefined || sel === null) return true;
  if (!isObject(sel)) return false;
  return selectorMatchesLabels(sel as LabelSelectorLike, labels);
}

// --- host names

/** util.ConvertHostToFQDN: a short name is qualified with the namespace. */
function hostToFQDN(namespace: string, host: string): string {
  return !host.startsWith('*') && !host.includes('.') ? `${host}.${namespace}.${CLUSTER_LOCAL}` : host;
}

/** `scope/fqdn` (util.ScopedFqdn). */
export function scopedFqdn(scope: string, namespace: string, host: string): string {
  return `${scope}/${hostToFQDN(namespace, host)}`;
}

export function splitScoped(s: string): [string, string] {
  const i = s.indexOf('/');
  return [s.slice(0, i), s.slice(i + 1)];
}

/** util.GetResourceNameFromHost: `name.ns.svc.cluster.local` → ns/name; otherwise the host in `ns`. */
export function resourceNameFromHost(defaultNamespace: string, host: string): string {
  const m = /^(.+)\.(.+)\.svc\.cluster\.local$/.exec(host);
  return m ? `${m[2]}/${m[1]}` : `${defaultNamespace}/${host}`;
}

/** What a host resolves to for destination checks: a ServiceEntry's hosts and ports, or a Service's. */
export interface ServiceLike {
  ports: ReadonlyArray<{ number: number; name?: string; protocol?: string }>;
}

/** util.InitServiceEntryHostMap: scoped FQDN → the ServiceEntry (or Service) that defines it. */
export function serviceEntryHostMap(ctx: AnalysisContext): Map<string, ServiceLike> {
  const out = new Map<string, ServiceLike>();
  for (const r of ctx.list('ServiceEntry')) {
    const s = specOf(r);
    const se: ServiceLike = { ports: (s.ports ?? []).map((p: { number: number; name?: string; protocol?: string }) => p) };
    const exportTo: string[] = s.exportTo ?? [];
    let all = false;
    for (const h of s.hosts ?? []) {
      if (exportTo.length === 0 || all) {
        out.set(scopedFqdn(EXPORT_ALL, r.namespace, h), se);
        continue;
      }
      for (const ns of exportTo) {
        if (ns === EXPORT_ALL) {
          out.set(scopedFqdn(EXPORT_ALL, r.namespace, h), se);
          all = true;
        } else if (ns === EXPORT_LOCAL) out.set(scopedFqdn(r.namespace, r.namespace, h), se);
        else out.set(scopedFqdn(ns, r.namespace, h), se);
        if (all) break;
      }
    }
  }
  for (const r of ctx.list('Service')) {
    const s = specOf(r);
    const se: ServiceLike = {
      ports: (Array.isArray(s.ports) ? s.ports : []).filter(isObject).map((p: Record<string, unknown>) => ({
        number: Number(p.port),
        name: typeof p.name === 'string' ? p.name : '',
        protocol: typeof p.protocol === 'string' ? p.protocol : '',
      })),
    };
    const anno = r.annotations['networking.mesh.io/exportTo'] ?? '';
    const scopes = anno === '' ? [EXPORT_ALL] : anno.split(',').map((x) => (x.trim() === EXPORT_LOCAL ? r.namespace : x.trim()));
    for (const scope of scopes) out.set(scopedFqdn(scope, r.namespace, r.name), se);
  }
  return out;
}

/** util.GetDestinationHost: the ServiceEntry or Service a destination host names, as seen from `sourceNs`. */
export function destinationHost(
  sourceNs: string,
  exportTo: readonly string[] | undefined,
  host: string,
  hosts: ReadonlyMap<string, ServiceLike>,
): ServiceLike | undefined {
  const all = hosts.get(scopedFqdn(EXPORT_ALL, sourceNs, host));
  if (all) return all;
  if (!exportTo || exportTo.length === 0) {
    const s = hosts.get(scopedFqdn(sourceNs, sourceNs, host));
    if (s) return s;
  } else {
    for (const e of exportTo) {
      const s = hosts.get(scopedFqdn(e === EXPORT_LOCAL ? sourceNs : e, sourceNs, host));
      if (s) return s;
    }
  }
  for (const [key, s] of hosts) {
    const [scope, seHost] = splitScoped(key);
    if (!seHost.startsWith('*')) continue;
    if (scope !== EXPORT_ALL && scope !== sourceNs) continue;
    if (host.replace(/^\*/, '').endsWith(seHost.slice(1))) return s;
  }
  return undefined;
}

// --- mesh membership (util/in_mesh.go)

type Container = { name?: string; image?: string; securityContext?: { runAsUser?: number } };

export function containersOf(podSpec: Record<string, unknown>, withInit = true): Container[] {
  const c = Array.isArray(podSpec.containers) ? podSpec.containers : [];
  const i = withInit && Array.isArray(podSpec.initContainers) ? podSpec.initContainers : [];
  return [...c, ...i].filter(isObject) as Container[];
}

function hasProxy(containers: readonly Container[]): boolean {
  const proxy = containers.find((c) => c.name === PROXY_CONTAINER);
  return Boolean(proxy?.image);
}

function injectionStatus(m: Readonly<Record<string, string>> | undefined): boolean | undefined {
  const v = m?.[SIDECAR_INJECT];
  return v === undefined ? undefined : v === 'true';
}

function inMesh(
  annos: Readonly<Record<string, string>>,
  labels: Readonly<Record<string, string>>,
  namespace: string,
  containers: readonly Container[],
  ctx: AnalysisContext,
): boolean {
  if (hasProxy(containers)) return true;
  const fromLabels = injectionStatus(labels);
  if (fromLabels !== undefined) return fromLabels;
  const fromAnnos = injectionStatus(annos);
  if (fromAnnos !== undefined) return fromAnnos;
  const ns = ctx.find('Namespace', '', namespace);
  if (ns) return ns.labels[INJECTION_LABEL] === 'enabled';
  return false;
}

export function podInMesh(r: Resource, ctx: AnalysisContext): boolean {
  return inMesh(r.annotations, r.labels, r.namespace, containersOf(specOf(r)), ctx);
}

/** The pod template of a Deployment: labels, annotations, spec. */
export function podTemplate(r: Resource): { labels: Record<string, string>; annotations: Record<string, string>; spec: Record<string, unknown> } {
  const s = specOf(r);
  const t = isObject(s.template) ? s.template : {};
  const m = isObject(t.metadata) ? t.metadata : {};
  return {
    labels: (isObject(m.labels) ? m.labels : {}) as Record<string, string>,
    annotations: (isObject(m.annotations) ? m.annotations : {}) as Record<string, string>,
    spec: isObject(t.spec) ? t.spec : {},
  };
}

export function deploymentInMesh(r: Resource, ctx: AnalysisContext): boolean {
  const t = podTemplate(r);
  return inMesh(t.annotations, t.labels, r.namespace, containersOf(t.spec, false), ctx);
}

export function podInAmbient(r: Resource | undefined): boolean {
  return r?.annotations[AMBIENT_REDIRECTION] === 'enabled';
}

export function namespaceInAmbient(r: Resource | undefined): boolean {
  if (!r) return false;
  if (r.labels[INJECTION_LABEL] === 'enabled') return false;
  if (r.labels[REVISION_LABEL]) return false;
  return r.labels[DATAPLANE_MODE_LABEL] === 'ambient';
}

/** util.IsIstioControlPlane: labelled `mesh` or `release: mesh`. */
export function isControlPlane(r: Resource): boolean {
  return 'mesh' in r.labels || r.labels.release === 'mesh';
}

/** Sorted resource names (sidecar/telemetry getNames). */
export function names(rs: readonly Resource[]): string[] {
  return rs.map((r) => r.name).sort();
}

/** Sorted full names joined by commas. */
export function joinFullNames(rs: readonly Resource[]): string {
  return rs.map(fullName).sort().join(',');
}

/** resource.NewShortOrFullName: `ns/name` as given, or `name` in `defaultNs`. */
export function shortOrFull(defaultNs: string, name: string): { namespace: string; name: string } {
  const i = name.indexOf('/');
  return i >= 0 ? { namespace: name.slice(0, i), name: name.slice(i + 1) } : { namespace: defaultNs, name };
}
