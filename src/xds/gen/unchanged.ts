// Types a push provably leaves as they were. Istio's skip lists (needs-push.ts) go by the kinds that changed;
// a VirtualService is on none of them for CDS and LDS, because Istio's clusters and listeners can read
// VirtualServices (gateway cluster filtering, destinations added to a Sidecar's scope). Our generators read
// them less: clusters never (they come from services, DestinationRules, PeerAuthentications, endpoints and the
// daemon's options), listeners only through a VirtualService's hosts, gateways, exportTo, tcp and tls routes
// and its place among the others (sidecar scopes, the first tcp route that matches, gateway filter chains).
// So an edit of VirtualServices' HTTP routes — the common edit — leaves every proxy's CDS and LDS as they
// were, and regenerating them for every kind of proxy only to find that out was most of such a push's work.
// The generators this relies on: packedOutboundClusters / packedLocalClusters / buildGrpcClusters
// (generators.ts, clusters.ts) and lds.ts. A change there that reads VirtualServices must change this too
// (test/xds/gen/unchanged.test.ts generates both types across such edits and compares).
import type { PushContext, VirtualServiceEntry } from '../../discovery/push-context';
import { TYPE_URL } from '../../lib/xds/type-urls';

const VS_KEY = /^VirtualService\/([^/]+)\/([^/]+)$/;

/**
 * Gateway API kinds that reach generation only as the VirtualServices translated from them (config/gateway-api
 * store.ts), whose own keys are in the same push: an edit of an HTTPRoute is judged by its VirtualServices.
 * (A Gateway API Gateway's or class's change also changes internal Gateways, which no rule here accepts.)
 */
const ROUTE_KEY = /^(HTTPRoute|GRPCRoute|ReferenceGrant)\//;

const json = (v: unknown): string => JSON.stringify(v ?? null);

/** Everything of a VirtualService listeners are built from (all but its HTTP routes). */
function sameForListeners(a: VirtualServiceEntry, b: VirtualServiceEntry): boolean {
  return (
    json(a.hosts) === json(b.hosts) &&
    json(a.gateways) === json(b.gateways) &&
    json(a.exportTo) === json(b.exportTo) &&
    json(a.spec.tcp) === json(b.spec.tcp) &&
    json(a.spec.tls) === json(b.spec.tls)
  );
}

function indexByName(list: readonly VirtualServiceEntry[]): Map<string, number> {
  const out = new Map<string, number>();
  list.forEach((v, i) => out.set(`${v.namespace}/${v.name}`, i));
  return out;
}

/**
 * Type URLs whose resources are the same for every proxy under `next` as under `prev`, given that the configs
 * named in `configsUpdated` (`Kind/namespace/name`) are all that changed between them. Only pushes that
 * changed VirtualServices alone (and no service) are answered; anything else gets the empty set.
 */
export function typesUnchanged(prev: PushContext, next: PushContext, configsUpdated: ReadonlySet<string>): Set<string> {
  const none = new Set<string>();
  if (configsUpdated.size === 0 || prev === next) return none;
  const changed: Array<readonly [string, string]> = [];
  for (const key of configsUpdated) {
    if (ROUTE_KEY.test(key)) continue;
    const m = VS_KEY.exec(key);
    if (!m) return none;
    changed.push([m[1]!, m[2]!]);
  }
  // Services come from the registries, outside configsUpdated: the same ones, or nothing is known.
  const ps = prev.allServices();
  const ns = next.allServices();
  if (ps.length !== ns.length || ps.some((s, i) => s !== ns[i])) return none;
  const out = new Set<string>([TYPE_URL.cluster]);
  const pv = prev.virtualServices();
  const nv = next.virtualServices();
  if (pv.length !== nv.length) return out;
  const pi = indexByName(pv);
  const ni = indexByName(nv);
  for (const [namespace, name] of changed) {
    const k = `${namespace}/${name}`;
    const i = pi.get(k);
    if (i === undefined || i !== ni.get(k) || !sameForListeners(pv[i]!, nv[i]!)) return out;
  }
  out.add(TYPE_URL.listener);
  return out;
}
