// Compiled route tables: what an RDS RouteConfiguration (or an HCM's inline route_config) becomes
// once per update, so that per-request routing is closures and table lookups only.
import type { JsonObject } from '@bufbuild/protobuf';
import type { RequestHeaders } from '../codec/headers';
import type { DynamicMetadata } from '../matchers/string';
import type { HeaderOps } from './header-ops';

/** What route matching reads of a request. */
export interface RouteRequest {
  readonly headers: RequestHeaders;
  readonly dynamicMetadata: DynamicMetadata | undefined;
  /** Client certificate presented / validated on the downstream connection (tls_context match). */
  readonly tlsPresented: boolean;
  readonly tlsValidated: boolean;
  /** A stable random value in [0, 1) for this request (runtime_fraction, weighted clusters). */
  readonly random: number;
}

/** Per-filter config of a route/vhost/route-config, decoded once; `disabled` turns a filter off. */
export interface PerFilterConfig {
  config: unknown;
  disabled: boolean;
}

export interface RetryPolicy {
  retryOn: ReadonlySet<string>;
  numRetries: number;
  perTryTimeoutMs: number;
  retriableStatusCodes: ReadonlySet<number>;
  /** Previous-hosts predicate: prefer another host on retry. */
  avoidPreviousHosts: boolean;
  hostSelectionRetryMaxAttempts: number;
  baseIntervalMs: number;
  maxIntervalMs: number;
}

export interface WeightedClusterEntry {
  name: string;
  weight: number;
  headerOps: HeaderOps | undefined;
  hostRewriteLiteral: string | undefined;
  perFilterConfig: ReadonlyMap<string, PerFilterConfig>;
}

export type ClusterSpecifier =
  | { kind: 'cluster'; name: string }
  | { kind: 'header'; header: string }
  | { kind: 'weighted'; clusters: readonly WeightedClusterEntry[]; total: number; randomHeader: string };

export type HostRewrite =
  | { kind: 'none' }
  | { kind: 'literal'; value: string }
  | { kind: 'auto' }
  | { kind: 'header'; header: string }
  | { kind: 'pathRegex'; replace: (path: string) => string };

export type PathRewrite = { kind: 'none' } | { kind: 'prefix'; value: string } | { kind: 'regex'; replace: (path: string) => string };

export type HashPolicy =
  | { kind: 'header'; name: string; terminal: boolean }
  | { kind: 'cookie'; name: string; terminal: boolean }
  | { kind: 'sourceIp'; terminal: boolean }
  | { kind: 'query'; name: string; terminal: boolean };

export interface ForwardAction {
  kind: 'route';
  /** Consistent-hash inputs for RING_HASH/MAGLEV clusters (Envoy RouteAction.hash_policy). */
  hashPolicies: readonly HashPolicy[];
  cluster: ClusterSpecifier;
  clusterNotFoundCode: number;
  pathRewrite: PathRewrite;
  hostRewrite: HostRewrite;
  /** Route timeout (Envoy default 15 s); 0 disables it. */
  timeoutMs: number;
  idleTimeoutMs: number;
  retry: RetryPolicy | undefined;
  maxGrpcTimeoutMs: number | undefined;
  upgradeTypes: ReadonlyMap<string, boolean>;
  appendXForwardedHost: boolean;
  /** RouteAction.request_mirror_policies: copies of the request sent to other clusters, answers dropped. */
  mirrors: readonly MirrorPolicy[];
}

/** One RequestMirrorPolicy (Envoy's ShadowPolicy). */
export interface MirrorPolicy {
  cluster: string;
  /** runtime_fraction's default value as a fraction in [0, 1] (1 when absent). */
  fraction: number;
  /** Append `-shadow` to the copy's host (not disable_shadow_host_suffix_append). */
  hostSuffix: boolean;
}

export interface RedirectAction {
  kind: 'redirect';
  scheme: string | undefined;
  host: string | undefined;
  /** `:8080`, or '' */
  port: string;
  pathRedirect: string | undefined;
  pathRewrite: PathRewrite;
  status: number;
  stripQuery: boolean;
}

export interface DirectResponseAction {
  kind: 'direct';
  status: number;
  body: Buffer | undefined;
}

export interface NonForwardingAction {
  kind: 'nonForwarding';
}

export type RouteActionKind = ForwardAction | RedirectAction | DirectResponseAction | NonForwardingAction;

export interface CompiledRoute {
  name: string;
  /** Index in its virtual host (for config_dump / debugging). */
  index: number;
  matches: (req: RouteRequest) => boolean;
  /** Length of the matched prefix for prefix rewrites (path: whole path; regex: whole path). */
  prefixLength: (req: RouteRequest) => number;
  matchKind: 'prefix' | 'path' | 'regex' | 'pathSeparatedPrefix' | 'connect';
  action: RouteActionKind;
  headerOps: HeaderOps | undefined;
  perFilterConfig: ReadonlyMap<string, PerFilterConfig>;
  metadata: JsonObject | undefined;
  decoratorOperation: string;
  /** Decorator.propagate (default true): an egress request carries the operation in x-envoy-decorator-operation. */
  decoratorPropagate: boolean;
  statPrefix: string;
}

export interface CompiledVirtualHost {
  name: string;
  domains: readonly string[];
  routes: readonly CompiledRoute[];
  requireTls: 'none' | 'external' | 'all';
  headerOps: HeaderOps | undefined;
  perFilterConfig: ReadonlyMap<string, PerFilterConfig>;
  retry: RetryPolicy | undefined;
  includeRequestAttemptCount: boolean;
  includeAttemptCountInResponse: boolean;
}

export interface CompiledRouteConfig {
  name: string;
  /** The virtual host for an authority, compiled on its first request (src/proxy/route/compile.ts). */
  findVirtualHost(authority: string): CompiledVirtualHost | undefined;
  virtualHostCount: number;
  /** How many virtual hosts requests have compiled so far. */
  compiledVirtualHosts(): number;
  headerOps: HeaderOps | undefined;
  perFilterConfig: ReadonlyMap<string, PerFilterConfig>;
  mostSpecificHeaderMutationsWins: boolean;
  ignorePortInHostMatching: boolean;
  validateClusters: boolean;
  /** Headers Envoy strips from every upstream request of this config. */
  internalOnlyHeaders: readonly string[];
}

/** The result of routing one request. */
export interface RouteSelection {
  config: CompiledRouteConfig;
  vhost: CompiledVirtualHost;
  route: CompiledRoute;
}
