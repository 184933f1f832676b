// VirtualService analyzers (Istio's analyzers/virtualservice): conflicting mesh hosts, destination
// hosts and ports, subsets, gateways, and JWT claim routes without a RequestAuthentication.
import { hostMatches } from '../../config/validate/hosts';
import { toRoutingClaim } from '../../config/validate/claims';
import { MESSAGES } from '../messages';
import { type AnalysisContext, type Analyzer, fullName, type Resource, specOf } from '../model';
import {
  destinationHost,
  EXPORT_ALL,
  EXPORT_LOCAL,
  joinFullNames,
  lineOf,
  MESH_GATEWAY,
  resourceNameFromHost,
  scopedFqdn,
  type ServiceLike,
  serviceEntryHostMap,
  setMatches,
  shortOrFull,
  splitScoped,
} from '../util';

interface Destination {
  host?: string;
  subset?: string;
  port?: { number?: number };
}

/** A destination and where it sits (AnnotatedDestination). */
export interface AnnotatedDestination {
  rule: 'http' | 'tcp' | 'tls' | 'http.mirror' | 'http.mirrors';
  service: number;
  destination: number;
  d: Destination;
}

export function routeDestinations(vs: Record<string, any>): AnnotatedDestination[] {
  const out: AnnotatedDestination[] = [];
  for (const rule of ['tcp', 'tls', 'http'] as const)
    (vs[rule] ?? []).forEach((r: { route?: Array<{ destination?: Destination }> }, i: number) =>
      (r.route ?? []).forEach((rd, j) => out.push({ rule, service: i, destination: j, d: rd.destination ?? {} })),
    );
  return out;
}

export function mirrorDestinations(vs: Record<string, any>): AnnotatedDestination[] {
  const out: AnnotatedDestination[] = [];
  (vs.http ?? []).forEach((r: { mirror?: Destination; mirrors?: Array<{ destination?: Destination }> }, i: number) => {
    if (r.mirror) out.push({ rule: 'http.mirror', service: i, destination: 0, d: r.mirror });
    (r.mirrors ?? []).forEach((m, j) => out.push({ rule: 'http.mirrors', service: i, destination: j, d: m.destination ?? {} }));
  });
  return out;
}

/** The field a destination message points at (util.DestinationHost / MirrorHost / MirrorsHost). */
function destinationLine(r: Resource, d: AnnotatedDestination): number | undefined {
  if (d.rule === 'http.mirror') return lineOf(r, ['spec', 'http', d.service, 'mirror', 'host']);
  if (d.rule === 'http.mirrors') return lineOf(r, ['spec', 'http', d.service, 'mirrors', d.destination, 'host']);
  return lineOf(r, ['spec', d.rule, d.service, 'route', d.destination, 'destination', 'host']);
}

export const conflictingMeshGatewayHosts: Analyzer = {
  name: 'virtualservice.ConflictingMeshGatewayHostsAnalyzer',
  description: 'Checks if multiple virtual services associated with the mesh gateway have conflicting hosts',
  inputs: ['VirtualService'],
  analyze(ctx) {
    const hosts = new Map<string, Resource[]>();
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      const gateways: string[] = vs.gateways ?? [];
      if (gateways.length > 0 && !gateways.includes(MESH_GATEWAY)) continue;
      const exportTo: string[] = vs.exportTo ?? [];
      const scopes =
        exportTo.length === 0 || exportTo.includes(EXPORT_ALL)
          ? [EXPORT_ALL]
          : [...new Set(exportTo.map((e) => (e === EXPORT_LOCAL ? r.namespace : e)))];
      for (const scope of scopes)
        for (const h of vs.hosts ?? []) {
          const k = scopedFqdn(scope, r.namespace, h);
          hosts.set(k, [...(hosts.get(k) ?? []), r]);
        }
    }
    const reported = new Set<string>();
    for (const [scoped, list] of hosts) {
      const [scope, host] = splitScoped(scoped);
      let vsList = list;
      if (scope !== EXPORT_ALL) {
        // VirtualServices exported everywhere whose host overlaps also conflict.
        for (const [other, rs] of hosts) {
          const [os, oh] = splitScoped(other);
          if (os === EXPORT_ALL && hostMatches(host, oh)) vsList = [...vsList, ...rs];
        }
      }
      if (vsList.length <= 1) continue;
      const names = joinFullNames(vsList);
      for (const r of vsList) {
        if (reported.has(fullName(r))) continue;
        reported.add(fullName(r));
        ctx.report(MESSAGES.ConflictingMeshGatewayVirtualServiceHosts, r, [names, scoped], lineOf(r, ['metadata', 'name']));
      }
    }
  },
};

function checkServiceEntryPorts(ctx: AnalysisContext, r: Resource, d: AnnotatedDestination, s: ServiceLike): void {
  const line = destinationLine(r, d);
  if (d.d.port === undefined) {
    if (s.ports.length > 1)
      ctx.report(MESSAGES.VirtualServiceDestinationPortSelectorRequired, r, [d.d.host ?? '', s.ports.map((p) => p.number)], line);
    return;
  }
  if (!s.ports.some((p) => p.number === (d.d.port?.number ?? 0)))
    ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['host:port', `${d.d.host ?? ''}:${d.d.port?.number ?? 0}`], line);
}

export const destinationHosts: Analyzer = {
  name: 'virtualservice.DestinationHostAnalyzer',
  description: 'Checks the destination hosts associated with each virtual service',
  inputs: ['ServiceEntry', 'VirtualService', 'Service'],
  analyze(ctx) {
    const seHosts = serviceEntryHostMap(ctx);
    // VirtualService → the subset destinations routing to one of its own hosts.
    const subsetDestinations = new Map<Resource, Destination[]>();
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      for (const h of vs.http ?? [])
        for (const rd of h.route ?? []) {
          const d: Destination = rd.destination ?? {};
          if (d.subset && (vs.hosts ?? []).includes(d.host)) subsetDestinations.set(r, [...(subsetDestinations.get(r) ?? []), d]);
        }
    }
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      for (const d of routeDestinations(vs)) {
        const s = destinationHost(r.namespace, vs.exportTo, d.d.host ?? '', seHosts);
        if (!s) ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['host', d.d.host ?? ''], destinationLine(r, d));
        else checkServiceEntryPorts(ctx, r, d, s);
      }
      for (const d of mirrorDestinations(vs)) {
        const s = destinationHost(r.namespace, vs.exportTo, d.d.host ?? '', seHosts);
        if (!s) ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['mirror host', d.d.host ?? ''], destinationLine(r, d));
        else checkServiceEntryPorts(ctx, r, d, s);
      }
      // Ingress routes without a subset to a host another VirtualService splits by subset.
      if ((vs.gateways ?? []).length === 0) continue;
      (vs.http ?? []).forEach((h: { route?: Array<{ destination?: Destination }> }, i: number) =>
        (h.route ?? []).forEach((rd, j) => {
          if (rd.destination?.subset) return;
          for (const [other, dests] of subsetDestinations)
            for (const d of dests)
              if (d.host === rd.destination?.host)
                ctx.report(
                  MESSAGES.IngressRouteRulesNotAffected,
                  r,
                  [fullName(other), fullName(r)],
                  lineOf(r, ['spec', 'http', i, 'route', j, 'destination', 'host']),
                );
        }),
      );
    }
  },
};

export const destinationRules: Analyzer = {
  name: 'virtualservice.DestinationRuleAnalyzer',
  description: 'Checks the destination rules associated with each virtual service',
  inputs: ['VirtualService', 'DestinationRule'],
  analyze(ctx) {
    const subsets = new Set<string>();
    for (const r of ctx.list('DestinationRule')) {
      const dr = specOf(r);
      for (const ss of dr.subsets ?? []) subsets.add(`${resourceNameFromHost(r.namespace, dr.host ?? '')}+${ss.name ?? ''}`);
    }
    const ok = (ns: string, d: Destination): boolean => !d.subset || subsets.has(`${resourceNameFromHost(ns, d.host ?? '')}+${d.subset}`);
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      for (const d of routeDestinations(vs))
        if (!ok(r.namespace, d.d))
          ctx.report(
            MESSAGES.ReferencedResourceNotFound,
            r,
            ['host+subset in destinationrule', `${d.d.host ?? ''}+${d.d.subset}`],
            destinationLine(r, d),
          );
      for (const d of mirrorDestinations(vs))
        if (!ok(r.namespace, d.d))
          ctx.report(
            MESSAGES.ReferencedResourceNotFound,
            r,
            ['mirror+subset in destinationrule', `${d.d.host ?? ''}+${d.d.subset}`],
            destinationLine(r, d),
          );
    }
  },
};

/** Gateway hosts as a VirtualService in `vsNs` sees them (sanitizeServerHostNamespace + host.NamesForNamespace). */
function gatewayHostsFor(gw: Resource, vsNs: string): string[] {
  const out: string[] = [];
  for (const server of specOf(gw).servers ?? []) {
    let hosts: string[] = [...(server.hosts ?? [])];
    for (let i = 0; i < hosts.length; i++) {
      const h = hosts[i]!;
      if (!h.includes('/')) continue;
      const [ns, rest] = [h.slice(0, h.indexOf('/')), h.slice(h.indexOf('/') + 1)];
      if (ns === '.') hosts[i] = `${gw.namespace}/${rest}`;
      else if (ns === '*') {
        if (rest === '*') {
          hosts = ['*'];
          break;
        }
        hosts[i] = rest;
      }
    }
    out.push(...hosts);
  }
  return out.flatMap((h) => {
    const i = h.indexOf('/');
    if (i < 0) return [h];
    const ns = h.slice(0, i);
    return ns === vsNs || ns === '*' ? [h.slice(i + 1)] : [];
  });
}

/** Istio's gateway.IsInternalGatewayReference: names generated for Kubernetes Gateways (`-mesh-autogenerated-k8s-gateway-`). */
function isInternalGatewayReference(name: string): boolean {
  const n = name.includes('/') ? name.slice(name.indexOf('/') + 1) : name;
  return n.includes('-mesh-autogenerated-k8s-gateway-');
}

export const gateways: Analyzer = {
  name: 'virtualservice.GatewayAnalyzer',
  description: 'Checks the gateways associated with each virtual service',
  inputs: ['Gateway', 'VirtualService'],
  analyze(ctx) {
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      (vs.gateways ?? []).forEach((gwName: string, i: number) => {
        if (gwName === MESH_GATEWAY) return;
        const line = lineOf(r, ['spec', 'gateways', i]);
        if (isInternalGatewayReference(gwName)) {
          ctx.report(MESSAGES.ReferencedInternalGateway, r, [fullName(r), gwName], line);
          return;
        }
        const ref = shortOrFull(r.namespace, gwName);
        const gw = ctx.find('Gateway', ref.namespace, ref.name);
        if (!gw) ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['gateway', gwName], line);
        const gwHosts = gw ? gatewayHostsFor(gw, r.namespace) : [];
        const vsHosts: string[] = vs.hosts ?? [];
        if (!gwHosts.some((gh) => vsHosts.some((h) => hostMatches(gh, h))))
          ctx.report(MESSAGES.VirtualServiceHostNotFoundInGateway, r, [vsHosts, fullName(r), `${ref.namespace}/${ref.name}`], line);
      });
    }
  },
};

/** The first claim header key a VirtualService matches on (routeBasedOnJWTClaimKey). */
export function claimRouteKey(vs: Record<string, any>): string {
  for (const h of vs.http ?? [])
    for (const m of h.match ?? [])
      for (const k of [...Object.keys(m.headers ?? {}), ...Object.keys(m.withoutHeaders ?? {})]) if (toRoutingClaim(k).match) return k;
  return '';
}

export const jwtClaimRoute: Analyzer = {
  name: 'virtualservice.JWTClaimRouteAnalyzer',
  description: 'Checks the VirtualService using JWT claim based routing has corresponding RequestAuthentication',
  inputs: ['VirtualService', 'RequestAuthentication', 'Gateway', 'Pod'],
  analyze(ctx) {
    const raByNs = new Map<string, Array<Record<string, string>>>();
    for (const r of ctx.list('RequestAuthentication'))
      raByNs.set(r.namespace, [...(raByNs.get(r.namespace) ?? []), specOf(r).selector?.matchLabels ?? {}]);
    for (const r of ctx.list('VirtualService')) {
      const vs = specOf(r);
      const key = claimRouteKey(vs);
      if (!key) continue;
      for (const gwName of vs.gateways ?? []) {
        if (gwName === MESH_GATEWAY) continue;
        const ref = shortOrFull(r.namespace, gwName);
        const gw = ctx.find('Gateway', ref.namespace, ref.name);
        if (!gw) continue;
        const selector = specOf(gw).selector ?? {};
        for (const pod of ctx.list('Pod')) {
          if (!setMatches(selector, pod.labels)) continue;
          const selectors = [...(raByNs.get(ctx.meshNamespace) ?? []), ...(raByNs.get(pod.namespace) ?? [])];
          if (!selectors.some((s) => setMatches(s, pod.labels)))
            ctx.report(MESSAGES.JwtClaimBasedRoutingWithoutRequestAuthN, r, [key, `${ref.namespace}/${ref.name}`, pod.name]);
        }
      }
    }
  },
};
