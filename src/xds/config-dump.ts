// Envoy's /config_dump shape (envoy.admin.v3.ConfigDump) for a set of xDS resources: what Istio's
// /debug/config_dump?proxyID= and a proxy's admin endpoint show, so users can read them alike.
import { toJson, type JsonValue } from '@bufbuild/protobuf';
import { AnySchema, type Any } from '@bufbuild/protobuf/wkt';
import type { Resource } from './types';
import { TYPE_URL } from '../lib/xds/type-urls';
import { envoyTypeRegistry } from '../lib/xds/registry';

export interface TypedResources {
  version: string;
  resources: readonly Resource[];
  /** ms since the epoch; Envoy's last_updated. */
  lastUpdated?: number;
}

const ADMIN = 'type.googleapis.com/envoy.admin.v3.';

function anyJson(a: Any): JsonValue {
  return toJson(AnySchema, a, { registry: envoyTypeRegistry() });
}

function stamp(t: TypedResources): Record<string, JsonValue> {
  return t.lastUpdated === undefined ? { version_info: t.version } : { version_info: t.version, last_updated: new Date(t.lastUpdated).toISOString() };
}

/** Dumps in Envoy's order: clusters, listeners, routes, then endpoints when asked for. */
export function configDumpJson(byType: ReadonlyMap<string, TypedResources>, opts: { includeEds: boolean }): JsonValue {
  const configs: JsonValue[] = [];
  const clusters = byType.get(TYPE_URL.cluster);
  if (clusters) {
    configs.push({
      '@type': `${ADMIN}ClustersConfigDump`,
      version_info: clusters.version,
      dynamic_active_clusters: clusters.resources.map((r) => ({ ...stamp(clusters), cluster: anyJson(r.resource) })),
    });
  }
  const listeners = byType.get(TYPE_URL.listener);
  if (listeners) {
    configs.push({
      '@type': `${ADMIN}ListenersConfigDump`,
      version_info: listeners.version,
      dynamic_listeners: listeners.resources.map((r) => ({ name: r.name, active_state: { ...stamp(listeners), listener: anyJson(r.resource) } })),
    });
  }
  const routes = byType.get(TYPE_URL.route);
  if (routes) {
    // A proxy served over VHDS holds each route configuration with the virtual hosts it got for it, as
    // Envoy's own dump shows them: fold them in, so the daemon's view and the proxy's compare alike.
    const vhosts = new Map<string, JsonValue[]>();
    for (const v of byType.get(TYPE_URL.virtualHost)?.resources ?? []) {
      const rc = v.name.slice(0, v.name.indexOf('/'));
      vhosts.set(rc, [...(vhosts.get(rc) ?? []), anyJson(v.resource)]);
    }
    const withVhosts = (name: string, rc: JsonValue): JsonValue => {
      const more = vhosts.get(name);
      if (!more || typeof rc !== 'object' || rc === null || Array.isArray(rc)) return rc;
      const own = Array.isArray(rc['virtualHosts']) ? rc['virtualHosts'] : [];
      const bodies = more.map((v) => Object.fromEntries(Object.entries(v as Record<string, JsonValue>).filter(([k]) => k !== '@type')));
      return { ...rc, virtualHosts: [...own, ...bodies] };
    };
    configs.push({
      '@type': `${ADMIN}RoutesConfigDump`,
      dynamic_route_configs: routes.resources.map((r) => ({ ...stamp(routes), route_config: withVhosts(r.name, anyJson(r.resource)) })),
    });
  }
  const endpoints = byType.get(TYPE_URL.endpoint);
  if (opts.includeEds && endpoints) {
    configs.push({
      '@type': `${ADMIN}EndpointsConfigDump`,
      dynamic_endpoint_configs: endpoints.resources.map((r) => ({ ...stamp(endpoints), endpoint_config: anyJson(r.resource) })),
    });
  }
  return { configs };
}
