// HTTPRoute and GRPCRoute rules to VirtualService HTTP routes, pure. Follows Istio 1.26's
// pilot/pkg/config/kube/gateway/conversion.go (convertHTTPRoute, convertGRPCRoute, buildHTTPDestination,
// buildDestination, create*Filter, create*Match, sortHTTPRoutes). Differs on purpose: only Service and
// networking.istio.io Hostname backends (no ServiceImport). Durations are written as protobuf JSON (`0.001s`), as
// Istio's converted VirtualServices carry them.
import { parseDurationNs } from '../../lib/duration';
import type {
  CorsPolicy,
  Config,
  Destination,
  HTTPMatchRequest,
  HTTPRoute,
  HTTPRouteDestination,
  HeaderOperations,
  HTTPRedirect,
  HTTPRewrite,
  StringMatch,
} from '../types';
import type { GRPCRouteMatch, HTTPBackendRef, HTTPHeaderFilter, HTTPRouteFilter, HTTPRouteMatch, HTTPRouteRule, GRPCRouteRule } from './types';

/** Istio's ConfigError: a reason (a Gateway API condition reason or Istio's own) and a message. */
export interface RouteError {
  reason: string;
  message: string;
}

/** What a route conversion may look up: Services, hostnames (ServiceEntry hosts) and ReferenceGrants. */
export interface RouteContext {
  domain: string;
  serviceExists(namespace: string, name: string): boolean;
  hostnameExists(host: string): boolean;
  /** ReferenceGrants: may a `fromKind` in `fromNamespace` reference `toKind` `toName` in `toNamespace`? */
  referenceAllowed(fromKind: string, fromNamespace: string, toKind: string, toNamespace: string, toName: string): boolean;
}

/** A VirtualService HTTP route made from a Gateway API rule. */
export type GatewayHTTPRoute = HTTPRoute;

const SERVICE_ENTRY_GROUP = 'networking.istio.io';

function join(a: RouteError | undefined, b: RouteError | undefined): RouteError | undefined {
  if (!a) return b;
  if (!b) return a;
  return { reason: a.reason, message: `${a.message}; ${b.message}` };
}

/** Istio headerListToMap: lower-cased names, later duplicates ignored ("Subsequent entries ... MUST be ignored"). */
function headerMap(hl: readonly { name: string; value: string }[] | undefined): Record<string, string> | undefined {
  if (!hl || hl.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const h of hl) {
    const k = h.name.toLowerCase();
    if (!(k in out)) out[k] = h.value;
  }
  return out;
}

export function headerOperations(f: HTTPHeaderFilter | undefined): HeaderOperations | undefined {
  if (!f) return undefined;
  const out: HeaderOperations = {};
  const add = headerMap(f.add);
  const set = headerMap(f.set);
  if (add) out.add = add;
  if (set) out.set = set;
  if (f.remove && f.remove.length > 0) out.remove = [...f.remove];
  return out;
}

/** Istio createURIMatch: PathPrefix (the default, `/`) drops one trailing `/`. */
export function uriMatch(m: HTTPRouteMatch): StringMatch | RouteError {
  const type = m.path?.type ?? 'PathPrefix';
  let value = m.path?.value ?? '/';
  switch (type) {
    case 'PathPrefix':
      if (value !== '/' && value.endsWith('/')) value = value.slice(0, -1);
      return { prefix: value };
    case 'Exact':
      return { exact: value };
    case 'RegularExpression':
      return { regex: value };
    default:
      return { reason: 'InvalidConfiguration', message: `unknown type: "${String(type)}" is not supported Path match type` };
  }
}

function nameValueMatches(
  list: readonly { type?: string; name: string; value: string }[] | undefined,
  what: string,
): Record<string, StringMatch> | undefined | RouteError {
  if (!list || list.length === 0) return undefined;
  const out: Record<string, StringMatch> = {};
  for (const x of list) {
    const type = x.type ?? 'Exact';
    if (type === 'Exact') out[x.name] = { exact: x.value };
    else if (type === 'RegularExpression') out[x.name] = { regex: x.value };
    else return { reason: 'InvalidConfiguration', message: `unknown type: "${type}" is not supported ${what} type` };
  }
  return out;
}

const isError = (v: unknown): v is RouteError => typeof v === 'object' && v !== null && 'reason' in v && 'message' in v;

/** One HTTPRouteMatch as a VirtualService match (Istio creates one route per match). */
export function httpMatch(m: HTTPRouteMatch): HTTPMatchRequest | RouteError {
  const uri = uriMatch(m);
  if (isError(uri)) return uri;
  const headers = nameValueMatches(m.headers, 'HeaderMatch');
  if (isError(headers)) return headers;
  const queryParams = nameValueMatches(m.queryParams, 'QueryParams');
  if (isError(queryParams)) return queryParams;
  const out: HTTPMatchRequest = { uri };
  if (headers) out.headers = headers;
  if (queryParams) out.queryParams = queryParams;
  if (m.method) out.method = { exact: m.method };
  return out;
}

/** Istio createGRPCURIMatch: gRPC's `/<service>/<method>` path as exact, prefix or regex. */
export function grpcMatch(m: GRPCRouteMatch): HTTPMatchRequest | RouteError {
  const out: HTTPMatchRequest = {};
  const mm = m.method;
  if (mm) {
    if (mm.method === undefined && mm.service === undefined)
      return { reason: 'InvalidConfiguration', message: 'gRPC match must have method or service defined' };
    const type = mm.type ?? 'Exact';
    if (type === 'Exact') {
      if (mm.method === undefined) out.uri = { prefix: `/${mm.service}/` };
      else if (mm.service === undefined) out.uri = { regex: `/[^/]+/${mm.method}` };
      else out.uri = { exact: `/${mm.service}/${mm.method}` };
    } else if (type === 'RegularExpression') {
      if (mm.method === undefined) out.uri = { regex: `/${mm.service}/.+` };
      else if (mm.service === undefined) out.uri = { regex: `/[^/]+/${mm.method}` };
      else out.uri = { regex: `/${mm.service}/${mm.method}` };
    } else return { reason: 'InvalidConfiguration', message: `unknown type: "${String(type)}" is not supported Path match type` };
  }
  const headers = nameValueMatches(m.headers, 'HeaderMatch');
  if (isError(headers)) return headers;
  if (headers) out.headers = headers;
  return out;
}

/** Istio createRedirectFilter: the `%PREFIX()%` marker asks the route generator for a prefix rewrite. */
export function redirect(f: NonNullable<HTTPRouteFilter['requestRedirect']>): HTTPRedirect {
  const out: HTTPRedirect = {};
  // The CRD defaults statusCode to 302 (the API server fills it in; files get the same here).
  out.redirectCode = f.statusCode ?? 302;
  if (f.hostname !== undefined) out.authority = f.hostname;
  if (f.scheme !== undefined) out.scheme = f.scheme;
  if (f.port !== undefined) out.port = f.port;
  // "When empty, port (if specified) of the request is used": unlike a VirtualService's default.
  else out.derivePort = f.scheme !== undefined ? 'FROM_PROTOCOL_DEFAULT' : 'FROM_REQUEST_PORT';
  if (f.path?.type === 'ReplaceFullPath') out.uri = f.path.replaceFullPath ?? '';
  else if (f.path?.type === 'ReplacePrefixMatch') out.uri = `%PREFIX()%${f.path.replacePrefixMatch ?? ''}`;
  return out;
}

/** Istio createRewriteFilter; undefined when it changes nothing. */
export function rewrite(f: NonNullable<HTTPRouteFilter['urlRewrite']>): HTTPRewrite | undefined {
  const out: HTTPRewrite = {};
  if (f.path?.type === 'ReplacePrefixMatch') {
    let uri = f.path.replacePrefixMatch ?? '';
    if (uri.endsWith('/')) uri = uri.slice(0, -1);
    out.uri = uri === '' ? '/' : uri; // `/` means removing the prefix
  } else if (f.path?.type === 'ReplaceFullPath') {
    out.uriRegexRewrite = { match: '/.*', rewrite: f.path.replaceFullPath ?? '' };
  }
  if (f.hostname) out.authority = f.hostname;
  return out.uri || out.uriRegexRewrite || out.authority ? out : undefined;
}

/** A Gateway API duration (Go syntax, `1ms`) as protobuf JSON writes it (`0.001s`): Istio's durationpb.New. */
export function protoDuration(d: string): string | undefined {
  let ns: bigint;
  try {
    ns = parseDurationNs(d);
  } catch {
    return undefined;
  }
  const secs = ns / 1_000_000_000n;
  const nanos = ns % 1_000_000_000n;
  if (nanos === 0n) return `${secs}s`;
  const digits = nanos % 1_000_000n === 0n ? 3 : nanos % 1_000n === 0n ? 6 : 9;
  return `${secs}.${nanos.toString().padStart(9, '0').slice(0, digits)}s`;
}

/** Istio createCorsFilter: origins matched exactly (wildcards are not in the spec yet). */
export function cors(f: NonNullable<HTTPRouteFilter['cors']>): CorsPolicy {
  const out: CorsPolicy = {};
  const origins = (f.allowOrigins ?? []).filter((o) => o !== '').map((o) => ({ exact: o }));
  if (origins.length > 0) out.allowOrigins = origins;
  if (f.allowCredentials) out.allowCredentials = true;
  if (f.allowMethods?.length) out.allowMethods = [...f.allowMethods];
  if (f.allowHeaders?.length) out.allowHeaders = [...f.allowHeaders];
  if (f.exposeHeaders?.length) out.exposeHeaders = [...f.exposeHeaders];
  if (f.maxAge && f.maxAge > 0) out.maxAge = `${f.maxAge}s`;
  return out;
}

/** Istio buildDestination: a backendRef to a Destination, and the error that makes it unusable. */
export function destination(
  ctx: RouteContext,
  to: { group?: string; kind?: string; name: string; namespace?: string; port?: number },
  routeKind: string,
  routeNamespace: string,
  enforceRefGrant: boolean,
): { destination?: Destination; error?: RouteError; fatal?: boolean } {
  if (enforceRefGrant && to.namespace !== undefined && to.namespace !== routeNamespace) {
    const targetKind = to.kind ?? 'Service';
    if (!ctx.referenceAllowed(routeKind, routeNamespace, targetKind, to.namespace, to.name))
      return {
        destination: { host: '' },
        error: {
          reason: 'RefNotPermitted',
          message: `backendRef ${to.name}/${to.namespace} not accessible to a ${routeKind} in namespace "${routeNamespace}" (missing a ReferenceGrant?)`,
        },
      };
  }
  const namespace = to.namespace ?? routeNamespace;
  const group = to.group ?? '';
  const kind = to.kind ?? 'Service';
  let host: string;
  let error: RouteError | undefined;
  if (group === '' && kind === 'Service') {
    if (to.name.includes('.'))
      return {
        fatal: true,
        error: { reason: 'InvalidDestination', message: 'service name invalid; the name of the Service must be used, not the hostname.' },
      };
    host = `${to.name}.${namespace}.svc.${ctx.domain}`;
    if (!ctx.serviceExists(namespace, to.name)) error = { reason: 'BackendNotFound', message: `backend(${host}) not found` };
  } else if (group === SERVICE_ENTRY_GROUP && kind === 'Hostname') {
    if (to.namespace !== undefined)
      return { fatal: true, error: { reason: 'InvalidDestination', message: 'namespace may not be set with Hostname type' } };
    host = to.name;
    if (!ctx.hostnameExists(host)) error = { reason: 'BackendNotFound', message: `backend(${host}) not found` };
  } else {
    return {
      destination: { host: '' },
      error: { reason: 'InvalidKind', message: `referencing unsupported backendRef: group "${group}" kind "${to.kind ?? ''}"` },
    };
  }
  if (to.port === undefined) return { fatal: true, error: { reason: 'InvalidDestination', message: 'port is required in backendRef' } };
  return { destination: { host, port: { number: to.port } }, ...(error ? { error } : {}) };
}

const INVALID_BACKEND = new Set(['InvalidDestination', 'RefNotPermitted', 'InvalidKind', 'BackendNotFound']);

/** Istio buildHTTPDestination: weight 0 backends dropped, a single backend's weight left unset. */
function httpDestinations(
  ctx: RouteContext,
  refs: readonly HTTPBackendRef[],
  routeKind: string,
  ns: string,
  enforce: boolean,
): { route?: HTTPRouteDestination[]; backendError?: RouteError; error?: RouteError } {
  const action = refs.filter((r) => (r.weight ?? 1) !== 0);
  const weights = action.length === 1 ? [0] : action.map((r) => r.weight ?? 1);
  let backendError: RouteError | undefined;
  const out: HTTPRouteDestination[] = [];
  for (const [i, ref] of action.entries()) {
    const d = destination(ctx, ref, routeKind, ns, enforce);
    if (d.error) {
      if (!INVALID_BACKEND.has(d.error.reason) || d.fatal) return { error: d.error };
      backendError = d.error;
    }
    const rd: HTTPRouteDestination = { destination: d.destination ?? { host: '' } };
    if (weights[i]) rd.weight = weights[i];
    for (const f of ref.filters ?? []) {
      if (f.type === 'RequestHeaderModifier') {
        const h = headerOperations(f.requestHeaderModifier);
        if (h) rd.headers = { ...rd.headers, request: h };
      } else if (f.type === 'ResponseHeaderModifier') {
        const h = headerOperations(f.responseHeaderModifier);
        if (h) rd.headers = { ...rd.headers, response: h };
      } else return { error: { reason: 'InvalidFilter', message: `unsupported filter type "${f.type}"` } };
    }
    out.push(rd);
  }
  return { route: out, ...(backendError ? { backendError } : {}) };
}

/** Istio convertHTTPRoute/convertGRPCRoute for one rule and one of its matches (or none). */
export function convertRule(
  ctx: RouteContext,
  rule: HTTPRouteRule | GRPCRouteRule,
  match: HTTPMatchRequest | undefined,
  route: Config<'HTTPRoute'> | Config<'GRPCRoute'>,
  position: number,
  enforceRefGrant: boolean,
): { route?: GatewayHTTPRoute; error?: RouteError } {
  const routeKind = route.kind === 'GRPCRoute' ? 'GRPCRoute' : 'HTTPRoute';
  const ns = route.meta.namespace;
  const vs: GatewayHTTPRoute = { name: rule.name ?? `${ns}.${route.meta.name}.${position}` };
  if (match) vs.match = [match];
  let mirrorError: RouteError | undefined;
  for (const f of rule.filters ?? []) {
    switch (f.type) {
      case 'RequestHeaderModifier': {
        const h = headerOperations(f.requestHeaderModifier);
        if (h) vs.headers = { ...vs.headers, request: h };
        break;
      }
      case 'ResponseHeaderModifier': {
        const h = headerOperations(f.responseHeaderModifier);
        if (h) vs.headers = { ...vs.headers, response: h };
        break;
      }
      case 'RequestRedirect':
        if (routeKind === 'HTTPRoute' && f.requestRedirect) vs.redirect = redirect(f.requestRedirect);
        else return { error: { reason: 'InvalidFilter', message: `unsupported filter type "${f.type}"` } };
        break;
      case 'RequestMirror': {
        if (!f.requestMirror) break;
        const d = destination(ctx, f.requestMirror.backendRef, routeKind, ns, enforceRefGrant);
        if (d.error) {
          if (d.fatal) return { error: d.error };
          mirrorError = d.error;
          break;
        }
        const m: { destination: Destination; percentage?: { value: number } } = { destination: d.destination! };
        const fr = f.requestMirror.fraction;
        if (fr) m.percentage = { value: (100 * fr.numerator) / (fr.denominator ?? 100) };
        else if (f.requestMirror.percent !== undefined) m.percentage = { value: f.requestMirror.percent };
        (vs.mirrors ??= []).push(m);
        break;
      }
      case 'URLRewrite': {
        if (routeKind !== 'HTTPRoute' || !f.urlRewrite) return { error: { reason: 'InvalidFilter', message: `unsupported filter type "${f.type}"` } };
        const rw = rewrite(f.urlRewrite);
        if (rw) vs.rewrite = rw;
        break;
      }
      case 'CORS':
        if (routeKind !== 'HTTPRoute' || !f.cors) return { error: { reason: 'InvalidFilter', message: `unsupported filter type "${f.type}"` } };
        vs.corsPolicy = cors(f.cors);
        break;
      default:
        return { error: { reason: 'InvalidFilter', message: `unsupported filter type "${f.type}"` } };
    }
  }
  if ('retry' in rule && rule.retry) {
    // "Implementations SHOULD retry on connection errors ... if a retry stanza is configured."
    const retryOn = ['connect-failure', 'refused-stream', 'unavailable', 'cancelled', ...(rule.retry.codes ?? []).map(String)];
    const attempts = rule.retry.attempts ?? 2;
    vs.retries = { attempts, ...(attempts > 0 ? { retryOn: retryOn.join(',') } : {}) };
    const backoff = rule.retry.backoff ? protoDuration(rule.retry.backoff) : undefined;
    if (backoff) vs.retries.backoff = backoff;
  }
  if ('timeouts' in rule && rule.timeouts) {
    const request = rule.timeouts.request ? protoDuration(rule.timeouts.request) : undefined;
    const backend = rule.timeouts.backendRequest ? protoDuration(rule.timeouts.backendRequest) : undefined;
    if (request && request !== '0s') vs.timeout = request;
    if (backend && backend !== '0s') {
      if (vs.retries) vs.retries.perTryTimeout = backend;
      else vs.timeout = backend;
    }
  }
  const refs = rule.backendRefs ?? [];
  if (refs.reduce((n, r) => n + (r.weight ?? 1), 0) === 0 && !vs.redirect) {
    // "the spec requires us to return 500 when there are no >0 weight backends"
    vs.directResponse = { status: 500 };
    return { route: vs, ...(mirrorError ? { error: mirrorError } : {}) };
  }
  if (vs.redirect) return { route: vs, ...(mirrorError ? { error: mirrorError } : {}) };
  const d = httpDestinations(ctx, refs, routeKind, ns, enforceRefGrant);
  if (d.error) return { error: d.error };
  vs.route = d.route!;
  const err = join(d.backendError, mirrorError);
  return { route: vs, ...(err ? { error: err } : {}) };
}

function uriRank(m: HTTPMatchRequest): number {
  if (!m.uri) return -1;
  if (m.uri.exact !== undefined) return 3;
  if (m.uri.prefix !== undefined) return 2;
  if (m.uri.regex !== undefined) return 1;
  return -1;
}

function uriLength(m: HTTPMatchRequest): number {
  return (m.uri?.exact ?? m.uri?.prefix ?? m.uri?.regex ?? '').length;
}

/**
 * Istio sortHTTPRoutes, the Gateway API precedence: exact before prefix before regex, longer paths first,
 * then a method match, more header matches, more query matches; rules without a match last. Stable: among
 * equals, the caller's order (oldest route first, then rule order) stands.
 */
export function sortHTTPRoutes<R extends HTTPRoute>(routes: R[]): R[] {
  const cmp = (a: R, b: R): number => {
    const ma = a.match?.[0];
    const mb = b.match?.[0];
    if (!ma && !mb) return 0;
    if (!ma) return 1;
    if (!mb) return -1;
    const ra = uriRank(ma);
    const rb = uriRank(mb);
    if (ra !== rb) return rb - ra;
    const la = uriLength(ma);
    const lb = uriLength(mb);
    if (la !== lb) return lb - la;
    if (!ma.method !== !mb.method) return ma.method ? -1 : 1;
    const ha = Object.keys(ma.headers ?? {}).length;
    const hb = Object.keys(mb.headers ?? {}).length;
    if (ha !== hb) return hb - ha;
    return Object.keys(mb.queryParams ?? {}).length - Object.keys(ma.queryParams ?? {}).length;
  };
  return routes.sort(cmp); // Array.prototype.sort is stable
}
