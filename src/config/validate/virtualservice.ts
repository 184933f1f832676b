// VirtualService (Istio's ValidateVirtualService, virtualservice.go and the route helpers).
import type {
  Config,
  CorsPolicy,
  Destination,
  Headers,
  HTTPFaultInjection,
  HTTPMatchRequest,
  HTTPRedirect,
  HTTPRewrite,
  HTTPRetry,
  HTTPRoute,
  L4MatchAttributes,
  StringMatch,
  TLSMatchAttributes,
  VirtualServiceSpec,
} from '../types';
import { toRoutingClaim } from './claims';
import {
  checkDuration,
  checkExportTo,
  checkLabels,
  corsHeaderNameError,
  durationError,
  goStrings,
  headerOperationNameError,
  headerValueError,
  headerWithAuthorityOperationNameError,
  httpHeaderNameError,
  isAuthorityHeader,
  matchType,
  stringMatchError,
  stringMatchRegexpError,
  stringRegexpError,
} from './common';
import { hostMatches, hostSubsetOf } from './hosts';
import {
  goFixed,
  goFloat,
  isDNS1123Label,
  isValidIP,
  validateFQDN,
  validateIPSubnet,
  validatePort,
  validateWildcardDomain,
  validateWildcardDomainForVirtualServiceBoundToGateway,
} from './names';
import { at, dot, key, type Report } from './report';
import { parseDurationNs } from '../../lib/duration';

const MESH_GATEWAY = 'mesh';

// Go's net/http method constants.
const SUPPORTED_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE']);

// Envoy's x-envoy-retry-on and x-envoy-retry-grpc-on policies.
const RETRY_ON = new Set([
  '5xx',
  'gateway-error',
  'reset',
  'reset-before-request',
  'connect-failure',
  'retriable-4xx',
  'refused-stream',
  'retriable-status-codes',
  'retriable-headers',
  'envoy-ratelimited',
  'http3-post-connect-failure',
  'cancelled',
  'deadline-exceeded',
  'internal',
  'resource-exhausted',
  'unavailable',
]);

// Status codes Go's http.StatusText knows (a bare code in retryOn must be one of them).
const HTTP_STATUS_CODES = new Set([
  100, 101, 102, 103, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307, 308, 400, 401, 402, 403, 404, 405, 406,
  407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 418, 421, 422, 423, 424, 425, 426, 428, 429, 431, 451, 500, 501, 502, 503, 504, 505, 506,
  507, 508, 510, 511,
]);

const GRPC_STATUS = new Set([
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
]);

const KB = 1024;
const MB = 1024 * KB;

/** A VirtualService binds to gateways unless it names none or names `mesh` (isGateway in Istio). */
function isGateway(vs: VirtualServiceSpec): boolean {
  return !(vs.gateways ?? []).includes(MESH_GATEWAY);
}

function isSniHost(vs: VirtualServiceSpec): boolean {
  return (vs.tls ?? []).some((t) => (t.match ?? []).some((m) => (m.sniHosts ?? []).length > 0));
}

export function validateVirtualService(c: Config<'VirtualService'>, r: Report): void {
  const vs = c.spec;
  const hosts = vs.hosts ?? [];
  const gateways = vs.gateways ?? [];
  if (hosts.length === 0) {
    // No hosts: a delegate, which takes its hosts and gateways from the root that includes it.
    if (gateways.length !== 0) r.error('spec.gateways', 'delegate virtual service must have no gateways specified');
    if ((vs.tls ?? []).length !== 0) r.error('spec.tls', 'delegate virtual service must have no tls route specified');
    if ((vs.tcp ?? []).length !== 0) r.error('spec.tcp', 'delegate virtual service must have no tcp route specified');
  }

  let appliesToMesh = false;
  let appliesToGateway = false;
  if (gateways.length === 0) {
    appliesToMesh = true;
  } else {
    checkGatewayNames(gateways, 'spec.gateways', r);
    appliesToGateway = isGateway(vs);
    appliesToMesh = !appliesToGateway;
  }

  if (!appliesToGateway) {
    // Claims exist only where a gateway validated the token: sidecars never see them.
    (vs.http ?? []).forEach((h, i) =>
      (h.match ?? []).forEach((m, j) => {
        for (const [field, hdrs] of [
          ['headers', m.headers],
          ['withoutHeaders', m.withoutHeaders],
        ] as const) {
          for (const k of Object.keys(hdrs ?? {})) {
            if (toRoutingClaim(k).match)
              r.error(
                key(dot(at(at('spec.http', i) + '.match', j), field), k),
                `JWT claim based routing (key: ${k}) is only supported for gateway, found no gateways: ${goStrings(vs.gateways)}`,
              );
          }
        }
      }),
    );
  }

  let allHostsValid = true;
  hosts.forEach((h, i) => {
    const err = appliesToGateway ? validateWildcardDomainForVirtualServiceBoundToGateway(isSniHost(vs), h) : validateWildcardDomain(h);
    if (err !== undefined) {
      if (!isValidIP(h)) {
        r.error(at('spec.hosts', i), err);
        allHostsValid = false;
      }
    } else if (appliesToMesh && h === '*') {
      r.error(at('spec.hosts', i), 'wildcard host * is not allowed for virtual services bound to the mesh gateway');
      allHostsValid = false;
    }
  });
  if (allHostsValid) {
    for (let i = 0; i < hosts.length; i++)
      for (let j = i + 1; j < hosts.length; j++)
        if (hostMatches(hosts[i]!, hosts[j]!)) r.error(at('spec.hosts', j), `duplicate hosts in virtual service: ${hosts[i]} & ${hosts[j]}`);
  }

  if ((vs.http ?? []).length === 0 && (vs.tcp ?? []).length === 0 && (vs.tls ?? []).length === 0)
    r.error('spec', 'http, tcp or tls must be provided in virtual service');
  (vs.http ?? []).forEach((h, i) => validateHTTPRoute(h, hosts.length === 0, at('spec.http', i), r));
  (vs.tls ?? []).forEach((t, i) => {
    const p = at('spec.tls', i);
    const matches = t.match ?? [];
    if (matches.length === 0) r.error(dot(p, 'match'), 'TLS route must have at least one match condition');
    matches.forEach((m, j) => validateTLSMatch(m, vs, at(dot(p, 'match'), j), r));
    if ((t.route ?? []).length === 0) r.error(dot(p, 'route'), 'TLS route is required');
    checkRouteDestinations(t.route ?? [], dot(p, 'route'), r);
  });
  (vs.tcp ?? []).forEach((t, i) => {
    const p = at('spec.tcp', i);
    (t.match ?? []).forEach((m, j) => checkL4Match(m, at(dot(p, 'match'), j), r));
    if ((t.route ?? []).length === 0) r.error(dot(p, 'route'), 'TCP route is required');
    checkRouteDestinations(t.route ?? [], dot(p, 'route'), r);
  });
  checkExportTo(c.meta.namespace, vs.exportTo, false, false, 'spec.exportTo', r);

  analyzeUnreachableHTTPRules(vs.http ?? [], r);
  analyzeUnreachableL4Rules(vs.tcp ?? [], 'spec.tcp', r);
  analyzeUnreachableL4Rules(vs.tls ?? [], 'spec.tls', r);
}

/** validateGatewayNames: `namespace/name`, or a legacy bare or dotted name. */
export function checkGatewayNames(names: readonly string[], path: string, r: Report): void {
  names.forEach((g, i) => {
    const p = at(path, i);
    const slash = g.indexOf('/');
    if (slash < 0) {
      if (g.includes('.')) {
        const parts = g.split('.');
        r.warn(
          p,
          `using legacy gatewayName format ${JSON.stringify(g)}; prefer the <namespace>/<name> format: ${JSON.stringify(`${parts[1]}/${parts[0]}`)}`,
        );
      }
      r.error(p, validateFQDN(g));
      return;
    }
    const ns = g.slice(0, slash);
    const name = g.slice(slash + 1);
    if (ns.length === 0 || name.length === 0) r.error(p, 'config namespace and gateway name cannot be empty');
    if (!isDNS1123Label(ns)) r.error(p, `invalid value for namespace: ${JSON.stringify(ns)}`);
    if (!isDNS1123Label(name)) r.error(p, `invalid value for gateway name: ${JSON.stringify(name)}`);
  });
}

function validateHTTPRoute(h: HTTPRoute, delegate: boolean, path: string, r: Report): void {
  const type = delegate ? 'delegate' : h.delegate ? 'root' : 'independent';
  checkRouteConflicts(h, type, path, r);
  checkMatchRequests(h.match ?? [], dot(path, 'match'), r);
  checkHeaderOperations(h.headers, dot(path, 'headers'), r);
  checkCors(h.corsPolicy, dot(path, 'corsPolicy'), r);
  checkFault(h.fault, dot(path, 'fault'), r);

  const mirrorPercent = (h as { mirrorPercent?: number }).mirrorPercent;
  if (mirrorPercent !== undefined) {
    const v = mirrorPercent;
    if (v > 100) r.error(dot(path, 'mirrorPercent'), `mirror_percent must have a max value of 100 (it has ${v})`);
    r.warn(dot(path, 'mirrorPercent'), 'using deprecated setting "mirrorPercent", use "mirrorPercentage" instead');
  }
  if (h.mirrorPercentage !== undefined) {
    const v = h.mirrorPercentage.value ?? 0;
    if (v > 100) r.error(dot(path, 'mirrorPercentage'), `mirror_percentage must have a max value of 100 (it has ${goFixed(v)})`);
    if (v < 0) r.error(dot(path, 'mirrorPercentage'), `mirror_percentage must have a min value of 0 (it has ${goFixed(v)})`);
  }
  checkDestination(h.mirror, dot(path, 'mirror'), r);
  const mirrors = (h as HTTPRoute & { mirrors?: Array<{ destination?: Destination; percentage?: { value?: number } }> }).mirrors ?? [];
  mirrors.forEach((m, i) => {
    const p = at(dot(path, 'mirrors'), i);
    if (!m.destination) {
      r.error(dot(p, 'destination'), 'destination is required for mirrors');
      return;
    }
    checkDestination(m.destination, dot(p, 'destination'), r);
    if (m.percentage) {
      const v = m.percentage.value ?? 0;
      if (v > 100) r.error(dot(p, 'percentage'), `mirror percentage must have a max value of 100 (it has ${goFixed(v)})`);
      if (v < 0) r.error(dot(p, 'percentage'), `mirror percentage must have a min value of 0 (it has ${goFixed(v)})`);
    }
  });
  r.error(dot(path, 'redirect'), redirectError(h.redirect));
  checkDirectResponse(h, dot(path, 'directResponse'), r);
  checkRetries(h.retries, dot(path, 'retries'), r);
  r.error(dot(path, 'rewrite'), rewriteError(h.rewrite));
  r.error(dot(path, 'headers.request'), authorityRewriteError(h.rewrite, h.headers));
  checkHTTPRouteDestinations(h.route ?? [], dot(path, 'route'), r);
  if (h.timeout !== undefined) checkDuration(h.timeout, dot(path, 'timeout'), r);
}

function checkRouteConflicts(h: HTTPRoute, type: 'delegate' | 'root' | 'independent', path: string, r: Report): void {
  const routes = h.route ?? [];
  if (type === 'root') {
    // A root route hands the request to its delegate and may do nothing else.
    if (h.redirect) r.error(dot(path, 'redirect'), `root HTTP route ${h.name ?? ''} must not specify redirect`);
    if (routes.length > 0) r.error(dot(path, 'route'), `root HTTP route ${h.name ?? ''} must not specify route`);
    return;
  }
  if (type === 'delegate' && h.delegate) r.error(dot(path, 'delegate'), 'delegate HTTP route cannot contain delegate');
  if (h.redirect) {
    if (routes.length > 0) r.error(path, 'HTTP route cannot contain both route and redirect');
    if (h.fault) r.error(path, 'HTTP route cannot contain both fault and redirect');
    if (h.rewrite) r.error(path, 'HTTP route rule cannot contain both rewrite and redirect');
    if (h.directResponse) r.error(path, 'HTTP route rule cannot contain both direct_response and redirect');
  } else if (h.directResponse) {
    if (routes.length > 0) r.error(path, 'HTTP route cannot contain both route and direct_response');
    if (h.fault) r.error(path, 'HTTP route cannot contain both fault and direct_response');
    if (h.rewrite) r.error(path, 'HTTP route rule cannot contain both rewrite and direct_response');
  } else if (routes.length === 0) {
    r.error(dot(path, 'route'), 'HTTP route, redirect or direct_response is required');
  }
  const mirrors = (h as { mirrors?: unknown[] }).mirrors ?? [];
  if (h.mirror && mirrors.length > 0) r.error(path, 'HTTP route cannot contain both mirror and mirrors');
}

/** ValidateHTTPHeaderNameOrJwtClaimRoute */
function matchHeaderNameError(name: string): string | undefined {
  if (name === '') return 'header name cannot be empty';
  if (toRoutingClaim(name).match) return undefined;
  return httpHeaderNameError(name);
}

function checkMatchRequests(matches: readonly HTTPMatchRequest[], path: string, r: Report): void {
  matches.forEach((m, j) => {
    const p = at(path, j);
    for (const [name, hdr] of Object.entries(m.headers ?? {})) {
      const hp = key(dot(p, 'headers'), name);
      r.error(hp, matchHeaderNameError(name));
      r.error(hp, stringMatchError(hdr, 'headers'));
    }
    for (const [name, hdr] of Object.entries(m.withoutHeaders ?? {})) {
      const hp = key(dot(p, 'withoutHeaders'), name);
      r.error(hp, matchHeaderNameError(name));
      // `*` here is not a regex: it means "header present".
      if (hdr.regex !== '*') r.error(hp, stringMatchError(hdr, 'withoutHeaders'));
    }
    // An empty uri prefix is valid (matches everything); scheme/method/authority need content.
    r.error(dot(p, 'uri'), stringMatchRegexpError(m.uri, 'uri'));
    r.error(dot(p, 'scheme'), stringMatchError(m.scheme, 'scheme'));
    r.error(dot(p, 'method'), stringMatchError(m.method, 'method'));
    r.error(dot(p, 'authority'), stringMatchError(m.authority, 'authority'));
    for (const [name, qp] of Object.entries(m.queryParams ?? {})) r.error(key(dot(p, 'queryParams'), name), stringMatchError(qp, 'queryParams'));
    if (m.port !== undefined && m.port !== 0) r.error(dot(p, 'port'), validatePort(m.port));
    checkLabels(m.sourceLabels, dot(p, 'sourceLabels'), r);
    checkGatewayNames(m.gateways ?? [], dot(p, 'gateways'), r);
    if (m.sourceNamespace && !isDNS1123Label(m.sourceNamespace))
      r.error(dot(p, 'sourceNamespace'), `sourceNamespace match ${m.sourceNamespace} is invalid`);
  });
}

function checkHeaderOperations(h: Headers | undefined, path: string, r: Report): void {
  if (!h) return;
  const req = dot(path, 'request');
  const resp = dot(path, 'response');
  for (const op of ['add', 'set'] as const) {
    for (const [name, val] of Object.entries(h.request?.[op] ?? {})) {
      r.error(key(dot(req, op), name), headerWithAuthorityOperationNameError(name));
      r.error(key(dot(req, op), name), headerValueError(val));
    }
    for (const [name, val] of Object.entries(h.response?.[op] ?? {})) {
      r.error(key(dot(resp, op), name), headerOperationNameError(name));
      r.error(key(dot(resp, op), name), headerValueError(val));
    }
  }
  (h.request?.remove ?? []).forEach((name, i) => r.error(at(dot(req, 'remove'), i), headerOperationNameError(name)));
  (h.response?.remove ?? []).forEach((name, i) => r.error(at(dot(resp, 'remove'), i), headerOperationNameError(name)));
}

function authorityRewriteError(rewrite: HTTPRewrite | undefined, headers: Headers | undefined): string | undefined {
  let current = rewrite?.authority ?? '';
  for (const op of ['set', 'add'] as const) {
    for (const [k, v] of Object.entries(headers?.request?.[op] ?? {})) {
      if (!isAuthorityHeader(k)) continue;
      if (current !== '')
        return `authority header cannot be set multiple times: have ${JSON.stringify(current)}, attempting to set ${JSON.stringify(v)}`;
      current = v;
    }
  }
  return undefined;
}

function checkCors(cors: CorsPolicy | undefined, path: string, r: Report): void {
  if (!cors) return;
  (cors.allowOrigins ?? []).forEach((o, i) => {
    const t = matchType(o);
    const value = t ? (o[t] ?? '') : '';
    if (value === '') r.error(at(dot(path, 'allowOrigins'), i), `'${value}' is not a valid match type for CORS allow origins`);
    else r.error(at(dot(path, 'allowOrigins'), i), stringMatchRegexpError(o, 'corsPolicy.allowOrigins'));
  });
  (cors.allowMethods ?? []).forEach((m, i) => {
    if (!SUPPORTED_METHODS.has(m)) r.error(at(dot(path, 'allowMethods'), i), `${JSON.stringify(m)} is not a supported HTTP method`);
  });
  (cors.allowHeaders ?? []).forEach((hn, i) => r.error(at(dot(path, 'allowHeaders'), i), corsHeaderNameError(hn)));
  (cors.exposeHeaders ?? []).forEach((hn, i) => r.error(at(dot(path, 'exposeHeaders'), i), corsHeaderNameError(hn)));
  if (cors.maxAge !== undefined) {
    r.error(dot(path, 'maxAge'), durationError(cors.maxAge));
    if (parseDurationNs(cors.maxAge) % 1_000_000_000n !== 0n) r.error(dot(path, 'maxAge'), 'max_age duration is accurate only to seconds precision');
  }
}

function percentageError(p: { value?: number } | undefined): string | undefined {
  if (!p) return undefined;
  const v = p.value ?? 0;
  if (v < 0 || v > 100 || (v > 0 && v < 0.0001)) return `percentage ${goFloat(v)} is neither 0.0, nor in range [0.0001, 100.0]`;
  return undefined;
}

function httpStatusError(status: number): string | undefined {
  if (status < 200 || status > 600) return `HTTP status ${status} is not in range 200-599`;
  return undefined;
}

function checkFault(f: HTTPFaultInjection | undefined, path: string, r: Report): void {
  if (!f) return;
  if (!f.abort && !f.delay) r.error(path, 'HTTP fault injection must have an abort and/or a delay');
  if (f.abort) {
    const p = dot(path, 'abort');
    const abort = f.abort as HTTPFaultInjection['abort'] & { http2Error?: string };
    r.error(dot(p, 'percentage'), percentageError(abort!.percentage));
    if (abort!.grpcStatus !== undefined) {
      if (!GRPC_STATUS.has(abort!.grpcStatus))
        r.error(
          dot(p, 'grpcStatus'),
          `gRPC status ${JSON.stringify(abort!.grpcStatus)} is not supported. See https://github.com/grpc/grpc/blob/master/doc/statuscodes.md for a list of supported codes, for example 'NOT_FOUND'`,
        );
    } else if (abort!.http2Error !== undefined) {
      r.error(dot(p, 'http2Error'), 'HTTP/2 abort fault injection not supported yet');
    } else if (abort!.httpStatus !== undefined) {
      r.error(dot(p, 'httpStatus'), httpStatusError(abort!.httpStatus));
    } else {
      r.warn(p, 'abort configured, but error type not set');
    }
  }
  if (f.delay) {
    const p = dot(path, 'delay');
    const delay = f.delay as HTTPFaultInjection['delay'] & { exponentialDelay?: string };
    r.error(dot(p, 'percentage'), percentageError(delay!.percentage));
    if (delay!.fixedDelay !== undefined) checkDuration(delay!.fixedDelay, dot(p, 'fixedDelay'), r);
    else if (delay!.exponentialDelay !== undefined) {
      checkDuration(delay!.exponentialDelay, dot(p, 'exponentialDelay'), r);
      r.error(dot(p, 'exponentialDelay'), 'exponentialDelay not supported yet');
    }
  }
}

export function checkDestination(d: Destination | undefined, path: string, r: Report): void {
  if (!d) return;
  const host = d.host ?? '';
  if (host === '*') r.error(dot(path, 'host'), `invalid destination host ${host}`);
  else r.error(dot(path, 'host'), validateWildcardDomain(host));
  if (d.subset) r.error(dot(path, 'subset'), subsetNameError(d.subset));
  if (d.port) r.error(dot(path, 'port.number'), validatePort(d.port.number ?? 0));
}

export function subsetNameError(name: string): string | undefined {
  if (name.length === 0) return 'subset name cannot be empty';
  if (!isDNS1123Label(name)) return `subset name is invalid: ${name}`;
  return undefined;
}

function redirectError(rd: HTTPRedirect | undefined): string | undefined {
  if (!rd) return undefined;
  const hasPort = rd.port !== undefined || rd.derivePort !== undefined;
  if (!rd.uri && !rd.authority && !hasPort && !rd.scheme) return 'redirect must specify URI, authority, scheme, or port';
  if (rd.redirectCode !== undefined && rd.redirectCode !== 0 && (rd.redirectCode < 300 || rd.redirectCode > 399))
    return `${rd.redirectCode} is not a valid redirect code, must be 3xx`;
  if (rd.scheme && rd.scheme !== 'http' && rd.scheme !== 'https') return 'invalid redirect scheme, must be "http" or "https"';
  if ((rd.port ?? 0) > 0) return validatePort(rd.port!);
  return undefined;
}

function checkDirectResponse(h: HTTPRoute, path: string, r: Report): void {
  const dr = h.directResponse;
  if (!dr) return;
  if (dr.body) {
    let size = 0;
    if (dr.body.string !== undefined) size = Buffer.byteLength(dr.body.string, 'utf8');
    else if (dr.body.bytes !== undefined) size = Buffer.from(dr.body.bytes, 'base64').length;
    if (size > MB) r.error(dot(path, 'body'), 'large direct_responses may impact control plane performance, must be less than 1MB');
    else if (size > 100 * KB) r.warn(dot(path, 'body'), 'large direct_responses may impact control plane performance');
  }
  r.error(dot(path, 'status'), httpStatusError(dr.status ?? 0));
}

function checkRetries(rt: HTTPRetry | undefined, path: string, r: Report): void {
  if (!rt) return;
  const attempts = rt.attempts ?? 0;
  if (attempts < 0) r.error(dot(path, 'attempts'), 'attempts cannot be negative');
  if (attempts === 0 && (rt.perTryTimeout !== undefined || (rt.retryOn ?? '') !== '' || rt.retryRemoteLocalities !== undefined))
    r.error(path, 'http retry policy configured when attempts are set to 0 (disabled)');
  if (rt.perTryTimeout !== undefined) checkDuration(rt.perTryTimeout, dot(path, 'perTryTimeout'), r);
  if (rt.retryOn) {
    for (const policy of rt.retryOn.split(',')) {
      const code = /^[+-]?[0-9]+$/.test(policy) ? Number(policy) : 0;
      if (!HTTP_STATUS_CODES.has(code) && !RETRY_ON.has(policy))
        r.error(dot(path, 'retryOn'), `${JSON.stringify(policy)} is not a valid retryOn policy`);
    }
  }
}

function rewriteError(rw: HTTPRewrite | undefined): string | undefined {
  if (!rw) return undefined;
  if (rw.uri && rw.uriRegexRewrite) return 'rewrite may only contain one of URI or UriRegexRewrite';
  if (!rw.uri && !rw.uriRegexRewrite && !rw.authority)
    return 'rewrite must specify at least one of URI, UriRegexRewrite, or authority. Only one of URI or UriRegexRewrite may be specified';
  const rr = rw.uriRegexRewrite;
  if (rr) {
    let err: string | undefined;
    if (!rr.match || !rr.rewrite) err = 'UriRegexRewrite requires both Rewrite and Match fields to be specified';
    else err = stringRegexpError(rr.match, 'HTTPRewrite.UriRegexRewrite.Match');
    if (err) return `UriRegexRewrite has errors: ${err}`;
  }
  return undefined;
}

function checkHTTPRouteDestinations(routes: NonNullable<HTTPRoute['route']>, path: string, r: Report): void {
  let total = 0;
  routes.forEach((w, i) => {
    const p = at(path, i);
    if (!w.destination) r.error(dot(p, 'destination'), 'destination is required');
    checkHeaderOperations(w.headers, dot(p, 'headers'), r);
    checkDestination(w.destination, dot(p, 'destination'), r);
    const weight = w.weight ?? 0;
    if (weight < 0) r.error(dot(p, 'weight'), `weight ${weight} < 0`);
    total += weight;
  });
  // Weights are relative (Envoy normalises them); only an all-zero split across several destinations is meaningless.
  if (routes.length > 1 && total === 0) r.error(path, 'total destination weight = 0');
}

function checkRouteDestinations(routes: ReadonlyArray<{ destination: Destination; weight?: number }>, path: string, r: Report): void {
  let total = 0;
  routes.forEach((w, i) => {
    const p = at(path, i);
    if (!w.destination) r.error(dot(p, 'destination'), 'destination is required');
    checkDestination(w.destination, dot(p, 'destination'), r);
    const weight = w.weight ?? 0;
    if (weight < 0) r.error(dot(p, 'weight'), `weight ${weight} < 0`);
    total += weight;
  });
  if (routes.length > 1 && total === 0) r.error(path, 'total destination weight = 0');
}

function checkL4Match(m: L4MatchAttributes, path: string, r: Report): void {
  (m.destinationSubnets ?? []).forEach((s, i) => r.error(at(dot(path, 'destinationSubnets'), i), validateIPSubnet(s)));
  if (m.port !== undefined && m.port !== 0) r.error(dot(path, 'port'), validatePort(m.port));
  checkLabels(m.sourceLabels, dot(path, 'sourceLabels'), r);
  checkGatewayNames(m.gateways ?? [], dot(path, 'gateways'), r);
}

function validateTLSMatch(m: TLSMatchAttributes, vs: VirtualServiceSpec, path: string, r: Report): void {
  const snis = m.sniHosts ?? [];
  if (snis.length === 0) r.error(dot(path, 'sniHosts'), 'TLS match must have at least one SNI host');
  snis.forEach((sni, i) => {
    const p = at(dot(path, 'sniHosts'), i);
    const err = isGateway(vs) ? validateWildcardDomainForVirtualServiceBoundToGateway(true, sni) : validateWildcardDomain(sni);
    if (err !== undefined) {
      if (isValidIP(sni)) r.warn(p, `using an IP address (${JSON.stringify(sni)}) goes against SNI spec and most clients do not support this`);
      else r.error(p, err);
      return;
    }
    if (!(vs.hosts ?? []).some((h) => hostSubsetOf(sni, h)))
      r.error(p, `SNI host ${JSON.stringify(sni)} is not a compatible subset of any of the virtual service hosts: [${(vs.hosts ?? []).join(', ')}]`);
  });
  checkL4Match(m, path, r);
}

// --- unreachable and ineffective rules (warnings only)

/** A canonical JSON of a match without its name: equal strings mean equal matching. */
function matchKey(m: object): string {
  const { name: _name, ...rest } = m as { name?: string };
  return canonicalJSON(rest);
}

function canonicalJSON(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJSON).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJSON((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

function routeName(name: string | undefined, i: number): string {
  return name ? JSON.stringify(name) : `#${i}`;
}

interface PrefixMatch {
  routeStr: string;
  matchStr: string;
  path: string;
  prefix: string;
  port: number;
  method: string;
  authority: string;
  headers: Map<string, string>;
  queryParams: Map<string, string>;
  withoutHeaders: Map<string, string>;
}

function exactOrPrefix(sm: StringMatch | undefined): string {
  if (sm?.exact) return `exact:${sm.exact}`;
  if (sm?.prefix) return `prefix:${sm.prefix}`;
  return '';
}

function matchMap(m: Record<string, StringMatch> | undefined): Map<string, string> {
  return new Map(Object.entries(m ?? {}).map(([k, v]) => [k, exactOrPrefix(v)]));
}

/** Istio's coveredValidation: does the earlier prefix match `a` take every request of `b`? */
function covers(a: PrefixMatch, b: PrefixMatch): boolean {
  if (!b.prefix.startsWith(a.prefix)) return false;
  if (b.port !== a.port) return false;
  if (a.method !== b.method && !a.method.startsWith(b.method)) return false;
  if (a.authority !== b.authority && !a.authority.startsWith(b.authority)) return false;
  for (const [am, bm] of [
    [a.headers, b.headers],
    [a.queryParams, b.queryParams],
    [a.withoutHeaders, b.withoutHeaders],
  ] as const) {
    if (am.size !== bm.size) return false;
    for (const [k, v] of am) {
      const bv = bm.get(k);
      if (bv === undefined) return false;
      if (v !== bv && !v.startsWith(bv)) return false;
    }
  }
  return true;
}

function analyzeUnreachableHTTPRules(routes: readonly HTTPRoute[], r: Report): void {
  const seen = new Map<string, number>();
  let emptyMatchAt = -1;
  const prefixes: PrefixMatch[] = [];
  routes.forEach((route, i) => {
    const rp = at('spec.http', i);
    const matches = route.match ?? [];
    if (matches.length === 0) {
      if (emptyMatchAt >= 0) r.unusedRule(rp, routeName(route.name, i), 'only the last rule can have no matches');
      emptyMatchAt = i;
      return;
    }
    let duplicates = 0;
    matches.forEach((m, j) => {
      const k = matchKey(m);
      const dup = seen.get(k);
      if (dup !== undefined) {
        r.ineffectiveMatch(at(dot(rp, 'match'), j), routeName(route.name, i), routeName(m.name, j), routeName(routes[dup]!.name, dup));
        duplicates++;
        return;
      }
      seen.set(k, i);
      const prefix = m.uri?.prefix;
      if (prefix) {
        prefixes.push({
          routeStr: routeName(route.name, i),
          matchStr: routeName(m.name, j),
          path: at(dot(rp, 'match'), j),
          prefix,
          port: m.port ?? 0,
          method: exactOrPrefix(m.method) || 'exact:GET',
          authority: exactOrPrefix(m.authority),
          headers: matchMap(m.headers),
          queryParams: matchMap(m.queryParams),
          withoutHeaders: matchMap(m.withoutHeaders),
        });
      }
    });
    if (duplicates === matches.length) r.unusedRule(rp, routeName(route.name, i), 'all matches used by prior rules');
  });
  for (let a = 0; a < prefixes.length; a++) {
    for (let b = a + 1; b < prefixes.length; b++) {
      const pa = prefixes[a]!;
      const pb = prefixes[b]!;
      if (pa.prefix === pb.prefix) continue;
      if (covers(pa, pb))
        r.ineffectiveMatch(pb.path, pb.routeStr, `${pb.matchStr} of prefix ${pb.prefix}`, `${pa.matchStr} of prefix ${pa.prefix} on ${pa.routeStr}`);
    }
  }
}

function analyzeUnreachableL4Rules(routes: ReadonlyArray<{ match?: readonly object[] }>, base: string, r: Report): void {
  const seen = new Map<string, number>();
  let emptyMatchAt = -1;
  routes.forEach((route, i) => {
    const rp = at(base, i);
    const matches = route.match ?? [];
    if (matches.length === 0) {
      if (emptyMatchAt >= 0) r.unusedRule(rp, `#${i}`, 'only the last rule can have no matches');
      emptyMatchAt = i;
      return;
    }
    let duplicates = 0;
    matches.forEach((m, j) => {
      const k = canonicalJSON(m);
      const dup = seen.get(k);
      if (dup !== undefined) {
        r.ineffectiveMatch(at(dot(rp, 'match'), j), `#${i}`, `#${j}`, `#${dup}`);
        duplicates++;
      } else seen.set(k, i);
    });
    if (duplicates === matches.length) r.unusedRule(rp, `#${i}`, 'all matches used by prior rules');
  });
}
