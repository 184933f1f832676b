// What the plugin needs to know about a pod, read from its orchestrator object, and whether the pod is
// one whose traffic we capture (Istio's cni/pkg/plugin doAddRun and ExtractPodInfo). Pods injected by
// Istio's own injector (`istio-proxy`, `istio-init`, `sidecar.istio.io/*`, `traffic.sidecar.istio.io/*`)
// are read as well: where a pod carries both names, ours win.
import { goBool } from '../../lib/gostrconv';
import { INIT_CONTAINER, PROXY_CONTAINER } from '../../config/containers';

/** Istio's names for the same containers. */
const ISTIO_PROXY_CONTAINER = 'istio-proxy';
const ISTIO_INIT_CONTAINER = 'istio-init';

export const ANNOTATION = {
  inject: 'sidecar.mesh.io/inject',
  status: 'sidecar.mesh.io/status',
  interceptionMode: 'sidecar.mesh.io/interceptionMode',
  includeOutboundIPRanges: 'traffic.sidecar.mesh.io/includeOutboundIPRanges',
  excludeOutboundIPRanges: 'traffic.sidecar.mesh.io/excludeOutboundIPRanges',
  includeInboundPorts: 'traffic.sidecar.mesh.io/includeInboundPorts',
  excludeInboundPorts: 'traffic.sidecar.mesh.io/excludeInboundPorts',
  includeOutboundPorts: 'traffic.sidecar.mesh.io/includeOutboundPorts',
  excludeOutboundPorts: 'traffic.sidecar.mesh.io/excludeOutboundPorts',
  excludeInterfaces: 'traffic.sidecar.mesh.io/excludeInterfaces',
  kubevirtInterfaces: 'traffic.sidecar.mesh.io/kubevirtInterfaces',
  rerouteVirtualInterfaces: 'mesh.io/reroute-virtual-interfaces',
} as const;

/** The label form of the inject switch, which wins over the annotation. */
export const INJECT_LABEL = 'sidecar.mesh.io/inject';

/** Istio's spelling of one of our annotation or label keys. */
const istioKey = (key: string): string => key.replace(/(^|\.)mesh\.io\//, '$1istio.io/');

/** A map with each Istio-named key also under our name, unless our name is there already. */
function withMeshNames(m: Record<string, string>, keys: readonly string[]): Record<string, string> {
  const out = { ...m };
  for (const k of keys) {
    const istio = istioKey(k);
    if (!(k in out) && istio in m) out[k] = m[istio]!;
  }
  return out;
}

export interface PodInfo {
  containers: Set<string>;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  /** Second argument of `pilot-agent proxy <type>` in the proxy container: sidecar, router… */
  proxyType: string;
  proxyEnv: Record<string, string>;
  proxyUID?: number;
  proxyGID?: number;
}

interface Container {
  name?: unknown;
  env?: unknown;
  args?: unknown;
  securityContext?: { runAsUser?: unknown; runAsGroup?: unknown } | null;
}

const strMap = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
};

/** Reads a Pod object; init containers count too (the proxy may be a native sidecar). */
export function extractPodInfo(pod: unknown): PodInfo {
  const p = (pod ?? {}) as { metadata?: { labels?: unknown; annotations?: unknown }; spec?: { containers?: unknown; initContainers?: unknown } };
  const list = (v: unknown): Container[] => (Array.isArray(v) ? (v.filter((c) => c && typeof c === 'object') as Container[]) : []);
  const info: PodInfo = {
    containers: new Set(),
    labels: withMeshNames(strMap(p.metadata?.labels), [INJECT_LABEL]),
    annotations: withMeshNames(strMap(p.metadata?.annotations), Object.values(ANNOTATION)),
    proxyType: '',
    proxyEnv: {},
  };
  const all = [...list(p.spec?.initContainers), ...list(p.spec?.containers)];
  const names = new Set(all.map((c) => c.name));
  // Istio's proxy container stands for ours only in a pod that has no container of our name.
  const proxyName = names.has(PROXY_CONTAINER) || !names.has(ISTIO_PROXY_CONTAINER) ? PROXY_CONTAINER : ISTIO_PROXY_CONTAINER;
  for (const c of all) {
    if (typeof c.name !== 'string') continue;
    const name = c.name === proxyName ? PROXY_CONTAINER : c.name === ISTIO_INIT_CONTAINER ? INIT_CONTAINER : c.name;
    info.containers.add(name);
    if (c.name !== proxyName) continue;
    if (Array.isArray(c.env)) {
      for (const e of c.env as Array<{ name?: unknown; value?: unknown }>) {
        if (e && typeof e.name === 'string') info.proxyEnv[e.name] = typeof e.value === 'string' ? e.value : '';
      }
    }
    if (Array.isArray(c.args) && c.args.length >= 2 && c.args[0] === 'proxy' && typeof c.args[1] === 'string') info.proxyType = c.args[1];
    const sc = c.securityContext;
    if (sc && typeof sc === 'object') {
      if (typeof sc.runAsUser === 'number') info.proxyUID = sc.runAsUser;
      if (typeof sc.runAsGroup === 'number') info.proxyGID = sc.runAsGroup;
    }
  }
  return info;
}

/** Go strconv.ParseBool. */
/** Why a pod's traffic is left alone, or undefined when the sidecar's capture rules apply to it. */
export function skipReason(pi: PodInfo): string | undefined {
  if (pi.containers.has(INIT_CONTAINER)) return `already injected with the ${INIT_CONTAINER} init container`;
  const disabled = pi.proxyEnv['DISABLE_ENVOY'];
  if (disabled !== undefined && goBool(disabled) === true) return `DISABLE_ENVOY is set on ${PROXY_CONTAINER}`;
  if (!pi.containers.has(PROXY_CONTAINER)) return `it has no ${PROXY_CONTAINER} container (have ${[...pi.containers].sort().join(', ')})`;
  if (pi.proxyType !== '' && pi.proxyType !== 'sidecar') return `it has proxy type ${pi.proxyType}`;
  const inject = INJECT_LABEL in pi.labels ? pi.labels[INJECT_LABEL]! : (pi.annotations[ANNOTATION.inject] ?? '');
  if (inject !== '' && goBool(inject) === false) return 'injection is disabled for it (sidecar.mesh.io/inject)';
  if (!(ANNOTATION.status in pi.annotations)) return `it has no ${ANNOTATION.status} annotation`;
  return undefined;
}
