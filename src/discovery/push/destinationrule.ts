// DestinationRule lookup with Istio's precedence (PushContext.destinationRule): rules local to the
// proxy's namespace, then rules exported from the service's namespace, then rules exported from the
// root namespace; within a namespace the most specific host wins, and several rules for the same host
// merge (oldest traffic policy wins, subsets are appended unless their name is taken).
import type { Config, DestinationRuleSpec, Subset, TrafficPolicy } from '../../config/types';
import { isWildcard, mostSpecificHostMatch, resolveShortName } from '../host';
import { selectorMatches } from '../labels';
import { byAge, isExportedTo } from './visibility';

export interface MergedDestinationRule {
  /** Host as resolved (FQDN or wildcard). */
  host: string;
  namespace: string;
  trafficPolicy?: TrafficPolicy;
  subsets: Subset[];
  /** The rules merged into this one, oldest first (for debug output and config_dump metadata). */
  from: Config<'DestinationRule'>[];
  exportTo: readonly string[];
  workloadSelector?: Readonly<Record<string, string>>;
  /** Subset names a later rule repeated and the merge dropped (Istio's pilot_destrule_subsets). */
  duplicateSubsets: string[];
}

function merge(rules: Config<'DestinationRule'>[], host: string): MergedDestinationRule {
  const first = rules[0]!;
  const subsets: Subset[] = [];
  const names = new Set<string>();
  const duplicateSubsets: string[] = [];
  let trafficPolicy: TrafficPolicy | undefined;
  for (const r of rules) {
    trafficPolicy ??= r.spec.trafficPolicy;
    for (const s of r.spec.subsets ?? []) {
      if (names.has(s.name)) {
        duplicateSubsets.push(s.name);
        continue;
      }
      names.add(s.name);
      subsets.push(s);
    }
  }
  return {
    host,
    namespace: first.meta.namespace,
    ...(trafficPolicy ? { trafficPolicy } : {}),
    subsets,
    from: rules,
    duplicateSubsets,
    exportTo: first.spec.exportTo ?? [],
    ...(first.spec.workloadSelector?.matchLabels ? { workloadSelector: first.spec.workloadSelector.matchLabels } : {}),
  };
}

function sameExport(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  return JSON.stringify([...(a ?? [])].sort()) === JSON.stringify([...(b ?? [])].sort());
}

interface HostEntry {
  host: string;
  rules: MergedDestinationRule[];
  /** Position in byHost's order, which decides among equally specific matches. */
  index: number;
}

/** Rules of one namespace grouped by resolved host, merged where they may be (same selector, same exportTo). */
export class NamespaceDestinationRules {
  private readonly byHost = new Map<string, MergedDestinationRule[]>();
  /** byHost's entries, in its order. */
  private readonly entries: HostEntry[] = [];
  /**
   * The only hosts an exact hostname can match besides itself: wildcard ones, and exact ones by lower case.
   * Looked up per service per kind of proxy, so a lookup must not walk every rule of the namespace.
   */
  private readonly wildcardHosts: HostEntry[] = [];
  private readonly exactByLowerCase = new Map<string, HostEntry[]>();

  constructor(rules: readonly Config<'DestinationRule'>[], domain: string) {
    const groups = new Map<string, Config<'DestinationRule'>[][]>();
    for (const r of [...rules].sort(byAge)) {
      const host = resolveShortName(r.spec.host, r.meta.namespace, domain);
      const list = groups.get(host) ?? [];
      // ENABLE_ENHANCED_DESTINATIONRULE_MERGE: rules with different exportTo or selectors stay apart
      const g = list.find(
        (x) =>
          sameExport(x[0]!.spec.exportTo, r.spec.exportTo) &&
          JSON.stringify(x[0]!.spec.workloadSelector?.matchLabels ?? null) === JSON.stringify(r.spec.workloadSelector?.matchLabels ?? null),
      );
      if (g) g.push(r);
      else list.push([r]);
      groups.set(host, list);
    }
    for (const [host, list] of groups)
      this.byHost.set(
        host,
        list.map((g) => merge(g, host)),
      );
    let index = 0;
    for (const [host, rules] of this.byHost) {
      const e: HostEntry = { host, rules, index: index++ };
      this.entries.push(e);
      if (isWildcard(host)) this.wildcardHosts.push(e);
      else {
        const lower = host.toLowerCase();
        const same = this.exactByLowerCase.get(lower);
        if (same) same.push(e);
        else this.exactByLowerCase.set(lower, [e]);
      }
    }
  }

  /**
   * Hosts that may match `hostname`, in byHost's order: for an exact hostname the wildcard hosts and its own
   * spellings (mostSpecificHostMatch skips every other exact host), for a wildcard all of them.
   */
  private candidateHosts(hostname: string): Iterable<HostEntry> {
    if (isWildcard(hostname)) return this.entries;
    const same = this.exactByLowerCase.get(hostname.toLowerCase());
    if (!same) return this.wildcardHosts;
    return [...this.wildcardHosts, ...same].sort((a, b) => a.index - b.index);
  }

  /** The most specific rule for `hostname` usable by a proxy in `proxyNamespace` with `labels`. */
  lookup(
    hostname: string,
    proxyNamespace: string,
    labels: Readonly<Record<string, string>>,
    requireExport: boolean,
  ): MergedDestinationRule | undefined {
    const usable = (r: MergedDestinationRule): boolean => {
      if (r.workloadSelector) {
        if (r.namespace !== proxyNamespace || !selectorMatches(r.workloadSelector, labels)) return false;
      }
      return !requireExport || isExportedTo(r.exportTo, r.namespace, proxyNamespace);
    };
    // a rule for a selected workload is more specific than the namespace-wide one for the same host
    const pickOf = (rules: MergedDestinationRule[]) =>
      rules.find((r) => r.workloadSelector && usable(r)) ?? rules.find((r) => !r.workloadSelector && usable(r));
    // An exact host is the most specific match there is (looked up per service per namespace: keep it cheap).
    if (!isWildcard(hostname)) {
      const exact = this.byHost.get(hostname) ?? this.byHost.get(hostname.toLowerCase());
      const pick = exact && pickOf(exact);
      if (pick) return pick;
    }
    const candidates: [string, MergedDestinationRule][] = [];
    for (const { host, rules } of this.candidateHosts(hostname)) {
      const pick = pickOf(rules);
      if (pick) candidates.push([host, pick]);
    }
    return mostSpecificHostMatch(hostname, candidates)?.[1];
  }

  all(): MergedDestinationRule[] {
    return [...this.byHost.values()].flat();
  }
}

export class DestinationRuleIndex {
  private readonly byNamespace = new Map<string, NamespaceDestinationRules>();

  constructor(
    rules: readonly Config<'DestinationRule'>[],
    private readonly rootNamespace: string,
    domain: string,
  ) {
    const grouped = new Map<string, Config<'DestinationRule'>[]>();
    for (const r of rules) {
      const list = grouped.get(r.meta.namespace) ?? [];
      list.push(r);
      grouped.set(r.meta.namespace, list);
    }
    for (const [ns, list] of grouped) this.byNamespace.set(ns, new NamespaceDestinationRules(list, domain));
  }

  /**
   * The rule for `hostname` seen from a proxy: proxy namespace (unless it is the root namespace), the
   * service's namespace (exported rules), then the root namespace (exported rules).
   */
  lookup(
    hostname: string,
    proxyNamespace: string,
    proxyLabels: Readonly<Record<string, string>>,
    serviceNamespace: string | undefined,
  ): MergedDestinationRule | undefined {
    if (proxyNamespace !== this.rootNamespace) {
      const r = this.byNamespace.get(proxyNamespace)?.lookup(hostname, proxyNamespace, proxyLabels, false);
      if (r) return r;
    }
    if (serviceNamespace !== undefined) {
      const r = this.byNamespace.get(serviceNamespace)?.lookup(hostname, proxyNamespace, proxyLabels, true);
      if (r) return r;
    }
    return this.byNamespace.get(this.rootNamespace)?.lookup(hostname, proxyNamespace, proxyLabels, true);
  }

  all(): MergedDestinationRule[] {
    return [...this.byNamespace.values()].flatMap((n) => n.all());
  }
}

export type { DestinationRuleSpec };
