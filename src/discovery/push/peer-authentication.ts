// PeerAuthentication → mutual TLS modes, as Istio resolves them (pilot/pkg/model/authentication.go
// addPeerAuthentication, pilot/pkg/security/authn ComposePeerAuthentication). Two questions are answered:
// which mode a workload's own inbound port runs (mesh → namespace → workload → port level, UNSET
// inheriting from the level above, PERMISSIVE when nothing says otherwise), and which mode a client should
// assume for a destination namespace when deciding auto mTLS (namespace level, else mesh level, else unknown).
import type { Config } from '../../config/types';
import { isEmptySelector, selectorMatches } from '../labels';
import { byAge } from './visibility';

/** Istio model.MutualTLSMode. UNKNOWN: no policy says anything. */
export type MutualTlsMode = 'UNKNOWN' | 'DISABLE' | 'PERMISSIVE' | 'STRICT';

type SpecMode = NonNullable<NonNullable<Config<'PeerAuthentication'>['spec']['mtls']>['mode']>;

/** Istio ConvertToMutualTLSMode: UNSET (or absent) is UNKNOWN. */
export function convertMode(mode: SpecMode | undefined): MutualTlsMode {
  return mode === 'DISABLE' || mode === 'PERMISSIVE' || mode === 'STRICT' ? mode : 'UNKNOWN';
}

function unset(m: { mode?: SpecMode } | undefined): boolean {
  return !m || m.mode === undefined || m.mode === 'UNSET';
}

/** A workload's effective policy: a mode, overridden per workload port. */
export interface MergedPeerAuthentication {
  mode: MutualTlsMode;
  perPort: ReadonlyMap<number, MutualTlsMode>;
}

/**
 * The PeerAuthentications Istio looks at for a workload (getConfigsForWorkload): those of its namespace and
 * of the root namespace whose selector (if any) matches its labels.
 */
export function peerAuthenticationsFor(
  policies: readonly Config<'PeerAuthentication'>[],
  rootNamespace: string,
  namespace: string,
  labels: Readonly<Record<string, string>>,
): Config<'PeerAuthentication'>[] {
  return policies
    .filter((p) => (p.meta.namespace === namespace || p.meta.namespace === rootNamespace) && selectorMatches(p.spec.selector?.matchLabels, labels))
    .sort(byAge);
}

/**
 * Istio ComposePeerAuthentication: the oldest mesh-level (root namespace, no selector), namespace-level (no
 * selector) and workload-level (selector, not in the root namespace) policies, applied in that order; an
 * UNSET level keeps the mode of the level above; port-level settings come from the workload policy only,
 * an UNSET port inheriting the workload's resulting mode.
 */
export function composePeerAuthentication(rootNamespace: string, configs: readonly Config<'PeerAuthentication'>[]): MergedPeerAuthentication {
  let meshCfg: Config<'PeerAuthentication'> | undefined;
  let namespaceCfg: Config<'PeerAuthentication'> | undefined;
  let workloadCfg: Config<'PeerAuthentication'> | undefined;
  const older = (a: Config<'PeerAuthentication'>, b: Config<'PeerAuthentication'> | undefined) => !b || byAge(a, b) < 0;
  for (const c of configs) {
    if (isEmptySelector(c.spec.selector?.matchLabels)) {
      if (c.meta.namespace === rootNamespace) {
        if (older(c, meshCfg)) meshCfg = c;
      } else if (older(c, namespaceCfg)) namespaceCfg = c;
    } else if (c.meta.namespace !== rootNamespace && older(c, workloadCfg)) {
      workloadCfg = c;
    }
  }
  let mode: MutualTlsMode = 'PERMISSIVE';
  for (const c of [meshCfg, namespaceCfg, workloadCfg]) {
    if (c && !unset(c.spec.mtls)) mode = convertMode(c.spec.mtls!.mode);
  }
  const perPort = new Map<number, MutualTlsMode>();
  for (const [port, m] of Object.entries(workloadCfg?.spec.portLevelMtls ?? {})) {
    perPort.set(Number(port), unset(m) ? mode : convertMode(m.mode));
  }
  return { mode, perPort };
}

/** Istio GetMutualTLSModeForPort. */
export function modeForPort(merged: MergedPeerAuthentication, port: number): MutualTlsMode {
  return merged.perPort.get(port) ?? merged.mode;
}

/**
 * What clients assume of each namespace (Istio AuthenticationPolicies: globalMutualTLSMode and
 * namespaceMutualTLSMode). Only selector-less policies count, the oldest per namespace; the mesh policy's
 * UNSET means PERMISSIVE; a namespace policy's UNSET inherits the mesh mode (PERMISSIVE when there is none).
 */
export class NamespaceMtlsModes {
  readonly global: MutualTlsMode;
  private readonly byNamespace = new Map<string, MutualTlsMode>();

  constructor(policies: readonly Config<'PeerAuthentication'>[], rootNamespace: string) {
    let global: MutualTlsMode = 'UNKNOWN';
    const found = new Map<string, SpecMode | undefined>();
    for (const c of [...policies].sort(byAge)) {
      if (!isEmptySelector(c.spec.selector?.matchLabels)) continue;
      if (c.meta.namespace === rootNamespace) {
        if (found.has(rootNamespace)) continue;
        found.set(rootNamespace, c.spec.mtls?.mode);
        global = unset(c.spec.mtls) ? 'PERMISSIVE' : convertMode(c.spec.mtls!.mode);
      } else if (!found.has(c.meta.namespace)) {
        found.set(c.meta.namespace, c.spec.mtls?.mode);
      }
    }
    this.global = global;
    const inherited = global === 'UNKNOWN' ? 'PERMISSIVE' : global;
    for (const [ns, m] of found) {
      if (ns === rootNamespace) continue;
      this.byNamespace.set(ns, m === undefined || m === 'UNSET' ? inherited : convertMode(m));
    }
  }

  /** Istio GetNamespaceMutualTLSMode. */
  forNamespace(namespace: string): MutualTlsMode {
    return this.byNamespace.get(namespace) ?? this.global;
  }
}
