// Workload instances behind services: inline ServiceEntry endpoints, WorkloadEntries (optionally
// completed by the WorkloadGroup they were registered from) and Pods, reduced to one shape.
import type { Config, WorkloadEntrySpec, WorkloadGroupSpec } from '../../config/types';
import { workloadEntryHealthy } from '../../config/workload-entry';
import type { HealthStatus } from '../model';

export interface Workload {
  name: string;
  namespace: string;
  address: string;
  /** Port name → target port (WorkloadEntry `ports`). */
  ports: Readonly<Record<string, number>>;
  labels: Readonly<Record<string, string>>;
  network?: string;
  locality?: string;
  weight?: number;
  /** SPIFFE identity, `spiffe://<td>/ns/<ns>/sa/<name>`. */
  serviceAccount?: string;
  health: HealthStatus;
}

// Annotations Istio puts on auto-registered WorkloadEntries to name their WorkloadGroup.
export const WORKLOAD_GROUP_ANNOTATIONS = ['istio.io/autoRegistrationGroup', 'mesh.io/autoRegistrationGroup'] as const;

export function spiffeIdentity(trustDomain: string, namespace: string, serviceAccount: string): string {
  return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
}

/** Istio's locality notation in labels uses dots (`region.zone.subzone`); the model uses slashes. */
export function normalizeLocality(l: string | undefined): string | undefined {
  if (!l) return undefined;
  return l.includes('/') ? l : l.replace(/\./g, '/');
}

export function workloadFromEntry(
  spec: WorkloadEntrySpec,
  name: string,
  namespace: string,
  trustDomain: string,
  group?: WorkloadGroupSpec,
  healthy = true,
): Workload | undefined {
  const tmpl = group?.template ?? {};
  const address = spec.address || tmpl.address;
  if (!address || address.startsWith('unix://')) return undefined;
  const sa = spec.serviceAccount || tmpl.serviceAccount;
  return {
    name,
    namespace,
    address,
    ports: { ...(tmpl.ports ?? {}), ...(spec.ports ?? {}) },
    labels: { ...(group?.metadata?.labels ?? {}), ...(tmpl.labels ?? {}), ...(spec.labels ?? {}) },
    network: spec.network || tmpl.network || undefined,
    locality: normalizeLocality(spec.locality || tmpl.locality),
    weight: spec.weight ?? tmpl.weight,
    serviceAccount: sa ? spiffeIdentity(trustDomain, namespace, sa) : undefined,
    health: healthy ? 'Healthy' : 'UnHealthy',
  };
}

/** A WorkloadEntry object's health (its health-checks annotation and `Healthy` condition). */
export function entryHealthy(we: Config<'WorkloadEntry'>): boolean {
  return workloadEntryHealthy(we.meta.annotations, we.status?.conditions);
}

/** The WorkloadGroup a WorkloadEntry was registered from, if it names one that exists. */
export function groupOf(we: Config<'WorkloadEntry'>, groups: ReadonlyMap<string, WorkloadGroupSpec>): WorkloadGroupSpec | undefined {
  for (const a of WORKLOAD_GROUP_ANNOTATIONS) {
    const g = we.meta.annotations[a];
    if (g) return groups.get(`${we.meta.namespace}/${g}`);
  }
  return undefined;
}

/** A running Pod with an IP as a workload (ServiceEntry workloadSelector may select Pods). */
export function workloadFromPod(pod: Config<'Pod'>, trustDomain: string): Workload | undefined {
  const ip = pod.status?.podIP ?? pod.status?.podIPs?.[0]?.ip;
  if (!ip) return undefined;
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return undefined;
  const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
  const sa = pod.spec.serviceAccountName || 'default';
  return {
    name: pod.meta.name,
    namespace: pod.meta.namespace,
    address: ip,
    ports: {},
    labels: pod.meta.labels,
    locality: normalizeLocality(pod.meta.labels['istio-locality']),
    serviceAccount: spiffeIdentity(trustDomain, pod.meta.namespace, sa),
    health: ready && ready.status !== 'True' ? 'UnHealthy' : 'Healthy',
  };
}
