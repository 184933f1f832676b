// AuthorizationPolicies of a workload → RBAC HTTP filters and RBAC network filters (for TCP filter
// chains) in Istio's order and shape (pilot/pkg/security/authz/builder): one filter per action present,
// AUDIT (LOG) then DENY then ALLOW,
// each holding one policy per rule named `ns[<ns>]-policy[<name>]-rule[<i>]`. Dry-run policies go to
// shadow rules. A policy without rules gets a policy that never matches, so an ALLOW policy without
// rules denies everything.
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import type { Config } from '../../config/types';
import { RBAC_Action, type RBACSchema as CoreRbacSchema } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import { FilterSchema, type Filter } from '../../gen/envoy/config/listener/v3/listener_components_pb';
import { RBACSchema } from '../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { RBACSchema as NetworkRBACSchema } from '../../gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import type { HttpFilter } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { registerScope } from '../../lib/log';
import { pack } from '../../xds/gen/common';
import { httpFilter } from '../../xds/gen/filters';
import { generatePolicy, newModel, permissionAny, permissionNot, principalAny, principalNot, type PolicyInit, type RbacAction } from './model';

const log = registerScope('authorization', 'Istio Authorization Policy');

export const RBAC_FILTER_NAME = 'envoy.filters.http.rbac';
/** Istio wellknown.RoleBasedAccessControl: the network (TCP) RBAC filter. */
export const RBAC_NETWORK_FILTER_NAME = 'envoy.filters.network.rbac';
/** Istio authzmodel.RBACTCPFilterStatPrefix: the network filter's stats are `tcp.rbac.*`. */
export const RBAC_TCP_FILTER_STAT_PREFIX = 'tcp.';
export const SHADOW_RULES_ALLOW_STAT_PREFIX = 'istio_dry_run_allow_';
export const SHADOW_RULES_DENY_STAT_PREFIX = 'istio_dry_run_deny_';
/** Istio's annotation and ours marking a policy as dry-run. */
export const DRY_RUN_ANNOTATIONS = ['istio.io/dry-run', 'mesh.io/dry-run'] as const;

type RbacInit = MessageInitShape<typeof CoreRbacSchema>;

/** Istio rbacPolicyMatchNever. */
export function policyMatchNever(): PolicyInit {
  return { permissions: [permissionNot(permissionAny())], principals: [principalNot(principalAny())] };
}

/** Istio rbacDefaultDenyAll: what a CUSTOM policy becomes when its provider cannot be used. */
export const DENY_ALL_BAD_CUSTOM_POLICY = 'default-deny-all-due-to-bad-CUSTOM-action';

export function policyName(namespace: string, name: string, rule: number): string {
  return `ns[${namespace}]-policy[${name}]-rule[${rule}]`;
}

const GO_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const GO_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

function isDryRun(p: Config<'AuthorizationPolicy'>): boolean {
  for (const a of DRY_RUN_ANNOTATIONS) {
    const v = p.meta.annotations[a];
    if (v === undefined) continue;
    if (GO_TRUE.has(v)) return true;
    if (!GO_FALSE.has(v)) log.error(`failed to parse the value of ${a}: strconv.ParseBool: parsing ${JSON.stringify(v)}: invalid syntax`);
  }
  return false;
}

const ACTIONS: Record<RbacAction, RBAC_Action> = { ALLOW: RBAC_Action.ALLOW, DENY: RBAC_Action.DENY, AUDIT: RBAC_Action.LOG };

function shadowStatPrefix(action: RbacAction): string {
  return action === 'ALLOW' ? SHADOW_RULES_ALLOW_STAT_PREFIX : action === 'DENY' ? SHADOW_RULES_DENY_STAT_PREFIX : '';
}

interface BuiltRules {
  rules?: RbacInit;
  shadowRules?: RbacInit;
  shadowRulesStatPrefix: string;
}

/**
 * Istio Builder.build for one action: the enforced and the dry-run rule sets. With `forTCP`, HTTP-only
 * conditions make an ALLOW rule disappear (a smaller allow) and are dropped from DENY/AUDIT rules (a
 * wider deny), as Istio's model does.
 */
function buildAction(policies: readonly Config<'AuthorizationPolicy'>[], action: RbacAction, forTCP: boolean): BuiltRules | undefined {
  if (policies.length === 0) return undefined;
  const chain = forTCP ? 'TCP' : 'HTTP';
  const enforce: RbacInit = { action: ACTIONS[action], policies: {} };
  const shadow: RbacInit = { action: ACTIONS[action], policies: {} };
  let hasEnforce = false;
  let hasShadow = false;
  for (const p of policies) {
    const dry = isDryRun(p);
    const target = dry ? shadow : enforce;
    if (dry) hasShadow = true;
    else hasEnforce = true;
    const rules = p.spec.rules ?? [];
    rules.forEach((rule, i) => {
      const name = policyName(p.meta.namespace, p.meta.name, i);
      if (rule == null) {
        log.error(`skipped nil rule ${name}`);
        return;
      }
      try {
        target.policies![name] = generatePolicy(newModel(p.meta.namespace, rule, forTCP), action);
        log.debug(`generated config from rule ${name} on ${chain} filter chain successfully`);
      } catch (e) {
        log.debug(`skipped rule ${name} on ${chain} filter chain: ${(e as Error).message}`);
      }
    });
    if (rules.length === 0) target.policies![policyName(p.meta.namespace, p.meta.name, 0)] = policyMatchNever();
  }
  return {
    ...(hasEnforce ? { rules: enforce } : {}),
    ...(hasShadow ? { shadowRules: shadow } : {}),
    // Istio derives the prefix from the shadow rules' action, and an absent rule set reads as ALLOW, so
    // every filter without dry-run policies carries the ALLOW prefix.
    shadowRulesStatPrefix: shadowStatPrefix(hasShadow ? action : 'ALLOW'),
  };
}

type ByAction = Record<RbacAction | 'CUSTOM', Config<'AuthorizationPolicy'>[]>;

function byAction(policies: readonly Config<'AuthorizationPolicy'>[]): ByAction {
  const by: ByAction = { ALLOW: [], DENY: [], AUDIT: [], CUSTOM: [] };
  for (const p of policies) by[p.spec.action ?? 'ALLOW'].push(p);
  return by;
}

/** Istio's rbacDefaultDenyAll for CUSTOM policies whose provider cannot be used; logs why. */
function badCustomDenyRules(custom: readonly Config<'AuthorizationPolicy'>[], chain: 'HTTP' | 'TCP'): RbacInit {
  const names = custom.map((p) => `${p.meta.namespace}/${p.meta.name} (provider ${JSON.stringify(p.spec.provider?.name ?? '')})`).join(', ');
  log.error(
    `failed to process CUSTOM action on ${chain} filter chain: no extension provider is configured for ${names}; denying all ${chain === 'HTTP' ? 'requests' : 'connections'}`,
  );
  return { action: RBAC_Action.DENY, policies: { [DENY_ALL_BAD_CUSTOM_POLICY]: { permissions: [permissionAny()], principals: [principalAny()] } } };
}

/**
 * The RBAC filters for the policies selecting a workload (oldest first). CUSTOM policies need an
 * extension provider this control plane does not have, so, as Istio does for a provider it cannot use,
 * they become one filter denying every request, placed first.
 */
export function buildAuthzHttpFilters(policies: readonly Config<'AuthorizationPolicy'>[]): HttpFilter[] {
  const by = byAction(policies);
  const out: HttpFilter[] = [];
  if (by.CUSTOM.length > 0) out.push(httpFilter(RBAC_FILTER_NAME, pack(RBACSchema, { rules: badCustomDenyRules(by.CUSTOM, 'HTTP') })));
  for (const action of ['AUDIT', 'DENY', 'ALLOW'] as const) {
    const b = buildAction(by[action], action, false);
    if (b) out.push(httpFilter(RBAC_FILTER_NAME, pack(RBACSchema, b)));
  }
  return out;
}

function networkRbacFilter(config: MessageInitShape<typeof NetworkRBACSchema>): Filter {
  return create(FilterSchema, {
    name: RBAC_NETWORK_FILTER_NAME,
    configType: { case: 'typedConfig', value: pack(NetworkRBACSchema, { ...config, statPrefix: RBAC_TCP_FILTER_STAT_PREFIX }) },
  });
}

/**
 * The network RBAC filters (Istio Builder.BuildTCP) placed before tcp_proxy on the TCP filter chains of
 * sidecar inbound listeners and gateways: same order, names and rule sets as the HTTP filters, built
 * with the TCP model and the stat prefix `tcp.`.
 */
export function buildAuthzNetworkFilters(policies: readonly Config<'AuthorizationPolicy'>[]): Filter[] {
  const by = byAction(policies);
  const out: Filter[] = [];
  if (by.CUSTOM.length > 0) out.push(networkRbacFilter({ rules: badCustomDenyRules(by.CUSTOM, 'TCP') }));
  for (const action of ['AUDIT', 'DENY', 'ALLOW'] as const) {
    const b = buildAction(by[action], action, true);
    if (b) out.push(networkRbacFilter(b));
  }
  return out;
}
