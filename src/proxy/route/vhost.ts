// Virtual host selection exactly as Envoy's RouteMatcher: exact domains, then the longest `*suffix`
// wildcard, then the longest `prefix*` wildcard, then `*`. A wildcard never matches the empty string.
import { ConfigError } from '../common/config-error';

/** Envoy's getPortStart: where `:port` starts in a Host value, or -1 (IPv6 literals are bracketed). */
export function portStart(host: string): number {
  const colon = host.lastIndexOf(':');
  if (colon < 0) return -1;
  const v6End = host.lastIndexOf(']');
  if (v6End < 0 || v6End < colon) return colon + 1 > host.length ? -1 : colon;
  return -1;
}

export function stripPort(host: string): string {
  const p = portStart(host);
  return p >= 0 ? host.slice(0, p) : host;
}

export class VirtualHostTable<V> {
  private readonly exact = new Map<string, V>();
  /** Length → (suffix → vhost), longest first. */
  private readonly suffixes: Array<[number, Map<string, V>]> = [];
  private readonly prefixes: Array<[number, Map<string, V>]> = [];
  private defaultHost: V | undefined;

  constructor(
    entries: ReadonlyArray<{ domains: readonly string[]; value: V }>,
    readonly ignorePort: boolean,
    where: string,
  ) {
    const suffix = new Map<number, Map<string, V>>();
    const prefix = new Map<number, Map<string, V>>();
    const seen = new Set<string>();
    for (const e of entries) {
      for (const raw of e.domains) {
        const d = raw.toLowerCase();
        if (seen.has(d)) throw new ConfigError(`${where}: Only unique values for domains are permitted. Duplicate entry of domain ${d}`);
        seen.add(d);
        if (d === '*') {
          this.defaultHost = e.value;
        } else if (d.startsWith('*')) {
          const s = d.slice(1);
          let m = suffix.get(s.length);
          if (!m) suffix.set(s.length, (m = new Map()));
          m.set(s, e.value);
        } else if (d.endsWith('*')) {
          const p = d.slice(0, -1);
          let m = prefix.get(p.length);
          if (!m) prefix.set(p.length, (m = new Map()));
          m.set(p, e.value);
        } else {
          this.exact.set(d, e.value);
        }
      }
    }
    this.suffixes = [...suffix.entries()].sort((a, b) => b[0] - a[0]);
    this.prefixes = [...prefix.entries()].sort((a, b) => b[0] - a[0]);
  }

  find(authority: string): V | undefined {
    if (this.exact.size === 0 && this.suffixes.length === 0 && this.prefixes.length === 0) return this.defaultHost;
    let host = authority;
    if (this.ignorePort) host = stripPort(host);
    host = host.toLowerCase();
    const e = this.exact.get(host);
    if (e !== undefined) return e;
    for (const [len, m] of this.suffixes) {
      if (len >= host.length) continue;
      const v = m.get(host.slice(host.length - len));
      if (v !== undefined) return v;
    }
    for (const [len, m] of this.prefixes) {
      if (len >= host.length) continue;
      const v = m.get(host.slice(0, len));
      if (v !== undefined) return v;
    }
    return this.defaultHost;
  }
}
