// HTTPRoute and GRPCRoute attached to a Service or a ServiceEntry (the Gateway API's GAMMA mesh profile): the
// parent resolution and the keyed VirtualService routes a sidecar serves for that service, pure. Follows Istio
// 1.26's pilot/pkg/config/kube/gateway: conversion.go (toInternalParentReference, referenceAllowed for Service and
// ServiceEntry parents, augmentPortMatch), gateway_collection.go (RouteParents.fetch: the one `mesh` parent that
// takes every route kind) and route_collections.go (HTTPRouteCollection: for a mesh parent, one VirtualService per
// route namespace, parentRef port and service host, bound to the `mesh` gateway; route hostnames are ignored).
// Which sidecars obey such a route (a consumer route, in another namespace than the service, only for callers in
// its own namespace; consumer routes before every other VirtualService) is the sidecar's side:
// src/discovery/push/virtualservice.ts and src/xds/gen/rds.ts, as Istio's SelectVirtualServices and
// buildSidecarVirtualHostsForVirtualService.
// Differs on purpose: no `ResolvedWaypoints` condition and no `istio.io/use-waypoint` check (Istio reports them
// only with ambient enabled; mesh has no ambient data plane).
import type { Config, HTTPRoute } from '../types';
import { GATEWAY_API_GROUP, type ParentReference } from './types';

/** The internal gateway name of sidecars (Istio constants.IstioMeshGateway). */
export const MESH_GATEWAY_NAME = 'mesh';
const SERVICE_ENTRY_GROUP = 'networking.istio.io';

export type MeshParentKind = 'Service' | 'ServiceEntry';

/** A route's reference to a Service or ServiceEntry, resolved. */
export interface MeshParent {
  ref: ParentReference;
  kind: MeshParentKind;
  namespace: string;
  name: string;
  /** Why the reference is not accepted (Istio's ParentError), if it is not. */
  denied?: { reason: string; message: string };
  /** The hosts the route applies to: the Service's name in DNS, or the ServiceEntry's hosts. */
  hosts: string[];
}

/** What mesh parents are looked up in. */
export interface MeshParentInput {
  services: readonly Config<'Service'>[];
  serviceEntries: readonly Config<'ServiceEntry'>[];
}

/** Istio toInternalParentReference, for the mesh kinds: group "" kind Service, networking.istio.io ServiceEntry. */
export function meshParentKind(ref: ParentReference): MeshParentKind | undefined {
  const group = ref.group ?? GATEWAY_API_GROUP;
  const kind = ref.kind ?? 'Gateway';
  if (group === '' && kind === 'Service') return 'Service';
  if (group === SERVICE_ENTRY_GROUP && kind === 'ServiceEntry') return 'ServiceEntry';
  return undefined;
}

/**
 * Istio extractParentReferenceInfo + referenceAllowed for the mesh parents of a route: a Service or ServiceEntry
 * that does not exist is `NoMatchingParent`; every route kind is allowed (the mesh parent has no listeners);
 * `sectionName` and `port` are not checked against anything (a port narrows the routes, augmentPortMatch).
 */
export function meshParents(route: Config<'HTTPRoute'> | Config<'GRPCRoute'>, input: MeshParentInput, domain: string): MeshParent[] {
  const out: MeshParent[] = [];
  for (const ref of route.spec.parentRefs ?? []) {
    const kind = meshParentKind(ref);
    if (!kind) continue;
    const namespace = ref.namespace ?? route.meta.namespace;
    const p: MeshParent = { ref, kind, namespace, name: ref.name, hosts: [] };
    if (kind === 'Service') {
      if (input.services.some((s) => s.meta.namespace === namespace && s.meta.name === ref.name))
        p.hosts = [`${ref.name}.${namespace}.svc.${domain}`];
      else p.denied = { reason: 'NoMatchingParent', message: `parent service: "${ref.name}" not found` };
    } else {
      const se = input.serviceEntries.find((s) => s.meta.namespace === namespace && s.meta.name === ref.name);
      if (se) p.hosts = [...(se.spec.hosts ?? [])];
      else p.denied = { reason: 'NoMatchingParent', message: `parent service entry: "${ref.name}" not found` };
    }
    out.push(p);
  }
  return out;
}

/** Istio augmentPortMatch: every match (or a lone new one) also asks for the parentRef's port. */
export function augmentPortMatch(routes: readonly HTTPRoute[], port: number): HTTPRoute[] {
  return routes.map((r) => {
    const c = structuredClone(r);
    if (c.match && c.match.length > 0) for (const m of c.match) m.port = port;
    else c.match = [{ port }];
    return c;
  });
}

/**
 * The keyed routes one accepted mesh parent gives: per host, the merge key `<route namespace>[/<port>]/<host>`
 * (routes of several HTTPRoutes with one key merge into one VirtualService, named after the key) and the routes.
 */
export function meshRouteKeys(
  routeNamespace: string,
  parent: MeshParent,
  routes: readonly HTTPRoute[],
): Array<{ key: string; host: string; routes: HTTPRoute[] }> {
  if (parent.denied || routes.length === 0) return [];
  const port = parent.ref.port;
  // the routes are shared, not copied: the translation clones a VirtualService's routes when it builds one
  const own = port !== undefined ? augmentPortMatch(routes, port) : [...routes];
  const prefix = port !== undefined ? `${routeNamespace}/${port}` : routeNamespace;
  return parent.hosts.map((host) => ({ key: `${prefix}/${host}`, host, routes: own }));
}
