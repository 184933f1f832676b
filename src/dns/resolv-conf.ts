// resolv.conf(5) as Go's resolver reads it (net/dnsconfig_unix.go dnsReadConfig) for the parts Istio's agent
// takes from it through miekg/dns's ClientConfigFromReader: the nameservers to forward to (port 53) and the
// search domains. Lines starting with `#` or `;` are comments; `domain` and `search` replace each other, the
// last one wins; `options` as Go reads them (ndots clamped to 0..15, timeout and attempts at least 1).
// Differences on purpose:
// - every valid nameserver is kept, not only the first three (Go and glibc stop at three): Istio's agent
//   forwards to all of them;
// - a nameserver that is not an IP address (a host name, `addr:port`, `[addr]:port`) is skipped, as Go does,
//   and reported (miekg/dns keeps the text and every forward to it fails); resolv.conf has no port syntax;
// - no nameserver means no upstream (Istio), not Go's 127.0.0.1 and ::1 (with the agent on :53 that would be
//   the agent itself);
// - a field starting with `#` or `;` ends the line (a trailing comment; Go would read it as a search domain);
// - search domains stay as written, without Go's trailing dot (the name table appends it), and `.` is dropped.
import { isIP } from 'node:net';

export interface ResolvOptions {
  ndots: number;
  /** Seconds. */
  timeout: number;
  attempts: number;
  rotate: boolean;
  /** `single-request`, `single-request-reopen`. */
  singleRequest: boolean;
  /** `use-vc` (Linux), `usevc` (FreeBSD), `tcp` (OpenBSD). */
  useTcp: boolean;
  trustAd: boolean;
  noReload: boolean;
}

/** A line read but not used, with the reason (for the agent's log). */
export interface ResolvConfNote {
  line: number;
  text: string;
  reason: string;
}

export interface ResolvConf {
  /** Nameserver addresses in file order, IPv6 zones kept (`fe80::1%eth0`). */
  servers: string[];
  /** Search domains as written (`default.svc.cluster.local`). */
  search: string[];
  port: number;
  options: ResolvOptions;
  /** Options and keywords not known (Go's unknownOpt). */
  unknown: string[];
  notes: ResolvConfNote[];
}

/** Go's dtoi: the leading decimal digits, 0 when there are none. */
function leadingInt(s: string): number {
  const m = /^\d+/.exec(s);
  return m ? Math.min(Number(m[0]), 0xffffff) : 0;
}

function applyOption(o: ResolvOptions, s: string): boolean {
  if (s.startsWith('ndots:')) o.ndots = Math.min(leadingInt(s.slice(6)), 15);
  else if (s.startsWith('timeout:')) o.timeout = Math.max(leadingInt(s.slice(8)), 1);
  else if (s.startsWith('attempts:')) o.attempts = Math.max(leadingInt(s.slice(9)), 1);
  else if (s === 'rotate') o.rotate = true;
  else if (s === 'single-request' || s === 'single-request-reopen') o.singleRequest = true;
  else if (s === 'use-vc' || s === 'usevc' || s === 'tcp') o.useTcp = true;
  else if (s === 'trust-ad') o.trustAd = true;
  else if (s === 'no-reload') o.noReload = true;
  // Go takes edns0 as known (it always uses EDNS)
  else if (s !== 'edns0') return false;
  return true;
}

function nameserverProblem(addr: string): string | undefined {
  if (isIP(addr) !== 0) return undefined;
  if (/^\[[^\]]*\]:\d+$/.test(addr) || /^[\d.]+:\d+$/.test(addr)) return 'resolv.conf has no port syntax: nameservers are asked on port 53';
  return 'not an IP address';
}

export function parseResolvConf(text: string): ResolvConf {
  const out: ResolvConf = {
    servers: [],
    search: [],
    port: 53,
    options: { ndots: 1, timeout: 5, attempts: 2, rotate: false, singleRequest: false, useTcp: false, trustAd: false, noReload: false },
    unknown: [],
    notes: [],
  };
  text.split('\n').forEach((raw, i) => {
    if (raw.startsWith('#') || raw.startsWith(';')) return;
    const all = raw.split(/[ \t\r]+/).filter(Boolean);
    const comment = all.findIndex((f) => f.startsWith('#') || f.startsWith(';'));
    const f = comment < 0 ? all : all.slice(0, comment);
    if (f.length === 0) return;
    const note = (reason: string) => out.notes.push({ line: i + 1, text: raw.trim(), reason });
    switch (f[0]) {
      case 'nameserver': {
        if (f[1] === undefined) return note('no address');
        const problem = nameserverProblem(f[1]);
        if (problem) return note(problem);
        out.servers.push(f[1]);
        return;
      }
      case 'domain':
        if (f[1] !== undefined) out.search = [f[1]];
        return;
      case 'search':
        out.search = f.slice(1).filter((d) => d !== '.');
        return;
      case 'options':
        for (const o of f.slice(1)) if (!applyOption(out.options, o)) out.unknown.push(o);
        return;
      // OpenBSD's database order and glibc's address sort list: nothing for a forwarder
      case 'lookup':
      case 'sortlist':
        return;
      default:
        out.unknown.push(f[0]!);
    }
  });
  return out;
}
