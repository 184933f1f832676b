// Gateway API status as Istio 1.26 writes it, pure: condition builders and the status objects of GatewayClass,
// Gateway (conditions, addresses, listeners with attachedRoutes) and routes (parents with Accepted/ResolvedRefs).
// Follows pilot/pkg/config/kube/gateway/conditions.go (setConditions, createRouteStatus, reportListenerCondition)
// and conversion.go (reportGatewayStatus). Differs on purpose: lastTransitionTime is the time the status was computed
// (the writer keeps an earlier time when the condition did not change, as kstatus.UpdateConditionIfChanged does), and
// messages name mesh where Istio's name Istio.

import type { Config, Kind } from '../types';
import { objectKindOf } from '../schemas';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
}

/** Istio's `condition`: a default reason and message, replaced by an error (with the status inverted) when set. */
export interface ConditionSpec {
  reason: string;
  message: string;
  status?: 'True' | 'False';
  error?: { reason: string; message: string };
}

/** Istio setConditions: one condition per type, in type order. */
export function conditions(generation: number | undefined, specs: Readonly<Record<string, ConditionSpec>>): Condition[] {
  return Object.keys(specs)
    .sort()
    .map((type) => {
      const c = specs[type]!;
      const status = c.status ?? 'True';
      const out: Condition = c.error
        ? { type, status: status === 'True' ? 'False' : 'True', reason: c.error.reason, message: c.error.message }
        : { type, status, reason: c.reason, message: c.message };
      if (generation !== undefined) out.observedGeneration = generation;
      return out;
    });
}

export interface RouteGroupKind {
  group: string;
  kind: string;
}

export interface ListenerStatus {
  name: string;
  attachedRoutes: number;
  supportedKinds: RouteGroupKind[];
  conditions: Condition[];
}

export interface GatewayStatus {
  addresses?: Array<{ type: 'IPAddress' | 'Hostname'; value: string }>;
  conditions: Condition[];
  listeners: ListenerStatus[];
}

export interface RouteParentStatus {
  parentRef: Record<string, unknown>;
  controllerName: string;
  conditions: Condition[];
}

export interface RouteStatus {
  parents: RouteParentStatus[];
}

export interface GatewayClassStatus {
  conditions: Condition[];
}

/** Every status the translation computed, keyed `Kind/namespace/name` (our Kind names). */
export interface GatewayApiStatus {
  gatewayClasses: Map<string, GatewayClassStatus>;
  gateways: Map<string, GatewayStatus>;
  routes: Map<string, RouteStatus>;
}

/** Istio's GatewayClass status: Accepted by the controller that handles it. */
export function gatewayClassStatus(generation: number | undefined): GatewayClassStatus {
  return { conditions: conditions(generation, { Accepted: { reason: 'Accepted', message: 'Handled by mesh controller' } }) };
}

/** Istio humanReadableJoin: `a`, `a and b`, `a, b, and c`. */
export function humanReadableJoin(ss: readonly string[]): string {
  if (ss.length <= 1) return ss.join('');
  if (ss.length === 2) return `${ss[0]} and ${ss[1]}`;
  return `${ss.slice(0, -1).join(', ')}, and ${ss[ss.length - 1]}`;
}

/** A route's result for one parent, as Istio's RouteParentResult. */
export interface RouteParentResult {
  parentRef: Record<string, unknown>;
  /** parentRefString, to group results of the same reference. */
  refKey: string;
  denied?: { reason: string; message: string };
  routeError?: { reason: string; message: string };
}

const DENIED_RANK: Readonly<Record<string, number>> = {
  NotAllowedByListeners: 1,
  NoMatchingListenerHostname: 2,
  ParentRefConflict: 3,
  NoMatchingParent: 4,
};
const rank = (r: RouteParentResult): number => (r.denied ? (DENIED_RANK[r.denied.reason] ?? 0) : 0);

/** Istio createRouteStatus: one entry per parentRef, the least severe result reported, in descending ref order. */
export function routeStatus(results: readonly RouteParentResult[], generation: number | undefined, controllerName: string): RouteStatus {
  const byRef = new Map<string, RouteParentResult[]>();
  for (const r of results) byRef.set(r.refKey, [...(byRef.get(r.refKey) ?? []), r]);
  const parents: Array<RouteParentStatus & { key: string }> = [];
  for (const [key, rs] of byRef) {
    let report = { ...rs[0]! };
    let best = rank(report);
    for (const r of rs.slice(1)) {
      const rr = rank(r);
      if (rr < best) {
        best = rr;
        report = { ...r };
      } else if (rr === best) {
        if (!report.denied) report.denied = r.denied;
        else if (r.denied) report.denied = { ...report.denied, message: `${report.denied.message}; ${r.denied.message}` };
      }
    }
    const successes = rs.filter((r) => !r.denied).length;
    const specs: Record<string, ConditionSpec> = {
      Accepted: { reason: 'Accepted', message: successes > 1 ? `Route was valid, bound to ${successes} parents` : 'Route was valid' },
      ResolvedRefs: { reason: 'ResolvedRefs', message: 'All references resolved' },
    };
    if (report.routeError) specs.ResolvedRefs!.error = report.routeError;
    if (report.denied) specs.Accepted!.error = report.denied;
    parents.push({ key, parentRef: report.parentRef, controllerName, conditions: conditions(generation, specs) });
  }
  parents.sort((a, b) => (a.key > b.key ? -1 : a.key < b.key ? 1 : 0));
  return { parents: parents.map(({ key: _k, ...p }) => p) };
}

/** A Gateway API object and the status computed for it, in the object's own shape. */
export interface StatusObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; generation?: number };
  status: GatewayClassStatus | GatewayStatus | RouteStatus;
}

/** The computed status of every object, oldest key first: the no-cluster view of what the leader writes. */
export function statusObjects(st: GatewayApiStatus, get: (kind: Kind, ns: string, name: string) => Config | undefined): StatusObject[] {
  const out: StatusObject[] = [];
  const entries: Array<[string, GatewayClassStatus | GatewayStatus | RouteStatus]> = [...st.gatewayClasses, ...st.gateways, ...st.routes];
  for (const [k, status] of entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const [kind, ns, name] = k.split('/') as [Kind, string, string];
    const c = get(kind, ns, name);
    if (!c) continue;
    const metadata: StatusObject['metadata'] = {
      name,
      ...(ns ? { namespace: ns } : {}),
      ...(c.meta.generation !== undefined ? { generation: c.meta.generation } : {}),
    };
    out.push({ apiVersion: c.apiVersion, kind: objectKindOf(kind), metadata, status });
  }
  return out;
}
