// Public surface of the security translation: RequestAuthentication → jwt_authn, AuthorizationPolicy →
// RBAC, `@request.auth.claims` route matches, and the daemon's JWKS resolver.
import { sharedEnv } from '../../commands/env/shared';
import { EnvTable, type EnvVars } from '../lib/env';
import type { Config } from '../config/types';
import type { PushContext } from '../discovery/push-context';
import type { GeneratorOptions } from '../xds/gen/generators';
import { prefetchJwks, securityGeneratorOptions, type SecurityContext } from './builders';
import { parseJwksFetchMode, type JwksFetchMode } from './jwks/mode';
import { JwksResolver } from './jwks/resolver';

export { claimMetadataMatcher, claimMetadataMatcherHook, claimPath, envoyStringMatcher } from './claims';
export { convertToEnvoyJwtConfig, jwtFilter, mergedJwtRules, SPACE_DELIMITED_CLAIMS, type JwtAuthenticationInit } from './authn/jwt-filter';
export { jwksSource, lookupCluster, parseJwksUri, planJwks, REMOTE_JWKS_CACHE_DURATION_MS, type JwksPlan } from './authn/jwks-source';
export { buildAuthzHttpFilters, DENY_ALL_BAD_CUSTOM_POLICY, policyMatchNever, policyName, RBAC_FILTER_NAME } from './authz/builder';
export { generatePolicy, newModel, type Model, type PolicyInit, type RbacAction } from './authz/model';
export { prefetchJwks, securityFilterBuilders, securityGeneratorOptions, type SecurityContext } from './builders';
export { parseJwksFetchMode, type JwksFetchMode } from './jwks/mode';
export { createFakeJwks, keySetChanged } from './jwks/keyset';
export { JwksResolver, networkFetchFail, networkFetchSuccess, type JwksResolverOptions } from './jwks/resolver';
export { JWT_FILTER_NAME, JWT_PAYLOAD_KEY } from './matchers';

/** The daemon's security wiring: generator options, the resolver, and its lifecycle. */
export interface DaemonSecurity {
  readonly mode: JwksFetchMode;
  readonly resolver: JwksResolver;
  readonly generatorOptions: GeneratorOptions;
  /** Starts fetching the key sets a new configuration needs. */
  prefetch(policies: readonly Config<'RequestAuthentication'>[], push: PushContext): void;
  /** Called when fetched keys change; the daemon pushes. */
  onKeysChanged(fn: () => void): void;
  close(): void;
}

/**
 * From the daemon's environment: PILOT_JWT_ENABLE_REMOTE_JWKS, PILOT_JWT_PUB_KEY_REFRESH_INTERVAL and
 * JWKS_RESOLVER_INSECURE_SKIP_VERIFY. Throws with the variable's name when a value is unusable.
 */
export function createDaemonSecurity(vars: EnvVars): DaemonSecurity {
  const env = new EnvTable(sharedEnv, vars);
  const mode = parseJwksFetchMode(env.string('PILOT_JWT_ENABLE_REMOTE_JWKS'));
  const resolver = new JwksResolver({
    refreshIntervalMs: env.duration('PILOT_JWT_PUB_KEY_REFRESH_INTERVAL'),
    insecureSkipVerify: env.bool('JWKS_RESOLVER_INSECURE_SKIP_VERIFY'),
  });
  const ctx: SecurityContext = { mode, resolver };
  return {
    mode,
    resolver,
    generatorOptions: securityGeneratorOptions(ctx),
    prefetch: (policies, push) => prefetchJwks(policies, push, ctx),
    onKeysChanged: (fn) => resolver.setOnChange(fn),
    close: () => resolver.close(),
  };
}
