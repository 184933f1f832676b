// Envoy matcher shapes as Istio's security code writes them (pilot/pkg/security/authz/matcher and the
// JWT-claim helpers of authz/model): string matchers with Istio's `*` conventions, header and path
// matchers, and metadata matchers reading the payload jwt_authn stores under `payload`.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HeaderMatcherSchema } from '../gen/envoy/config/route/v3/route_components_pb';
import type { MetadataMatcherSchema } from '../gen/envoy/type/matcher/v3/metadata_pb';
import type { PathMatcherSchema } from '../gen/envoy/type/matcher/v3/path_pb';
import type { StringMatcherSchema } from '../gen/envoy/type/matcher/v3/string_pb';
import type { ValueMatcherSchema } from '../gen/envoy/type/matcher/v3/value_pb';

export type StringMatcherInit = MessageInitShape<typeof StringMatcherSchema>;
export type ValueMatcherInit = MessageInitShape<typeof ValueMatcherSchema>;
export type MetadataMatcherInit = MessageInitShape<typeof MetadataMatcherSchema>;
export type HeaderMatcherInit = MessageInitShape<typeof HeaderMatcherSchema>;
export type PathMatcherInit = MessageInitShape<typeof PathMatcherSchema>;

/** Istio's filters.EnvoyJwtFilterName and EnvoyJwtFilterPayload: where jwt_authn puts a verified payload. */
export const JWT_FILTER_NAME = 'envoy.filters.http.jwt_authn';
export const JWT_PAYLOAD_KEY = 'payload';

export function exactMatcher(value: string, ignoreCase = false): StringMatcherInit {
  return { matchPattern: { case: 'exact', value }, ...(ignoreCase ? { ignoreCase } : {}) };
}
export function prefixMatcher(value: string, ignoreCase = false): StringMatcherInit {
  return { matchPattern: { case: 'prefix', value }, ...(ignoreCase ? { ignoreCase } : {}) };
}
export function suffixMatcher(value: string, ignoreCase = false): StringMatcherInit {
  return { matchPattern: { case: 'suffix', value }, ...(ignoreCase ? { ignoreCase } : {}) };
}
/** Istio's StringMatcherRegex: a safe_regex with no engine named (RE2 is Envoy's default). */
export function regexMatcher(regex: string): StringMatcherInit {
  return { matchPattern: { case: 'safeRegex', value: { regex } } };
}

/**
 * Istio's StringMatcherWithPrefix: `*` is any non-empty value (`.+`), `*x` a suffix, `x*` a prefix,
 * anything else exact; `prefix` is prepended to the value (a suffix then becomes a regex).
 */
export function istioStringMatcher(v: string, prefix = ''): StringMatcherInit {
  if (v === '*') return regexMatcher('.+');
  if (v.startsWith('*')) return prefix === '' ? suffixMatcher(v.slice(1)) : regexMatcher(`${prefix}.*${v.slice(1)}`);
  if (v.endsWith('*')) return prefixMatcher(prefix + v.slice(0, -1));
  return exactMatcher(prefix + v);
}

/** Istio's HeaderMatcher: `*` is presence, `*x`/`x*` suffix/prefix, else exact (case-sensitive). */
export function istioHeaderMatcher(name: string, v: string): HeaderMatcherInit {
  return headerWith(name, v, false);
}

/** Istio's HostMatcher: like the header matcher but case-insensitive, for `:authority`. */
export function istioHostMatcher(name: string, v: string): HeaderMatcherInit {
  return headerWith(name, v, true);
}

function headerWith(name: string, v: string, ignoreCase: boolean): HeaderMatcherInit {
  // `*` is checked first: an empty prefix or suffix is invalid in a HeaderMatcher.
  if (v === '*') return { name, headerMatchSpecifier: { case: 'presentMatch', value: true } };
  let sm: StringMatcherInit;
  if (v.startsWith('*')) sm = suffixMatcher(v.slice(1), ignoreCase);
  else if (v.endsWith('*')) sm = prefixMatcher(v.slice(0, -1), ignoreCase);
  else sm = exactMatcher(v, ignoreCase);
  return { name, headerMatchSpecifier: { case: 'stringMatch', value: sm } };
}

/** Istio's PathMatcher: the URL path without the query, matched with the `*` conventions. */
export function istioPathMatcher(path: string): PathMatcherInit {
  return { rule: { case: 'path', value: istioStringMatcher(path) } };
}

export function stringValue(sm: StringMatcherInit): ValueMatcherInit {
  return { matchPattern: { case: 'stringMatch', value: sm } };
}

/** Istio's OrMatcher: a single matcher stays as it is. */
export function orValue(matchers: ValueMatcherInit[]): ValueMatcherInit {
  if (matchers.length === 1) return matchers[0]!;
  return { matchPattern: { case: 'orMatch', value: { valueMatchers: matchers } } };
}

/** Istio's StringOrMatcher: any of the values, each with the `*` conventions. */
export function stringOrValue(values: readonly string[]): ValueMatcherInit {
  return orValue(values.map((v) => stringValue(istioStringMatcher(v))));
}

function keyPath(keys: readonly string[]): MetadataMatcherInit['path'] {
  return keys.map((k) => ({ segment: { case: 'key' as const, value: k } }));
}

/**
 * Istio's MetadataListValueMatcher with useExtendedJwt: the value at the path matches when it is a
 * list with an element matching `value`, or when it matches `value` itself (a string claim).
 */
export function metadataListOrValueMatcher(filter: string, keys: readonly string[], value: ValueMatcherInit): MetadataMatcherInit {
  return {
    filter,
    path: keyPath(keys),
    value: {
      matchPattern: {
        case: 'orMatch',
        value: { valueMatchers: [{ matchPattern: { case: 'listMatch', value: { matchPattern: { case: 'oneOf', value } } } }, value] },
      },
    },
  };
}

/** Istio's MetadataValueMatcherForJWTClaim: `payload.<claim>` of the jwt_authn metadata, one level. */
export function jwtClaimValueMatcher(claim: string, value: ValueMatcherInit): MetadataMatcherInit {
  return { filter: JWT_FILTER_NAME, path: keyPath([JWT_PAYLOAD_KEY, claim]), value };
}

/** Istio's MetadataStringMatcherForJWTClaim. */
export function jwtClaimStringMatcher(claim: string, sm: StringMatcherInit): MetadataMatcherInit {
  return jwtClaimValueMatcher(claim, stringValue(sm));
}

/** Istio's MetadataListValueMatcherForJWTClaims: nested claims, string or list values. */
export function jwtClaimsListValueMatcher(claims: readonly string[], value: ValueMatcherInit): MetadataMatcherInit {
  return metadataListOrValueMatcher(JWT_FILTER_NAME, [JWT_PAYLOAD_KEY, ...claims], value);
}

/** Istio's MetadataMatcherForJWTClaims (route claim matches): one string matcher. */
export function jwtClaimsMatcher(claims: readonly string[], sm: StringMatcherInit): MetadataMatcherInit {
  return jwtClaimsListValueMatcher(claims, stringValue(sm));
}

/** Istio's MetadataValueMatcher: one key under a filter's metadata, any value matcher. */
export function metadataValueMatcher(filter: string, key: string, value: ValueMatcherInit): MetadataMatcherInit {
  return { filter, path: keyPath([key]), value };
}
