// Which request-level security policies apply to a workload (Istio getConfigsForWorkload). Only the
// selection lives here; turning them into jwt_authn / RBAC filters is for the security filter builders.
// PeerAuthentication has its own composition rules: peer-authentication.ts.
import type { Config } from '../../config/types';
import { selectorMatches } from '../labels';
import { byAge } from './visibility';

type Selectable = 'RequestAuthentication' | 'AuthorizationPolicy' | 'PeerAuthentication';

/**
 * RequestAuthentication and AuthorizationPolicy: a policy in the root namespace applies in every
 * namespace, one in the workload's namespace applies there; a selector narrows either to matching
 * workloads. Policies that target by `targetRef(s)` are for waypoints/gateway-API and are not selected here.
 */
export function policiesForWorkload<K extends 'RequestAuthentication' | 'AuthorizationPolicy'>(
  policies: readonly Config<K>[],
  rootNamespace: string,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): Config<K>[] {
  return policies
    .filter((p) => {
      if (p.meta.namespace !== rootNamespace && p.meta.namespace !== namespace) return false;
      const spec = p.spec as { targetRef?: unknown; targetRefs?: unknown[]; selector?: { matchLabels?: Record<string, string> } };
      if (spec.targetRef || (spec.targetRefs && spec.targetRefs.length > 0)) return false;
      return selectorMatches(spec.selector?.matchLabels, labels);
    })
    .sort(byAge);
}

export type { Selectable };
