// PILOT_JWT_ENABLE_REMOTE_JWKS: who fetches the key sets of RequestAuthentication rules (Istio pkg/jwt
// JwksFetchMode).

/**
 * `istiod`: the daemon fetches every jwksUri and inlines the keys (local_jwks).
 * `hybrid`: the proxy fetches (remote_jwks) when the key server is a service of the mesh registry, the
 * daemon otherwise. `envoy`: the proxy always fetches, through the registry's cluster when there is one.
 */
export type JwksFetchMode = 'istiod' | 'hybrid' | 'envoy';

const MODES: Readonly<Record<string, JwksFetchMode>> = {
  false: 'istiod',
  istiod: 'istiod',
  true: 'hybrid',
  hybrid: 'hybrid',
  envoy: 'envoy',
};

/**
 * The mode a PILOT_JWT_ENABLE_REMOTE_JWKS value names. Istio falls back to `istiod` for anything it does
 * not know; a typo here would silently change who fetches keys, so it is an error instead.
 */
export function parseJwksFetchMode(raw: string): JwksFetchMode {
  const mode = MODES[raw.trim().toLowerCase()];
  if (mode === undefined) {
    throw new Error(
      `invalid value ${JSON.stringify(raw)} for environment variable PILOT_JWT_ENABLE_REMOTE_JWKS: expected one of false, istiod, true, hybrid, envoy`,
    );
  }
  return mode;
}
