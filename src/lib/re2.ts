// RE2 for every regular expression that comes from configuration or from a request (route and header
// matchers, RBAC and jwt_authn string matchers, rewrites, CORS origins, stats tags, admin filters).
// Envoy matches these with RE2 and Istio validates them with Go's regexp: both run in time linear in
// the input. JavaScript's RegExp backtracks, so one pattern such as `/x(a+)+b` and a 33-byte path
// would freeze the event loop for a minute. re2js is a port of RE2/Go's regexp: the same syntax, the
// same parse errors (Go's messages), and linear-time matching.
import { RE2JS } from 're2js';

export type Re2 = RE2JS;

/** Go's `error parsing regexp: …` message. */
export class Re2SyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Re2SyntaxError';
  }
}

// re2js drops the backquoted (empty) expression Go prints after this one code.
const goMessage = (m: string) => (m === 'error parsing regexp: trailing backslash at end of expression' ? `${m}: \`\`` : m);

/** Compiles with Go/RE2 (Perl) syntax; throws Re2SyntaxError with Go's message. */
export function compileRe2(pattern: string): Re2 {
  try {
    return RE2JS.compile(pattern);
  } catch (e) {
    throw new Re2SyntaxError(goMessage((e as Error).message));
  }
}

/** Go's `error parsing regexp: …` message for an invalid RE2 pattern, or undefined when it compiles. */
export function re2SyntaxError(pattern: string): string | undefined {
  try {
    compileRe2(pattern);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Whole-input match (Envoy's safe_regex, RE2::FullMatch). */
export function fullMatcher(pattern: string): (s: string) => boolean {
  const re = compileRe2(pattern);
  // Every whole-input match starts with the program's literal prefix: checking it first makes a route
  // table of regexes that mostly fail as cheap as JavaScript's RegExp (scripts/bench/regex.mjs).
  const prefix = (re.re2() as unknown as { prefix?: unknown }).prefix;
  if (typeof prefix === 'string' && prefix !== '') return (s) => s.startsWith(prefix) && re.matches(s);
  return (s) => re.matches(s);
}

/** Match anywhere in the input (RE2::PartialMatch: admin `filter`, `name_regex`). */
export function searcher(pattern: string): (s: string) => boolean {
  const re = compileRe2(pattern);
  return (s) => re.test(s);
}

/**
 * RE2::GlobalReplace: every non-overlapping match replaced by `substitution`, where `\0`…`\9` name
 * capture groups and `\\` is a backslash. Throws for a group the pattern does not have, as Envoy's
 * config validation does.
 */
export function globalReplacer(pattern: string, substitution: string): (s: string) => string {
  const re = compileRe2(pattern);
  const parts: Array<string | number> = [];
  let lit = '';
  for (let i = 0; i < substitution.length; i++) {
    const c = substitution[i]!;
    const n = substitution.charCodeAt(i + 1);
    if (c === '\\' && n >= 48 && n <= 57) {
      const group = n - 48;
      if (group > re.groupCount())
        throw new Re2SyntaxError(`substitution '${substitution}' names group \\${group}, but the pattern has ${re.groupCount()}`);
      if (lit) parts.push(lit);
      lit = '';
      parts.push(group);
      i++;
    } else if (c === '\\' && substitution[i + 1] === '\\') {
      lit += '\\';
      i++;
    } else lit += c;
  }
  if (lit) parts.push(lit);
  return (s) =>
    re.matcher(s).replaceAll((...args: unknown[]) => {
      let out = '';
      for (const p of parts) out += typeof p === 'string' ? p : ((args[p] as string | undefined) ?? '');
      return out;
    });
}

export interface SearchMatch {
  /** [start, end) of a capture group in the input; undefined when it did not take part. */
  span(group: number): [number, number] | undefined;
  group(group: number): string | undefined;
  groupCount: number;
}

/** The first match anywhere in the input with its groups (stats tag extraction), or undefined. */
export function searchGroups(re: Re2, s: string): SearchMatch | undefined {
  const m = re.matcher(s);
  if (!m.find()) return undefined;
  return {
    groupCount: m.groupCount(),
    span: (g) => {
      const start = m.start(g);
      return start < 0 ? undefined : [start, m.end(g)];
    },
    group: (g) => m.group(g) ?? undefined,
  };
}
