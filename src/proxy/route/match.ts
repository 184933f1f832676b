// RouteMatch → predicate, following Envoy: path specifiers compare the path without query string
// (case-insensitive when case_sensitive is false, never for safe_regex), then headers, query
// parameters, runtime fraction, gRPC, TLS context and dynamic metadata conditions, all required.
import type { HeaderMatcher, QueryParameterMatcher, RouteMatch } from '../../gen/envoy/config/route/v3/route_components_pb';
import { FractionalPercent_DenominatorType } from '../../gen/envoy/type/v3/percent_pb';
import type { FractionalPercent } from '../../gen/envoy/type/v3/percent_pb';
import type { HeaderSource } from '../format/substitution';
import { compileMetadataMatcher, compileRegex, compileStringMatcher } from '../matchers/string';
import { ConfigError } from '../common/config-error';
import type { RouteRequest } from './types';

/** Request headers with each received field of a name kept apart (pseudo-headers included). */
export interface HeaderFields extends HeaderSource {
  getAll(name: string): readonly string[];
}

export type HeaderPredicate = (h: HeaderFields) => boolean;

/** The fields of a header source; one that only reads joined values (a test's map) is one field per name. */
export function headerFieldsOf(src: HeaderSource): HeaderFields {
  if ('getAll' in src && typeof src.getAll === 'function') return src as HeaderFields;
  return {
    get: (n) => src.get(n),
    getAll: (n) => {
      const v = src.get(n);
      return v === undefined ? [] : [v];
    },
  };
}

/**
 * Envoy HeaderUtility::matchHeaders for one HeaderMatcher, as fixed for CVE-2026-26308 (GHSA-ghc4-35x6-crw5)
 * and extended to every HeaderMatcher user in Envoy 1.39 (match_headers_individually,
 * rbac_match_headers_individually): each value of a repeated header is matched on its own and any match
 * counts, invert_match inverts that result, and a missing header is judged as before. Joining the values
 * with ',' first let `x-block: no` + `x-block: yes` slip past a rule on `yes`. Verified against Envoy 1.39.3
 * (test/proxy/fixtures/path-header-cases.ts); one field holding `no, yes` stays one value, as there.
 */
export function compileHeaderMatcher(m: HeaderMatcher, where: string): HeaderPredicate {
  const name = m.name.toLowerCase();
  if (!name) throw new ConfigError(`${where}.name: must not be empty`);
  const invert = m.invertMatch;
  const missingAsEmpty = m.treatMissingHeaderAsEmpty;
  const spec = m.headerMatchSpecifier;
  let isPresentType = false;
  let present = false;
  let test: (v: string) => boolean;
  switch (spec.case) {
    case 'exactMatch': {
      const want = spec.value;
      test = (v) => want === '' || v === want;
      break;
    }
    case 'safeRegexMatch': {
      test = compileRegex(spec.value.regex, `${where}.safe_regex_match`);
      break;
    }
    case 'rangeMatch': {
      const start = spec.value.start;
      const end = spec.value.end;
      test = (v) => {
        if (!/^-?\d+$/.test(v)) return false;
        const n = BigInt(v);
        return n >= start && n < end;
      };
      break;
    }
    case 'presentMatch':
      isPresentType = true;
      present = spec.value;
      test = () => present;
      break;
    case 'prefixMatch': {
      const p = spec.value;
      test = (v) => v.startsWith(p);
      break;
    }
    case 'suffixMatch': {
      const s = spec.value;
      test = (v) => v.endsWith(s);
      break;
    }
    case 'containsMatch': {
      const s = spec.value;
      test = (v) => v.includes(s);
      break;
    }
    case 'stringMatch':
      test = compileStringMatcher(spec.value, `${where}.string_match`);
      break;
    default:
      // no specifier: the header must be present (empty exact value)
      test = () => true;
  }
  return (h) => {
    const values = h.getAll(name);
    if (values.length === 0) {
      if (missingAsEmpty) return test('') !== invert;
      return invert ? isPresentType && present : isPresentType && !present;
    }
    let any = false;
    for (const v of values) {
      if (test(v)) {
        any = true;
        break;
      }
    }
    return any !== invert;
  };
}

function compileQueryParam(q: QueryParameterMatcher, where: string): (req: RouteRequest) => boolean {
  const name = q.name;
  if (!name) throw new ConfigError(`${where}.name: must not be empty`);
  const spec = q.queryParameterMatchSpecifier;
  if (spec.case === 'presentMatch') {
    const want = spec.value;
    return (req) => req.headers.queryParam(name) !== undefined && want;
  }
  if (spec.case === 'stringMatch') {
    const f = compileStringMatcher(spec.value, `${where}.string_match`);
    return (req) => {
      const v = req.headers.queryParam(name);
      return v !== undefined && f(v);
    };
  }
  return (req) => req.headers.queryParam(name) !== undefined;
}

const DENOMINATOR: Record<number, number> = {
  [FractionalPercent_DenominatorType.HUNDRED]: 100,
  [FractionalPercent_DenominatorType.TEN_THOUSAND]: 10_000,
  [FractionalPercent_DenominatorType.MILLION]: 1_000_000,
};

/** Fraction in [0, 1] of a FractionalPercent (numerator above the denominator counts as 100 %). */
export function fractionOf(p: FractionalPercent | undefined, defaultFraction = 0): number {
  if (!p) return defaultFraction;
  return Math.min(1, p.numerator / (DENOMINATOR[p.denominator] ?? 100));
}

export interface CompiledMatch {
  matches: (req: RouteRequest) => boolean;
  prefixLength: (req: RouteRequest) => number;
  kind: 'prefix' | 'path' | 'regex' | 'pathSeparatedPrefix' | 'connect';
}

export function compileRouteMatch(m: RouteMatch | undefined, where: string): CompiledMatch {
  if (!m) throw new ConfigError(`${where}: match is required`);
  const caseSensitive = m.caseSensitive ?? true;
  const ps = m.pathSpecifier;
  let pathTest: (req: RouteRequest) => boolean;
  let prefixLength: (req: RouteRequest) => number;
  let kind: CompiledMatch['kind'];
  switch (ps.case) {
    case 'prefix': {
      const p = caseSensitive ? ps.value : ps.value.toLowerCase();
      const n = p.length;
      pathTest = caseSensitive ? (r) => r.headers.pathOnly().startsWith(p) : (r) => r.headers.pathOnly().toLowerCase().startsWith(p);
      prefixLength = () => n;
      kind = 'prefix';
      break;
    }
    case 'path': {
      const p = caseSensitive ? ps.value : ps.value.toLowerCase();
      pathTest = caseSensitive ? (r) => r.headers.pathOnly() === p : (r) => r.headers.pathOnly().toLowerCase() === p;
      prefixLength = (r) => r.headers.pathOnly().length;
      kind = 'path';
      break;
    }
    case 'safeRegex': {
      const re = compileRegex(ps.value.regex, `${where}.safe_regex`);
      pathTest = (r) => re(r.headers.pathOnly());
      prefixLength = (r) => r.headers.pathOnly().length;
      kind = 'regex';
      break;
    }
    case 'pathSeparatedPrefix': {
      const raw = ps.value;
      if (raw.includes('?') || raw.includes('#') || raw.endsWith('/')) {
        throw new ConfigError(`${where}.path_separated_prefix: must not contain '?' or '#' nor end with '/'`);
      }
      const p = caseSensitive ? raw : raw.toLowerCase();
      const n = p.length;
      pathTest = (r) => {
        let path = r.headers.pathOnly();
        if (!caseSensitive) path = path.toLowerCase();
        return path.startsWith(p) && (path.length === n || path.charCodeAt(n) === 47); /* / */
      };
      prefixLength = () => n;
      kind = 'pathSeparatedPrefix';
      break;
    }
    case 'connectMatcher':
      pathTest = (r) => r.headers.method === 'CONNECT';
      prefixLength = () => 0;
      kind = 'connect';
      break;
    case 'pathMatchPolicy':
      throw new ConfigError(`${where}.path_match_policy: extension '${ps.value.name}' is not supported`);
    default:
      throw new ConfigError(`${where}: RouteMatch has no path_specifier`);
  }
  const conds: Array<(r: RouteRequest) => boolean> = [];
  m.headers.forEach((h, i) => {
    const f = compileHeaderMatcher(h, `${where}.headers[${i}]`);
    conds.push((r) => f(r.headers));
  });
  m.queryParameters.forEach((q, i) => conds.push(compileQueryParam(q, `${where}.query_parameters[${i}]`)));
  if (m.runtimeFraction) {
    const frac = fractionOf(m.runtimeFraction.defaultValue, 0);
    conds.push((r) => r.random < frac);
  }
  if (m.grpc) conds.push((r) => (r.headers.get('content-type') ?? '').startsWith('application/grpc'));
  if (m.tlsContext) {
    const { presented, validated } = m.tlsContext;
    if (presented !== undefined) conds.push((r) => r.tlsPresented === presented);
    if (validated !== undefined) conds.push((r) => r.tlsValidated === validated);
  }
  m.dynamicMetadata.forEach((d, i) => {
    const f = compileMetadataMatcher(d, `${where}.dynamic_metadata[${i}]`);
    conds.push((r) => f(r.dynamicMetadata));
  });
  const matches =
    conds.length === 0
      ? pathTest
      : (r: RouteRequest) => {
          if (!pathTest(r)) return false;
          for (const c of conds) if (!c(r)) return false;
          return true;
        };
  return { matches, prefixLength, kind };
}
