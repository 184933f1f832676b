// Host name matching as Istio's host.Name does it (a leading `*` matches any suffix).

function isWildcarded(h: string): boolean {
  return h.length > 0 && h[0] === '*';
}

/** host.Name.Matches: the two hosts have a non-empty intersection. */
export function hostMatches(a: string, b: string): boolean {
  const aw = isWildcarded(a);
  const bw = isWildcarded(b);
  if (aw) {
    if (bw) return a.length < b.length ? b.slice(1).endsWith(a.slice(1)) : a.slice(1).endsWith(b.slice(1));
    return b.endsWith(a.slice(1));
  }
  if (bw) return a.endsWith(b.slice(1));
  return a === b;
}

/** host.Name.SubsetOf: every name matched by `a` is matched by `b`. */
export function hostSubsetOf(a: string, b: string): boolean {
  if (isWildcarded(a)) {
    if (!isWildcarded(b)) return false;
    return a.slice(1).endsWith(b.slice(1));
  }
  if (isWildcarded(b)) return a.endsWith(b.slice(1));
  return a === b;
}
