// RouteConfiguration → CompiledRouteConfig (once per RDS update), and routing one request with it:
// virtual host by authority, then the first route whose match holds (Envoy's first-match order).
//
// A virtual host is compiled on its first request, not with its route configuration: Envoy's workers share one
// immutable route table, but a JS object cannot be shared between threads, and a sidecar with 1000 services in
// scope has 1000 virtual hosts per port of which it talks to a few. So each thread keeps the virtual hosts as
// received (domains in the lookup table, the rest encoded) and compiles one when a request first selects it. The
// configuration is still validated whole when it arrives (every virtual host compiled, then dropped), so an
// invalid one is rejected as Envoy rejects it; a worker thread skips that: it only gets what the main thread accepted.
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
  /**
   * Compile every virtual host on arrival to reject an invalid configuration (the results are dropped). Default
   * on; off in an engine worker thread, which gets only configurations the main thread accepted.
   */
  validate?: boolean;
  /** A virtual host that fails to compile on its first request (only possible unvalidated): it then matches nothing. */
  onLazyError?: (e: Error) => void;
}

/** One virtual host as received: its domains (the lookup table needs them all) and its message, decoded on first use. */
export interface VirtualHostSource {
  readonly domains: readonly string[];
  message(): VirtualHost;
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

/**
 * Throws ConfigError naming the route configuration and the field for any invalid part. `sources` are the virtual
 * hosts when they are not `rc.virtualHosts` decoded (RDS keeps them encoded; VHDS delivers them apart).
 */
export function compileRouteConfiguration(
  rc: RouteConfiguration,
  opts: RouteCompileOptions,
  sources: readonly VirtualHostSource[] = rc.virtualHosts.map((v) => ({ domains: v.domains, message: () => v })),
): CompiledRouteConfig {
  const where = `route_config '${rc.name}'`;
  if (rc.vhds) throw new ConfigError(`${where}.vhds: on-demand virtual hosts are not supported`);
  const maxBody = rc.maxDirectResponseBodySizeBytes ?? DEFAULT_MAX_DIRECT_RESPONSE_BODY;
  const vhostWhere = (i: number) => `${where}.virtual_hosts[${i}]`;
  const validate = rc.validateClusters ?? opts.isStatic ?? false;
  if (opts.validate !== false) {
    const clusterNames = new Set<string>();
    sources.forEach((s, i) => compileVirtualHost(s.message(), vhostWhere(i), opts, maxBody, clusterNames));
    if (validate && opts.clusterExists) {
      for (const c of clusterNames) if (!opts.clusterExists(c)) throw new ConfigError(`${where}: route: unknown cluster '${c}'`);
    }
  }
  const table = new VirtualHostTable(
    sources.map((s, i) => ({ domains: s.domains, value: i })),
    rc.ignorePortInHostMatching,
    where,
  );
  // by index, filled on first use; null: failed to compile (an unvalidated configuration)
  const compiled: Array<CompiledVirtualHost | null | undefined> = new Array(sources.length);
  let count = 0;
  const vhostAt = (i: number): CompiledVirtualHost | undefined => {
    const have = compiled[i];
    if (have !== undefined) return have ?? undefined;
    try {
      const v = compileVirtualHost(sources[i]!.message(), vhostWhere(i), opts, maxBody, new Set());
      compiled[i] = v;
      count++;
      return v;
    } catch (e) {
      compiled[i] = null;
      opts.onLazyError?.(e as Error);
      return undefined;
    }
  };
  return {
    name: rc.name,
    findVirtualHost: (authority) => {
      const i = table.find(authority);
      return i === undefined ? undefined : vhostAt(i);
    },
    virtualHostCount: sources.length,
    compiledVirtualHosts: () => count,
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
