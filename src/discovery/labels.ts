// Label selector semantics shared by registries and the push context.

export type Labels = Readonly<Record<string, string>>;

/** True when every key/value of `selector` is present in `labels`; an empty selector selects all. */
export function selectorMatches(selector: Labels | undefined, labels: Labels): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector)) {
    if (labels[k] !== v) return false;
  }
  return true;
}

export function isEmptySelector(selector: Labels | undefined): boolean {
  return !selector || Object.keys(selector).length === 0;
}

/** Label keys naming a workload's TLS mode: ours and Istio's (`security.istio.io/tlsMode`). */
export const TLS_MODE_LABELS = ['security.mesh.io/tlsMode', 'security.istio.io/tlsMode'] as const;
/** The tlsMode of workloads with a sidecar, as Istio writes it in xDS (model.IstioMutualTLSModeLabel). */
export const TLS_MODE_ISTIO = 'istio';
export const TLS_MODE_DISABLED = 'disabled';

/**
 * Istio GetTLSModeFromEndpointLabels: the label's value, `disabled` without one. Our injector writes
 * `mesh` where Istio's writes `istio`; both mean "has a sidecar" and become `istio`, the value Istio's
 * transport socket matches look for, so the xDS stays Istio's.
 */
export function endpointTlsMode(labels: Labels): string {
  for (const k of TLS_MODE_LABELS) {
    const v = labels[k];
    if (v === undefined) continue;
    return v === 'mesh' ? TLS_MODE_ISTIO : v;
  }
  return TLS_MODE_DISABLED;
}
