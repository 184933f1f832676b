// Policy and configuration analyzers (Istio's analyzers/authz, destinationrule, serviceentry,
// sidecar, deprecation, envoyfilter, telemetry).
import { MESSAGES } from '../messages';
import { type Analyzer, type Resource, specOf } from '../model';
import { firstSelectorKey, lineOf, names, namespaceInAmbient, podInAmbient, podInMesh, selectorString, setMatches } from '../util';

/** namespaceMatch: `*`, `prefix*`, `*suffix` or an exact (case-insensitive) name. */
function namespaceMatch(ns: string, exp: string): boolean {
  if (exp === '*') return true;
  if (exp.startsWith('*')) return ns.endsWith(exp.slice(1));
  if (exp.endsWith('*')) return ns.startsWith(exp.slice(0, -1));
  return ns.toLowerCase() === exp.toLowerCase();
}

export const authorizationPolicies: Analyzer = {
  name: 'auth.AuthorizationPoliciesAnalyzer',
  description: 'Checks the validity of authorization policies',
  inputs: ['MeshConfig', 'AuthorizationPolicy', 'Namespace', 'Pod'],
  analyze(ctx) {
    // Namespace → labels of its pods that are in the mesh (or ambient).
    const podLabels = new Map<string, Array<Readonly<Record<string, string>>>>();
    for (const p of ctx.list('Pod')) {
      const list = podLabels.get(p.namespace) ?? [];
      if (podInMesh(p, ctx)) list.push(p.labels);
      if (podInAmbient(p)) list.push(p.labels);
      podLabels.set(p.namespace, list);
    }
    const anyIn = (sel: Record<string, string>, list: ReadonlyArray<Readonly<Record<string, string>>>): boolean =>
      list.some((l) => setMatches(sel, l));
    for (const r of ctx.list('AuthorizationPolicy')) {
      const ap = specOf(r);
      const sel: Record<string, string> | undefined = ap.selector ? (ap.selector.matchLabels ?? {}) : undefined;
      if (r.namespace === ctx.mesh.rootNamespace) {
        if (sel && ![...podLabels.values()].some((l) => anyIn(sel, l))) ctx.report(MESSAGES.NoMatchingWorkloadsFound, r, [selectorString(sel)]);
      } else if (!sel) {
        if ((podLabels.get(r.namespace) ?? []).length === 0) ctx.report(MESSAGES.NoMatchingWorkloadsFound, r, ['']);
      } else if (!anyIn(sel, podLabels.get(r.namespace) ?? [])) {
        ctx.report(MESSAGES.NoMatchingWorkloadsFound, r, [selectorString(sel)]);
      }
      // Namespaces a rule names must exist.
      (ap.rules ?? []).forEach((rule: { from?: Array<{ source?: { namespaces?: string[]; notNamespaces?: string[] } }> }, i: number) =>
        (rule.from ?? []).forEach((from, j) => {
          const nss = from.source?.namespaces ?? [];
          [...nss, ...(from.source?.notNamespaces ?? [])].forEach((ns, k) => {
            if (ctx.list('Namespace').some((n) => namespaceMatch(n.name, ns))) return;
            const field = k < nss.length ? 'namespaces' : 'notNamespaces';
            const idx = k < nss.length ? k : k - nss.length;
            // Istio's field path always says `namespaces`; a notNamespaces entry is found where it is.
            ctx.report(MESSAGES.ReferencedResourceNotFound, r, ['namespace', ns], lineOf(r, ['spec', 'rules', i, 'from', j, 'source', field, idx]));
          });
        }),
      );
    }
  },
};

export const caCertificates: Analyzer = {
  name: 'destinationrule.CaCertificateAnalyzer',
  description: 'Checks if caCertificates is set when TLS mode is SIMPLE/MUTUAL',
  inputs: ['DestinationRule'],
  analyze(ctx) {
    for (const r of ctx.list('DestinationRule')) {
      const dr = specOf(r);
      const name = `${r.namespace}/${r.name}`;
      const verifies = (tls: { caCertificates?: string; credentialName?: string }): boolean =>
        Boolean(tls.caCertificates) || Boolean(tls.credentialName && dr.workloadSelector);
      const tls = dr.trafficPolicy?.tls ?? {};
      if ((tls.mode === 'SIMPLE' || tls.mode === 'MUTUAL') && !verifies(tls))
        ctx.report(
          MESSAGES.NoServerCertificateVerificationDestinationLevel,
          r,
          [name, r.namespace, tls.mode, dr.host ?? ''],
          lineOf(r, ['spec', 'trafficPolicy', 'tls', 'caCertificates']),
        );
      (dr.trafficPolicy?.portLevelSettings ?? []).forEach(
        (p: { tls?: { mode?: string; caCertificates?: string; credentialName?: string }; port?: { number?: number } }, i: number) => {
          const ptls = p.tls ?? {};
          if ((ptls.mode === 'SIMPLE' || ptls.mode === 'MUTUAL') && !verifies(ptls)) {
            // PortSelector's String(): the prototext of the message.
            const port = p.port?.number ? `number:${p.port.number}` : '';
            ctx.report(
              MESSAGES.NoServerCertificateVerificationPortLevel,
              r,
              [name, r.namespace, ptls.mode, dr.host ?? '', port],
              lineOf(r, ['spec', 'trafficPolicy', 'portLevelSettings', i, 'tls', 'caCertificates']),
            );
          }
        },
      );
    }
  },
};

export const serviceEntryAddresses: Analyzer = {
  name: 'serviceentry.Analyzer',
  description: 'Checks the validity of ServiceEntry',
  inputs: ['ServiceEntry', 'MeshConfig'],
  analyze(ctx) {
    const md = ctx.mesh.proxyMetadata;
    const autoAllocated =
      md.MESH_META_DNS_CAPTURE === 'true' && (md.MESH_META_DNS_AUTO_ALLOCATE === 'true' || md.PILOT_ENABLE_IP_AUTOALLOCATE === 'true');
    if (autoAllocated) return;
    for (const r of ctx.list('ServiceEntry')) {
      const se = specOf(r);
      if (se.addresses !== undefined) continue;
      (se.ports ?? []).forEach((p: { protocol?: string }, i: number) => {
        if (!p.protocol || p.protocol.toUpperCase() === 'TCP')
          ctx.report(MESSAGES.ServiceEntryAddressesRequired, r, [], lineOf(r, ['spec', 'ports', i, 'name']));
      });
    }
  },
};

export const sidecarSelector: Analyzer = {
  name: 'sidecar.SelectorAnalyzer',
  description:
    "Validates that sidecars that define a workload selector match at least one pod, and that there aren't multiple sidecar resources that select overlapping pods",
  inputs: ['Sidecar', 'Pod', 'Namespace'],
  analyze(ctx) {
    const podsToSidecars = new Map<Resource, Resource[]>();
    const nsToSidecars = new Map<string, Resource[]>();
    for (const rs of ctx.list('Sidecar')) {
      const labels: Record<string, string> = specOf(rs).workloadSelector?.labels ?? {};
      if (Object.keys(labels).length === 0) {
        nsToSidecars.set(rs.namespace, [...(nsToSidecars.get(rs.namespace) ?? []), rs]);
        continue;
      }
      let found = false;
      for (const p of ctx.list('Pod')) {
        if (p.namespace !== rs.namespace || !setMatches(labels, p.labels)) continue;
        found = true;
        podsToSidecars.set(p, [...(podsToSidecars.get(p) ?? []), rs]);
      }
      if (!found) {
        const sel = selectorString(labels);
        ctx.report(
          MESSAGES.ReferencedResourceNotFound,
          rs,
          ['selector', sel],
          lineOf(rs, ['spec', 'workloadSelector', 'labels', firstSelectorKey(sel)]),
        );
      }
    }
    const reported = new Set<Resource>();
    for (const [pod, list] of podsToSidecars) {
      if (list.length === 1 && !podInAmbient(pod)) continue;
      for (const rs of list) {
        if (podInAmbient(pod)) {
          if (!reported.has(rs)) ctx.report(MESSAGES.IneffectivePolicy, rs, ['selected workload is in ambient mode, the policy has no impact']);
          reported.add(rs);
          continue;
        }
        ctx.report(MESSAGES.ConflictingSidecarWorkloadSelectors, rs, [names(list), pod.namespace, pod.name], lineOf(rs, ['metadata', 'name']));
      }
    }
    for (const [ns, list] of nsToSidecars) {
      if (namespaceInAmbient(ctx.find('Namespace', '', ns))) {
        for (const rs of list) {
          if (!reported.has(rs)) ctx.report(MESSAGES.IneffectivePolicy, rs, ['namespace is in ambient mode, the policy has no impact']);
          reported.add(rs);
        }
        continue;
      }
      if (list.length > 1) for (const rs of list) ctx.report(MESSAGES.MultipleSidecarsWithoutWorkloadSelectors, rs, [names(list), ns]);
    }
  },
};

export const deprecation: Analyzer = {
  name: 'deprecation.DeprecationAnalyzer',
  description: 'Checks for deprecated Mesh types and fields',
  inputs: ['VirtualService', 'Sidecar', 'CustomResourceDefinition'],
  analyze(ctx) {
    for (const r of ctx.list('VirtualService'))
      for (const h of specOf(r).http ?? [])
        if ((h.fault?.delay?.percent ?? 0) > 0)
          ctx.report(MESSAGES.Deprecated, r, ['HTTPRoute.fault.delay.percent is deprecated; use HTTPRoute.fault.delay.percentage']);
    for (const r of ctx.list('Sidecar'))
      if (specOf(r).outboundTrafficPolicy?.egressProxy) ctx.report(MESSAGES.Deprecated, r, ['OutboundTrafficPolicy.EgressProxy ignored']);
  },
};

export const envoyFilterPatches: Analyzer = {
  name: 'envoyfilter.EnvoyPatchAnalyzer',
  description: 'Checks an envoyFilters ',
  inputs: ['EnvoyFilter'],
  analyze(ctx) {
    // Names of patches (across EnvoyFilters, in order) that match a proxy version.
    const versioned: string[] = [];
    for (const r of ctx.list('EnvoyFilter')) {
      const ef = specOf(r);
      const priority: number = ef.priority ?? 0;
      const patches: Array<Record<string, any>> = ef.configPatches ?? [];
      for (let i = 0; i < patches.length; i++) {
        const cp = patches[i]!;
        if (!cp.patch) break;
        let instance = '';
        const value = cp.patch.value;
        if (value && typeof value === 'object') {
          // structpb.Value's String() of the name: the prototext of a string value.
          if (value.name !== undefined) instance = `string_value:${JSON.stringify(String(value.name))}`;
          else instance = cp.match?.listener?.filterChain?.filter?.name ?? '';
        }
        const line = lineOf(r, ['spec', 'configPatches', i, 'patch', 'value']);
        const relative = (): void => {
          if (priority !== 0) return;
          ctx.report(
            versioned.includes(instance) ? MESSAGES.EnvoyFilterUsesRelativeOperationWithProxyVersion : MESSAGES.EnvoyFilterUsesRelativeOperation,
            r,
            [],
            line,
          );
        };
        const op = cp.patch.operation;
        const applyTo = cp.applyTo;
        const routeClass = applyTo === 'ROUTE_CONFIGURATION' || applyTo === 'HTTP_ROUTE';
        if (op === 'ADD') {
          if (routeClass) ctx.report(MESSAGES.EnvoyFilterUsesAddOperationIncorrectly, r, [], line);
        } else if (op === 'REMOVE') {
          if (routeClass) ctx.report(MESSAGES.EnvoyFilterUsesRemoveOperationIncorrectly, r, [], line);
          else relative();
        } else if (op === 'REPLACE') {
          if (applyTo !== 'NETWORK_FILTER' && applyTo !== 'HTTP_FILTER') ctx.report(MESSAGES.EnvoyFilterUsesReplaceOperationIncorrectly, r, [], line);
          else relative();
        } else if (op === 'INSERT_BEFORE' || op === 'INSERT_AFTER') relative();
        if (cp.match?.proxy?.proxyVersion) versioned.push(instance);
      }
    }
  },
};

export const telemetryProviders: Analyzer = {
  name: 'telemetry.ProviderAnalyzer',
  description: 'Validates that providers in telemetry resource is valid',
  inputs: ['Telemetry', 'MeshConfig'],
  analyze(ctx) {
    if (ctx.mesh.defaultAccessLogProviders.length > 0) return;
    for (const r of ctx.list('Telemetry'))
      for (const l of specOf(r).accessLogging ?? []) {
        if (l.disabled === true) continue;
        if ((l.providers ?? []).length === 0) ctx.report(MESSAGES.InvalidTelemetryProvider, r, [r.name, r.namespace]);
      }
  },
};

export const telemetrySelector: Analyzer = {
  name: 'telemetry.SelectorAnalyzer',
  description:
    "Validates that telemetries that define a selector match at least one pod, and that there aren't multiple telemetry resources that select overlapping pods",
  inputs: ['Telemetry', 'Pod'],
  analyze(ctx) {
    const podsTo = new Map<Resource, Resource[]>();
    for (const rs of ctx.list('Telemetry')) {
      const labels: Record<string, string> = specOf(rs).selector?.matchLabels ?? {};
      if (Object.keys(labels).length === 0) continue;
      let found = false;
      for (const p of ctx.list('Pod')) {
        if (p.namespace !== rs.namespace || !setMatches(labels, p.labels)) continue;
        found = true;
        podsTo.set(p, [...(podsTo.get(p) ?? []), rs]);
      }
      if (!found) {
        const sel = selectorString(labels);
        ctx.report(
          MESSAGES.ReferencedResourceNotFound,
          rs,
          ['selector', sel],
          lineOf(rs, ['spec', 'selector', 'matchLabels', firstSelectorKey(sel)]),
        );
      }
    }
    for (const [pod, list] of podsTo) {
      if (list.length === 1) continue;
      for (const rs of list)
        ctx.report(MESSAGES.ConflictingTelemetryWorkloadSelectors, rs, [names(list), pod.namespace, pod.name], lineOf(rs, ['metadata', 'name']));
    }
  },
};

export const telemetryDefaultSelector: Analyzer = {
  name: 'telemetry.DefaultSelectorAnalyzer',
  description: "Validates that there aren't multiple telemetry resources that have no selector",
  inputs: ['Telemetry'],
  analyze(ctx) {
    const byNs = new Map<string, Resource[]>();
    for (const r of ctx.list('Telemetry')) if (!specOf(r).selector) byNs.set(r.namespace, [...(byNs.get(r.namespace) ?? []), r]);
    for (const [ns, list] of byNs)
      if (list.length > 1) for (const r of list) ctx.report(MESSAGES.MultipleTelemetriesWithoutWorkloadSelectors, r, [names(list), ns]);
  },
};

export const telemetryLightstep: Analyzer = {
  name: 'telemetry.LightstepAnalyzer',
  description: 'Validates that lightstep provider is still used',
  inputs: ['Telemetry', 'MeshConfig'],
  analyze(ctx) {
    const lightstep = new Set(ctx.mesh.extensionProviders.filter((p) => p.type === 'lightstep').map((p) => p.name));
    if (lightstep.size === 0) return;
    for (const r of ctx.list('Telemetry'))
      for (const t of specOf(r).tracing ?? [])
        for (const p of t.providers ?? [])
          if (lightstep.has(p.name))
            ctx.report(MESSAGES.Deprecated, r, [`The Lightstep provider ${p.name} is deprecated, please migrate to OpenTelemetry provider.`]);
  },
};
