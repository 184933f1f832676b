// envoy.type.matcher.v3 StringMatcher / ValueMatcher / MetadataMatcher / ListStringMatcher compiled to
// closures once per config update. Metadata is a filter-name → JSON object map: what filters such as
// jwt_authn write (payload_in_metadata) and routes and RBAC read.
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { StringMatcher, ListStringMatcher } from '../../gen/envoy/type/matcher/v3/string_pb';
import type { ValueMatcher } from '../../gen/envoy/type/matcher/v3/value_pb';
import type { MetadataMatcher } from '../../gen/envoy/type/matcher/v3/metadata_pb';
import type { DoubleMatcher } from '../../gen/envoy/type/matcher/v3/number_pb';
import { fullMatcher } from '../../lib/re2';
import { ConfigError } from '../common/config-error';

export type StringMatch = (value: string) => boolean;
/** Dynamic metadata of a request: filter namespace → Struct as JSON. */
export type DynamicMetadata = Map<string, JsonObject>;

export function compileStringMatcher(m: StringMatcher | undefined, where: string): StringMatch {
  if (!m) throw new ConfigError(`${where}: a string matcher is required`);
  const ic = m.ignoreCase;
  const p = m.matchPattern;
  switch (p.case) {
    case 'exact': {
      const v = ic ? p.value.toLowerCase() : p.value;
      return ic ? (s) => s.toLowerCase() === v : (s) => s === v;
    }
    case 'prefix': {
      const v = ic ? p.value.toLowerCase() : p.value;
      return ic ? (s) => s.toLowerCase().startsWith(v) : (s) => s.startsWith(v);
    }
    case 'suffix': {
      const v = ic ? p.value.toLowerCase() : p.value;
      return ic ? (s) => s.toLowerCase().endsWith(v) : (s) => s.endsWith(v);
    }
    case 'contains': {
      const v = ic ? p.value.toLowerCase() : p.value;
      return ic ? (s) => s.toLowerCase().includes(v) : (s) => s.includes(v);
    }
    case 'safeRegex':
      return compileRegex(p.value.regex, `${where}.safe_regex`);
    case 'custom':
      throw new ConfigError(`${where}: custom string matcher '${p.value.name}' is not supported`);
    default:
      throw new ConfigError(`${where}: StringMatcher has no match_pattern`);
  }
}

/** A full-match RE2 predicate, or a ConfigError naming where the bad pattern is. */
export function compileRegex(regex: string, where: string): StringMatch {
  try {
    return fullMatcher(regex);
  } catch (e) {
    throw new ConfigError(`${where}: invalid regex '${regex}': ${(e as Error).message}`);
  }
}

export function compileListStringMatcher(m: ListStringMatcher | undefined, where: string): StringMatch {
  const ms = (m?.patterns ?? []).map((p, i) => compileStringMatcher(p, `${where}.patterns[${i}]`));
  return (s) => ms.some((f) => f(s));
}

export type ValueMatch = (v: JsonValue | undefined) => boolean;

function compileDouble(d: DoubleMatcher, where: string): (n: number) => boolean {
  const m = d.matchPattern;
  if (m.case === 'exact') return (n) => n === m.value;
  if (m.case === 'range') return (n) => n >= m.value.start && n < m.value.end;
  throw new ConfigError(`${where}: DoubleMatcher has no match_pattern`);
}

export function compileValueMatcher(m: ValueMatcher | undefined, where: string): ValueMatch {
  if (!m) throw new ConfigError(`${where}: a value matcher is required`);
  const p = m.matchPattern;
  switch (p.case) {
    case 'nullMatch':
      return (v) => v === null;
    case 'doubleMatch': {
      const f = compileDouble(p.value, `${where}.double_match`);
      return (v) => typeof v === 'number' && f(v);
    }
    case 'stringMatch': {
      const f = compileStringMatcher(p.value, `${where}.string_match`);
      return (v) => typeof v === 'string' && f(v);
    }
    case 'boolMatch': {
      const want = p.value;
      return (v) => typeof v === 'boolean' && v === want;
    }
    case 'presentMatch': {
      const want = p.value;
      return (v) => want && v !== undefined;
    }
    case 'listMatch': {
      const lm = p.value.matchPattern;
      if (lm.case !== 'oneOf') throw new ConfigError(`${where}.list_match: ListMatcher has no match_pattern`);
      const f = compileValueMatcher(lm.value, `${where}.list_match.one_of`);
      return (v) => Array.isArray(v) && v.some((x) => f(x));
    }
    case 'orMatch': {
      const fs = p.value.valueMatchers.map((x, i) => compileValueMatcher(x, `${where}.or_match.value_matchers[${i}]`));
      return (v) => fs.some((f) => f(v));
    }
    default:
      throw new ConfigError(`${where}: ValueMatcher has no match_pattern`);
  }
}

/** The value at `path` under `filter` in dynamic metadata; undefined when any step is missing. */
export function metadataValue(md: DynamicMetadata | undefined, filter: string, path: readonly string[]): JsonValue | undefined {
  let v: JsonValue | undefined = md?.get(filter);
  for (const k of path) {
    if (v === undefined || v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
    v = (v as JsonObject)[k];
  }
  return v;
}

export type MetadataMatch = (md: DynamicMetadata | undefined) => boolean;

export function compileMetadataMatcher(m: MetadataMatcher, where: string): MetadataMatch {
  if (!m.filter) throw new ConfigError(`${where}.filter: must not be empty`);
  if (m.path.length === 0) throw new ConfigError(`${where}.path: at least one path segment is required`);
  const path = m.path.map((s, i) => {
    if (s.segment.case !== 'key') throw new ConfigError(`${where}.path[${i}]: a key is required`);
    return s.segment.value;
  });
  const f = compileValueMatcher(m.value, `${where}.value`);
  const filter = m.filter;
  const invert = m.invert;
  return (md) => f(metadataValue(md, filter, path)) !== invert;
}
