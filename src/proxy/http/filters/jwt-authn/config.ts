// JwtAuthentication → what the filter runs: compiled providers, route rules, named requirements,
// filter-state rules; and PerRouteConfig. Everything that can be wrong in the config is reported here
// (the listener is NACKed) instead of at request time.
import { create } from '@bufbuild/protobuf';
import { anyUnpack, type Any } from '@bufbuild/protobuf/wkt';
import { RouteMatchSchema } from '../../../../gen/envoy/config/route/v3/route_components_pb';
import {
  JwtAuthenticationSchema,
  PerRouteConfigSchema,
  type JwtAuthentication,
} from '../../../../gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { ConfigError } from '../../../common/config-error';
import { compileRouteMatch } from '../../../route/match';
import type { RouteRequest } from '../../../route/types';
import type { ProviderSet } from './authenticator';
import { compileProvider, type ProviderDeps, type ProviderRuntime } from './provider';
import { createVerifier, type Verifier } from './verifier';

export interface RequirementRuleRuntime {
  readonly matches: (r: RouteRequest) => boolean;
  /** undefined: the rule matches and nothing is required. */
  readonly verifier: Verifier | undefined;
}

export interface JwtAuthnConfig {
  readonly providers: ProviderSet;
  readonly rules: readonly RequirementRuleRuntime[];
  readonly filterStateName: string;
  readonly filterStateVerifiers: ReadonlyMap<string, Verifier>;
  readonly requirementMap: ReadonlyMap<string, Verifier>;
  /** Sorted, comma-joined names for the "Wrong requirement_name" message. */
  readonly requirementNames: string;
  readonly bypassCorsPreflight: boolean;
  readonly stripFailureResponse: boolean;
}

/** Decoded PerRouteConfig. */
export type JwtAuthnPerRoute = { readonly disabled: true } | { readonly disabled: false; readonly requirementName: string };

export function decodeJwtAuthentication(any: Any | undefined, where: string): JwtAuthentication {
  if (!any) return create(JwtAuthenticationSchema, {});
  const c = anyUnpack(any, JwtAuthenticationSchema);
  if (!c) throw new ConfigError(`${where}: cannot decode ${any.typeUrl} as ${JwtAuthenticationSchema.typeName}`);
  return c;
}

function providerSet(byName: Map<string, ProviderRuntime>): ProviderSet {
  const byIssuer = new Map<string, ProviderRuntime>();
  for (const p of byName.values()) if (!byIssuer.has(p.issuer)) byIssuer.set(p.issuer, p);
  return {
    byName,
    byIssuer: (iss) => byIssuer.get(iss) ?? (iss !== '' ? byIssuer.get('') : undefined),
    single: byName.size === 1 ? byName.values().next().value : undefined,
  };
}

// The jwt_authn rule matcher looks at the path specifier, headers and query parameters only.
function compileRuleMatch(m: JwtAuthentication['rules'][number]['match'], where: string): (r: RouteRequest) => boolean {
  if (!m) throw new ConfigError(`${where}: value is required`);
  const only = create(RouteMatchSchema, {
    pathSpecifier: m.pathSpecifier,
    caseSensitive: m.caseSensitive,
    headers: m.headers,
    queryParameters: m.queryParameters,
  });
  return compileRouteMatch(only, where).matches;
}

export function compileJwtAuthn(c: JwtAuthentication, where: string, deps: ProviderDeps): JwtAuthnConfig {
  const byName = new Map<string, ProviderRuntime>();
  for (const [name, p] of Object.entries(c.providers)) byName.set(name, compileProvider(name, p, `${where}.providers["${name}"]`, deps));
  const providers = providerSet(byName);
  const vdeps = { providers, stats: deps.stats };

  const requirementMap = new Map<string, Verifier>();
  for (const [name, r] of Object.entries(c.requirementMap)) requirementMap.set(name, createVerifier(r, vdeps, `${where}.requirement_map["${name}"]`));
  const requirementNames = [...requirementMap.keys()].sort().join(',');

  const rules = c.rules.map((rule, i): RequirementRuleRuntime => {
    const w = `${where}.rules[${i}]`;
    const matches = compileRuleMatch(rule.match, `${w}.match`);
    const t = rule.requirementType;
    if (t.case === 'requires') return { matches, verifier: createVerifier(t.value, vdeps, `${w}.requires`) };
    if (t.case === 'requirementName') {
      if (!t.value) throw new ConfigError(`${w}.requirement_name: value length must be at least 1 characters`);
      const v = requirementMap.get(t.value);
      if (!v) throw new ConfigError(`${w}.requirement_name: Wrong requirement_name: ${t.value}. It should be one of [${requirementNames}]`);
      return { matches, verifier: v };
    }
    return { matches, verifier: undefined };
  });

  const filterStateVerifiers = new Map<string, Verifier>();
  let filterStateName = '';
  if (c.filterStateRules) {
    filterStateName = c.filterStateRules.name;
    if (!filterStateName) throw new ConfigError(`${where}.filter_state_rules.name: value length must be at least 1 characters`);
    for (const [k, r] of Object.entries(c.filterStateRules.requires))
      filterStateVerifiers.set(k, createVerifier(r, vdeps, `${where}.filter_state_rules.requires["${k}"]`));
  }

  // only a fully valid config starts fetching keys in the background
  for (const p of byName.values()) p.keys.start();
  return {
    providers,
    rules,
    filterStateName,
    filterStateVerifiers,
    requirementMap,
    requirementNames,
    bypassCorsPreflight: c.bypassCorsPreflight,
    stripFailureResponse: c.stripFailureResponse,
  };
}

export function decodePerRoute(any: Any, where: string): JwtAuthnPerRoute {
  const p = anyUnpack(any, PerRouteConfigSchema);
  if (!p) throw new ConfigError(`${where}: cannot decode ${any.typeUrl} as ${PerRouteConfigSchema.typeName}`);
  const s = p.requirementSpecifier;
  if (s.case === 'disabled') {
    if (!s.value) throw new ConfigError(`${where}.disabled: value must equal true`);
    return { disabled: true };
  }
  if (s.case === 'requirementName') {
    if (!s.value) throw new ConfigError(`${where}.requirement_name: value length must be at least 1 characters`);
    return { disabled: false, requirementName: s.value };
  }
  throw new ConfigError(`${where}: requirement_specifier is required (disabled or requirement_name)`);
}
