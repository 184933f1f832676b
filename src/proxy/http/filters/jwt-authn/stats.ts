// Envoy's jwt_authn counters, under `http.<stat_prefix>.jwt_authn.`.
import type { Counter, StatsScope } from '../../../stats/store';

export interface JwtAuthnStats {
  readonly allowed: Counter;
  readonly denied: Counter;
  readonly corsPreflightBypassed: Counter;
  readonly jwksFetchSuccess: Counter;
  readonly jwksFetchFailed: Counter;
  readonly jwtCacheHit: Counter;
  readonly jwtCacheMiss: Counter;
}

export function jwtAuthnStats(httpScope: StatsScope): JwtAuthnStats {
  const s = httpScope.scope('jwt_authn.');
  return {
    allowed: s.counter('allowed'),
    denied: s.counter('denied'),
    corsPreflightBypassed: s.counter('cors_preflight_bypassed'),
    jwksFetchSuccess: s.counter('jwks_fetch_success'),
    jwksFetchFailed: s.counter('jwks_fetch_failed'),
    jwtCacheHit: s.counter('jwt_cache_hit'),
    jwtCacheMiss: s.counter('jwt_cache_miss'),
  };
}
