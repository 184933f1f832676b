// Route actions: forwarding (cluster choice, rewrites, timeouts, retries), redirects and direct
// responses, with Envoy's rules for each (RouteEntryImplBase, Http::Utility::newUri).
import type { DataSource } from '../../gen/envoy/config/core/v3/base_pb';
import {
  RedirectAction_RedirectResponseCode as Code,
  RouteAction_ClusterNotFoundResponseCode,
  type RedirectAction as RedirectProto,
  type RetryPolicy as RetryProto,
  type RouteAction,
  type RouteAction_RequestMirrorPolicy,
  type WeightedCluster,
} from '../../gen/envoy/config/route/v3/route_components_pb';
import { WeakInterner } from '../../lib/intern';
import { globalReplacer } from '../../lib/re2';
import { ConfigError } from '../common/config-error';
import { readDataSource } from '../common/data-source';
import { durationToMs } from '../common/duration';
import type { RequestHeaders } from '../codec/headers';
import { compileHeaderOps } from './header-ops';
import { fractionOf } from './match';
import type {
  ClusterSpecifier,
  DirectResponseAction,
  ForwardAction,
  HashPolicy,
  HostRewrite,
  MirrorPolicy,
  PathRewrite,
  PerFilterConfig,
  RedirectAction,
  RetryPolicy,
  WeightedClusterEntry,
} from './types';

/** Routes without upgrade_configs (nearly all) share this one. */
const NO_UPGRADES: ReadonlyMap<string, boolean> = new Map();

export const DEFAULT_ROUTE_TIMEOUT_MS = 15_000;
export const DEFAULT_MAX_DIRECT_RESPONSE_BODY = 4096;

export type PerFilterParser = (
  perFilter: { [key: string]: import('@bufbuild/protobuf/wkt').Any },
  where: string,
) => ReadonlyMap<string, PerFilterConfig>;

/** Envoy's retry_on values (router and gRPC); others are rejected like Envoy's config validation. */
const RETRY_ON = new Set([
  '5xx',
  'gateway-error',
  'reset',
  'reset-before-request',
  'connect-failure',
  'envoy-ratelimited',
  'retriable-4xx',
  'refused-stream',
  'retriable-status-codes',
  'retriable-headers',
  'http3-post-connect-failure',
  'cancelled',
  'deadline-exceeded',
  'internal',
  'resource-exhausted',
  'unavailable',
]);

/**
 * Compiled retry policies by content. A sidecar with a thousand services in scope has a route per service, each
 * with Istio's same default policy: one shared copy instead of a policy and its two sets per route (~0.5 KB
 * each). Policies are immutable (RetryPolicy's fields are read-only sets).
 */
const retryPolicies = new WeakInterner<RetryPolicy>();

export function compileRetryPolicy(p: RetryProto | undefined, where: string): RetryPolicy | undefined {
  if (!p) return undefined;
  // Envoy keeps the known conditions and ignores the rest (RetryStateImpl::parseRetryOn(...).first):
  // refusing them would NACK the whole route configuration, every virtual host of the port with it
  const retryOn = new Set(
    p.retryOn
      .split(',')
      .map((s) => s.trim())
      .filter((r) => RETRY_ON.has(r)),
  );
  const base = durationToMs(p.retryBackOff?.baseInterval) ?? 25;
  const max = durationToMs(p.retryBackOff?.maxInterval) ?? base * 10;
  if (max < base) throw new ConfigError(`${where}.retry_back_off: max_interval must be greater than or equal to the base_interval`);
  const policy: RetryPolicy = {
    retryOn,
    numRetries: p.numRetries ?? 1,
    perTryTimeoutMs: durationToMs(p.perTryTimeout) ?? 0,
    retriableStatusCodes: new Set(p.retriableStatusCodes),
    avoidPreviousHosts: p.retryHostPredicate.some((h) => h.name === 'envoy.retry_host_predicates.previous_hosts'),
    hostSelectionRetryMaxAttempts: Math.max(1, Number(p.hostSelectionRetryMaxAttempts || 1n)),
    baseIntervalMs: base,
    maxIntervalMs: max,
  };
  // every field of the compiled policy, so one added later cannot make two different policies one
  const key = JSON.stringify(policy, (_k, v: unknown) => (v instanceof Set ? [...(v as Set<unknown>)] : v));
  return retryPolicies.intern(key, policy);
}

function regexRewrite(pattern: string | undefined, substitution: string, where: string): { replace: (path: string) => string } {
  if (pattern === undefined) throw new ConfigError(`${where}.pattern: is required`);
  try {
    return { replace: globalReplacer(pattern, substitution) };
  } catch (e) {
    throw new ConfigError(`${where}.pattern: invalid regex '${pattern}': ${(e as Error).message}`);
  }
}

function compileWeighted(w: WeightedCluster, where: string, parsePerFilter: PerFilterParser): ClusterSpecifier {
  const clusters: WeightedClusterEntry[] = w.clusters.map((c, i) => {
    const cw = `${where}.clusters[${i}]`;
    if (!c.name && !c.clusterHeader) throw new ConfigError(`${cw}: name or cluster_header is required`);
    return {
      name: c.name || `%header:${c.clusterHeader.toLowerCase()}`,
      weight: c.weight ?? 0,
      headerOps: compileHeaderOps(c, cw),
      hostRewriteLiteral: c.hostRewriteSpecifier.case === 'hostRewriteLiteral' ? c.hostRewriteSpecifier.value : undefined,
      perFilterConfig: parsePerFilter(c.typedPerFilterConfig, `${cw}.typed_per_filter_config`),
    };
  });
  const sum = clusters.reduce((a, c) => a + c.weight, 0);
  const total = w.totalWeight !== undefined && w.totalWeight > 0 ? w.totalWeight : sum;
  if (sum === 0) throw new ConfigError(`${where}: Sum of weights in the weighted_cluster must be greater than 0`);
  if (w.totalWeight !== undefined && w.totalWeight > 0 && sum !== w.totalWeight) {
    throw new ConfigError(`${where}: Sum of weights in the weighted_cluster should add up to ${w.totalWeight}`);
  }
  return {
    kind: 'weighted',
    clusters,
    total,
    randomHeader: w.randomValueSpecifier.case === 'headerName' ? w.randomValueSpecifier.value.toLowerCase() : '',
  };
}

/** Envoy pickWeightedCluster: `random mod total` against the running sum of weights. */
export function pickWeighted(spec: Extract<ClusterSpecifier, { kind: 'weighted' }>, random: number): WeightedClusterEntry | undefined {
  const selected = Math.floor(random * spec.total) % spec.total;
  let acc = 0;
  for (const c of spec.clusters) {
    acc += c.weight;
    if (selected < acc) return c;
  }
  return undefined;
}

export function compileForward(a: RouteAction, where: string, parsePerFilter: PerFilterParser): ForwardAction {
  let cluster: ClusterSpecifier;
  const cs = a.clusterSpecifier;
  switch (cs.case) {
    case 'cluster':
      if (!cs.value) throw new ConfigError(`${where}.cluster: must not be empty`);
      cluster = { kind: 'cluster', name: cs.value };
      break;
    case 'clusterHeader':
      cluster = { kind: 'header', header: cs.value.toLowerCase() };
      break;
    case 'weightedClusters':
      cluster = compileWeighted(cs.value, `${where}.weighted_clusters`, parsePerFilter);
      break;
    case 'clusterSpecifierPlugin':
    case 'inlineClusterSpecifierPlugin':
      throw new ConfigError(`${where}: cluster specifier plugins are not supported`);
    default:
      throw new ConfigError(`${where}: RouteAction has no cluster_specifier`);
  }
  let pathRewrite: PathRewrite = { kind: 'none' };
  if (a.prefixRewrite && a.regexRewrite) throw new ConfigError(`${where}: Cannot specify both prefix_rewrite and regex_rewrite`);
  if (a.prefixRewrite) pathRewrite = { kind: 'prefix', value: a.prefixRewrite };
  else if (a.regexRewrite)
    pathRewrite = { kind: 'regex', ...regexRewrite(a.regexRewrite.pattern?.regex, a.regexRewrite.substitution, `${where}.regex_rewrite`) };
  if (a.pathRewritePolicy) throw new ConfigError(`${where}.path_rewrite_policy: extension '${a.pathRewritePolicy.name}' is not supported`);
  let hostRewrite: HostRewrite = { kind: 'none' };
  const hr = a.hostRewriteSpecifier;
  switch (hr.case) {
    case 'hostRewriteLiteral':
      hostRewrite = { kind: 'literal', value: hr.value };
      break;
    case 'autoHostRewrite':
      if (hr.value) hostRewrite = { kind: 'auto' };
      break;
    case 'hostRewriteHeader':
      hostRewrite = { kind: 'header', header: hr.value.toLowerCase() };
      break;
    case 'hostRewritePathRegex':
      hostRewrite = { kind: 'pathRegex', ...regexRewrite(hr.value.pattern?.regex, hr.value.substitution, `${where}.host_rewrite_path_regex`) };
      break;
  }
  const hashPolicies: HashPolicy[] = a.hashPolicy.map((h, i) => {
    const p = h.policySpecifier;
    switch (p.case) {
      case 'header':
        return { kind: 'header', name: p.value.headerName.toLowerCase(), terminal: h.terminal };
      case 'cookie':
        return { kind: 'cookie', name: p.value.name, terminal: h.terminal };
      case 'connectionProperties':
        return { kind: 'sourceIp', terminal: h.terminal };
      case 'queryParameter':
        return { kind: 'query', name: p.value.name, terminal: h.terminal };
      default:
        throw new ConfigError(`${where}.hash_policy[${i}]: '${p.case ?? 'none'}' is not supported`);
    }
  });
  let upgradeTypes: ReadonlyMap<string, boolean> = NO_UPGRADES;
  if (a.upgradeConfigs.length > 0) upgradeTypes = new Map(a.upgradeConfigs.map((u) => [u.upgradeType.toLowerCase(), u.enabled ?? true]));
  return {
    kind: 'route',
    hashPolicies,
    cluster,
    clusterNotFoundCode:
      a.clusterNotFoundResponseCode === RouteAction_ClusterNotFoundResponseCode.NOT_FOUND
        ? 404
        : a.clusterNotFoundResponseCode === RouteAction_ClusterNotFoundResponseCode.INTERNAL_SERVER_ERROR
          ? 500
          : 503,
    pathRewrite,
    hostRewrite,
    timeoutMs: durationToMs(a.timeout) ?? DEFAULT_ROUTE_TIMEOUT_MS,
    idleTimeoutMs: durationToMs(a.idleTimeout) ?? 0,
    retry: compileRetryPolicy(a.retryPolicy, `${where}.retry_policy`),
    maxGrpcTimeoutMs: durationToMs(a.maxGrpcTimeout),
    upgradeTypes,
    appendXForwardedHost: a.appendXForwardedHost,
    mirrors: a.requestMirrorPolicies.map((m, i) => compileMirror(m, `${where}.request_mirror_policies[${i}]`)),
  };
}

/** Envoy's ShadowPolicyImpl: a cluster (or a header naming one: not used by Istio, refused here) and a runtime fraction. */
function compileMirror(m: RouteAction_RequestMirrorPolicy, where: string): MirrorPolicy {
  if (m.clusterHeader) throw new ConfigError(`${where}.cluster_header: mirroring to a cluster named by a header is not supported`);
  if (!m.cluster) throw new ConfigError(`${where}: cluster must not be empty`);
  return {
    cluster: m.cluster,
    fraction: fractionOf(m.runtimeFraction?.defaultValue, m.runtimeFraction ? 0 : 1),
    hostSuffix: !m.disableShadowHostSuffixAppend,
  };
}

const REDIRECT_CODES: Record<number, number> = {
  [Code.MOVED_PERMANENTLY]: 301,
  [Code.FOUND]: 302,
  [Code.SEE_OTHER]: 303,
  [Code.TEMPORARY_REDIRECT]: 307,
  [Code.PERMANENT_REDIRECT]: 308,
};

export function compileRedirect(r: RedirectProto, where: string): RedirectAction {
  const s = r.schemeRewriteSpecifier;
  const scheme = s.case === 'schemeRedirect' ? s.value.toLowerCase() : s.case === 'httpsRedirect' && s.value ? 'https' : undefined;
  let pathRedirect: string | undefined;
  let pathRewrite: PathRewrite = { kind: 'none' };
  const p = r.pathRewriteSpecifier;
  // Envoy's newUri uses path_redirect only when non-empty (Istio sends '' for a redirect without uri)
  if (p.case === 'pathRedirect' && p.value !== '') pathRedirect = p.value;
  else if (p.case === 'prefixRewrite') pathRewrite = { kind: 'prefix', value: p.value };
  else if (p.case === 'regexRewrite')
    pathRewrite = { kind: 'regex', ...regexRewrite(p.value.pattern?.regex, p.value.substitution, `${where}.regex_rewrite`) };
  const status = REDIRECT_CODES[r.responseCode];
  if (status === undefined) throw new ConfigError(`${where}.response_code: unknown redirect response code ${r.responseCode}`);
  return {
    kind: 'redirect',
    scheme,
    host: r.hostRedirect || undefined,
    port: r.portRedirect ? `:${r.portRedirect}` : '',
    pathRedirect,
    pathRewrite,
    status,
    stripQuery: r.stripQuery,
  };
}

export function compileDirect(status: number, body: DataSource | undefined, maxBody: number, where: string): DirectResponseAction {
  if (status < 200 || status >= 600) throw new ConfigError(`${where}.status: value must be inside range [200, 600)`);
  const b = readDataSource(body, `${where}.body`);
  if (b && b.length > maxBody) throw new ConfigError(`${where}: response body size is ${b.length} bytes; maximum is ${maxBody}`);
  return { kind: 'direct', status, body: b && b.length > 0 ? b : undefined };
}

// ---------------------------------------------------------------------------------------------
// applying actions

/** Path after the action's rewrite; undefined when nothing changes. `prefixLength` comes from the match. */
export function rewritePath(rw: PathRewrite, path: string, prefixLength: number): string | undefined {
  if (rw.kind === 'none') return undefined;
  if (rw.kind === 'prefix') return rw.value + path.slice(prefixLength);
  const q = path.search(/[?#]/);
  const only = q >= 0 ? path.slice(0, q) : path;
  return rw.replace(only) + (q >= 0 ? path.slice(q) : '');
}

/** Envoy processRequestHost: the request's Host, minus a port the new scheme or port makes wrong. */
function processRequestHost(host: string, requestProto: string, newScheme: string, newPort: string): string {
  if (!host) return host;
  let end: number;
  if (host[0] === '[') {
    end = host.lastIndexOf(']:');
    if (end >= 0) end += 1;
  } else {
    end = host.lastIndexOf(':');
  }
  if (end >= 0) {
    const port = host.slice(end);
    let remove = newPort !== '';
    if (newScheme !== requestProto) {
      remove ||= requestProto === 'https' && port === ':443';
      remove ||= requestProto === 'http' && port === ':80';
    }
    if (remove) return host.slice(0, end);
  }
  return host;
}

/** The Location of a redirect (Envoy Http::Utility::newUri), after the action's path rewrite. */
export function redirectLocation(r: RedirectAction, req: RequestHeaders, prefixLength: number): string {
  const requestProto = req.get('x-forwarded-proto') ?? req.scheme;
  const scheme = r.scheme ?? requestProto;
  const host = r.host ?? processRequestHost(req.authority, requestProto, scheme, r.port);
  let path: string;
  if (r.pathRedirect !== undefined) {
    if (r.pathRedirect.includes('?')) path = r.pathRedirect;
    else {
      const q = req.path.indexOf('?');
      path = q >= 0 ? r.pathRedirect + req.path.slice(q) : r.pathRedirect;
    }
  } else {
    path = rewritePath(r.pathRewrite, req.path, prefixLength) ?? req.path;
  }
  if (!path.startsWith('/')) path = `/${path}`;
  if (r.stripQuery && !(r.pathRedirect ?? '').includes('?')) {
    const q = path.indexOf('?');
    if (q >= 0) path = path.slice(0, q);
  }
  return `${scheme}://${host}${r.port}${path}`;
}
