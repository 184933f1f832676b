// The status written to a Gateway API object from the status computed for it (status.ts) and the live one, as
// Istio 1.26 merges them: kstatus.UpdateConditionIfChanged (pilot/pkg/model/kstatus/helper.go) per condition,
// createRouteStatus (pilot/pkg/config/kube/gateway/conditions.go) for route parents, reportGatewayStatus
// (conversion.go) for Gateway addresses and listeners. Pure; `now` is the time a new or changed condition gets.
// Differs on purpose: Gateways of the waypoint classes get a status saying mesh has no waypoint data plane (Istio
// deploys a waypoint for them).
import type { Condition, GatewayClassStatus, GatewayStatus, RouteParentStatus, RouteStatus } from './status';
import { parentRefString } from './translate';
import type { ParentReference } from './types';

type Obj = Record<string, unknown>;
type LiveCondition = Condition & { lastTransitionTime?: string };

const asObj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const asList = <T>(v: unknown): T[] => (Array.isArray(v) ? (v as T[]) : []);

/** kstatus.UpdateConditionIfChanged for each computed condition: others' conditions stay, unchanged ones keep their time. */
export function mergeConditions(existing: unknown, computed: readonly Condition[], now: string): LiveCondition[] {
  const out = asList<LiveCondition>(existing).map((c) => ({ ...c }));
  for (const c of computed) {
    const i = out.findIndex((e) => e.type === c.type);
    const next: LiveCondition = { ...c, lastTransitionTime: now };
    if (i < 0) {
      out.push(next);
      continue;
    }
    const e = out[i]!;
    if (e.status === c.status) {
      if (e.message === c.message && e.observedGeneration === c.observedGeneration) continue;
      if (e.lastTransitionTime) next.lastTransitionTime = e.lastTransitionTime;
    }
    out[i] = next;
  }
  return out;
}

export function gatewayClassStatusToWrite(live: unknown, computed: GatewayClassStatus, now: string): Obj {
  const l = asObj(live);
  return { ...l, conditions: mergeConditions(l.conditions, computed.conditions, now) };
}

/**
 * reportGatewayStatus: conditions merged, listeners in spec order with their conditions merged (removed ones pruned),
 * and addresses replaced only when there are some ("once ready, never remove the address").
 */
export function gatewayStatusToWrite(live: unknown, computed: GatewayStatus, now: string): Obj {
  const l = asObj(live);
  const liveListeners = asList<Obj>(l.listeners);
  const out: Obj = {
    ...l,
    conditions: mergeConditions(l.conditions, computed.conditions, now),
    listeners: computed.listeners.map((x) => ({
      name: x.name,
      supportedKinds: x.supportedKinds,
      attachedRoutes: x.attachedRoutes,
      conditions: mergeConditions(liveListeners.find((o) => o.name === x.name)?.conditions, x.conditions, now),
    })),
  };
  if (computed.addresses && computed.addresses.length > 0) out.addresses = computed.addresses;
  return out;
}

/**
 * createRouteStatus's merge: parents of other controllers stay where they are, ours replace the entry of the same
 * reference in place (conditions merged), new ones are appended in the computed (descending reference) order, and
 * ours that are no longer computed are removed.
 */
export function routeStatusToWrite(live: unknown, computed: RouteStatus, namespace: string, controllerName: string, now: string): Obj {
  const l = asObj(live);
  const current = asList<RouteParentStatus>(l.parents);
  const key = (p: { parentRef: unknown }) => parentRefString(p.parentRef as ParentReference, namespace);
  const ours = new Map<string, number>();
  current.forEach((p, i) => {
    if (p.controllerName === controllerName && !ours.has(key(p))) ours.set(key(p), i);
  });
  const parents: Array<RouteParentStatus | undefined> = [...current];
  const append: RouteParentStatus[] = [];
  for (const p of computed.parents) {
    const k = key(p);
    const i = ours.get(k);
    // The NACK condition is ours alone: it goes when no longer computed.
    const live = (i !== undefined ? current[i]!.conditions : []).filter(
      (c) => c.type !== NACK_CONDITION || p.conditions.some((x) => x.type === NACK_CONDITION),
    );
    const merged = { ...p, conditions: mergeConditions(live, p.conditions, now) };
    if (i !== undefined) {
      parents[i] = merged;
      ours.delete(k);
    } else append.push(merged);
  }
  for (const i of ours.values()) parents[i] = undefined;
  return { ...l, parents: [...parents.filter((p): p is RouteParentStatus => p !== undefined), ...append] };
}

/** The waypoint classes: ours (`meshctl waypoint apply`) and Istio's, which mesh accepts beside it. */
export const WAYPOINT_CLASSES: ReadonlySet<string> = new Set(['mesh-waypoint', 'istio-waypoint']);

export const NO_WAYPOINT_MESSAGE =
  'mesh has no waypoint data plane yet (no ambient mode): nothing is deployed or programmed for this waypoint Gateway';

/** The status of a waypoint Gateway: not accepted and not programmed, saying why in plain words. */
export function waypointStatus(generation: number | undefined): GatewayStatus {
  const cond = (type: string, reason: string): Condition => ({
    type,
    status: 'False',
    reason,
    message: NO_WAYPOINT_MESSAGE,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  });
  return { conditions: [cond('Accepted', 'Unsupported'), cond('Programmed', 'Invalid')], listeners: [] };
}

/** The Gateway's Service as the status needs it: type, load balancer ingress. */
export interface GatewayServiceState {
  type?: string;
  ingress: Array<{ ip?: string; hostname?: string }>;
}

/** Istio's addressTypeOverride annotation, in both groups. */
const ADDRESS_TYPE_ANNOTATIONS = ['networking.mesh.io/address-type', 'networking.istio.io/address-type'];

/**
 * reportGatewayStatus's addresses for a managed Gateway (class address type Hostname): the Service's load balancer
 * addresses when it has some; else, unless a LoadBalancer Service is still pending (then Programmed says so, as Istio's
 * "address pending for hostname" warning), the internal hostname (or cluster IPs, per the address-type annotation).
 */
export function withServiceAddresses(
  st: GatewayStatus,
  annotations: Readonly<Record<string, string>>,
  svc: GatewayServiceState | undefined,
): GatewayStatus {
  // A Service the watch has not seen yet: the class's address type still applies (its load balancer is not known yet).
  svc ??= { ingress: [] };
  const external = svc.ingress.map((i) => i.ip || i.hostname || '').filter((a) => a !== '');
  const computed = st.addresses ?? [];
  const out: GatewayStatus = { ...st };
  if (external.length > 0) {
    out.addresses = external.map((value) => ({ type: /^[\d.]+$|:/.test(value) ? ('IPAddress' as const) : ('Hostname' as const), value }));
    return out;
  }
  const override = ADDRESS_TYPE_ANNOTATIONS.map((a) => annotations[a]).find((v) => v !== undefined);
  const want = override ?? 'Hostname';
  const hostnames = computed.filter((a) => a.type === 'Hostname');
  const pending = svc.type === 'LoadBalancer';
  const addresses = [
    ...(want !== 'Hostname' ? computed.filter((a) => a.type === 'IPAddress') : []),
    ...(want !== 'IPAddress' && !pending ? hostnames : []),
  ];
  if (addresses.length > 0) out.addresses = addresses;
  else delete out.addresses;
  const prog = st.conditions.find((c) => c.type === 'Programmed');
  if (pending && prog?.status === 'True' && hostnames.length > 0) {
    const assigned = prog.message.replace(/^Resource programmed, assigned to service\(s\) /, '');
    const warning = hostnames.map((h) => `address pending for hostname "${h.value}"`).join('; ');
    out.conditions = st.conditions.map((c) =>
      c === prog
        ? {
            ...c,
            status: 'False',
            reason: 'AddressNotAssigned',
            message: `Assigned to service(s) ${assigned}, but failed to assign to all requested addresses: ${warning}`,
          }
        : c,
    );
  }
  return out;
}

/**
 * Beyond Istio (issue 59933): the route-parent condition saying a connected proxy of that Gateway rejected (NACKed) the
 * configuration generated for it. Written only while some proxy's last answer for a type is a NACK; removed after.
 */
export const NACK_CONDITION = 'mesh.io/ConfigRejected';

/** A connected proxy serving a Gateway whose last answer for `typeUrl` was a NACK. */
export interface ProxyNack {
  proxy: string;
  namespace: string;
  /** The Gateway it serves (its `gateway.networking.k8s.io/gateway-name` label). */
  gateway: string;
  typeUrl: string;
  message: string;
}

/** The VirtualService fields the mapping reads: which internal Gateways it binds and which routes produced it. */
export interface DerivedRoutes {
  gateways: readonly string[];
  /** PARENT_NAMES_ANNOTATION: `Kind/name.namespace,…`. */
  parents: string;
}

/**
 * The NACK condition per route and parent Gateway (`Kind/ns/name` → `gwNamespace/gwName` → condition): a route
 * generated into a VirtualService bound to a Gateway listener (`<ns>/<gateway>-<internalSuffix>-<listener>`) whose
 * proxy NACKed.
 */
export function nackConditions(
  nacks: readonly ProxyNack[],
  derived: readonly DerivedRoutes[],
  internalSuffix: string,
  generationOf: (routeKey: string) => number | undefined,
): Map<string, Map<string, Condition>> {
  const out = new Map<string, Map<string, Condition>>();
  if (nacks.length === 0) return out;
  for (const vs of derived) {
    for (const n of nacks) {
      const prefix = `${n.namespace}/${n.gateway}-${internalSuffix}-`;
      if (!vs.gateways.some((g) => g.startsWith(prefix))) continue;
      for (const p of vs.parents.split(',')) {
        const m = /^([A-Za-z]+)\/(.+)\.([^.]+)$/.exec(p.trim());
        if (!m) continue;
        const routeKey = `${m[1]}/${m[3]}/${m[2]}`;
        const perGw = out.get(routeKey) ?? new Map<string, Condition>();
        out.set(routeKey, perGw);
        const gwKey = `${n.namespace}/${n.gateway}`;
        const type = n.typeUrl.slice(n.typeUrl.lastIndexOf('.') + 1);
        const text = `proxy ${n.proxy} rejected the ${type} configuration generated for this route: ${n.message}`;
        const prev = perGw.get(gwKey);
        if (prev?.message.includes(text)) continue;
        const gen = generationOf(routeKey);
        perGw.set(gwKey, {
          type: NACK_CONDITION,
          status: 'True',
          reason: 'Rejected',
          message: prev ? `${prev.message}; ${text}` : text,
          ...(gen !== undefined ? { observedGeneration: gen } : {}),
        });
      }
    }
  }
  return out;
}

/** A route status with the NACK condition added to the parents of the Gateways whose proxies rejected it. */
export function withNacks(st: RouteStatus, routeNamespace: string, byGateway: ReadonlyMap<string, Condition> | undefined): RouteStatus {
  if (!byGateway || byGateway.size === 0) return st;
  return {
    parents: st.parents.map((p) => {
      const ref = p.parentRef as { name?: string; namespace?: string; kind?: string };
      const c = (ref.kind ?? 'Gateway') === 'Gateway' ? byGateway.get(`${ref.namespace ?? routeNamespace}/${ref.name}`) : undefined;
      return c ? { ...p, conditions: [...p.conditions, c] } : p;
    }),
  };
}
