// RouteConfiguration → CompiledRouteConfig (once per RDS update), and routing one request with it:
// virtual host by authority, then the first route whose match holds (Envoy's first-match order).
import type { RouteConfiguration } from '../../gen/envoy/config/route/v3/route_pb';
import { VirtualHost_TlsRequirementType, type Route, type VirtualHost } from '../../gen/envoy/config/route/v3/route_components_pb';
import { ConfigError } from '../common/config-error';
import { compileDirect, compileForward, compileRedirect, compileRetryPolicy, DEFAULT_MAX_DIRECT_RESPONSE_BODY, type PerFilterParser } from './action';
import { compileHeaderOps } from './header-ops';
import { compileRouteMatch } from './match';
import type { CompiledRoute, CompiledRouteConfig, CompiledVirtualHost, RouteRequest, RouteSelection } from './types';
import { VirtualHostTable } from './vhost';

export interface RouteCompileOptions {
  parsePerFilter: PerFilterParser;
  /** Checks cluster names when validate_clusters is on (static route configs default to on). */
  clusterExists?: (name: string) => boolean;
  /** Inline (static) route configs validate clusters unless told otherwise; RDS ones do not. */
  isStatic?: boolean;
}

function compileRoute(r: Route, index: number, where: string, opts: RouteCompileOptions, maxBody: number, clusterNames: Set<string>): CompiledRoute {
  const m = compileRouteMatch(r.match, `${where}.match`);
  let action: CompiledRoute['action'];
  const a = r.action;
  switch (a.case) {
    case 'route':
      action = compileForward(a.value, `${where}.route`, opts.parsePerFilter);
      if (action.cluster.kind === 'cluster') clusterNames.add(action.cluster.name);
      else if (action.cluster.kind === 'weighted')
        for (const c of action.cluster.clusters) if (!c.name.startsWith('%header:')) clusterNames.add(c.name);
      break;
    case 'redirect':
      action = compileRedirect(a.value, `${where}.redirect`);
      break;
    case 'directResponse':
      action = compileDirect(a.value.status, a.value.body, maxBody, `${where}.direct_response`);
      break;
    case 'nonForwardingAction':
      action = { kind: 'nonForwarding' };
      break;
    case 'filterAction':
      throw new ConfigError(`${where}.filter_action: not supported`);
    default:
      throw new ConfigError(`${where}: Route has no action`);
  }
  return {
    name: r.name,
    index,
    matches: m.matches,
    prefixLength: m.prefixLength,
    matchKind: m.kind,
    action,
    headerOps: compileHeaderOps(r, where),
    perFilterConfig: opts.parsePerFilter(r.typedPerFilterConfig, `${where}.typed_per_filter_config`),
    metadata: r.metadata?.filterMetadata && Object.keys(r.metadata.filterMetadata).length > 0 ? r.metadata.filterMetadata : undefined,
    decoratorOperation: r.decorator?.operation ?? '',
    decoratorPropagate: r.decorator?.propagate ?? true,
    statPrefix: r.statPrefix,
  };
}

function compileVirtualHost(
  v: VirtualHost,
  where: string,
  opts: RouteCompileOptions,
  maxBody: number,
  clusterNames: Set<string>,
): CompiledVirtualHost {
  if (!v.name) throw new ConfigError(`${where}.name: must not be empty`);
  if (v.domains.length === 0) throw new ConfigError(`${where}.domains: at least one domain is required`);
  if (v.matcher) throw new ConfigError(`${where}.matcher: the generic matcher tree is not supported; use routes`);
  return {
    name: v.name,
    domains: v.domains,
    routes: v.routes.map((r, i) => compileRoute(r, i, `${where}.routes[${i}]`, opts, maxBody, clusterNames)),
    requireTls:
      v.requireTls === VirtualHost_TlsRequirementType.ALL
        ? 'all'
        : v.requireTls === VirtualHost_TlsRequirementType.EXTERNAL_ONLY
          ? 'external'
          : 'none',
    headerOps: compileHeaderOps(v, where),
    perFilterConfig: opts.parsePerFilter(v.typedPerFilterConfig, `${where}.typed_per_filter_config`),
    retry: compileRetryPolicy(v.retryPolicy, `${where}.retry_policy`),
    includeRequestAttemptCount: v.includeRequestAttemptCount,
    includeAttemptCountInResponse: v.includeAttemptCountInResponse,
  };
}

/** Throws ConfigError naming the route configuration and the field for any invalid part. */
export function compileRouteConfiguration(rc: RouteConfiguration, opts: RouteCompileOptions): CompiledRouteConfig {
  const where = `route_config '${rc.name}'`;
  if (rc.vhds) throw new ConfigError(`${where}.vhds: on-demand virtual hosts are not supported`);
  const maxBody = rc.maxDirectResponseBodySizeBytes ?? DEFAULT_MAX_DIRECT_RESPONSE_BODY;
  const clusterNames = new Set<string>();
  const vhosts = rc.virtualHosts.map((v, i) => compileVirtualHost(v, `${where}.virtual_hosts[${i}]`, opts, maxBody, clusterNames));
  const validate = rc.validateClusters ?? opts.isStatic ?? false;
  if (validate && opts.clusterExists) {
    for (const c of clusterNames) if (!opts.clusterExists(c)) throw new ConfigError(`${where}: route: unknown cluster '${c}'`);
  }
  const table = new VirtualHostTable(
    vhosts.map((v) => ({ domains: v.domains, value: v })),
    rc.ignorePortInHostMatching,
    where,
  );
  return {
    name: rc.name,
    findVirtualHost: (authority) => table.find(authority),
    virtualHosts: vhosts,
    headerOps: compileHeaderOps(rc, where),
    perFilterConfig: opts.parsePerFilter(rc.typedPerFilterConfig, `${where}.typed_per_filter_config`),
    mostSpecificHeaderMutationsWins: rc.mostSpecificHeaderMutationsWins,
    ignorePortInHostMatching: rc.ignorePortInHostMatching,
    validateClusters: validate,
    internalOnlyHeaders: rc.internalOnlyHeaders.map((h) => h.toLowerCase()),
  };
}

const SSL_REDIRECT_ROUTE: CompiledRoute = {
  name: '',
  index: -1,
  matches: () => true,
  prefixLength: () => 0,
  matchKind: 'prefix',
  action: {
    kind: 'redirect',
    scheme: 'https',
    host: undefined,
    port: '',
    pathRedirect: undefined,
    pathRewrite: { kind: 'none' },
    status: 301,
    stripQuery: false,
  },
  headerOps: undefined,
  perFilterConfig: new Map(),
  metadata: undefined,
  decoratorOperation: '',
  decoratorPropagate: true,
  statPrefix: '',
};

/** Envoy's route(): the vhost for the authority, then the first matching route. */
export function selectRoute(config: CompiledRouteConfig, req: RouteRequest): RouteSelection | undefined {
  const vhost = config.findVirtualHost(req.headers.authority);
  if (!vhost) return undefined;
  if (vhost.requireTls !== 'none' && (req.headers.get('x-forwarded-proto') ?? req.headers.scheme) !== 'https') {
    // Envoy's SslRedirectRoute: internal requests (x-envoy-internal) are exempt under EXTERNAL_ONLY
    if (vhost.requireTls === 'all' || req.headers.get('x-envoy-internal') !== 'true') return { config, vhost, route: SSL_REDIRECT_ROUTE };
  }
  for (const route of vhost.routes) if (route.matches(req)) return { config, vhost, route };
  return undefined;
}
