// Routing on claims of a verified token: a VirtualService header key `@request.auth.claims.<a>.<b>` or
// `@request.auth.claims[<a>][<b>]` is not an HTTP header but a dynamic-metadata match on the payload
// jwt_authn stored (Istio route.translateMetadataMatch with pkg/jwt.ToRoutingClaim).
import type { StringMatch } from '../config/types';
import { toRoutingClaim } from '../config/validate/claims';
import type { MetadataMatcherHook } from '../xds/gen/route';
import {
  exactMatcher,
  jwtClaimsMatcher,
  JWT_FILTER_NAME,
  JWT_PAYLOAD_KEY,
  prefixMatcher,
  regexMatcher,
  type MetadataMatcherInit,
  type StringMatcherInit,
} from './matchers';

/**
 * The claim path a header name designates, or undefined for an ordinary header. The prefix is matched
 * case-insensitively; `.` separates nested claims, and `[a][b]` is needed when a claim name holds a dot.
 * Names that merely start like the prefix (`@request.auth.claims-x`, `@request.auth.claimsx`) are headers.
 */
export function claimPath(headerName: string): string[] | undefined {
  const rc = toRoutingClaim(headerName);
  return rc.match ? rc.claims : undefined;
}

/** Istio's util.ConvertToEnvoyMatch: the StringMatch as written, without the `*` conventions of authz. */
export function envoyStringMatcher(m: StringMatch | undefined): StringMatcherInit | undefined {
  if (!m) return undefined;
  if (m.exact !== undefined) return exactMatcher(m.exact);
  if (m.prefix !== undefined) return prefixMatcher(m.prefix);
  if (m.regex !== undefined) return regexMatcher(m.regex);
  return undefined;
}

/**
 * The route dynamic-metadata matcher for a claim header: filter `envoy.filters.http.jwt_authn`, path
 * `payload.<claims…>`, and Istio's extended-JWT value (a list with a matching element, or a matching
 * string). An empty matcher (`{}`), which for headers means "present", requires the claim to be present;
 * Istio would emit a matcher without a pattern there, which Envoy rejects.
 */
export function claimMetadataMatcher(claims: readonly string[], m: StringMatch | undefined): MetadataMatcherInit {
  const sm = envoyStringMatcher(m);
  if (sm) return jwtClaimsMatcher(claims, sm);
  return {
    filter: JWT_FILTER_NAME,
    path: [JWT_PAYLOAD_KEY, ...claims].map((k) => ({ segment: { case: 'key' as const, value: k } })),
    value: { matchPattern: { case: 'presentMatch', value: true } },
  };
}

/** The MetadataMatcherHook of the route generators: claim headers become metadata matches, the rest stay headers. */
export const claimMetadataMatcherHook: MetadataMatcherHook = (headerName, match) => {
  const claims = claimPath(headerName);
  return claims ? claimMetadataMatcher(claims, match) : undefined;
};
