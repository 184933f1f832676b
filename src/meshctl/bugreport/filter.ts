// The bug-report selection grammar (--include / --exclude and the `include:` / `exclude:` lists of a
// --filename file): `namespaces/deployments/pods/labels/annotations/containers`, and which container paths
// `<ns>/<deployment>/<pod>/<container>` a set of selectors picks (istioctl bug-report's config and filter).

export interface SelectionSpec {
  namespaces: string[] | null;
  deployments: string[] | null;
  pods: string[] | null;
  labels: Record<string, string> | null;
  annotations: Record<string, string> | null;
  containers: string[] | null;
}

export class SelectorError extends Error {}

function names(part: string): string[] | null {
  if (part.trim() === '*' || part === '') return null;
  return part.split(',');
}

function pairs(part: string): Record<string, string> | null {
  if (part.trim() === '*') return null;
  const out: Record<string, string> = {};
  for (const item of part.split(',')) {
    if (item === '') continue;
    const kv = item.split('=');
    if (kv.length !== 2) throw new SelectorError(`bad label/annotation selection ${item}, must have format key=value`);
    if (kv[0]!.includes('*')) throw new SelectorError(`bad label/annotation selection ${item}, key cannot have '*' wildcards`);
    out[kv[0]!] = kv[1]!;
  }
  return out;
}

/** Parses one selector; missing trailing parts select everything. */
export function parseSelector(text: string): SelectionSpec {
  const parts = text.split('/');
  if (parts.length > 6) {
    throw new SelectorError(`bad selection ${text}: at most 6 "/"-separated parts (namespaces/deployments/pods/labels/annotations/containers)`);
  }
  const at = (i: number) => parts[i];
  return {
    namespaces: at(0) === undefined ? null : names(at(0)!),
    deployments: at(1) === undefined ? null : names(at(1)!),
    pods: at(2) === undefined ? null : names(at(2)!),
    labels: at(3) === undefined ? null : pairs(at(3)!),
    annotations: at(4) === undefined ? null : pairs(at(4)!),
    containers: at(5) === undefined ? null : names(at(5)!),
  };
}

/** The selector as text again (Istio's MarshalJSON, without the JSON quotes). */
export function formatSelector(s: SelectionSpec): string {
  const list = (v: string[] | null) => (v ?? []).join(',');
  const map = (v: Record<string, string> | null) =>
    Object.entries(v ?? {})
      .map(([k, x]) => `${k}=${x}`)
      .join(',');
  return [list(s.namespaces), list(s.deployments), list(s.pods), map(s.labels), map(s.annotations), list(s.containers)].join('/');
}

// ---- Go's path/filepath.Match ----

export class BadPattern extends Error {
  constructor() {
    super('syntax error in pattern');
  }
}

/** filepath.Match on Unix: `*` any run of non-`/`, `?` one non-`/` character, `[...]` classes, `\` escapes. */
export function globMatch(pattern: string, name: string): boolean {
  const p = [...pattern];
  const s = [...name];
  // Segments split at stars, matched greedily with backtracking as Go does.
  let pi = 0;
  let si = 0;
  let starP = -1;
  let starS = 0;
  while (true) {
    if (pi < p.length && p[pi] === '*') {
      while (pi < p.length && p[pi] === '*') pi++;
      starP = pi;
      starS = si;
      continue;
    }
    if (pi < p.length && si < s.length) {
      const m = matchOne(p, pi, s[si]!);
      if (m > 0) {
        pi = m;
        si++;
        continue;
      }
    } else if (pi >= p.length && si >= s.length) {
      return true;
    }
    // Mismatch: let the last star eat one more (non-separator) character.
    if (starP >= 0 && starS < s.length && s[starS] !== '/') {
      starS++;
      si = starS;
      pi = starP;
      continue;
    }
    // Go reports a bad pattern even on mismatch when the rest is malformed.
    checkRest(p, pi);
    return false;
  }
}

function checkRest(p: string[], pi: number): void {
  for (let i = pi; i < p.length;) {
    if (p[i] === '*') {
      i++;
      continue;
    }
    const n = skipOne(p, i);
    i = n;
  }
}

/** The index after the single-character pattern at `pi`; throws BadPattern when it is malformed. */
function skipOne(p: string[], pi: number): number {
  const c = p[pi]!;
  if (c === '\\') {
    if (pi + 1 >= p.length) throw new BadPattern();
    return pi + 2;
  }
  if (c !== '[') return pi + 1;
  let i = pi + 1;
  if (p[i] === '^') i++;
  let first = true;
  while (true) {
    if (i >= p.length) throw new BadPattern();
    if (p[i] === ']' && !first) return i + 1;
    first = false;
    i = classChar(p, i).next;
    if (p[i] === '-') {
      i = classChar(p, i + 1).next;
    }
  }
}

function classChar(p: string[], i: number): { ch: string; next: number } {
  if (i >= p.length) throw new BadPattern();
  const c = p[i]!;
  if (c === '-' || c === ']') throw new BadPattern();
  if (c === '\\') {
    if (i + 1 >= p.length) throw new BadPattern();
    return { ch: p[i + 1]!, next: i + 2 };
  }
  return { ch: c, next: i + 1 };
}

/** Matches one pattern character at `pi` against `ch`; the index after it, or 0 when it does not match. */
function matchOne(p: string[], pi: number, ch: string): number {
  const c = p[pi]!;
  if (c === '?') return ch === '/' ? 0 : pi + 1;
  if (c === '\\') {
    if (pi + 1 >= p.length) throw new BadPattern();
    return p[pi + 1] === ch ? pi + 2 : 0;
  }
  if (c !== '[') return c === ch ? pi + 1 : 0;
  let i = pi + 1;
  let negated = false;
  if (p[i] === '^') {
    negated = true;
    i++;
  }
  let matched = false;
  let n = 0;
  while (true) {
    if (i < p.length && p[i] === ']' && n > 0) {
      i++;
      break;
    }
    const lo = classChar(p, i);
    let hi = lo;
    i = lo.next;
    if (p[i] === '-') {
      hi = classChar(p, i + 1);
      i = hi.next;
    }
    if (lo.ch <= ch && ch <= hi.ch) matched = true;
    n++;
  }
  if (ch === '/') return 0;
  return matched !== negated ? i : 0;
}

function globOk(name: string, pattern: string): boolean {
  try {
    return globMatch(pattern, name);
  } catch {
    return false;
  }
}

function matchesGlobs(name: string, patterns: readonly string[] | null): boolean {
  if (!patterns || patterns.length === 0) return true;
  if (patterns.length === 1) {
    const p = patterns[0]!.trim();
    if (p === '' || p === '*') return true;
  }
  return patterns.some((p) => globOk(name, p));
}

function matchesMap(selection: Readonly<Record<string, string>> | null, actual: Readonly<Record<string, string>> | undefined): boolean {
  const keys = Object.keys(selection ?? {});
  if (keys.length === 0) return true;
  if (!actual || Object.keys(actual).length === 0) return false;
  return keys.every((k) => k in actual && globOk(actual[k]!, selection![k]!));
}

/** What the selection runs over: namespace → deployment → pod → containers, and pod labels/annotations by `<ns>/<pod>`. */
export interface ClusterTree {
  tree: Record<string, Record<string, Record<string, readonly string[]>>>;
  labels: Record<string, Record<string, string>>;
  annotations: Record<string, Record<string, string>>;
}

export function selects(s: SelectionSpec, c: ClusterTree, ns: string, deployment: string, pod: string, container: string): boolean {
  if (!matchesGlobs(ns, s.namespaces)) return false;
  if (!matchesGlobs(deployment, s.deployments)) return false;
  if (!matchesGlobs(pod, s.pods)) return false;
  if (!matchesGlobs(container, s.containers)) return false;
  const key = `${ns}/${pod}`;
  return matchesMap(s.labels, c.labels[key]) && matchesMap(s.annotations, c.annotations[key]);
}

/** Kept when no exclude selects it and some include does (no includes = everything). */
export function isSelected(
  include: readonly SelectionSpec[],
  exclude: readonly SelectionSpec[],
  c: ClusterTree,
  path: [string, string, string, string],
): boolean {
  if (exclude.some((s) => selects(s, c, ...path))) return false;
  const inc = include.length ? include : [parseSelector('*')];
  return inc.some((s) => selects(s, c, ...path));
}

/** The selected `<ns>/<deployment>/<pod>/<container>` paths, sorted. */
export function matchingPaths(include: readonly SelectionSpec[], exclude: readonly SelectionSpec[], c: ClusterTree): string[] {
  const out: string[] = [];
  for (const [ns, deps] of Object.entries(c.tree)) {
    for (const [dep, pods] of Object.entries(deps)) {
      for (const [pod, containers] of Object.entries(pods)) {
        for (const ctr of containers) if (isSelected(include, exclude, c, [ns, dep, pod, ctr])) out.push(`${ns}/${dep}/${pod}/${ctr}`);
      }
    }
  }
  return out.sort();
}

/** The four orchestrator system namespaces bug-report always leaves out. */
export const SYSTEM_NAMESPACES = ['kube-node-lease', 'kube-public', 'kube-system', 'local-path-storage'];

/**
 * The selectors of --include / --exclude as istioctl's flags.go builds them: the system-namespace exclude
 * first, then each --exclude with those namespaces dropped (one left with no namespace at all is ignored).
 */
export function selectorsFromFlags(include: readonly string[], exclude: readonly string[]): { include: SelectionSpec[]; exclude: SelectionSpec[] } {
  const inc = include.filter((s) => s !== '').map(parseSelector);
  const exc: SelectionSpec[] = [parseSelector(SYSTEM_NAMESPACES.join(','))];
  for (const text of exclude) {
    const s = parseSelector(text);
    const nss = (s.namespaces ?? []).filter((n) => !SYSTEM_NAMESPACES.includes(n));
    if (nss.length === 0) continue;
    exc.push({ ...s, namespaces: nss });
  }
  return { include: inc, exclude: exc };
}
