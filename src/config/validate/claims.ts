// `@request.auth.claims` header keys in VirtualService matches: routing on claims of a token the
// gateway validated (Istio's pkg/jwt.ToRoutingClaim).

export const HEADER_JWT_CLAIM = '@request.auth.claims';

export interface RoutingClaim {
  match: boolean;
  separator: 'dot' | 'square';
  /** The claim path: `["groups"]`, `["nested","key"]`. */
  claims: string[];
}

/** `@request.auth.claims.a.b` or `@request.auth.claims[a][b]` (prefix matched case-insensitively). */
export function toRoutingClaim(headerName: string): RoutingClaim {
  const none: RoutingClaim = { match: false, separator: 'dot', claims: [] };
  if (!headerName.toLowerCase().startsWith(HEADER_JWT_CLAIM)) return none;
  const name = headerName.slice(HEADER_JWT_CLAIM.length);
  if (name.startsWith('.') && name.length > 1) return { match: true, separator: 'dot', claims: name.slice(1).split('.') };
  if (name.startsWith('[') && name.endsWith(']') && name.length > 2)
    return { match: true, separator: 'square', claims: name.slice(1, -1).split('][') };
  return none;
}
