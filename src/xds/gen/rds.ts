// RouteConfigurations: gateways (`http.<port>` / `https.<port>.<portName>.<gw>.<ns>`, Istio
// buildGatewayHTTPRouteConfig), sidecars (`<port>`, BuildSidecarOutboundVirtualHosts) and proxyless
// gRPC clients (`<host>:<port>`).
import { autoAddressForProxy } from '../../discovery/auto-allocate';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { AnySchema, type Any } from '@bufbuild/protobuf/wkt';
import { hostMatches, domainName, ipv6Compliant, isWildcard } from '../../discovery/host';
import type { Proxy, Service } from '../../discovery/model';
import type { PushContext, VirtualServiceEntry } from '../../discovery/push-context';
import { MESH_GATEWAY } from '../../discovery/push-context';
import { usesGatewaySemantics } from '../../discovery/push/virtualservice';
import { isHttpOrSniffed } from '../../discovery/registry/protocol';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import { VirtualHost_TlsRequirementType, type VirtualHostSchema } from '../../gen/envoy/config/route/v3/route_components_pb';
import { buildSubsetKey } from './common';
import { initKey, internKey } from './reuse';
import {
  blockAllRoute,
  buildHttpRoutesForVirtualService,
  defaultOutboundRoute,
  isCatchAllRoute,
  MAX_DIRECT_RESPONSE_BODY_BYTES,
  passthroughRoute,
  type MetadataMatcherHook,
  type RouteContext,
  type RouteInit,
} from './route';

type VirtualHostInit = MessageInitShape<typeof VirtualHostSchema> & { name: string; domains: string[]; routes: RouteInit[] };

export interface RouteBuildOptions {
  metadataMatcher?: MetadataMatcherHook;
}

function sortVirtualHosts(v: VirtualHostInit[]): VirtualHostInit[] {
  return v.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Istio SortVHostRoutes: catch-all routes move to the end, the rest keep their order. */
function sortVHostRoutes(routes: RouteInit[]): RouteInit[] {
  return [...routes.filter((r) => !isCatchAllRoute(r)), ...routes.filter((r) => isCatchAllRoute(r))];
}

function routeContext(
  proxy: Proxy,
  push: PushContext,
  port: number,
  gatewayNames: ReadonlySet<string>,
  isTls: boolean,
  opts: RouteBuildOptions,
): RouteContext {
  return {
    port,
    gatewayNames,
    proxyLabels: proxy.labels,
    proxyNamespace: proxy.namespace,
    isTls,
    proxyless: proxy.proxyless,
    lookupService: (h) => push.serviceForHostname(proxy, h),
    ...(opts.metadataMatcher ? { metadataMatcher: opts.metadataMatcher } : {}),
  };
}

// ---------------------------------------------------------------------------------------------
// gateways

/** Of two matching hosts, the more specific (Istio host.Names.Intersection). */
function moreSpecific(a: string, b: string): string {
  if (!isWildcard(a)) return a;
  if (!isWildcard(b)) return b;
  return a.length >= b.length ? a : b;
}

export function buildGatewayRouteConfiguration(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions = {}): RouteConfiguration {
  const { virtualHosts, rest } = gatewayRouteParts(proxy, push, routeName, opts);
  return create(RouteConfigurationSchema, { name: routeName, virtualHosts, ...rest });
}

/** What a RouteConfiguration holds besides its name and virtual hosts. */
export type RouteConfigRest = Omit<MessageInitShape<typeof RouteConfigurationSchema>, 'name' | 'virtualHosts' | '$typeName'>;

/** A route configuration's virtual hosts and its other fields, apart (VHDS sends them separately). */
export interface RouteConfigParts {
  virtualHosts: VirtualHostInit[];
  rest: RouteConfigRest;
}

function gatewayRouteParts(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions): RouteConfigParts {
  const merged = push.mergedGateway(proxy);
  const servers = merged.serversByRouteName.get(routeName);
  if (!servers || servers.length === 0) {
    // the gateway was deleted but the proxy still asks while draining: an empty answer, not an error
    return { virtualHosts: [], rest: { validateClusters: false } };
  }
  const vhosts = new Map<string, { vh: VirtualHostInit; sources: string[] }>();
  const routeCache = new Map<string, RouteInit[]>();
  for (const gs of servers) {
    const port = gs.server.port.number;
    for (const vs of push.virtualServicesForGateway(proxy.namespace, gs.gatewayName)) {
      const serverHosts = gs.hosts.filter((h) => h.namespace === '*' || h.namespace === vs.namespace).map((h) => h.host);
      const intersecting = new Set<string>();
      for (const vh of vs.hosts) for (const sh of serverHosts) if (hostMatches(vh, sh)) intersecting.add(moreSpecific(vh, sh).toLowerCase());
      if (intersecting.size === 0) continue;
      const key = `${gs.gatewayName}|${vs.namespace}/${vs.name}`;
      let routes = routeCache.get(key);
      if (!routes) {
        routes = buildHttpRoutesForVirtualService(vs, routeContext(proxy, push, port, new Set([gs.gatewayName]), !!gs.server.tls, opts));
        routeCache.set(key, routes);
      }
      if (routes.length === 0) continue;
      for (const h of intersecting) {
        const existing = vhosts.get(h);
        if (existing) {
          existing.vh.routes.push(...routes);
          existing.sources.push(key);
          if (gs.server.tls?.httpsRedirect) existing.vh.requireTls = VirtualHost_TlsRequirementType.ALL;
        } else {
          vhosts.set(h, {
            vh: {
              name: domainName(h, port),
              domains: [h],
              routes: [...routes],
              includeRequestAttemptCount: true,
              ...(gs.server.tls?.httpsRedirect ? { requireTls: VirtualHost_TlsRequirementType.ALL } : {}),
            },
            sources: [key],
          });
        }
      }
    }
    if (gs.server.tls?.httpsRedirect) {
      for (const { host } of gs.hosts) {
        const h = host.toLowerCase();
        const existing = vhosts.get(h);
        if (existing) existing.vh.requireTls = VirtualHost_TlsRequirementType.ALL;
        else
          vhosts.set(h, {
            vh: {
              name: domainName(h, port),
              domains: [h],
              routes: [],
              includeRequestAttemptCount: true,
              requireTls: VirtualHost_TlsRequirementType.ALL,
            },
            sources: [],
          });
      }
    }
  }
  let virtualHosts: VirtualHostInit[];
  if (vhosts.size === 0) {
    const port = servers[0]!.server.port.number;
    // no VirtualService matches: a vhost without routes makes Envoy answer 404 (NR)
    virtualHosts = [{ name: domainName('blackhole', port), domains: ['*'], routes: [] }];
  } else {
    virtualHosts = collapseDuplicateRoutes([...vhosts.entries()], push.options.routeCollapse).map(
      (v) => ({ ...v, routes: sortVHostRoutes(v.routes) }) as VirtualHostInit,
    );
  }
  return {
    virtualHosts: sortVirtualHosts(virtualHosts),
    rest: gatewayRest(proxy),
  };
}

const gatewayRest = (proxy: Proxy): RouteConfigRest => ({
  validateClusters: false,
  ignorePortInHostMatching: !proxy.proxyless,
  maxDirectResponseBodySizeBytes: MAX_DIRECT_RESPONSE_BODY_BYTES,
});
const SIDECAR_REST: RouteConfigRest = {
  validateClusters: false,
  maxDirectResponseBodySizeBytes: MAX_DIRECT_RESPONSE_BODY_BYTES,
  ignorePortInHostMatching: true,
};

/** Istio collapseDuplicateRoutes: vhosts built from the same routes become one vhost with all domains. */
function collapseDuplicateRoutes(entries: Array<[string, { vh: VirtualHostInit; sources: string[] }]>, enabled: boolean): VirtualHostInit[] {
  if (!enabled) return entries.map(([, v]) => v.vh);
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const known = new Map<string, VirtualHostInit>();
  const out: VirtualHostInit[] = [];
  for (const [, { vh, sources }] of entries) {
    const key = `${sources.join(',')}|${vh.requireTls ?? 0}`;
    const prev = sources.length > 0 ? known.get(key) : undefined;
    if (prev) {
      prev.domains.push(...vh.domains);
      continue;
    }
    known.set(key, vh);
    out.push(vh);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// sidecars and proxyless gRPC

/** Istio generateAltVirtualHostsForKubernetesService / GenerateAltVirtualHosts. */
export function altVirtualHosts(hostname: string, proxyDomain: string): string[] {
  if (proxyDomain.includes('.svc.')) {
    const suffix = proxyDomain.slice(proxyDomain.indexOf('.svc.') + 1); // svc.cluster.local
    if (!hostname.endsWith(suffix)) return [];
    const id = proxyDomain.indexOf('.svc.');
    const ih = hostname.indexOf('.svc.');
    if (ih <= 0) return [];
    const ns = hostname.indexOf('.');
    if (ns + 1 >= hostname.length || ns + 1 > ih) return [];
    if (hostname.slice(ns + 1, ih) === proxyDomain.slice(0, id))
      return [hostname.slice(0, ns), `${hostname.slice(0, ih)}.svc`, hostname.slice(0, ih)];
    return [hostname.slice(0, ih), `${hostname.slice(0, ih)}.svc`];
  }
  const h = hostname.split('.').reverse();
  const p = proxyDomain.split('.').reverse();
  let shared = 0;
  while (shared < Math.min(h.length, p.length) && h[shared] === p[shared]) shared++;
  if (shared === 0) return [];
  const unique = h.slice(shared).reverse();
  const out = [unique.join('.')];
  // `foo.ns` also gets `foo.ns.<first shared label>`
  if (unique.length === 2) out.push(`${unique.join('.')}.${h.slice(0, shared).reverse()[0]}`);
  return out;
}

/** Istio generateVirtualHostDomains: FQDN, shorter names, VIPs; with `:port` variants only for proxyless gRPC. */
export function virtualHostDomains(service: Service, port: number, proxy: Proxy, allocateForAll = false): string[] {
  const withPort = proxy.proxyless;
  const add = (out: string[], d: string) => {
    out.push(ipv6Compliant(d));
    if (withPort) out.push(domainName(d, port));
  };
  const out: string[] = [];
  add(out, service.hostname);
  for (const alt of altVirtualHosts(service.hostname, proxy.dnsDomain)) add(out, alt);
  for (const a of service.addresses) if (a && a !== '0.0.0.0' && !a.includes('/')) add(out, a);
  // a ServiceEntry without addresses is also called by its auto-allocated one (Istio GetAddressForProxy)
  const auto = service.addresses.length === 0 ? autoAddressForProxy(service, proxy, allocateForAll) : undefined;
  if (auto) add(out, auto);
  return out;
}

interface VHostWrapper {
  port: number;
  services: Service[];
  vsHosts: string[];
  routes: RouteInit[];
  /** Identifies `routes` for reuse of serialised virtual hosts (see packSidecarRouteConfiguration). */
  routesKey: string;
  /** The VirtualService the routes come from (none: a service's default route). */
  vs?: VirtualServiceEntry;
}

/** The VirtualService a sidecar virtual host's routes were built from (for VHDS's partial rebuilds). */
const vhostSources = new WeakMap<VirtualHostInit, VirtualServiceEntry>();
/** Duplicate-domain reports (push status) made while building a list of sidecar virtual hosts. */
const dupReports = new WeakMap<readonly VirtualHostInit[], ReadonlyArray<readonly [string, string]>>();

/** Reuse keys of built virtual hosts: name, domains and what their routes were built from. */
const vhostKeys = new WeakMap<VirtualHostInit, string>();

const objectIds = new WeakMap<object, number>();
let nextObjectId = 0;
const objectId = (o: object | undefined): number => {
  if (!o) return -1;
  let id = objectIds.get(o);
  if (id === undefined) objectIds.set(o, (id = nextObjectId++));
  return id;
};

/**
 * A VirtualService's routes for sidecars, built once per push for every namespace that would build them
 * alike: routes depend on the proxy only through source matches (sourceLabels, sourceNamespace) and the
 * services their destinations resolve to, so those (and the port) are the key. `routesKey` identifies the
 * routes' content for reuse of serialised virtual hosts across pushes.
 */
function sharedVirtualServiceRoutes(
  push: PushContext,
  proxy: Proxy,
  vs: VirtualServiceEntry,
  ctx: RouteContext,
): { routes: RouteInit[]; routesKey: string } {
  const http = vs.spec.http ?? [];
  const bySource = http.some((h) =>
    (h.match ?? []).some((m) => m.sourceNamespace !== undefined || (m.sourceLabels && Object.keys(m.sourceLabels).length > 0)),
  );
  const dests: number[] = [];
  for (const h of http) {
    for (const d of h.route ?? []) dests.push(objectId(ctx.lookupService(d.destination.host)));
    if (h.mirror) dests.push(objectId(ctx.lookupService(h.mirror.host)));
  }
  const source = bySource ? `${proxy.namespace}|${initKey(proxy.labels)}` : '';
  const key = `vsroutes|${vs.namespace}/${vs.name}|${ctx.port}|${proxy.proxyless}|${source}|${dests.join(',')}`;
  return push.shared('rds', key, () => {
    const routes = buildHttpRoutesForVirtualService(vs, ctx);
    return { routes, routesKey: internKey(initKey(routes)) };
  });
}

/** Istio BuildSidecarOutboundVirtualHosts for one port (`listenerPort`), limited to `onlyHost` for gRPC. */
export function sidecarVirtualHosts(
  proxy: Proxy,
  push: PushContext,
  listenerPort: number,
  opts: RouteBuildOptions,
  onlyHost?: string,
): VirtualHostInit[] {
  const scope = push.sidecarScope(proxy);
  const listener = scope.egressListeners.find((l) => l.port?.number === listenerPort) ?? scope.egressListeners.find((l) => !l.port);
  if (!listener) return [];
  const servicesByName = new Map<string, Service>();
  for (const s of listener.services) {
    const p = s.ports.find((x) => x.port === listenerPort);
    if (!p || servicesByName.has(s.hostname)) continue;
    servicesByName.set(s.hostname, { ...s, ports: [p] });
  }
  let vss: VirtualServiceEntry[] = listener.virtualServices.filter((v) => v.gateways.includes(MESH_GATEWAY));
  if (listenerPort !== 80) {
    const hosts = [...servicesByName.keys()];
    vss = vss.filter((v) => v.hosts.some((h) => (isWildcard(h) ? hosts.some((s) => hostMatches(h, s)) : servicesByName.has(h))));
  }
  const wrappers: VHostWrapper[] = [];
  const claimed = new Set<string>();
  const ctx = routeContext(proxy, push, listenerPort, new Set([MESH_GATEWAY]), false, opts);
  for (const vs of vss) {
    const { routes, routesKey } = sharedVirtualServiceRoutes(push, proxy, vs, ctx);
    if (routes.length === 0) continue;
    const services: Service[] = [];
    const vsHosts: string[] = [];
    const gatewaySemantics = usesGatewaySemantics(vs);
    for (const h of vs.hosts) {
      // Istio separateVSHostsAndServices: a Gateway API route's wildcard host (a ServiceEntry's) names no service
      if (isWildcard(h) && gatewaySemantics) {
        vsHosts.push(h);
        continue;
      }
      if (!isWildcard(h)) {
        const s = servicesByName.get(h);
        if (s) services.push(s);
        else vsHosts.push(h);
        continue;
      }
      let found = false;
      for (const [sh, s] of servicesByName) {
        if (!hostMatches(sh, h)) continue;
        found = true;
        if (!claimed.has(sh)) services.push(s);
      }
      if (!found) vsHosts.push(h);
    }
    // Istio buildSidecarVirtualHostsForVirtualService: a Gateway API route applies to callers in its own namespace
    // (a consumer route) or, when it sits in the service's namespace (a producer route), to every caller
    if (gatewaySemantics && vs.namespace !== proxy.namespace && !services.some((s) => s.namespace === vs.namespace)) continue;
    for (const s of services) claimed.add(s.hostname);
    const httpServices = services.filter((s) => s.ports.some((p) => isHttpOrSniffed(p.protocol)));
    if (httpServices.length === 0 && listenerPort !== 80) continue;
    wrappers.push({ port: listenerPort, services: httpServices, vsHosts, routes, routesKey, vs });
  }
  for (const [h, s] of servicesByName) {
    if (claimed.has(h)) continue;
    const p = s.ports[0]!;
    if (!isHttpOrSniffed(p.protocol)) continue;
    const cluster = buildSubsetKey('outbound', '', s.hostname, p.port);
    wrappers.push({
      port: p.port,
      services: [s],
      vsHosts: [],
      routes: [defaultOutboundRoute(cluster, `${s.hostname}:${p.port}/*`, proxy.proxyless)],
      routesKey: `default|${cluster}|${proxy.proxyless}`,
    });
  }
  const seenNames = new Set<string>();
  const seenDomains = new Set<string>();
  const out: VirtualHostInit[] = [];
  const dups: Array<readonly [string, string]> = [];
  const build = (hostname: string, w: VHostWrapper, svc: Service | undefined) => {
    if (onlyHost !== undefined && hostname !== onlyHost) return;
    const name = domainName(hostname, w.port);
    // Istio buildSidecarOutboundHTTPRouteConfig: a repeated vhost name or domain is dropped and counted
    const dupMessage = `duplicate domain from ${svc ? 'service' : 'virtual service'}: ${name}`;
    if (seenNames.has(name)) {
      push.addMetric('dupDomain', name, proxy.id, dupMessage);
      dups.push([name, dupMessage]);
      return;
    }
    seenNames.add(name);
    const all = svc
      ? virtualHostDomains(svc, w.port, proxy, push.options.ipAutoallocate)
      : proxy.proxyless
        ? [ipv6Compliant(hostname), name]
        : [ipv6Compliant(hostname)];
    const domains = all.filter((d) => {
      const k = d.toLowerCase();
      if (seenDomains.has(k)) return false;
      seenDomains.add(k);
      return true;
    });
    if (domains.length !== all.length) {
      push.addMetric('dupDomain', name, proxy.id, dupMessage);
      dups.push([name, dupMessage]);
    }
    if (domains.length === 0) return;
    const vh: VirtualHostInit = { name, domains, routes: w.routes, includeRequestAttemptCount: true };
    vhostKeys.set(vh, `${name}|${domains.join(',')}|${w.routesKey}`);
    if (w.vs) vhostSources.set(vh, w.vs);
    out.push(vh);
  };
  for (const w of wrappers) {
    for (const h of w.vsHosts) build(h, w, undefined);
    for (const s of w.services) build(s.hostname, w, s);
  }
  if (dups.length > 0) dupReports.set(out, dups);
  return sortVirtualHosts(out);
}

/** The VirtualService a sidecar virtual host was built from; undefined for default routes and gateways. */
export function virtualHostSource(vh: VirtualHostInit): VirtualServiceEntry | undefined {
  return vhostSources.get(vh);
}

/** Duplicate-domain reports (vhost name, message) made while building `vhosts` (sidecarRouteParts output). */
export function duplicateDomainReports(vhosts: readonly VirtualHostInit[]): ReadonlyArray<readonly [string, string]> {
  return dupReports.get(vhosts) ?? [];
}

/**
 * The VirtualService `vs` of this push as a sidecar's listener on `port` sees it (after the mesh-gateway
 * filter), or undefined when it is not among them.
 */
export function sidecarVirtualService(
  proxy: Proxy,
  push: PushContext,
  port: number,
  namespace: string,
  name: string,
): VirtualServiceEntry | undefined {
  return sidecarListenerVirtualServices(proxy, push, port).find(
    (v) => v.namespace === namespace && v.name === name && v.gateways.includes(MESH_GATEWAY),
  );
}

function sidecarListenerVirtualServices(proxy: Proxy, push: PushContext, port: number): readonly VirtualServiceEntry[] {
  const scope = push.sidecarScope(proxy);
  const listener = scope.egressListeners.find((l) => l.port?.number === port) ?? scope.egressListeners.find((l) => !l.port);
  return listener?.virtualServices ?? [];
}

/** The VirtualServices a sidecar's listener on `port` sees, in order (which one claims a host depends on it). */
export function sidecarVirtualServiceOrder(proxy: Proxy, push: PushContext, port: number): string {
  return sidecarListenerVirtualServices(proxy, push, port)
    .map((v) => `${v.namespace}/${v.name}`)
    .join(',');
}

/**
 * A sidecar virtual host built from `vs` with the routes `vs` now gives (same name and domains): what
 * sidecarVirtualHosts would build when nothing but the routes of `vs` changed. undefined when `vs` now
 * gives no routes (its hosts then fall back to default routes: a full rebuild is needed).
 */
export function rebuiltSidecarVirtualHost(
  proxy: Proxy,
  push: PushContext,
  port: number,
  vh: VirtualHostInit,
  vs: VirtualServiceEntry,
  opts: RouteBuildOptions,
): VirtualHostInit | undefined {
  const ctx = routeContext(proxy, push, port, new Set([MESH_GATEWAY]), false, opts);
  const { routes, routesKey } = sharedVirtualServiceRoutes(push, proxy, vs, ctx);
  if (routes.length === 0) return undefined;
  const next = { ...vh, routes } as VirtualHostInit;
  vhostKeys.set(next, `${vh.name}|${vh.domains.join(',')}|${routesKey}`);
  vhostSources.set(next, vs);
  return next;
}

function catchAllVirtualHost(proxy: Proxy, push: PushContext): VirtualHostInit {
  const scope = push.sidecarScope(proxy);
  if (scope.outboundTrafficPolicy === 'REGISTRY_ONLY')
    return { name: 'block_all', domains: ['*'], routes: [blockAllRoute()], includeRequestAttemptCount: true };
  return { name: 'allow_any', domains: ['*'], routes: [passthroughRoute()], includeRequestAttemptCount: true };
}

function sidecarRouteParts(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions): RouteConfigParts {
  const port = Number(routeName);
  const vhosts = Number.isInteger(port) && port > 0 ? sidecarVirtualHosts(proxy, push, port, opts) : [];
  const virtualHosts = [...vhosts, catchAllVirtualHost(proxy, push)];
  const dups = dupReports.get(vhosts);
  if (dups) dupReports.set(virtualHosts, dups);
  return { virtualHosts, rest: SIDECAR_REST };
}

/** A sidecar's RouteConfiguration for an outbound port (`80`, `9080`…). */
export function buildSidecarRouteConfiguration(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions = {}): RouteConfiguration {
  const { virtualHosts, rest } = sidecarRouteParts(proxy, push, routeName, opts);
  return create(RouteConfigurationSchema, { name: routeName, virtualHosts, ...rest });
}

/**
 * buildSidecarRouteConfiguration serialised, byte for byte as toBinary writes it (fields in number order:
 * name 1, virtual_hosts 2, then the rest), reusing the bytes of virtual hosts built identically in an
 * earlier push: an edit of one VirtualService re-serialises one virtual host, not thousands.
 */
export function packSidecarRouteConfiguration(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions = {}): Any {
  const { virtualHosts, rest } = sidecarRouteParts(proxy, push, routeName, opts);
  const parts: Uint8Array[] = [toBinary(RouteConfigurationSchema, create(RouteConfigurationSchema, { name: routeName }))];
  for (const vh of virtualHosts) {
    parts.push(
      push.cache.get('rds', `vhbytes|${vhostKeys.get(vh) ?? initKey(vh)}`, () =>
        toBinary(RouteConfigurationSchema, create(RouteConfigurationSchema, { virtualHosts: [vh] })),
      ),
    );
  }
  parts.push(toBinary(RouteConfigurationSchema, create(RouteConfigurationSchema, rest)));
  return create(AnySchema, { typeUrl: `type.googleapis.com/${RouteConfigurationSchema.typeName}`, value: Buffer.concat(parts) });
}

/** Splits `host:port` (IPv6 literals bracketed). */
export function splitHostPort(name: string): { host: string; port?: number } {
  const m = /^\[(.+)\]:(\d+)$/.exec(name) ?? /^([^:]+):(\d+)$/.exec(name);
  if (!m) return { host: name };
  return { host: m[1]!, port: Number(m[2]) };
}

/** A proxyless gRPC client's RouteConfiguration `<host>:<port>`: the vhost of that service on that port. */
export function buildGrpcRouteConfiguration(
  proxy: Proxy,
  push: PushContext,
  routeName: string,
  opts: RouteBuildOptions = {},
): RouteConfiguration | undefined {
  const { host, port } = splitHostPort(routeName);
  if (!port) return undefined;
  const svc = push.serviceForHostname(proxy, host);
  const vhosts = sidecarVirtualHosts(proxy, push, port, opts, svc?.hostname ?? host);
  return create(RouteConfigurationSchema, { name: routeName, virtualHosts: vhosts });
}

/** The virtual hosts and other fields of an Envoy proxy's RouteConfiguration (gateway or sidecar). */
export function routeConfigParts(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions = {}): RouteConfigParts {
  return proxy.type === 'router' ? gatewayRouteParts(proxy, push, routeName, opts) : sidecarRouteParts(proxy, push, routeName, opts);
}

/** routeConfigParts(…).rest without building the virtual hosts (VHDS route configurations carry only this). */
export function routeConfigRest(proxy: Proxy, push: PushContext, routeName: string): RouteConfigRest {
  if (proxy.type !== 'router') return SIDECAR_REST;
  const servers = push.mergedGateway(proxy).serversByRouteName.get(routeName);
  return servers && servers.length > 0 ? gatewayRest(proxy) : { validateClusters: false };
}

/** What a built virtual host was made from (name, domains, routes' inputs), for reuse of its bytes; undefined when unknown. */
export function virtualHostReuseKey(vh: VirtualHostInit): string | undefined {
  return vhostKeys.get(vh);
}

export type { VirtualHostInit };
