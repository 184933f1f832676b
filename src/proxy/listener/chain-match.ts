// Filter chain selection with Envoy's precedence: destination port, destination IP, server name (exact,
// then the longest `*.` wildcard), transport protocol, application protocols, direct source IP, source
// type, source IP, source port. At each step chains naming a matching value win over chains that name
// nothing; chains naming only other values drop out.
import type { FilterChainMatch, ListenerFilterChainMatchPredicate } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { FilterChainMatch_ConnectionSourceType } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { ConfigError } from '../common/config-error';
import { cidrContains, parseCidr, parseIp, type Cidr, type IpValue } from '../common/cidr';

export interface CompiledChainMatch {
  destinationPort: number | undefined;
  prefixRanges: Cidr[];
  serverNames: string[];
  transportProtocol: string;
  applicationProtocols: string[];
  directSourcePrefixRanges: Cidr[];
  sourceType: 'any' | 'local' | 'external';
  sourcePrefixRanges: Cidr[];
  sourcePorts: number[];
}

export interface ConnectionFacts {
  destinationPort: number;
  destinationIp: string;
  serverName: string;
  transportProtocol: string;
  applicationProtocols: readonly string[];
  sourceIp: string;
  sourcePort: number;
}

export function compileChainMatch(m: FilterChainMatch | undefined, where: string): CompiledChainMatch {
  if (m?.addressSuffix || m?.suffixLen !== undefined) throw new ConfigError(`${where}: address_suffix/suffix_len are not supported`);
  for (const n of m?.serverNames ?? []) {
    if (n.includes('*') && !(n.startsWith('*.') && n.indexOf('*', 1) < 0))
      throw new ConfigError(`${where}.server_names: partial wildcards are not supported: ${n}`);
  }
  return {
    destinationPort: m?.destinationPort,
    prefixRanges: (m?.prefixRanges ?? []).map((r, i) => parseCidr(r, `${where}.prefix_ranges[${i}]`)),
    serverNames: (m?.serverNames ?? []).map((n) => n.toLowerCase()),
    transportProtocol: m?.transportProtocol ?? '',
    applicationProtocols: m?.applicationProtocols ?? [],
    directSourcePrefixRanges: (m?.directSourcePrefixRanges ?? []).map((r, i) => parseCidr(r, `${where}.direct_source_prefix_ranges[${i}]`)),
    sourceType:
      m?.sourceType === FilterChainMatch_ConnectionSourceType.SAME_IP_OR_LOOPBACK
        ? 'local'
        : m?.sourceType === FilterChainMatch_ConnectionSourceType.EXTERNAL
          ? 'external'
          : 'any',
    sourcePrefixRanges: (m?.sourcePrefixRanges ?? []).map((r, i) => parseCidr(r, `${where}.source_prefix_ranges[${i}]`)),
    sourcePorts: m?.sourcePorts ?? [],
  };
}

/** A key for Envoy's "multiple filter chains with the same matching rules" check. */
export function chainMatchKey(m: CompiledChainMatch): string {
  return JSON.stringify(m, (_k, v) => (typeof v === 'bigint' ? v.toString() : v));
}

/** Specificity of a match: undefined = no match, 0 = criterion absent, higher = more specific. */
type Scorer<T> = (chain: T, facts: ConnectionFacts) => number | undefined;

function longestCidr(ranges: Cidr[], ip: IpValue | undefined): number | undefined {
  if (ranges.length === 0) return 0;
  let best: number | undefined;
  for (const r of ranges) if (cidrContains(r, ip)) best = Math.max(best ?? -1, r.len + 1);
  return best;
}

function serverNameScore(names: string[], sni: string): number | undefined {
  if (names.length === 0) return 0;
  if (names.includes(sni)) return 100_000;
  let best: number | undefined;
  for (const n of names) {
    if (n.startsWith('*.') && sni.endsWith(n.slice(1)) && sni.length > n.length - 1) best = Math.max(best ?? 0, n.length);
  }
  return best;
}

function isLocal(ip: string, dst: string): boolean {
  return ip === dst || ip === '127.0.0.1' || ip === '::1' || ip.startsWith('127.');
}

const SCORERS: Array<Scorer<{ match: CompiledChainMatch }>> = [
  (c, f) => (c.match.destinationPort === undefined ? 0 : c.match.destinationPort === f.destinationPort ? 1 : undefined),
  (c, f) => longestCidr(c.match.prefixRanges, parseIp(f.destinationIp)),
  (c, f) => serverNameScore(c.match.serverNames, f.serverName),
  (c, f) => (c.match.transportProtocol === '' ? 0 : c.match.transportProtocol === f.transportProtocol ? 1 : undefined),
  (c, f) =>
    c.match.applicationProtocols.length === 0 ? 0 : c.match.applicationProtocols.some((p) => f.applicationProtocols.includes(p)) ? 1 : undefined,
  (c, f) => longestCidr(c.match.directSourcePrefixRanges, parseIp(f.sourceIp)),
  (c, f) => (c.match.sourceType === 'any' ? 0 : (c.match.sourceType === 'local') === isLocal(f.sourceIp, f.destinationIp) ? 1 : undefined),
  (c, f) => longestCidr(c.match.sourcePrefixRanges, parseIp(f.sourceIp)),
  (c, f) => (c.match.sourcePorts.length === 0 ? 0 : c.match.sourcePorts.includes(f.sourcePort) ? 1 : undefined),
];

/** The chain for a connection, or undefined (the listener's default chain applies then). */
export function selectChain<T extends { match: CompiledChainMatch }>(chains: readonly T[], f: ConnectionFacts): T | undefined {
  let candidates: readonly T[] = chains;
  for (const score of SCORERS) {
    let best = 0;
    const scored: Array<[T, number]> = [];
    for (const c of candidates) {
      const s = score(c, f);
      if (s === undefined) continue;
      scored.push([c, s]);
      if (s > best) best = s;
    }
    candidates = scored.filter(([, s]) => s === best).map(([c]) => c);
    if (candidates.length === 0) return undefined;
  }
  return candidates[0];
}

/** Whether selecting among these chains needs the first bytes (SNI, ALPN, transport protocol). */
export function needsInspection(chains: ReadonlyArray<{ match: CompiledChainMatch }>): { tls: boolean; http: boolean } {
  let tls = false;
  let http = false;
  for (const c of chains) {
    if (c.match.serverNames.length > 0 || c.match.transportProtocol !== '') tls = true;
    if (c.match.applicationProtocols.length > 0) {
      tls = true;
      http = true;
    }
  }
  return { tls, http };
}

/**
 * A listener filter's `filter_disabled` predicate (ListenerFilterChainMatchPredicate): true when the
 * filter must not run for a connection to this destination port. Istio turns the TLS and HTTP
 * inspectors off on inbound ports that do not need them, so server-first protocols are not held.
 */
export function compileFilterDisabled(p: ListenerFilterChainMatchPredicate | undefined, where: string): (port: number) => boolean {
  if (!p) return () => false;
  const r = p.rule;
  switch (r.case) {
    case 'orMatch': {
      const fs = r.value.rules.map((x, i) => compileFilterDisabled(x, `${where}.or_match.rules[${i}]`));
      return (port) => fs.some((f) => f(port));
    }
    case 'andMatch': {
      const fs = r.value.rules.map((x, i) => compileFilterDisabled(x, `${where}.and_match.rules[${i}]`));
      return (port) => fs.every((f) => f(port));
    }
    case 'notMatch': {
      const f = compileFilterDisabled(r.value, `${where}.not_match`);
      return (port) => !f(port);
    }
    case 'anyMatch':
      return () => r.value;
    case 'destinationPortRange': {
      const { start, end } = r.value;
      return (port) => port >= start && port < end;
    }
    default:
      throw new ConfigError(`${where}: a rule is required`);
  }
}
