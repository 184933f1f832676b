// What a sidecar may see (Istio model.SidecarScope): the Sidecar resource selected for the workload
// (its workloadSelector in the workload's namespace, else the namespace-wide one, else the root
// namespace's), and through its egress hosts `namespace/dnsName` the services and VirtualServices
// visible to it. Without a Sidecar everything exported to the namespace is visible.
import type { Config, IstioEgressListener, Port } from '../../config/types';
import { hostMatches } from '../host';
import { isEmptySelector, selectorMatches } from '../labels';
import type { Service } from '../model';
import { inSelectionOrder, MESH_GATEWAY, type VirtualServiceEntry } from './virtualservice';
import { isExportedTo } from './visibility';

export interface EgressHost {
  /** `*` any namespace, `~` none, or a namespace name (`.` already resolved). */
  namespace: string;
  host: string;
}

export interface EgressListenerScope {
  port?: Port;
  bind?: string;
  hosts: EgressHost[];
  services: Service[];
  virtualServices: VirtualServiceEntry[];
}

export interface SidecarScope {
  /** `namespace/name` of the Sidecar resource used, or undefined for the default scope. */
  name?: string;
  namespace: string;
  sidecar?: Config<'Sidecar'>;
  egressListeners: EgressListenerScope[];
  /** Union of the services of all egress listeners, in registry order. */
  services: Service[];
  /** VirtualServices bound to `mesh` visible to this scope. */
  virtualServices: VirtualServiceEntry[];
  outboundTrafficPolicy: 'ALLOW_ANY' | 'REGISTRY_ONLY';
  servicesByHost: ReadonlyMap<string, Service>;
}

export function parseEgressHost(h: string, proxyNamespace: string): EgressHost {
  const i = h.indexOf('/');
  if (i < 0) return { namespace: '*', host: h };
  const ns = h.slice(0, i);
  return { namespace: ns === '.' ? proxyNamespace : ns, host: h.slice(i + 1) };
}

function egressAllows(hosts: readonly EgressHost[], namespace: string, hostnames: readonly string[]): boolean {
  for (const e of hosts) {
    if (e.namespace === '~') continue;
    if (e.namespace !== '*' && e.namespace !== namespace) continue;
    if (e.host === '*' || hostnames.some((h) => hostMatches(h, e.host))) return true;
  }
  return false;
}

/** Sidecar's selector field is `labels` (Istio's networking WorkloadSelector); accept `matchLabels` too. */
function selectorOf(s: Config<'Sidecar'>): Readonly<Record<string, string>> | undefined {
  return s.spec.workloadSelector?.labels ?? s.spec.workloadSelector?.matchLabels;
}

/**
 * The Sidecar that applies to a workload (oldest wins among equals, like Istio): one selecting the workload in
 * its namespace, else the namespace's selector-less one, else the root namespace's selector-less one.
 * `sidecars` must be sorted oldest first (PushContext keeps them so).
 */
export function selectSidecar(
  sidecars: readonly Config<'Sidecar'>[],
  namespace: string,
  labels: Readonly<Record<string, string>>,
  rootNamespace: string,
): Config<'Sidecar'> | undefined {
  let nsWide: Config<'Sidecar'> | undefined;
  let rootWide: Config<'Sidecar'> | undefined;
  for (const s of sidecars) {
    const sel = selectorOf(s);
    if (s.meta.namespace === namespace) {
      if (isEmptySelector(sel)) nsWide ??= s;
      else if (selectorMatches(sel, labels)) return s;
    } else if (s.meta.namespace === rootNamespace && isEmptySelector(sel)) {
      rootWide ??= s;
    }
  }
  return nsWide ?? rootWide;
}

export function buildSidecarScope(
  namespace: string,
  sidecar: Config<'Sidecar'> | undefined,
  services: readonly Service[],
  meshVirtualServices: readonly VirtualServiceEntry[],
  defaultOutboundPolicy: 'ALLOW_ANY' | 'REGISTRY_ONLY',
): SidecarScope {
  const exportedServices = services.filter((s) => isExportedTo(s.exportTo, s.namespace, namespace));
  const exportedVs = meshVirtualServices.filter((v) => isExportedTo(v.exportTo, v.namespace, namespace));
  const egress: IstioEgressListener[] = sidecar?.spec.egress && sidecar.spec.egress.length > 0 ? sidecar.spec.egress : [{ hosts: ['*/*'] }];
  const listeners: EgressListenerScope[] = egress.map((e) => {
    const hosts = e.hosts.map((h) => parseEgressHost(h, namespace));
    return {
      ...(e.port ? { port: e.port } : {}),
      ...(e.bind ? { bind: e.bind } : {}),
      hosts,
      services: exportedServices.filter(
        (s) => egressAllows(hosts, s.namespace, [s.hostname]) && (!e.port || s.ports.some((p) => p.port === e.port!.number)),
      ),
      virtualServices: [],
    };
  });
  const seen = new Set<string>();
  const all: Service[] = [];
  const byHost = new Map<string, Service>();
  for (const l of listeners) {
    for (const s of l.services) {
      const k = `${s.namespace}/${s.hostname}`;
      if (seen.has(k)) continue;
      seen.add(k);
      all.push(s);
      // one service per hostname: the proxy's own namespace wins, else the oldest (services are age-ordered)
      const prev = byHost.get(s.hostname);
      if (!prev || (s.namespace === namespace && prev.namespace !== namespace)) byHost.set(s.hostname, s);
    }
  }
  const scope: SidecarScope = {
    ...(sidecar ? { name: `${sidecar.meta.namespace}/${sidecar.meta.name}`, sidecar } : {}),
    namespace,
    egressListeners: listeners,
    services: all,
    virtualServices: [],
    outboundTrafficPolicy: sidecar?.spec.outboundTrafficPolicy?.mode ?? defaultOutboundPolicy,
    servicesByHost: byHost,
  };
  return withVirtualServices(scope, meshVirtualServices);
}

/**
 * `scope` with the mesh-bound VirtualServices it sees taken from `meshVirtualServices` (its services, which no
 * VirtualService changes, kept): what buildSidecarScope gives for them, at the cost of the VirtualServices alone.
 * After an edit of VirtualServices only, a push context re-scopes its predecessor's scopes so.
 */
export function withVirtualServices(scope: SidecarScope, meshVirtualServices: readonly VirtualServiceEntry[]): SidecarScope {
  const exportedVs = inSelectionOrder(
    meshVirtualServices.filter((v) => isExportedTo(v.exportTo, v.namespace, scope.namespace)),
    scope.namespace,
  );
  const listeners = scope.egressListeners.map((l) => ({
    ...l,
    virtualServices: exportedVs.filter((v) => egressAllows(l.hosts, v.namespace, v.hosts)),
  }));
  const vsSeen = new Set<string>();
  const vs: VirtualServiceEntry[] = [];
  for (const l of listeners) {
    for (const v of l.virtualServices) {
      const k = `${v.namespace}/${v.name}`;
      if (vsSeen.has(k)) continue;
      vsSeen.add(k);
      vs.push(v);
    }
  }
  return { ...scope, egressListeners: listeners, virtualServices: vs };
}

export { MESH_GATEWAY };
