// AuthorizationPolicies of a workload → RBAC HTTP filters in Istio's order and shape
// (pilot/pkg/security/authz/builder): one filter per action present, AUDIT (LOG) then DENY then ALLOW,
// each holding one policy per rule named `ns[<ns>]-policy[<name>]-rule[<i>]`. Dry-run policies go to
// shadow rules. A policy without rules gets a policy that never matches, so an ALLOW policy without
// rules denies everything.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Config } from '../../config/types';
import { RBAC_Action, type RBACSchema as CoreRbacSchema } from '../../gen/envoy/config/rbac/v3/rbac_pb';
import { RBACSchema } from '../../gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import type { HttpFilter } from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { registerScope } from '../../lib/log';
import { pack } from '../../xds/gen/common';
import { httpFilter } from '../../xds/gen/filters';
import { generatePolicy, newModel, permissionAny, permissionNot, principalAny, principalNot, type PolicyInit, type RbacAction } from './model';

const log = registerScope('authorization', 'Istio Authorization Policy');

export const RBAC_FILTER_NAME = 'envoy.filters.http.rbac';
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

/** Istio Builder.build for one action: the enforced and the dry-run rule sets. */
function buildAction(policies: readonly Config<'AuthorizationPolicy'>[], action: RbacAction): HttpFilter | undefined {
  if (policies.length === 0) return undefined;
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
        target.policies![name] = generatePolicy(newModel(p.meta.namespace, rule), action);
        log.debug(`generated config from rule ${name} on HTTP filter chain successfully`);
      } catch (e) {
        log.debug(`skipped rule ${name}: ${(e as Error).message}`);
      }
    });
    if (rules.length === 0) target.policies![policyName(p.meta.namespace, p.meta.name, 0)] = policyMatchNever();
  }
  const config: MessageInitShape<typeof RBACSchema> = {};
  if (hasEnforce) config.rules = enforce;
  if (hasShadow) config.shadowRules = shadow;
  // Istio derives the prefix from the shadow rules' action, and an absent rule set reads as ALLOW, so
  // every filter without dry-run policies carries the ALLOW prefix.
  config.shadowRulesStatPrefix = shadowStatPrefix(hasShadow ? action : 'ALLOW');
  return httpFilter(RBAC_FILTER_NAME, pack(RBACSchema, config));
}

/**
 * The RBAC filters for the policies selecting a workload (oldest first). CUSTOM policies need an
 * extension provider this control plane does not have, so, as Istio does for a provider it cannot use,
 * they become one filter denying every request, placed first.
 */
export function buildAuthzHttpFilters(policies: readonly Config<'AuthorizationPolicy'>[]): HttpFilter[] {
  const by: Record<RbacAction | 'CUSTOM', Config<'AuthorizationPolicy'>[]> = { ALLOW: [], DENY: [], AUDIT: [], CUSTOM: [] };
  for (const p of policies) by[p.spec.action ?? 'ALLOW'].push(p);
  const out: HttpFilter[] = [];
  if (by.CUSTOM.length > 0) {
    const names = by.CUSTOM.map((p) => `${p.meta.namespace}/${p.meta.name} (provider ${JSON.stringify(p.spec.provider?.name ?? '')})`).join(', ');
    log.error(`failed to process CUSTOM action: no extension provider is configured for ${names}; denying all requests`);
    out.push(
      httpFilter(
        RBAC_FILTER_NAME,
        pack(RBACSchema, { rules: { action: RBAC_Action.DENY, policies: { [DENY_ALL_BAD_CUSTOM_POLICY]: { permissions: [permissionAny()], principals: [principalAny()] } } } }),
      ),
    );
  }
  for (const action of ['AUDIT', 'DENY', 'ALLOW'] as const) {
    const f = buildAction(by[action], action);
    if (f) out.push(f);
  }
  return out;
}
