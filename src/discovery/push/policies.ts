// Which security policies apply to a workload (Istio getConfigsForWorkload / PeerAuthentication
// selection). Only the selection lives here; turning them into jwt_authn / RBAC filters is for the
// filter builders of the security issue, which take these lists as input.
import type { Config } from '../../config/types';
import { isEmptySelector, selectorMatches } from '../labels';
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

export interface PeerAuthenticationsForWorkload {
  /** Root-namespace policy without selector. */
  mesh?: Config<'PeerAuthentication'>;
  /** Workload-namespace policy without selector. */
  namespace?: Config<'PeerAuthentication'>;
  /** Workload-namespace policy whose selector matches (oldest first; Istio uses the oldest). */
  workload: Config<'PeerAuthentication'>[];
}

/** PeerAuthentication layers: mesh, namespace and workload levels, as Istio composes them. */
export function peerAuthenticationsForWorkload(
  policies: readonly Config<'PeerAuthentication'>[],
  rootNamespace: string,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): PeerAuthenticationsForWorkload {
  const sorted = [...policies].sort(byAge);
  const out: PeerAuthenticationsForWorkload = { workload: [] };
  for (const p of sorted) {
    const sel = p.spec.selector?.matchLabels;
    if (p.meta.namespace === rootNamespace && isEmptySelector(sel)) out.mesh ??= p;
    if (p.meta.namespace !== namespace) continue;
    if (isEmptySelector(sel)) {
      if (p.meta.namespace !== rootNamespace || namespace === rootNamespace) out.namespace ??= p;
    } else if (selectorMatches(sel, labels)) {
      out.workload.push(p);
    }
  }
  return out;
}

export type { Selectable };
