// Virtual Host Discovery (Envoy's VHDS): a RouteConfiguration that names a `vhds` config source carries no
// virtual hosts of its own; they arrive as envoy.config.route.v3.VirtualHost resources over delta xDS, each
// named `<route config name>/<virtual host name>`, so an edit that changes one virtual host sends that one
// resource instead of every proxy's whole route table. Envoy only takes VHDS over DELTA_GRPC and has no way
// to say it wants it, so the server uses it only for clients that advertise VHDS_CLIENT_FEATURE in
// node.client_features on a delta stream; every other client (a real Envoy, a SotW stream) gets full RDS.

/** node.client_features entry by which a client says it resolves RouteConfiguration.vhds over its ADS stream. */
export const VHDS_CLIENT_FEATURE = 'mesh.io/vhds';

/** Resource name of a virtual host of a route configuration. */
export function vhdsResourceName(routeConfigName: string, virtualHostName: string): string {
  return `${routeConfigName}/${virtualHostName}`;
}

/** `<route config>/<rest>` → its parts; the route config name is everything before the first `/`. */
export function splitVhdsName(name: string): { routeConfig: string; rest: string } | undefined {
  const i = name.indexOf('/');
  if (i <= 0 || i === name.length - 1) return undefined;
  return { routeConfig: name.slice(0, i), rest: name.slice(i + 1) };
}
