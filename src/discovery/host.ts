// Hostname matching with Istio's wildcard rules (pkg/config/host): `*` matches everything,
// `*.foo.com` matches any name ending in `.foo.com` (and the wildcard `*.bar.foo.com`), exact
// names match themselves. Comparison is case-insensitive like DNS.
import { ipFamily } from '../lib/ip';

export function isWildcard(h: string): boolean {
  return h.startsWith('*');
}

/** True when `a` and `b` can name the same host (Istio host.Name.Matches: symmetric). */
export function hostMatches(a: string, b: string): boolean {
  a = a.toLowerCase();
  b = b.toLowerCase();
  if (a === b) return true;
  const aw = isWildcard(a);
  const bw = isWildcard(b);
  if (aw && bw) {
    // the longer suffix is the more specific: it matches when it ends with the shorter one
    const as = a.slice(1);
    const bs = b.slice(1);
    return as.length > bs.length ? as.endsWith(bs) : bs.endsWith(as);
  }
  if (aw) return b.endsWith(a.slice(1));
  if (bw) return a.endsWith(b.slice(1));
  return false;
}

/** True when every host named by `a` is also named by `b` (Istio host.Name.SubsetOf). */
export function hostSubsetOf(a: string, b: string): boolean {
  a = a.toLowerCase();
  b = b.toLowerCase();
  if (a === b) return true;
  if (!isWildcard(b)) return false;
  const suffix = b.slice(1);
  if (isWildcard(a)) return a.slice(1).endsWith(suffix);
  return a.endsWith(suffix);
}

/** Of `candidates`, the one that matches `needle` most specifically: exact first, then the longest wildcard. */
export function mostSpecificHostMatch<T>(needle: string, candidates: Iterable<[string, T]>): [string, T] | undefined {
  let best: [string, T] | undefined;
  const n = needle.toLowerCase();
  for (const c of candidates) {
    const h = c[0].toLowerCase();
    if (h === n) return c;
    if (!isWildcard(h)) {
      // a wildcard needle (sidecar egress `*.foo.com`) may still cover an exact candidate
      if (isWildcard(n) && hostSubsetOf(h, n) && (best === undefined || isWildcard(best[0]))) best = c;
      continue;
    }
    if (!hostMatches(n, h)) continue;
    if (best === undefined || (isWildcard(best[0]) && h.length > best[0].length)) best = c;
  }
  return best;
}

/**
 * Resolves a short host written in a config (VirtualService destination, DestinationRule host) the way
 * Istio does (ResolveShortnameToFQDN): a name without dots becomes `<name>.<ns>.svc.<domain>`.
 */
export function resolveShortName(h: string, namespace: string, domain: string): string {
  if (h === '' || h.includes('.') || isWildcard(h)) return h;
  return `${h}.${namespace}.svc.${domain}`;
}

export function isIp(s: string): boolean {
  return isIPv4(s) || isIPv6(s);
}

export function isIPv4(s: string): boolean {
  return ipFamily(s) === 4;
}

export function isIPv6(s: string): boolean {
  if (!s.includes(':')) return false;
  return /^[0-9a-fA-F:.]+$/.test(s) && s.split('::').length <= 2;
}

/** `host:port`, bracketing IPv6 literals (Istio util.DomainName). */
export function domainName(h: string, port: number): string {
  return `${ipv6Compliant(h)}:${port}`;
}

export function ipv6Compliant(h: string): string {
  return isIPv6(h) && !h.startsWith('[') ? `[${h}]` : h;
}
