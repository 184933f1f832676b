// IP address literals, accepted exactly as node:net's isIP accepts them, without its IPv6 regular expression:
// V8 compiles that expression on first use, which cost an agent 10–50 ms of its start (it checks its
// addresses before asking for its certificate).

const HEX = /^[0-9a-fA-F]{1,4}$/;
const ZONE = /^[0-9a-zA-Z\-.:]+$/;

/** 4 for a dotted-quad IPv4 literal (no leading zeros, as node:net), else 0. */
function v4(s: string): boolean {
  const parts = s.split('.');
  if (parts.length !== 4) return false;
  for (const p of parts) {
    if (p.length === 0 || p.length > 3 || (p.length > 1 && p[0] === '0')) return false;
    for (let i = 0; i < p.length; i++) {
      const c = p.charCodeAt(i);
      if (c < 48 || c > 57) return false;
    }
    if (Number(p) > 255) return false;
  }
  return true;
}

/** Counts the 16-bit groups of a colon-separated run; -1 if a group is malformed. */
function groups(run: string, mayEndInV4: boolean): number {
  if (run === '') return 0;
  const parts = run.split(':');
  let n = 0;
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i]!;
    if (mayEndInV4 && i === parts.length - 1 && p.includes('.')) {
      if (!v4(p)) return -1;
      n += 2;
    } else if (HEX.test(p)) n += 1;
    else return -1;
  }
  return n;
}

function v6(s: string): boolean {
  const pct = s.indexOf('%');
  if (pct >= 0) {
    if (!ZONE.test(s.slice(pct + 1))) return false;
    s = s.slice(0, pct);
  }
  const halves = s.split('::');
  if (halves.length > 2) return false;
  if (halves.length === 1) return groups(s, true) === 8;
  const head = groups(halves[0]!, false);
  const tail = groups(halves[1]!, true);
  // `::` stands for at least one group of zeros.
  return head >= 0 && tail >= 0 && head + tail <= 7;
}

/** node:net isIP: 4, 6, or 0 when the string is not an address literal. */
export function ipFamily(s: string): 0 | 4 | 6 {
  if (s.includes(':')) return v6(s) ? 6 : 0;
  return v4(s) ? 4 : 0;
}

/**
 * Gives node:net's isIP, isIPv4 and isIPv6 this module's verdicts. Node's own TLS client checks every server
 * name with net.isIP and the gRPC library checks every address with net.isIPv6; the first such check with a
 * name that is not an IPv4 literal compiled node's IPv6 expression, 15–25 ms of an agent's way to its first
 * certificate. The verdicts are the same (test/lib/ip.test.ts compares them), so every caller may use ours.
 */
export function useRegexFreeNetChecks(net: { isIP: (s: string) => number; isIPv4: (s: string) => boolean; isIPv6: (s: string) => boolean }): void {
  Object.assign(net, {
    isIP: (s: string) => ipFamily(String(s)),
    isIPv4: (s: string) => ipFamily(String(s)) === 4,
    isIPv6: (s: string) => ipFamily(String(s)) === 6,
  });
}
