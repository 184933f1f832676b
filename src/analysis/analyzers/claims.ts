// mesh's own analyzers (MESH01xx): claim routing mistakes that validation cannot see because they
// span resources, and DENY AuthorizationPolicies whose host list a port in the Host header slips past.
import { toRoutingClaim } from '../../config/validate/claims';
import { MESSAGES } from '../messages';
import { type AnalysisContext, type Analyzer, type Resource, specOf } from '../model';
import { lineOf, MESH_GATEWAY, selectorString, setMatches, shortOrFull } from '../util';

interface ClaimMatch {
  key: string;
  /** The claim path (`["iss"]`). */
  claims: string[];
  /** The StringMatch, for `headers` (not `withoutHeaders`). */
  value?: { exact?: string; prefix?: string; regex?: string };
  /** Gateways this match applies to (the match's own, else the VirtualService's, else `mesh`). */
  gateways: string[];
  line?: number;
}

function claimMatches(r: Resource): ClaimMatch[] {
  const vs = specOf(r);
  const vsGateways: string[] = (vs.gateways ?? []).length > 0 ? vs.gateways : [MESH_GATEWAY];
  const out: ClaimMatch[] = [];
  (vs.http ?? []).forEach((h: { match?: Array<Record<string, any>> }, i: number) =>
    (h.match ?? []).forEach((m, j) => {
      const gateways: string[] = (m.gateways ?? []).length > 0 ? m.gateways : vsGateways;
      for (const field of ['headers', 'withoutHeaders'] as const)
        for (const [key, sm] of Object.entries((m[field] ?? {}) as Record<string, { exact?: string; prefix?: string; regex?: string }>)) {
          const claim = toRoutingClaim(key);
          if (!claim.match) continue;
          const kind = ['exact', 'prefix', 'regex'].find((k) => (sm as Record<string, unknown>)[k] !== undefined);
          out.push({
            key,
            claims: claim.claims,
            value: field === 'headers' ? sm : undefined,
            gateways,
            line: lineOf(r, ['spec', 'http', i, 'match', j, field, key, ...(kind ? [kind] : [])]),
          });
        }
    }),
  );
  return out;
}

/** RequestAuthentications that select the workloads of a gateway with `selector` in `gwNs`. */
function requestAuthNsFor(ctx: AnalysisContext, selector: Readonly<Record<string, string>>, gwNs: string): Resource[] {
  const pods = ctx.list('Pod').filter((p) => setMatches(selector, p.labels));
  // Without pods in the input (gateways started outside a cluster), the gateway's own namespace and
  // its selector labels stand for the workload.
  const workloads = pods.length > 0 ? pods.map((p) => ({ ns: p.namespace, labels: p.labels })) : [{ ns: gwNs, labels: selector }];
  return ctx.list('RequestAuthentication').filter((ra) => {
    const s = specOf(ra);
    if (s.targetRef || (s.targetRefs ?? []).length > 0) return false;
    const sel: Record<string, string> = s.selector?.matchLabels ?? {};
    return workloads.some((w) => (ra.namespace === ctx.mesh.rootNamespace || ra.namespace === w.ns) && setMatches(sel, w.labels));
  });
}

export const claimRoutes: Analyzer = {
  name: 'mesh.ClaimRouteAnalyzer',
  description: 'Checks JWT claim routes: bound to gateways, validated there by a RequestAuthentication that lists the issuer they name',
  inputs: ['VirtualService', 'Gateway', 'RequestAuthentication', 'Pod'],
  analyze(ctx) {
    for (const r of ctx.list('VirtualService')) {
      const reported = new Set<string>();
      const once = (key: string, report: () => void): void => {
        if (reported.has(key)) return;
        reported.add(key);
        report();
      };
      for (const m of claimMatches(r)) {
        const gws = m.gateways.filter((g) => g !== MESH_GATEWAY);
        // A VirtualService bound to both `mesh` and gateways fails validation already (IST0106).
        if (gws.length === 0) once(`0101 ${m.key}`, () => ctx.report(MESSAGES.ClaimRouteWithoutGateway, r, [m.key], m.line));
        for (const g of gws) {
          const ref = shortOrFull(r.namespace, g);
          const gw = ctx.find('Gateway', ref.namespace, ref.name);
          if (!gw) continue; // IST0101 says so
          const selector: Record<string, string> = specOf(gw).selector ?? {};
          const ras = requestAuthNsFor(ctx, selector, gw.namespace);
          const gwName = `${ref.namespace}/${ref.name}`;
          if (ras.length === 0) {
            // With pods for the gateway, Istio's IST0149 reports this per pod.
            if (!ctx.list('Pod').some((p) => setMatches(selector, p.labels)))
              once(`0102 ${m.key} ${gwName}`, () =>
                ctx.report(MESSAGES.ClaimRouteGatewayWithoutRequestAuthN, r, [m.key, gwName, selectorString(selector)], m.line),
              );
            continue;
          }
          if (m.claims.length !== 1 || m.claims[0] !== 'iss' || !m.value) continue;
          const issuers = [...new Set(ras.flatMap((ra) => (specOf(ra).jwtRules ?? []).map((j: { issuer?: string }) => j.issuer ?? '')))].sort();
          const { exact, prefix } = m.value;
          const known = exact !== undefined ? issuers.includes(exact) : prefix !== undefined ? issuers.some((i) => i.startsWith(prefix)) : true;
          if (!known)
            once(`0103 ${m.key} ${gwName}`, () => ctx.report(MESSAGES.ClaimRouteUnknownIssuer, r, [exact ?? prefix ?? '', gwName, issuers], m.line));
        }
      }
    }
  },
};

export const denyHosts: Analyzer = {
  name: 'mesh.DenyHostPortAnalyzer',
  description: 'Checks that DENY AuthorizationPolicies matching hosts also match them with a port (host:*)',
  inputs: ['AuthorizationPolicy'],
  analyze(ctx) {
    for (const r of ctx.list('AuthorizationPolicy')) {
      const ap = specOf(r);
      if (ap.action !== 'DENY') continue;
      (ap.rules ?? []).forEach((rule: { to?: Array<{ operation?: { hosts?: string[] } }> }, i: number) =>
        (rule.to ?? []).forEach((to, j) => {
          const hosts = to.operation?.hosts ?? [];
          hosts.forEach((h, k) => {
            // A host with a port, or a prefix match (`foo*`), already covers the ported form.
            if (h.includes(':') || h.endsWith('*')) return;
            const ported = `${h}:*`;
            if (!hosts.includes(ported))
              ctx.report(MESSAGES.DenyHostWithoutPortVariant, r, [h, ported, h], lineOf(r, ['spec', 'rules', i, 'to', j, 'operation', 'hosts', k]));
          });
        }),
      );
    }
  },
};
