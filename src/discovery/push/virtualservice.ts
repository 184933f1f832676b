// VirtualServices as the generators consume them: short hosts resolved to FQDNs in the
// VirtualService's namespace (Istio ResolveShortnameToFQDN), gateway references resolved to
// `namespace/name` keys, `mesh` kept as is (and implied when `gateways` is empty).
import { ROUTE_SEMANTICS_ANNOTATION } from '../../config/gateway-api/translate';
import type { Config, Destination, HTTPRoute, TCPRoute, TLSRoute, VirtualServiceSpec } from '../../config/types';
import { resolveShortName } from '../host';

export const MESH_GATEWAY = 'mesh';

export interface VirtualServiceEntry {
  config: Config<'VirtualService'>;
  name: string;
  namespace: string;
  /** Hosts with short names resolved. */
  hosts: string[];
  /** `mesh` and/or `namespace/name` of gateways. */
  gateways: string[];
  exportTo: readonly string[];
  /** The spec with every host (hosts, destinations, mirrors, match gateways) resolved. */
  spec: VirtualServiceSpec;
}

/** Istio UseGatewaySemantics: the VirtualService was translated from a Gateway API route. */
export function usesGatewaySemantics(v: VirtualServiceEntry): boolean {
  return v.config.meta.annotations[ROUTE_SEMANTICS_ANNOTATION] === 'gateway';
}

/**
 * Istio SelectVirtualServices (PILOT_UNIFIED_SIDECAR_SCOPE, the default) orders the mesh VirtualServices a proxy in
 * `namespace` sees: those private to its namespace, then those exported to it by name, then public ones; in each
 * group Gateway API routes of the proxy's own namespace (consumer routes) first; oldest first within. The first
 * VirtualService to name a host claims it, so a consumer's HTTPRoute wins over a public VirtualService.
 */
export function inSelectionOrder(vss: readonly VirtualServiceEntry[], namespace: string): VirtualServiceEntry[] {
  const group = (v: VirtualServiceEntry): number => {
    const e = v.exportTo;
    if (e.length === 0 || e.includes('*')) return 2;
    return v.namespace === namespace && (e.includes('.') || e.includes(namespace)) ? 0 : 1;
  };
  const rank = (v: VirtualServiceEntry): number => 2 * group(v) + (usesGatewaySemantics(v) && v.namespace === namespace ? 0 : 1);
  return vss
    .map((v, i) => ({ v, i, r: rank(v) }))
    .sort((a, b) => a.r - b.r || a.i - b.i)
    .map((x) => x.v);
}

/** `name` → `<vsNamespace>/name`; `ns/name` and `mesh` unchanged (Istio resolveGatewayName). */
export function resolveGatewayName(gw: string, vsNamespace: string): string {
  if (gw === MESH_GATEWAY) return gw;
  const i = gw.indexOf('/');
  if (i >= 0) return gw;
  // `name.namespace` is the legacy form Istio still accepts
  const dot = gw.indexOf('.');
  if (dot > 0) return `${gw.slice(dot + 1)}/${gw.slice(0, dot)}`;
  return `${vsNamespace}/${gw}`;
}

function resolveDestination(d: Destination, ns: string, domain: string): Destination {
  return { ...d, host: resolveShortName(d.host, ns, domain) };
}

function resolveHttp(r: HTTPRoute, ns: string, domain: string): HTTPRoute {
  return {
    ...r,
    ...(r.match ? { match: r.match.map((m) => (m.gateways ? { ...m, gateways: m.gateways.map((g) => resolveGatewayName(g, ns)) } : m)) } : {}),
    ...(r.route ? { route: r.route.map((d) => ({ ...d, destination: resolveDestination(d.destination, ns, domain) })) } : {}),
    ...(r.mirror ? { mirror: resolveDestination(r.mirror, ns, domain) } : {}),
    ...(r.mirrors ? { mirrors: r.mirrors.map((m) => ({ ...m, destination: resolveDestination(m.destination, ns, domain) })) } : {}),
  };
}

function resolveL4<T extends TCPRoute | TLSRoute>(r: T, ns: string, domain: string): T {
  return {
    ...r,
    ...(r.match ? { match: r.match.map((m) => (m.gateways ? { ...m, gateways: m.gateways.map((g) => resolveGatewayName(g, ns)) } : m)) } : {}),
    ...(r.route ? { route: r.route.map((d) => ({ ...d, destination: resolveDestination(d.destination, ns, domain) })) } : {}),
  };
}

export function resolveVirtualService(c: Config<'VirtualService'>, domain: string): VirtualServiceEntry {
  const ns = c.meta.namespace;
  const spec = c.spec;
  const gateways = spec.gateways && spec.gateways.length > 0 ? spec.gateways.map((g) => resolveGatewayName(g, ns)) : [MESH_GATEWAY];
  const hosts = spec.hosts.map((h) => resolveShortName(h, ns, domain));
  return {
    config: c,
    name: c.meta.name,
    namespace: ns,
    hosts,
    gateways: [...new Set(gateways)],
    exportTo: spec.exportTo ?? [],
    spec: {
      ...spec,
      hosts,
      gateways,
      ...(spec.http ? { http: spec.http.map((r) => resolveHttp(r, ns, domain)) } : {}),
      ...(spec.tcp ? { tcp: spec.tcp.map((r) => resolveL4(r, ns, domain)) } : {}),
      ...(spec.tls ? { tls: spec.tls.map((r) => resolveL4(r, ns, domain)) } : {}),
    },
  };
}
