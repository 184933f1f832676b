// VHDS output (see src/xds/vhds.ts): for a proxy served over VHDS, each RouteConfiguration names the
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
import { TYPE_URL, type Generator, type Resource } from '../types';
import { vhdsResourceName } from '../vhds';
import { initKey, TwoGenerationCache } from './reuse';
import { routeConfigParts, virtualHostReuseKey, type RouteBuildOptions, type RouteConfigRest } from './rds';

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

const packedVirtualHosts = new TwoGenerationCache<Resource>();
const VIRTUAL_HOST_TYPE = `type.googleapis.com/${VirtualHostSchema.typeName}`;

/**
 * The VirtualHost resources of one route configuration, packed. Bytes of a virtual host built identically in
 * an earlier push are reused (as for RDS), so unchanged virtual hosts keep their Resource objects and hashes
 * and a delta push sends only the changed ones.
 */
export function packedRouteVirtualHosts(proxy: Proxy, push: PushContext, routeName: string, opts: RouteBuildOptions = {}): Resource[] {
  packedVirtualHosts.nextPush(push.version);
  const { virtualHosts } = routeConfigParts(proxy, push, routeName, opts);
  return virtualHosts.map((vh) => {
    const name = vhdsResourceName(routeName, vh.name);
    const key = `${routeName}|${virtualHostReuseKey(vh) ?? initKey(vh)}`;
    return packedVirtualHosts.get(key, () => ({
      name,
      resource: create(AnySchema, { typeUrl: VIRTUAL_HOST_TYPE, value: toBinary(VirtualHostSchema, create(VirtualHostSchema, { ...vh, name })) }),
    }));
  });
}

/**
 * VirtualHost generator: the virtual hosts of the route configurations the proxy watches over RDS
 * (`watched.routeConfigs`); a named watch gets only the names it lists.
 */
export function vhdsGenerator(opts: RouteBuildOptions = {}): Generator<PushContext> {
  return {
    generate(proxy, watched, req) {
      const push = req.push;
      const out: Resource[] = [];
      for (const rc of [...(watched.routeConfigs ?? [])].sort()) {
        out.push(...push.memo(`vhds|${push.sharedKey(proxy)}|${rc}`, () => packedRouteVirtualHosts(proxy, push, rc, opts)));
      }
      return { resources: watched.wildcard ? out : out.filter((r) => watched.resourceNames.has(r.name)) };
    },
  };
}

export { TYPE_URL };
