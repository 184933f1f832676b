// The security half of the generators: jwt_authn and RBAC filters for the HTTP connection managers of
// gateways and sidecar inbound listeners, network RBAC filters for their TCP filter chains (Istio's
// authn/authz builders skip sidecar outbound), and the
// claim-header hook of the route generators.
import type { Config } from '../config/types';
import type { PushContext } from '../discovery/push-context';
import type { SecurityFilterBuilders } from '../xds/gen/filters';
import type { GeneratorOptions } from '../xds/gen/generators';
import { goDurationMs } from '../xds/gen/common';
import { planJwks } from './authn/jwks-source';
import { jwtFilter } from './authn/jwt-filter';
import { buildAuthzHttpFilters, buildAuthzNetworkFilters } from './authz/builder';
import { claimMetadataMatcherHook } from './claims';
import type { JwksFetchMode } from './jwks/mode';
import { DEFAULT_JWKS_TIMEOUT_MS, type JwksResolver } from './jwks/resolver';

export interface SecurityContext {
  mode: JwksFetchMode;
  resolver: JwksResolver;
}

/** Called only where traffic enters a workload (gateway, sidecar inbound): filters.ts decides placement. */
export function securityFilterBuilders(ctx: SecurityContext): SecurityFilterBuilders {
  return {
    authn: (proxy, push, cls) => {
      // A gateway re-selects the route after validation so that claim matches see the payload.
      const f = jwtFilter(push.requestAuthentications(proxy), cls === 'gateway', { ...ctx, push });
      return f ? [f] : [];
    },
    authz: (proxy, push) => buildAuthzHttpFilters(push.authorizationPolicies(proxy)),
    authzTcp: (proxy, push) => buildAuthzNetworkFilters(push.authorizationPolicies(proxy)),
  };
}

/** What the daemon passes to generatorsFor. */
export function securityGeneratorOptions(ctx: SecurityContext): Required<Pick<GeneratorOptions, 'security' | 'metadataMatcher'>> {
  return { security: securityFilterBuilders(ctx), metadataMatcher: claimMetadataMatcherHook };
}

/**
 * Starts the daemon's fetch of every key set it will have to inline, so that keys are usually known
 * before the first proxy asks. Generation would start the same fetches; this only starts them earlier.
 */
export function prefetchJwks(policies: readonly Config<'RequestAuthentication'>[], push: PushContext, ctx: SecurityContext): void {
  for (const p of policies) {
    for (const rule of p.spec.jwtRules ?? []) {
      if (rule.jwks && (ctx.mode === 'istiod' || !rule.jwksUri)) continue;
      if (planJwks(rule, { mode: ctx.mode, push }, true).by !== 'daemon') continue;
      ctx.resolver.getPublicKey(rule.issuer, rule.jwksUri ?? '', goDurationMs(rule.timeout) ?? DEFAULT_JWKS_TIMEOUT_MS);
    }
  }
}
