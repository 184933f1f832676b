// VirtualService HTTP rules → Envoy routes, following Istio's pilot/pkg/networking/core/route:
// matches (uri exact/prefix/regex, headers, query params, method/authority/scheme as pseudo-headers,
// ignoreUriCase, withoutHeaders inverted), actions (cluster / weighted clusters, rewrites, redirect,
// direct response), timeouts, retries, header operations, fault and CORS per-route configs.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Any } from '@bufbuild/protobuf/wkt';
import type { CorsPolicy, Destination, Headers, HTTPFaultInjection, HTTPMatchRequest, HTTPRetry, HTTPRoute, StringMatch } from '../../config/types';
import type { Service } from '../../discovery/model';
import type { VirtualServiceEntry } from '../../discovery/push-context';
import { HeaderValueOption_HeaderAppendAction } from '../../gen/envoy/config/core/v3/base_pb';
import { ROUTE_SEMANTICS_ANNOTATION } from '../../config/gateway-api/translate';
import {
  RedirectAction_RedirectResponseCode,
  RouteAction_ClusterNotFoundResponseCode,
  type RouteSchema,
} from '../../gen/envoy/config/route/v3/route_components_pb';
import { CorsPolicySchema } from '../../gen/envoy/extensions/filters/http/cors/v3/cors_pb';
import { HTTPFaultSchema } from '../../gen/envoy/extensions/filters/http/fault/v3/fault_pb';
import { FractionalPercent_DenominatorType } from '../../gen/envoy/type/v3/percent_pb';
import { PreviousPrioritiesConfigSchema } from '../../gen/envoy/extensions/retry/priority/previous_priorities/v3/previous_priorities_config_pb';
import { PreviousHostsPredicateSchema } from '../../gen/envoy/extensions/retry/host/previous_hosts/v3/previous_hosts_pb';
import { buildSubsetKey, configInfoMetadata, durationMs, goDuration, goDurationMs, pack, parseSubsetKey, PASSTHROUGH_CLUSTER, WK } from './common';

export type RouteInit = MessageInitShape<typeof RouteSchema>;
type RouteMatchInit = NonNullable<RouteInit['match']>;
type HeaderMatcherInit = NonNullable<RouteMatchInit['headers']>[number];
type StringMatcherInit = {
  matchPattern: { case: 'exact' | 'prefix' | 'suffix'; value: string } | { case: 'safeRegex'; value: { regex: string } };
  ignoreCase?: boolean;
};

export const DEFAULT_ROUTE_NAME = 'default';
/** Istio's DefaultRetryOn and the previous-hosts predicate of DefaultPolicy. */
export const DEFAULT_RETRY_ON = 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes';
export const DEFAULT_RETRY_ATTEMPTS = 2;
export const MAX_DIRECT_RESPONSE_BODY_BYTES = 1024 * 1024;

/**
 * Hook for header names that are not HTTP headers: `@request.auth.claims.*` becomes a dynamic-metadata
 * matcher on the JWT payload in the claim-routing issue. Returning undefined keeps the header matcher.
 * The default recognises no such names.
 */
export type MetadataMatcherHook = (
  headerName: string,
  match: StringMatch | undefined,
) => NonNullable<RouteMatchInit['dynamicMetadata']>[number] | undefined;

export interface RouteContext {
  /** Listener/route port the routes are built for. */
  port: number;
  /** Gateway names (`ns/name`) or `mesh` the routes are built for (match.gateways filter). */
  gatewayNames: ReadonlySet<string>;
  proxyLabels: Readonly<Record<string, string>>;
  proxyNamespace: string;
  /** Route is served behind TLS (redirect scheme default). */
  isTls: boolean;
  /** Proxyless gRPC takes timeouts from max_stream_duration. */
  proxyless: boolean;
  lookupService: (hostname: string) => Service | undefined;
  metadataMatcher?: MetadataMatcherHook;
}

export function stringMatcher(m: StringMatch | undefined, ignoreCase = false): StringMatcherInit | undefined {
  if (!m) return undefined;
  const ic = ignoreCase ? { ignoreCase: true } : {};
  if (m.exact !== undefined) return { matchPattern: { case: 'exact', value: m.exact }, ...ic };
  if (m.prefix !== undefined) return { matchPattern: { case: 'prefix', value: m.prefix }, ...ic };
  if (m.regex !== undefined) return { matchPattern: { case: 'safeRegex', value: { regex: m.regex } } };
  return undefined;
}

/** `regex: "*"` (and an empty matcher) means "present" in Istio, not the RE2 regex. */
function isPresentMatch(m: StringMatch | undefined): boolean {
  return !m || (m.exact === undefined && m.prefix === undefined && m.regex === undefined) || m.regex === '*';
}

export function headerMatcher(name: string, m: StringMatch | undefined): HeaderMatcherInit {
  if (isPresentMatch(m)) return { name, headerMatchSpecifier: { case: 'presentMatch', value: true } };
  return { name, headerMatchSpecifier: { case: 'stringMatch', value: stringMatcher(m)! } } as HeaderMatcherInit;
}

/**
 * `gatewaySemantics`: a VirtualService translated from the Gateway API (Istio UseGatewaySemantics): a prefix other
 * than `/` matches whole path segments (path_separated_prefix).
 */
export function translateRouteMatch(m: HTTPMatchRequest | undefined, hook?: MetadataMatcherHook, gatewaySemantics = false): RouteMatchInit {
  const out: RouteMatchInit = { pathSpecifier: { case: 'prefix', value: '/' } };
  if (!m) return out;
  const headers: HeaderMatcherInit[] = [];
  const dyn: Record<string, unknown>[] = [];
  for (const [name, sm] of Object.entries(m.headers ?? {})) {
    const md = hook?.(name, sm);
    if (md) dyn.push(md as Record<string, unknown>);
    else headers.push(headerMatcher(name, sm));
  }
  for (const [name, sm] of Object.entries(m.withoutHeaders ?? {})) {
    const md = hook?.(name, sm);
    if (md) {
      dyn.push({ ...(md as Record<string, unknown>), invert: true });
      continue;
    }
    const h = headerMatcher(name, sm);
    h.invertMatch = true;
    // treat_missing_header_as_empty conflicts with present_match
    if (!isPresentMatch(sm)) h.treatMissingHeaderAsEmpty = true;
    headers.push(h);
  }
  headers.sort((a, b) => ((a.name ?? '') < (b.name ?? '') ? -1 : (a.name ?? '') > (b.name ?? '') ? 1 : 0));
  if (m.uri) {
    if (m.uri.exact !== undefined) out.pathSpecifier = { case: 'path', value: m.uri.exact };
    else if (m.uri.prefix !== undefined && gatewaySemantics && m.uri.prefix !== '/')
      out.pathSpecifier = { case: 'pathSeparatedPrefix', value: m.uri.prefix.replace(/\/$/, '') };
    else if (m.uri.prefix !== undefined) out.pathSpecifier = { case: 'prefix', value: m.uri.prefix };
    else if (m.uri.regex !== undefined) out.pathSpecifier = { case: 'safeRegex', value: { regex: m.uri.regex } };
  }
  out.caseSensitive = !m.ignoreUriCase;
  if (m.method) headers.push(headerMatcher(':method', m.method));
  if (m.authority) headers.push(headerMatcher(':authority', m.authority));
  if (m.scheme) headers.push(headerMatcher(':scheme', m.scheme));
  out.headers = headers;
  out.queryParameters = Object.entries(m.queryParams ?? {}).map(([name, sm]) =>
    isPresentMatch(sm)
      ? { name, queryParameterMatchSpecifier: { case: 'presentMatch' as const, value: true } }
      : { name, queryParameterMatchSpecifier: { case: 'stringMatch' as const, value: stringMatcher(sm)! } },
  ) as RouteMatchInit['queryParameters'];
  if (dyn.length > 0) out.dynamicMetadata = dyn as RouteMatchInit['dynamicMetadata'];
  return out;
}

const PREFIX_MARKER = '%PREFIX()%';
const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

type HeaderValueOptionInit = { header: { key: string; value: string }; appendAction: HeaderValueOption_HeaderAppendAction };

interface HeaderOps {
  requestHeadersToAdd: HeaderValueOptionInit[];
  responseHeadersToAdd: HeaderValueOptionInit[];
  requestHeadersToRemove: string[];
  responseHeadersToRemove: string[];
  authority?: string;
}

const isInternalHeader = (k: string) => k.startsWith(':') || k.toLowerCase() === 'host';
const isAuthorityHeader = (k: string) => k.toLowerCase() === ':authority' || k.toLowerCase() === 'host';

function appendHeaders(h: Record<string, string> | undefined, append: boolean): { ops: HeaderOps['requestHeadersToAdd']; authority?: string } {
  let authority: string | undefined;
  const ops: HeaderOps['requestHeadersToAdd'] = [];
  for (const [key, value] of Object.entries(h ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    if (isAuthorityHeader(key)) authority = value;
    if (isInternalHeader(key)) continue;
    ops.push({
      header: { key, value },
      appendAction: append
        ? HeaderValueOption_HeaderAppendAction.APPEND_IF_EXISTS_OR_ADD
        : HeaderValueOption_HeaderAppendAction.OVERWRITE_IF_EXISTS_OR_ADD,
    });
  }
  return { ops, ...(authority !== undefined ? { authority } : {}) };
}

/** Istio TranslateHeadersOperations: `set` overwrites, `add` appends; Host/:authority become a host rewrite. */
export function translateHeaders(h: Headers | undefined): HeaderOps {
  const reqSet = appendHeaders(h?.request?.set, false);
  const reqAdd = appendHeaders(h?.request?.add, true);
  const respSet = appendHeaders(h?.response?.set, false);
  const respAdd = appendHeaders(h?.response?.add, true);
  const authority = reqSet.authority ?? reqAdd.authority;
  return {
    requestHeadersToAdd: [...reqSet.ops, ...reqAdd.ops],
    responseHeadersToAdd: [...respSet.ops, ...respAdd.ops],
    requestHeadersToRemove: (h?.request?.remove ?? []).filter((k) => !isInternalHeader(k)),
    responseHeadersToRemove: (h?.response?.remove ?? []).filter((k) => !isInternalHeader(k)),
    ...(authority !== undefined ? { authority } : {}),
  };
}

/** Istio GetDestinationCluster: destination port, else the service's only port, else the listener port. */
export function destinationCluster(d: Destination, service: Service | undefined, listenerPort: number): string {
  if (!d.host) return 'UnknownService';
  let port = listenerPort;
  if (d.port?.number) port = d.port.number;
  else if (service && service.ports.length === 1) port = service.ports[0]!.port;
  return buildSubsetKey('outbound', d.subset ?? '', d.host, port);
}

/** Istio retry.ConvertPolicy: mesh default when unset, none for attempts 0, status codes split out of retryOn. */
export function retryPolicy(
  r: HTTPRetry | undefined,
  consistentHash = false,
): RouteInit extends { action?: infer _A } ? Record<string, unknown> | undefined : never {
  if (r && r.attempts <= 0) return undefined;
  const out: Record<string, unknown> = {
    retryOn: DEFAULT_RETRY_ON,
    numRetries: r?.attempts ?? DEFAULT_RETRY_ATTEMPTS,
    retriableStatusCodes: [503],
    hostSelectionRetryMaxAttempts: 5n,
  };
  if (!consistentHash) {
    out.retryHostPredicate = [
      { name: 'envoy.retry_host_predicates.previous_hosts', configType: { case: 'typedConfig', value: pack(PreviousHostsPredicateSchema, {}) } },
    ];
  }
  if (r?.retryOn) {
    const on: string[] = [];
    const codes: number[] = [];
    for (const part of r.retryOn
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')) {
      if (/^\d+$/.test(part)) codes.push(Number(part));
      else on.push(part);
    }
    let retryOn = on.join(',');
    if (codes.length > 0 && !retryOn.includes('retriable-status-codes'))
      retryOn = retryOn ? `${retryOn},retriable-status-codes` : 'retriable-status-codes';
    out.retryOn = retryOn;
    out.retriableStatusCodes = codes;
  }
  const ptt = goDuration(r?.perTryTimeout);
  if (ptt) out.perTryTimeout = ptt;
  if (r?.retryRemoteLocalities) {
    out.retryPriority = {
      name: 'envoy.retry_priorities.previous_priorities',
      // Istio retries in other localities with update_frequency 2.
      configType: { case: 'typedConfig', value: pack(PreviousPrioritiesConfigSchema, { updateFrequency: 2 }) },
    };
  }
  return out as never;
}

function percentFraction(v: number | undefined): { numerator: number; denominator: FractionalPercent_DenominatorType } {
  // Istio translatePercentToFractionalPercent: percent × 10000 per MILLION
  return { numerator: Math.round((v ?? 100) * 10000), denominator: FractionalPercent_DenominatorType.MILLION };
}

/** gRPC status names Istio accepts in abort.grpcStatus. */
const GRPC_STATUS: Readonly<Record<string, number>> = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
};

export function translateFault(f: HTTPFaultInjection | undefined): Any | undefined {
  if (!f) return undefined;
  const init: Record<string, unknown> = {};
  if (f.delay?.fixedDelay) {
    init.delay = {
      percentage: percentFraction(f.delay.percentage?.value),
      faultDelaySecifier: { case: 'fixedDelay', value: goDuration(f.delay.fixedDelay) },
    };
  }
  if (f.abort && (f.abort.httpStatus !== undefined || f.abort.grpcStatus !== undefined)) {
    init.abort = {
      percentage: percentFraction(f.abort.percentage?.value),
      errorType:
        f.abort.httpStatus !== undefined
          ? { case: 'httpStatus', value: f.abort.httpStatus }
          : { case: 'grpcStatus', value: GRPC_STATUS[f.abort.grpcStatus!] ?? 2 },
    };
  }
  if (!init.delay && !init.abort) return undefined;
  return pack(HTTPFaultSchema, init);
}

export function translateCors(c: CorsPolicy | undefined): Any | undefined {
  if (!c) return undefined;
  const maxAgeMs = goDurationMs(c.maxAge);
  return pack(CorsPolicySchema, {
    allowOriginStringMatch: (c.allowOrigins ?? []).map((o) => stringMatcher(o)).filter((x): x is StringMatcherInit => x !== undefined),
    filterEnabled: { defaultValue: { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED } },
    ...(c.allowCredentials !== undefined ? { allowCredentials: c.allowCredentials } : {}),
    allowHeaders: (c.allowHeaders ?? []).join(','),
    allowMethods: (c.allowMethods ?? []).join(','),
    exposeHeaders: (c.exposeHeaders ?? []).join(','),
    ...(maxAgeMs !== undefined ? { maxAge: String(Math.floor(maxAgeMs / 1000)) } : {}),
    forwardNotMatchingPreflights: true,
  } as Parameters<typeof pack<typeof CorsPolicySchema>>[1]);
}

/** Istio sourceMatchHTTP: match.gateways, or sourceLabels ⊆ proxy labels (and sourceNamespace). */
function sourceMatches(m: HTTPMatchRequest | undefined, ctx: RouteContext): boolean {
  if (!m) return true;
  if (m.gateways && m.gateways.length > 0) return m.gateways.some((g) => ctx.gatewayNames.has(g));
  for (const [k, v] of Object.entries(m.sourceLabels ?? {})) if (ctx.proxyLabels[k] !== v) return false;
  return !m.sourceNamespace || m.sourceNamespace === ctx.proxyNamespace;
}

function applyTimeout(action: Record<string, unknown>, timeout: string | undefined, proxyless: boolean): void {
  const t = goDuration(timeout) ?? durationMs(0);
  action.timeout = t;
  if (proxyless) action.maxStreamDuration = { maxStreamDuration: t };
  // gRPC requests honour grpc-timeout up to the route timeout (0 = unlimited), as Istio sets it
  else action.maxGrpcTimeout = t;
}

function redirectCode(code: number | undefined): RedirectAction_RedirectResponseCode | undefined {
  switch (code ?? 301) {
    case 301:
      return RedirectAction_RedirectResponseCode.MOVED_PERMANENTLY;
    case 302:
      return RedirectAction_RedirectResponseCode.FOUND;
    case 303:
      return RedirectAction_RedirectResponseCode.SEE_OTHER;
    case 307:
      return RedirectAction_RedirectResponseCode.TEMPORARY_REDIRECT;
    case 308:
      return RedirectAction_RedirectResponseCode.PERMANENT_REDIRECT;
    default:
      return undefined;
  }
}

/** Istio GetRouteOperation: `host:port/path*` for single-cluster routes, else `vsName:port/path*`. */
function routeOperation(route: RouteInit, vsName: string, port: number): string {
  let path = '/*';
  const ps = route.match?.pathSpecifier;
  if (ps?.case === 'prefix') path = `${ps.value}*`;
  else if (ps?.case === 'path') path = ps.value as string;
  else if (ps?.case === 'safeRegex') path = (ps.value as { regex: string }).regex;
  const action = route.action;
  if (action?.case === 'route') {
    const cs = (action.value as { clusterSpecifier?: { case?: string; value?: unknown } }).clusterSpecifier;
    if (cs?.case === 'cluster') {
      const k = parseSubsetKey(cs.value as string);
      if (k) return `${k.hostname}:${k.port}${path}`;
    }
  }
  return `${vsName}:${port}${path}`;
}

function translateRoute(vs: VirtualServiceEntry, http: HTTPRoute, match: HTTPMatchRequest | undefined, ctx: RouteContext): RouteInit | undefined {
  if (match?.port && match.port !== ctx.port) return undefined;
  if (!sourceMatches(match, ctx)) return undefined;
  let name = http.name ?? '';
  if (match?.name) name = `${name}.${match.name}`;
  const c = vs.config;
  const gatewaySemantics = c.meta.annotations[ROUTE_SEMANTICS_ANNOTATION] === 'gateway';
  const route: RouteInit = {
    name,
    match: translateRouteMatch(match, ctx.metadataMatcher, gatewaySemantics),
    metadata: configInfoMetadata(c.apiVersion, 'VirtualService', vs.namespace, vs.name),
  };
  if (match?.statPrefix) route.statPrefix = match.statPrefix;
  let authority: string | undefined;
  if (http.headers) {
    const ops = translateHeaders(http.headers);
    route.requestHeadersToAdd = ops.requestHeadersToAdd as RouteInit['requestHeadersToAdd'];
    route.responseHeadersToAdd = ops.responseHeadersToAdd as RouteInit['responseHeadersToAdd'];
    route.requestHeadersToRemove = ops.requestHeadersToRemove;
    route.responseHeadersToRemove = ops.responseHeadersToRemove;
    authority = ops.authority;
  }
  if (http.redirect) {
    const r = http.redirect;
    const code = redirectCode(r.redirectCode);
    if (code === undefined) return undefined;
    const redirect: Record<string, unknown> = {
      hostRedirect: r.authority ?? '',
      pathRewriteSpecifier: { case: 'pathRedirect', value: r.uri ?? '' },
      responseCode: code,
    };
    // Istio ApplyRedirect: the Gateway API's ReplacePrefixMatch arrives as `%PREFIX()%<prefix>`.
    if (gatewaySemantics && r.uri?.startsWith(PREFIX_MARKER))
      redirect.pathRewriteSpecifier = { case: 'prefixRewrite', value: r.uri.slice(PREFIX_MARKER.length) };
    if (r.scheme) redirect.schemeRewriteSpecifier = { case: 'schemeRedirect', value: r.scheme };
    if (r.port !== undefined || r.derivePort) {
      let port = r.port ?? (r.derivePort === 'FROM_REQUEST_PORT' ? ctx.port : 0);
      const scheme = r.scheme || (ctx.isTls ? 'https' : 'http');
      if ((port === 80 && scheme === 'http') || (port === 443 && scheme === 'https')) port = 0;
      redirect.portRedirect = port;
    }
    route.action = { case: 'redirect', value: redirect };
  } else if (http.directResponse) {
    const d = http.directResponse;
    const body =
      d.body?.string !== undefined
        ? { specifier: { case: 'inlineString' as const, value: d.body.string } }
        : d.body?.bytes !== undefined
          ? { specifier: { case: 'inlineBytes' as const, value: Buffer.from(d.body.bytes, 'base64') } }
          : undefined;
    route.action = { case: 'directResponse', value: { status: d.status, ...(body ? { body } : {}) } };
  } else {
    const action: Record<string, unknown> = {};
    applyTimeout(action, http.timeout, ctx.proxyless);
    if (http.rewrite) {
      if (http.rewrite.uriRegexRewrite) {
        action.regexRewrite = { pattern: { regex: http.rewrite.uriRegexRewrite.match }, substitution: http.rewrite.uriRegexRewrite.rewrite };
      } else if (http.rewrite.uri && gatewaySemantics && http.rewrite.uri === '/' && route.match?.pathSpecifier?.case === 'pathSeparatedPrefix') {
        // Istio: removing a whole-segment prefix keeps the `/` that follows it.
        const prefix = route.match.pathSpecifier.value as string;
        action.regexRewrite = { pattern: { regex: `^${escapeRegex(prefix)}(/?)(.*)` }, substitution: '/\\2' };
      } else if (http.rewrite.uri) {
        action.prefixRewrite = http.rewrite.uri;
      }
      if (http.rewrite.authority) authority = http.rewrite.authority;
    }
    if (authority) action.hostRewriteSpecifier = { case: 'hostRewriteLiteral', value: authority };
    if (http.mirror) {
      const pct = http.mirrorPercentage;
      if (!pct || pct.value > 0) {
        action.requestMirrorPolicies = [
          {
            cluster: destinationCluster(http.mirror, ctx.lookupService(http.mirror.host), ctx.port),
            runtimeFraction: {
              defaultValue: pct ? percentFraction(pct.value) : { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
            },
            traceSampled: false,
          },
        ];
      }
    }
    for (const m of http.mirrors ?? []) {
      if (m.percentage && m.percentage.value <= 0) continue;
      ((action.requestMirrorPolicies ??= []) as unknown[]).push({
        cluster: destinationCluster(m.destination, ctx.lookupService(m.destination.host), ctx.port),
        runtimeFraction: {
          defaultValue: m.percentage
            ? percentFraction(m.percentage.value)
            : { numerator: 100, denominator: FractionalPercent_DenominatorType.HUNDRED },
        },
        traceSampled: false,
      });
    }
    // Istio: a Gateway API backend that does not resolve answers 500, as the spec asks.
    if (gatewaySemantics) action.clusterNotFoundResponseCode = RouteAction_ClusterNotFoundResponseCode.INTERNAL_SERVER_ERROR;
    const dests = http.route ?? [];
    if (dests.length === 1) {
      const d = dests[0]!;
      action.clusterSpecifier = { case: 'cluster', value: destinationCluster(d.destination, ctx.lookupService(d.destination.host), ctx.port) };
      if (d.headers) {
        const ops = translateHeaders(d.headers);
        route.requestHeadersToAdd = [
          ...((route.requestHeadersToAdd ?? []) as HeaderValueOptionInit[]),
          ...ops.requestHeadersToAdd,
        ] as RouteInit['requestHeadersToAdd'];
        route.requestHeadersToRemove = [...(route.requestHeadersToRemove ?? []), ...ops.requestHeadersToRemove];
        route.responseHeadersToAdd = [
          ...((route.responseHeadersToAdd ?? []) as HeaderValueOptionInit[]),
          ...ops.responseHeadersToAdd,
        ] as RouteInit['responseHeadersToAdd'];
        route.responseHeadersToRemove = [...(route.responseHeadersToRemove ?? []), ...ops.responseHeadersToRemove];
        if (ops.authority && !action.hostRewriteSpecifier) action.hostRewriteSpecifier = { case: 'hostRewriteLiteral', value: ops.authority };
      }
    } else {
      const clusters = dests
        .filter((d) => (d.weight ?? 0) !== 0)
        .map((d) => {
          const cw: Record<string, unknown> = {
            name: destinationCluster(d.destination, ctx.lookupService(d.destination.host), ctx.port),
            weight: d.weight,
          };
          if (d.headers) {
            const ops = translateHeaders(d.headers);
            cw.requestHeadersToAdd = ops.requestHeadersToAdd;
            cw.requestHeadersToRemove = ops.requestHeadersToRemove;
            cw.responseHeadersToAdd = ops.responseHeadersToAdd;
            cw.responseHeadersToRemove = ops.responseHeadersToRemove;
            if (ops.authority) cw.hostRewriteSpecifier = { case: 'hostRewriteLiteral', value: ops.authority };
          }
          return cw;
        });
      action.clusterSpecifier = { case: 'weightedClusters', value: { clusters } };
    }
    const rp = retryPolicy(http.retries);
    if (rp) action.retryPolicy = rp;
    route.action = { case: 'route', value: action };
  }
  route.decorator = { operation: routeOperation(route, vs.name, ctx.port) };
  const perFilter: Record<string, Any> = {};
  const fault = translateFault(http.fault);
  if (fault) perFilter[WK.fault] = fault;
  const cors = translateCors(http.corsPolicy);
  if (cors) perFilter[WK.cors] = cors;
  if (Object.keys(perFilter).length > 0) route.typedPerFilterConfig = perFilter;
  return route;
}

/** Istio IsCatchAllRoute: prefix `/` (or regex `.*`) with no header, query or metadata conditions. */
export function isCatchAllRoute(r: RouteInit): boolean {
  const ps = r.match?.pathSpecifier;
  const catchall = (ps?.case === 'prefix' && ps.value === '/') || (ps?.case === 'safeRegex' && (ps.value as { regex: string }).regex === '.*');
  return (
    catchall &&
    (r.match?.headers?.length ?? 0) === 0 &&
    (r.match?.queryParameters?.length ?? 0) === 0 &&
    (r.match?.dynamicMetadata?.length ?? 0) === 0
  );
}

/** Istio BuildHTTPRoutesForVirtualService: routes in order, stopping after a catch-all. */
export function buildHttpRoutesForVirtualService(vs: VirtualServiceEntry, ctx: RouteContext): RouteInit[] {
  const out: RouteInit[] = [];
  for (const http of vs.spec.http ?? []) {
    let catchall = false;
    if (!http.match || http.match.length === 0) {
      const r = translateRoute(vs, http, undefined, ctx);
      if (r) out.push(r);
      catchall = true;
    } else {
      for (const m of http.match) {
        const r = translateRoute(vs, http, m, ctx);
        if (!r) continue;
        out.push(r);
        if (isCatchAllRoute(r)) {
          catchall = true;
          break;
        }
      }
    }
    if (catchall) break;
  }
  return out;
}

/** Istio BuildDefaultHTTPOutboundRoute: `default` route to the cluster with the mesh retry policy. */
export function defaultOutboundRoute(cluster: string, operation: string, proxyless: boolean): RouteInit {
  const action: Record<string, unknown> = { clusterSpecifier: { case: 'cluster', value: cluster }, retryPolicy: retryPolicy(undefined) };
  applyTimeout(action, undefined, proxyless);
  return {
    name: DEFAULT_ROUTE_NAME,
    match: { pathSpecifier: { case: 'prefix', value: '/' } },
    decorator: { operation },
    action: { case: 'route', value: action },
  };
}

/** Istio BuildDefaultHTTPInboundRoute: no timeout, no stream-duration limit. */
export function defaultInboundRoute(cluster: string, operation: string): RouteInit {
  return {
    name: DEFAULT_ROUTE_NAME,
    match: { pathSpecifier: { case: 'prefix', value: '/' } },
    decorator: { operation },
    action: {
      case: 'route',
      value: {
        clusterSpecifier: { case: 'cluster', value: cluster },
        timeout: durationMs(0),
        maxStreamDuration: { maxStreamDuration: durationMs(0), grpcTimeoutHeaderMax: durationMs(0) },
      },
    },
  };
}

/** The `allow_any` route of sidecar catch-all vhosts (ALLOW_ANY outbound policy). */
export function passthroughRoute(): RouteInit {
  return {
    name: 'allow_any',
    match: { pathSpecifier: { case: 'prefix', value: '/' } },
    action: {
      case: 'route',
      value: { clusterSpecifier: { case: 'cluster', value: PASSTHROUGH_CLUSTER }, timeout: durationMs(0), maxGrpcTimeout: durationMs(0) },
    },
  };
}

/** The `block_all` route of REGISTRY_ONLY catch-all vhosts: 502 like Istio. */
export function blockAllRoute(): RouteInit {
  return { name: 'block_all', match: { pathSpecifier: { case: 'prefix', value: '/' } }, action: { case: 'directResponse', value: { status: 502 } } };
}
