// What the plugin needs to know about a pod, read from its orchestrator object, and whether the pod is
// one whose traffic we capture (Istio's cni/pkg/plugin doAddRun and ExtractPodInfo).

export const PROXY_CONTAINER = 'mesh-proxy';
/** A pod with this init container programs its own rules (the mesh is installed without CNI there). */
export const INIT_CONTAINER = 'mesh-init';

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
    labels: strMap(p.metadata?.labels),
    annotations: strMap(p.metadata?.annotations),
    proxyType: '',
    proxyEnv: {},
  };
  for (const c of [...list(p.spec?.initContainers), ...list(p.spec?.containers)]) {
    if (typeof c.name !== 'string') continue;
    info.containers.add(c.name);
    if (c.name !== PROXY_CONTAINER) continue;
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
export function parseGoBool(v: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(v)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(v)) return false;
  return undefined;
}

/** Why a pod's traffic is left alone, or undefined when the sidecar's capture rules apply to it. */
export function skipReason(pi: PodInfo): string | undefined {
  if (pi.containers.has(INIT_CONTAINER)) return `already injected with the ${INIT_CONTAINER} init container`;
  const disabled = pi.proxyEnv['DISABLE_ENVOY'];
  if (disabled !== undefined && parseGoBool(disabled) === true) return `DISABLE_ENVOY is set on ${PROXY_CONTAINER}`;
  if (!pi.containers.has(PROXY_CONTAINER)) return `it has no ${PROXY_CONTAINER} container (have ${[...pi.containers].sort().join(', ')})`;
  if (pi.proxyType !== '' && pi.proxyType !== 'sidecar') return `it has proxy type ${pi.proxyType}`;
  const inject = INJECT_LABEL in pi.labels ? pi.labels[INJECT_LABEL]! : (pi.annotations[ANNOTATION.inject] ?? '');
  if (inject !== '' && parseGoBool(inject) === false) return 'injection is disabled for it (sidecar.mesh.io/inject)';
  if (!(ANNOTATION.status in pi.annotations)) return `it has no ${ANNOTATION.status} annotation`;
  return undefined;
}
