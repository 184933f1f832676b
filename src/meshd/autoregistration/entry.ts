// WorkloadEntry auto-registration as data (Istio's pilot/pkg/autoregistration controller.go helpers and
// internal/health): the entry's name, the entry made from a WorkloadGroup's template, the annotations that
// say which daemon controls it and since when, the cleanup decision, and the `Healthy` condition. Pure.
//
// Renamed as everywhere in mesh: `istio.io/<x>` annotations are written as `mesh.io/<x>`; Istio's names are
// still read, so entries a user annotated with them are recognised.

import {
  annotation,
  AUTO_REGISTRATION_GROUP,
  CONDITION_HEALTHY,
  CONNECTED_AT,
  DISCONNECTED_AT,
  HEALTH_CHECKS_ENABLED,
  ISTIO_NAME,
  WORKLOAD_CONTROLLER,
} from '../../config/workload-entry';

export { annotation, AUTO_REGISTRATION_GROUP, CONDITION_HEALTHY, CONNECTED_AT, DISCONNECTED_AT, HEALTH_CHECKS_ENABLED, WORKLOAD_CONTROLLER };

/** The locality label the agent may send (Istio's pm.LocalityLabel); never copied onto an entry. */
const LOCALITY_LABEL = 'istio-locality';

type Annotations = Readonly<Record<string, string>> | undefined;

/** Removes an annotation under both names. */
function dropAnnotation(a: Record<string, string>, name: string): void {
  delete a[name];
  const istio = ISTIO_NAME[name];
  if (istio) delete a[istio];
}

// ---- time as Istio writes it (Go's time.RFC3339Nano) ---------------------------------------------------

/** Go's RFC3339Nano of a UTC time: trailing zeros of the fraction dropped, no fraction when it is zero. */
export function formatTime(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2026-01-02T03:04:05.120Z
  const [whole, frac] = iso.slice(0, -1).split('.') as [string, string];
  const f = frac.replace(/0+$/, '');
  return `${whole}${f ? `.${f}` : ''}Z`;
}

/** Parses an RFC 3339 time (any fraction length); undefined when it is not one (Go's zero time). */
export function parseTime(s: string | undefined): number | undefined {
  if (!s) return undefined;
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(s);
  if (!m) return undefined;
  const ms = Date.parse(`${m[1]}.${(m[2] ?? '').padEnd(3, '0').slice(0, 3)}${m[3]}`);
  return Number.isNaN(ms) ? undefined : ms;
}

// ---- the proxy as auto-registration sees it ----------------------------------------------------------

/** What of a connecting proxy auto-registration reads. */
export interface RegisteringProxy {
  /** Proxy ID (`name.namespace`), for messages. */
  id: string;
  namespace: string;
  ipAddresses: readonly string[];
  /** AUTO_REGISTER_GROUP metadata. */
  autoRegisterGroup?: string;
  /** WORKLOAD_ENTRY metadata: the existing entry a health-checked, not auto-registered, workload is. */
  workloadEntry?: string;
  network?: string;
  /** LABELS metadata. */
  labels: Readonly<Record<string, string>>;
  /** `region/zone/subzone` of the xDS node's locality, when it sent one. */
  locality?: string;
  /** PROXY_CONFIG metadata has a readinessProbe (Istio: proxy.Metadata.ProxyConfig.ReadinessProbe != nil). */
  hasReadinessProbe: boolean;
}

/** Istio's sanitizeIP: IPv6 colons are not allowed in names. */
function sanitizeIp(ip: string): string {
  return ip.replace(/:/g, '-');
}

/**
 * Istio's autoregisteredWorkloadEntryName: `<group>-<ip>[-<network>]`, its last 253 characters when longer;
 * an error message when the proxy cannot be registered (no IP, no namespace).
 */
export function autoRegisteredEntryName(p: RegisteringProxy): { name: string; shortened: boolean } | { error: string } | undefined {
  if (!p.autoRegisterGroup) return undefined;
  if (p.ipAddresses.length === 0) return { error: `auto-registration of ${p.id} failed: missing IP addresses` };
  if (!p.namespace) return { error: `auto-registration of ${p.id} failed: missing namespace` };
  const parts = [p.autoRegisterGroup, sanitizeIp(p.ipAddresses[0]!)];
  if (p.network) parts.push(p.network);
  const name = parts.join('-');
  return name.length > 253 ? { name: name.slice(name.length - 253), shortened: true } : { name, shortened: false };
}

// ---- objects -------------------------------------------------------------------------------------------

/** The orchestrator object of a WorkloadEntry as read and written (what we do not read is kept as is). */
export interface WorkloadEntryObject {
  apiVersion: string;
  kind: 'WorkloadEntry';
  metadata: {
    name: string;
    namespace: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    ownerReferences?: Array<{ apiVersion: string; kind: string; name: string; uid: string; controller?: boolean }>;
    [k: string]: unknown;
  };
  spec: Record<string, unknown> & { address?: string; labels?: Record<string, string>; network?: string; locality?: string };
  status?: { conditions?: Condition[]; [k: string]: unknown };
}

/** Istio's IstioCondition as stored (protojson of meta.v1alpha1.IstioCondition). */
export interface Condition {
  type: string;
  status: string;
  lastProbeTime?: string;
  lastTransitionTime?: string;
  reason?: string;
  message?: string;
}

/** The WorkloadGroup the entry is made from. */
export interface WorkloadGroupSource {
  apiVersion: string;
  name: string;
  namespace: string;
  uid: string;
  spec: {
    metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
    template?: Record<string, unknown> & { labels?: Record<string, string> };
  };
}

function hasKeys(m: Readonly<Record<string, string>> | undefined): m is Record<string, string> {
  return m !== undefined && Object.keys(m).length > 0;
}

/**
 * Istio's workloadEntryFromGroup: the template with the proxy's address; labels from the template, then the
 * group's metadata, then the proxy's (node metadata wins, its locality label dropped since the entry carries
 * the locality); annotations naming the group plus the group's metadata annotations; network and locality
 * from the proxy; the health-checks annotation when the proxy has a readiness probe; the group as
 * controlling owner. The connection annotations are added by `connected`.
 */
export function workloadEntryFromGroup(name: string, p: RegisteringProxy, group: WorkloadGroupSource): WorkloadEntryObject {
  const spec: WorkloadEntryObject['spec'] = structuredClone(group.spec.template ?? {});
  spec.address = p.ipAddresses[0]!;
  let labels = spec.labels;
  if (hasKeys(group.spec.metadata?.labels)) labels = { ...(labels ?? {}), ...group.spec.metadata.labels };
  if (hasKeys(p.labels)) {
    labels = { ...(labels ?? {}), ...p.labels };
    delete labels[LOCALITY_LABEL];
  }
  if (labels) spec.labels = labels;
  const annotations: Record<string, string> = { [AUTO_REGISTRATION_GROUP]: group.name, ...(group.spec.metadata?.annotations ?? {}) };
  if (p.network) spec.network = p.network;
  if (p.locality) spec.locality = p.locality;
  if (p.hasReadinessProbe) annotations[HEALTH_CHECKS_ENABLED] = 'true';
  return {
    apiVersion: group.apiVersion,
    kind: 'WorkloadEntry',
    metadata: {
      name,
      namespace: p.namespace,
      ...(labels ? { labels: { ...labels } } : {}),
      annotations,
      ownerReferences: [{ apiVersion: group.apiVersion, kind: 'WorkloadGroup', name: group.name, uid: group.uid, controller: true }],
    },
    spec,
  };
}

/** Istio's setConnectMeta: this daemon controls the entry since `at`; any disconnect mark goes. */
export function connected<T extends { metadata: { annotations?: Record<string, string> } }>(obj: T, controller: string, at: number): T {
  const out = structuredClone(obj);
  const a = (out.metadata.annotations ??= {});
  dropAnnotation(a, WORKLOAD_CONTROLLER);
  dropAnnotation(a, CONNECTED_AT);
  dropAnnotation(a, DISCONNECTED_AT);
  a[WORKLOAD_CONTROLLER] = controller;
  a[CONNECTED_AT] = formatTime(at);
  return out;
}

/** The disconnect mark (Istio's changeWorkloadEntryStateToDisconnected): connectedAt goes, disconnectedAt set. */
export function disconnected<T extends { metadata: { annotations?: Record<string, string> } }>(obj: T, at: number): T {
  const out = structuredClone(obj);
  const a = (out.metadata.annotations ??= {});
  dropAnnotation(a, CONNECTED_AT);
  dropAnnotation(a, DISCONNECTED_AT);
  a[DISCONNECTED_AT] = formatTime(at);
  return out;
}

/**
 * Istio's changeWorkloadEntryStateToConnected checks: whether a connection made at `conTime` to
 * `controller` should be written onto an entry with these annotations.
 */
export function shouldMarkConnected(a: Annotations, controller: string, conTime: number): boolean {
  const disconnAt = parseTime(annotation(a, DISCONNECTED_AT));
  // a connect processed slowly, after the disconnect that followed it
  if (disconnAt !== undefined && conTime < disconnAt) return false;
  const lastCon = parseTime(annotation(a, CONNECTED_AT)) ?? Number.NEGATIVE_INFINITY;
  // the proxy has since connected to another daemon
  if (conTime < lastCon) return false;
  // already written for this connection
  if (annotation(a, WORKLOAD_CONTROLLER) === controller && !(conTime > lastCon)) return false;
  return true;
}

/** Istio's changeWorkloadEntryStateToDisconnected checks, for a disconnect at `disconTime` of a connection made at `origConTime`. */
export function shouldMarkDisconnected(a: Annotations, controller: string, disconTime: number, origConTime: number): boolean {
  const recent = parseTime(annotation(a, CONNECTED_AT));
  // reconnected (here or elsewhere) after this connection was made
  if (recent !== undefined && recent > origConTime) return false;
  if (annotation(a, WORKLOAD_CONTROLLER) !== controller) return false;
  // Go's zero time when unset: never after a real disconnect time
  if (recent !== undefined && disconTime < recent) return false;
  return true;
}

export function isAutoRegistered(a: Annotations): boolean {
  return !!annotation(a, AUTO_REGISTRATION_GROUP);
}

/** Istio's isHealthCheckedWorkloadEntry: controlled by a daemon, but not auto-registered. */
export function isHealthChecked(a: Annotations): boolean {
  return !!annotation(a, WORKLOAD_CONTROLLER) && !isAutoRegistered(a);
}

/** Istio's IsEligibleForHealthStatusUpdates: the annotation is present, whatever its value. */
export function healthChecksEnabled(a: Annotations): boolean {
  return annotation(a, HEALTH_CHECKS_ENABLED) !== undefined;
}

/**
 * Istio's shouldCleanupEntry, at time `now`: only auto-registered entries (or health-checked ones with a
 * health condition); a connected entry only once it is older than the longest a connection lives (both
 * daemon and workload gone before the disconnect was written); a disconnected one after the grace period.
 */
export function shouldCleanup(
  e: { annotations: Annotations; hasHealthCondition: boolean },
  now: number,
  gracePeriodMs: number,
  maxConnectionAgeMs: number,
): boolean {
  if (!isAutoRegistered(e.annotations) && !(isHealthChecked(e.annotations) && e.hasHealthCondition)) return false;
  const con = annotation(e.annotations, CONNECTED_AT);
  if (con) {
    const at = parseTime(con);
    return at !== undefined && now - at > maxConnectionAgeMs;
  }
  const dis = annotation(e.annotations, DISCONNECTED_AT);
  if (!dis) return false;
  const at = parseTime(dis);
  // unparsable: Go's zero time, long past
  return !(at !== undefined && now - at < gracePeriodMs);
}

/**
 * Istio's NewController: the longest a connection lives is 1.5 × --keepaliveMaxServerConnectionAge; unset
 * (zero or less) means unlimited.
 */
export function maxConnectionAge(keepaliveMaxServerConnectionAgeMs: number): number {
  if (!(keepaliveMaxServerConnectionAgeMs > 0) || !Number.isFinite(keepaliveMaxServerConnectionAgeMs)) return Number.POSITIVE_INFINITY;
  return keepaliveMaxServerConnectionAgeMs * 1.5;
}

// ---- health --------------------------------------------------------------------------------------------

/** Istio's HealthEvent: what the agent reported on the `istio.v1.HealthInformation` type. */
export interface HealthEvent {
  healthy: boolean;
  message?: string;
}

/** Istio's transformHealthEvent: the `Healthy` condition for a report at `now`. */
export function healthCondition(ev: HealthEvent, now: number): Condition {
  const t = formatTime(now);
  const c: Condition = { type: CONDITION_HEALTHY, status: ev.healthy ? 'True' : 'False', lastProbeTime: t, lastTransitionTime: t };
  if (!ev.healthy && ev.message) c.message = ev.message;
  return c;
}

/** Istio's UpdateIstioConfigCondition: the condition of that type replaced, or appended. */
export function withCondition(conditions: readonly Condition[] | undefined, c: Condition): Condition[] {
  const out = [...(conditions ?? [])];
  const i = out.findIndex((x) => x.type === c.type);
  if (i >= 0) out[i] = c;
  else out.push(c);
  return out;
}

/** Istio's DeleteIstioConfigCondition. */
export function withoutCondition(conditions: readonly Condition[] | undefined, type: string): Condition[] {
  return (conditions ?? []).filter((x) => x.type !== type);
}

/** Istio's UpdateHealth guard: a stored condition probed later than this report wins. */
export function isStaleReport(conditions: readonly Condition[] | undefined, c: Condition): boolean {
  const cur = conditions?.find((x) => x.type === c.type);
  const stored = parseTime(cur?.lastProbeTime);
  const incoming = parseTime(c.lastProbeTime);
  return stored !== undefined && incoming !== undefined && stored > incoming;
}
