// VHDS output (see src/lib/xds/vhds.ts): for a proxy served over VHDS, each RouteConfiguration names the
// `vhds` config source and holds no virtual hosts, and its virtual hosts are VirtualHost resources named
// `<route config>/<virtual host>`. Routing is unchanged: Envoy picks a virtual host by domain (exact, then
// longest suffix/prefix wildcard, then `*`), never by position, so moving them out of the list loses nothing.
import { create, toBinary } from '@bufbuild/protobuf';
import { AnySchema } from '@bufbuild/protobuf/wkt';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import { ApiConfigSource_ApiType, ApiVersion, ConfigSourceSchema, type ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import { VirtualHostSchema } from '../../gen/envoy/config/route/v3/route_components_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import type { Generator, PushRequest, Resource } from '../types';
import { TYPE_URL } from '../../lib/xds/type-urls';
import { vhdsResourceName } from '../../lib/xds/vhds';
import { initKey } from './reuse';
import {
  duplicateDomainReports,
  rebuiltSidecarVirtualHost,
  routeConfigParts,
  sidecarVirtualService,
  sidecarVirtualServiceOrder,
  virtualHostReuseKey,
  virtualHostSource,
  type RouteBuildOptions,
  type RouteConfigRest,
  type VirtualHostInit,
} from './rds';

/** Istio's bootstrap names its xDS cluster `xds-grpc`; Envoy accepts VHDS only from a DELTA_GRPC api_config_source. */
export const VHDS_XDS_CLUSTER = 'xds-grpc';

export function vhdsConfigSource(): ConfigSource {
  return create(ConfigSourceSchema, {
    resourceApiVersion: ApiVersion.V3,
    configSourceSpecifier: {
      case: 'apiConfigSource',
      value: {
        apiType: ApiConfigSource_ApiType.DELTA_GRPC,
        transportApiVersion: ApiVersion.V3,
        grpcServices: [{ targetSpecifier: { case: 'envoyGrpc', value: { clusterName: VHDS_XDS_CLUSTER } } }],
      },
    },
  });
}

/** The RouteConfiguration a VHDS client gets: its fields without virtual hosts, and where to find them. */
export function vhdsRouteConfiguration(name: string, rest: RouteConfigRest): RouteConfiguration {
  return create(RouteConfigurationSchema, { name, ...rest, virtualHosts: [], vhds: { configSource: vhdsConfigSource() } });
}

/**
 * The VirtualHost resources of one route configuration, packed. Bytes of a virtual host built identically in
 * an earlier push are reused (as for RDS), so unchanged virtual hosts keep their Resource objects and hashes
 * and a delta push sends only the changed ones.
 */
export function packedRouteVirtualHosts(
  proxy: Proxy,
  push: PushContext,
  routeName: string,
  opts: RouteBuildOptions = {},
  virtualHosts: readonly VirtualHostInit[] = routeConfigParts(proxy, push, routeName, opts).virtualHosts,
): Resource[] {
  return virtualHosts.map((vh) => {
    const name = vhdsResourceName(routeName, vh.name);
    const key = `vhds|${routeName}|${virtualHostReuseKey(vh) ?? initKey(vh)}`;
    return push.cache.get('rds', key, (): Resource => ({
      name,
      resource: create(AnySchema, { typeUrl: TYPE_URL.virtualHost, value: toBinary(VirtualHostSchema, create(VirtualHostSchema, { ...vh, name })) }),
    }));
  });
}

/** A route configuration's virtual hosts as last built for a kind of proxy (sharedKey). */
export interface LastBuild {
  pushVersion: number;
  virtualHosts: readonly VirtualHostInit[];
  /** sidecarVirtualServiceOrder when built. */
  order: string;
  /** Duplicate-domain reports of the build. */
  dups: ReadonlyArray<readonly [string, string]>;
}

/** Last builds per generator options (the daemon has one options object), by `<sharedKey>|<route config>`. */
const buildsByOptions = new WeakMap<object, { sweptAt: number; last: Map<string, LastBuild> }>();

const VS_KEY = /^VirtualService\/([^/]+)\/([^/]+)$/;

/**
 * The virtual hosts of a sidecar's route configuration after a push that changed only the routes of some
 * VirtualServices, from the previous push's: only the virtual hosts built from those VirtualServices are
 * rebuilt (an edit of one VirtualService no longer rebuilds a thousand virtual hosts per kind of proxy).
 * undefined when that is not known to give what a full build would: the previous build is not of the push
 * just before this one, the push changed other kinds, a changed VirtualService's hosts, gateways, exportTo
 * or position changed, it built no virtual host before or gives no routes now.
 */
export function patchedSidecarVirtualHosts(
  proxy: Proxy,
  push: PushContext,
  routeName: string,
  opts: RouteBuildOptions,
  req: Pick<PushRequest<PushContext>, 'full' | 'configsUpdated'>,
  last: LastBuild | undefined,
  order: string,
): VirtualHostInit[] | undefined {
  const port = Number(routeName);
  if (!last || proxy.type !== 'sidecar' || proxy.proxyless || !Number.isInteger(port) || port <= 0) return undefined;
  // pushVersion only grows by one per snapshot: the push just before this one, and nothing else, was built from.
  if (!req.full || req.configsUpdated.size === 0 || last.pushVersion !== push.pushVersion - 1 || last.order !== order) return undefined;
  const out = [...last.virtualHosts];
  for (const key of req.configsUpdated) {
    const m = VS_KEY.exec(key);
    if (!m) return undefined;
    const [, namespace, name] = m as unknown as [string, string, string];
    const now = sidecarVirtualService(proxy, push, port, namespace, name);
    let built = 0;
    for (let i = 0; i < out.length; i++) {
      const before = virtualHostSource(out[i]!);
      if (!before || before.namespace !== namespace || before.name !== name) continue;
      if (!now || !sameShape(before, now)) return undefined;
      const vh = rebuiltSidecarVirtualHost(proxy, push, port, out[i]!, now, opts);
      if (!vh) return undefined;
      out[i] = vh;
      built++;
    }
    if (built === 0) return undefined;
  }
  return out;
}

type VirtualServiceShape = { hosts: readonly string[]; gateways: readonly string[]; exportTo: readonly string[] };

const sameList = (a: readonly string[], b: readonly string[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** What decides which virtual hosts a VirtualService gives (everything but its routes). */
function sameShape(a: VirtualServiceShape, b: VirtualServiceShape): boolean {
  return sameList(a.hosts, b.hosts) && sameList(a.gateways, b.gateways) && sameList(a.exportTo, b.exportTo);
}

/**
 * VirtualHost generator: the virtual hosts of the route configurations the proxy watches over RDS
 * (`watched.routeConfigs`); a named watch gets only the names it lists. Built once per kind of proxy
 * (sharedKey) and push; after an edit of VirtualServices only their virtual hosts are rebuilt.
 */
export function vhdsGenerator(opts: RouteBuildOptions = {}): Generator<PushContext> {
  // One generator is made per proxy, with the daemon's options: builds are remembered per options object.
  let builds = buildsByOptions.get(opts);
  if (!builds) buildsByOptions.set(opts, (builds = { sweptAt: 0, last: new Map() }));
  const lastBuilds = builds.last;
  const state = builds;
  const virtualHostsOf = (proxy: Proxy, push: PushContext, rc: string, req: PushRequest<PushContext>): readonly VirtualHostInit[] => {
    if (state.sweptAt !== push.pushVersion) {
      state.sweptAt = push.pushVersion;
      for (const [k, b] of lastBuilds) if (b.pushVersion < push.pushVersion - 1) lastBuilds.delete(k);
    }
    const key = `${push.sharedKey(proxy)}|${rc}`;
    const port = Number(rc);
    const sidecar = proxy.type === 'sidecar' && Number.isInteger(port) && port > 0;
    const order = sidecar ? sidecarVirtualServiceOrder(proxy, push, port) : '';
    const patched = sidecar ? patchedSidecarVirtualHosts(proxy, push, rc, opts, req, lastBuilds.get(key), order) : undefined;
    let virtualHosts: readonly VirtualHostInit[];
    let dups: LastBuild['dups'];
    if (patched) {
      // The push status gets what the full build would have reported (names and domains are unchanged).
      dups = lastBuilds.get(key)!.dups;
      for (const [name, message] of dups) push.addMetric('dupDomain', name, proxy.id, message);
      virtualHosts = patched;
    } else {
      virtualHosts = routeConfigParts(proxy, push, rc, opts).virtualHosts;
      dups = duplicateDomainReports(virtualHosts);
    }
    if (sidecar) lastBuilds.set(key, { pushVersion: push.pushVersion, virtualHosts, order, dups });
    return virtualHosts;
  };
  return {
    generate(proxy, watched, req) {
      const push = req.push;
      const out: Resource[] = [];
      for (const rc of [...(watched.routeConfigs ?? [])].sort()) {
        out.push(
          ...push.shared('rds', `vhds|${push.sharedKey(proxy)}|${rc}`, () =>
            packedRouteVirtualHosts(proxy, push, rc, opts, virtualHostsOf(proxy, push, rc, req)),
          ),
        );
      }
      return { resources: watched.wildcard ? out : out.filter((r) => watched.resourceNames.has(r.name)) };
    },
  };
}
