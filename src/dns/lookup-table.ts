// The agent's answers, precomputed from the name table (Istio 1.26 pkg/dns/client LookupTable): every name a
// client may ask for — the host, and for orchestrator services of the proxy's cluster domain `name.ns`,
// `name.ns.svc` and (in the proxy's namespace) `name` — with its A and AAAA records, plus each of those names
// with the first search domain appended answered by a CNAME to the real name. Most resolvers try the search
// list first (ndots:5), so `reviews` arrives as `reviews.default.svc.cluster.local.` and
// `www.example.com` as `www.example.com.default.svc.cluster.local.`; the CNAME cuts that walk short.
import { isIPv4, isIPv6 } from '../discovery/host';
import { aaaaRecord, aRecord, cnameRecord, recordValue, TYPE, type ResourceRecord } from './wire';

/** Istio's defaultTTLInSeconds: low, so clients that honour it see new addresses soon. */
export const DEFAULT_TTL = 30;

/** Registries whose hosts get short names: mesh's `Orchestrator`, and Istio's `Kubernetes` from an Istio discovery. */
const ORCHESTRATOR_REGISTRIES = new Set(['Orchestrator', 'Kubernetes']);

/** One name table entry (istio.networking.nds.v1.NameTable.NameInfo). */
export interface NameEntry {
  ips: readonly string[];
  registry: string;
  shortname?: string;
  namespace?: string;
  altHosts?: readonly string[];
}

export interface ProxyDns {
  /** The proxy's namespace: short names resolve only for services there. */
  namespace: string;
  /** The proxy's DNS domain (`ns.svc.cluster.local`); the namespace part is dropped. */
  domain: string;
  /** resolv.conf search domains. */
  search: readonly string[];
}

export interface LookupTable {
  /** Every name answered here (lower case, dot-terminated): for these the agent never asks upstream. */
  allHosts: Set<string>;
  name4: Map<string, ResourceRecord[]>;
  name6: Map<string, ResourceRecord[]>;
  cname: Map<string, ResourceRecord[]>;
}

/** Istio's proxyDomain / proxyDomainParts: the domain without the proxy's namespace in front. */
function domainParts(p: ProxyDns): string[] {
  const parts = p.domain.split('.');
  if (parts[0] === p.namespace) parts.shift();
  return parts;
}

/** generateAltHosts: the names an orchestrator service answers to, for this proxy. */
export function altHosts(hostname: string, ni: NameEntry, p: ProxyDns): Set<string> {
  const out = new Set<string>();
  if (hostname.endsWith('.')) return out;
  out.add(`${hostname}.`);
  const parts = domainParts(p);
  const domain = parts.join('.');
  // a service of another cluster domain gets no short names: `name.ns` could mean either
  if (domain === '' || !hostname.endsWith(domain)) return out;
  out.add(`${ni.shortname}.${ni.namespace}.`);
  if (p.namespace === ni.namespace) out.add(`${ni.shortname}.`);
  // only the `.svc` form of the longer names: the rest are rare and cost a table entry per service each
  out.add(`${ni.shortname}.${ni.namespace}.${parts[0]}.`);
  for (const a of ni.altHosts ?? []) out.add(`${a}.`);
  return out;
}

/** BuildAlternateHosts: each entry's names with its IPv4 and IPv6 addresses (entries without a valid IP are skipped). */
export function forEachEntryNames(
  table: Readonly<Record<string, NameEntry>>,
  p: ProxyDns,
  apply: (names: Set<string>, v4: string[], v6: string[]) => void,
): void {
  for (const [hostname, ni] of Object.entries(table)) {
    const names = ORCHESTRATOR_REGISTRIES.has(ni.registry)
      ? altHosts(hostname, ni, p)
      : new Set([hostname.endsWith('.') ? hostname : `${hostname}.`]);
    const v4 = ni.ips.filter(isIPv4);
    const v6 = ni.ips.filter((ip) => !isIPv4(ip) && isIPv6(ip));
    if (v4.length === 0 && v6.length === 0) continue;
    apply(names, v4, v6);
  }
}

export function buildLookupTable(table: Readonly<Record<string, NameEntry>>, p: ProxyDns): LookupTable {
  const t: LookupTable = { allHosts: new Set(), name4: new Map(), name6: new Map(), cname: new Map() };
  const first = p.search[0];
  forEachEntryNames(table, p, (names, v4, v6) => {
    for (const n of names) {
      const h = n.toLowerCase();
      t.allHosts.add(h);
      if (v4.length > 0)
        t.name4.set(
          h,
          v4.map((ip) => aRecord(h, ip, DEFAULT_TTL)),
        );
      if (v6.length > 0)
        t.name6.set(
          h,
          v6.map((ip) => aaaaRecord(h, ip, DEFAULT_TTL)),
        );
      if (first !== undefined) {
        // only the first search domain: resolvers walk the list in order
        let expanded = (h + first).toLowerCase();
        if (!first.endsWith('.')) expanded += '.';
        // `productpage` + `ns1.svc.cluster.local` is itself a real name of the service
        if (!names.has(expanded)) {
          t.cname.set(expanded, [cnameRecord(expanded, h, DEFAULT_TTL)]);
          t.allHosts.add(expanded);
        }
      }
    }
  });
  return t;
}

/**
 * lookupHost: the answers for a question, and whether the name is ours at all. A name of ours with no record
 * of the asked type answers NOERROR with nothing (not NXDOMAIN: a client asking A and AAAA at once would
 * take NXDOMAIN for the whole name); other types of our names, and names not ours, go upstream.
 */
export function lookupHost(t: LookupTable, qtype: number, name: string): { answers: ResourceRecord[]; found: boolean } {
  // answers carry the name lower-cased, as Istio's do
  const question = name.toLowerCase();
  let hostname = question;
  let wildcard = false;
  let found = t.allHosts.has(hostname);
  if (!found) {
    // `a.b.example.com.` may be answered by `*.b.example.com.` or `*.example.com.`…
    const labels = hostname.replace(/\.$/, '').split('.');
    for (let i = 0; i < labels.length; i++) {
      const q = `*.${labels.slice(i + 1).join('.')}.`;
      if (t.allHosts.has(q)) {
        found = true;
        wildcard = true;
        hostname = q;
        break;
      }
    }
  }
  if (!found) return { answers: [], found: false };
  const cn: ResourceRecord[] = [];
  for (const c of t.cname.get(hostname) ?? []) {
    cn.push({ ...c, name: question });
    hostname = recordValue(c)!;
  }
  let ips: ResourceRecord[];
  if (qtype === TYPE.A) ips = t.name4.get(hostname) ?? [];
  else if (qtype === TYPE.AAAA) ips = t.name6.get(hostname) ?? [];
  else return { answers: [], found: false };
  if (ips.length === 0) return { answers: [], found: true };
  // A chained answer (CNAME then the addresses): some clients never follow a CNAME with a second query.
  // A wildcard's addresses are named as asked, or as the wildcard after a CNAME to it.
  const addrs = wildcard ? ips.map((r) => ({ ...r, name: cn.length > 0 ? hostname : question })) : ips;
  return { answers: [...cn, ...addrs], found: true };
}

/** Istio's roundRobinResponse for local answers: CNAMEs first, then the rest, then the addresses shuffled (DNS load balancing). */
export function roundRobin(records: readonly ResourceRecord[], random: () => number = Math.random): ResourceRecord[] {
  const cname = records.filter((r) => r.type === TYPE.CNAME);
  const addrs = records.filter((r) => r.type === TYPE.A || r.type === TYPE.AAAA);
  const rest = records.filter((r) => r.type !== TYPE.CNAME && r.type !== TYPE.A && r.type !== TYPE.AAAA);
  for (let i = addrs.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [addrs[i], addrs[j]] = [addrs[j]!, addrs[i]!];
  }
  return [...cname, ...rest, ...addrs];
}
