// RequestAuthentication → the jwt_authn HTTP filter (Istio pilot/pkg/security/authn policy_applier.go
// newPolicyApplier + convertToEnvoyJwtConfig): the rules of every policy selecting the workload, merged
// and sorted by issuer, become providers `origins-<i>`; the requirement lets a request without a token
// through and rejects one with an invalid token.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Config, JWTRule } from '../../config/types';
import {
  JwtAuthenticationSchema,
  type JwtProviderSchema,
  type JwtRequirementSchema,
} from '../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import type { HttpFilter } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { goDurationMs, pack } from '../../xds/gen/common';
import { httpFilter } from '../../xds/gen/filters';
import { JWT_FILTER_NAME, JWT_PAYLOAD_KEY } from '../matchers';
import { DEFAULT_JWKS_TIMEOUT_MS } from '../jwks/resolver';
import { jwksSource, type JwksSourceContext } from './jwks-source';

export type JwtAuthenticationInit = MessageInitShape<typeof JwtAuthenticationSchema>;
type ProviderInit = MessageInitShape<typeof JwtProviderSchema>;
type RequirementInit = MessageInitShape<typeof JwtRequirementSchema>;

/** Claims Envoy turns from space-delimited strings into lists in the metadata (Istio 1.26's fixed set). */
export const SPACE_DELIMITED_CLAIMS: readonly string[] = ['scope', 'permission'];

/**
 * The rules of the selected policies in Istio's order: all rules of all policies, sorted by issuer so
 * the generated config is deterministic (a stable sort keeps equal issuers in policy order).
 */
export function mergedJwtRules(policies: readonly Config<'RequestAuthentication'>[]): JWTRule[] {
  const rules = policies.flatMap((p) => p.spec.jwtRules ?? []);
  return rules
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (a.r.issuer < b.r.issuer ? -1 : a.r.issuer > b.r.issuer ? 1 : a.i - b.i))
    .map(({ r }) => r);
}

const byName = (name: string): RequirementInit => ({ requiresType: { case: 'providerName', value: name } });
const allowMissing = (): RequirementInit => ({ requiresType: { case: 'allowMissing', value: {} } });

function provider(rule: JWTRule, clearRouteCache: boolean, ctx: JwksSourceContext): ProviderInit {
  const timeoutMs = goDurationMs(rule.timeout) ?? DEFAULT_JWKS_TIMEOUT_MS;
  const p: ProviderInit = {
    issuer: rule.issuer,
    audiences: rule.audiences ?? [],
    forward: rule.forwardOriginalToken ?? false,
    forwardPayloadHeader: rule.outputPayloadToHeader ?? '',
    payloadInMetadata: JWT_PAYLOAD_KEY,
    normalizePayloadInMetadata: { spaceDelimitedClaims: [...SPACE_DELIMITED_CLAIMS] },
    clearRouteCache,
    claimToHeaders: (rule.outputClaimToHeaders ?? []).map((c) => ({ headerName: c.header, claimName: c.claim })),
    // Without locations Envoy looks in `Authorization: Bearer …` and the `access_token` parameter.
    fromHeaders: (rule.fromHeaders ?? []).map((h) => ({ name: h.name, valuePrefix: h.prefix ?? '' })),
    fromParams: rule.fromParams ?? [],
    fromCookies: rule.fromCookies ?? [],
    jwksSourceSpecifier: jwksSource(rule, timeoutMs, ctx),
  };
  return p;
}

/**
 * Istio's convertToEnvoyJwtConfig. One provider: requires_any{provider, allow_missing}. Several: requires_any
 * of each provider alone (providers sharing a token location) and requires_all of {provider or
 * allow_missing} per provider (every token present must be valid). undefined when there are no rules.
 */
export function convertToEnvoyJwtConfig(
  rules: readonly JWTRule[],
  clearRouteCache: boolean,
  ctx: JwksSourceContext,
): JwtAuthenticationInit | undefined {
  if (rules.length === 0) return undefined;
  const providers: Record<string, ProviderInit> = {};
  const innerAnd: RequirementInit[] = [];
  const outerOr: RequirementInit[] = [];
  rules.forEach((rule, i) => {
    const name = `origins-${i}`;
    providers[name] = provider(rule, clearRouteCache, ctx);
    innerAnd.push({ requiresType: { case: 'requiresAny', value: { requirements: [byName(name), allowMissing()] } } });
    outerOr.push(byName(name));
  });
  const requires: RequirementInit =
    innerAnd.length === 1
      ? innerAnd[0]!
      : {
          requiresType: {
            case: 'requiresAny',
            value: { requirements: [...outerOr, { requiresType: { case: 'requiresAll', value: { requirements: innerAnd } } }] },
          },
        };
  return {
    rules: [{ match: { pathSpecifier: { case: 'prefix', value: '/' } }, requirementType: { case: 'requires', value: requires } }],
    providers,
    bypassCorsPreflight: true,
  };
}

/** The jwt_authn HTTP filter for the policies selecting a workload; undefined without JWT rules. */
export function jwtFilter(
  policies: readonly Config<'RequestAuthentication'>[],
  clearRouteCache: boolean,
  ctx: JwksSourceContext,
): HttpFilter | undefined {
  const config = convertToEnvoyJwtConfig(mergedJwtRules(policies), clearRouteCache, ctx);
  return config ? httpFilter(JWT_FILTER_NAME, pack(JwtAuthenticationSchema, config)) : undefined;
}
