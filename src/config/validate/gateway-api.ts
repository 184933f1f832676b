// Structure and required fields of the Gateway API kinds (gateway.networking.k8s.io v1.3.0), for resources that
// reach mesh without an API server (--configDir, `meshctl validate -f`). Follows the `required` lists and enums of
// the v1.3.0 CRDs (manifests/gateway-api/v1.3.0). Differs on purpose: the CRDs' CEL rules (e.g. "hostname must not be
// set for TCP listeners") are not checked here; on a cluster the API server applies them before mesh sees the object.
import type { Config } from '../types';
import { type Report, at, dot } from './report';
import { any, en, i32, list, obj, str, strMap, strs, type Shape } from './shape';

const parentRef = obj({ group: str, kind: str, namespace: str, name: str, sectionName: str, port: i32 });
const backendObjectRef = obj({ group: str, kind: str, name: str, namespace: str, port: i32 });
const header = obj({ name: str, value: str });
const headerFilter = obj({ set: list(header), add: list(header), remove: strs });
const pathModifier = obj({ type: en('ReplaceFullPath', 'ReplacePrefixMatch'), replaceFullPath: str, replacePrefixMatch: str });
const routeFilter = obj({
  type: en('RequestHeaderModifier', 'ResponseHeaderModifier', 'RequestMirror', 'RequestRedirect', 'URLRewrite', 'ExtensionRef', 'CORS'),
  requestHeaderModifier: headerFilter,
  responseHeaderModifier: headerFilter,
  requestRedirect: obj({ scheme: en('http', 'https'), hostname: str, path: pathModifier, port: i32, statusCode: i32 }),
  urlRewrite: obj({ hostname: str, path: pathModifier }),
  requestMirror: obj({ backendRef: backendObjectRef, percent: i32, fraction: obj({ numerator: i32, denominator: i32 }) }),
  extensionRef: obj({ group: str, kind: str, name: str }),
  cors: any,
});
const nameValueMatch = obj({ type: en('Exact', 'RegularExpression'), name: str, value: str });
const backendRef = obj({ group: str, kind: str, name: str, namespace: str, port: i32, weight: i32, filters: list(routeFilter) });

const httpRoute = obj({
  parentRefs: list(parentRef),
  hostnames: strs,
  rules: list(
    obj({
      name: str,
      matches: list(
        obj({
          path: obj({ type: en('Exact', 'PathPrefix', 'RegularExpression'), value: str }),
          headers: list(nameValueMatch),
          queryParams: list(nameValueMatch),
          method: en('GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH'),
        }),
      ),
      filters: list(routeFilter),
      backendRefs: list(backendRef),
      timeouts: obj({ request: str, backendRequest: str }),
      retry: obj({ codes: list(i32), attempts: i32, backoff: str }),
      sessionPersistence: any,
    }),
  ),
});

const grpcRoute = obj({
  parentRefs: list(parentRef),
  hostnames: strs,
  rules: list(
    obj({
      name: str,
      matches: list(obj({ method: obj({ type: en('Exact', 'RegularExpression'), service: str, method: str }), headers: list(nameValueMatch) })),
      filters: list(routeFilter),
      backendRefs: list(backendRef),
      sessionPersistence: any,
    }),
  ),
});

const listener = obj({
  name: str,
  hostname: str,
  port: i32,
  protocol: str,
  tls: obj({
    mode: en('Terminate', 'Passthrough'),
    certificateRefs: list(obj({ group: str, kind: str, name: str, namespace: str })),
    options: strMap,
    frontendValidation: any,
  }),
  allowedRoutes: obj({
    namespaces: obj({ from: en('All', 'Same', 'Selector', 'None'), selector: any }),
    kinds: list(obj({ group: str, kind: str })),
  }),
});

// TLSRoute and TCPRoute (v1alpha2): parents, SNI hostnames (TLSRoute), backends with weights.
const streamRule = obj({ name: str, backendRefs: list(obj({ group: str, kind: str, name: str, namespace: str, port: i32, weight: i32 })) });
const tlsRoute = obj({ parentRefs: list(parentRef), hostnames: strs, rules: list(streamRule) });
const tcpRoute = obj({ parentRefs: list(parentRef), rules: list(streamRule) });

export const GATEWAY_API_SHAPES: Readonly<
  Record<'GatewayClass' | 'KubernetesGateway' | 'HTTPRoute' | 'GRPCRoute' | 'ReferenceGrant' | 'TLSRoute' | 'TCPRoute', Shape>
> = {
  GatewayClass: obj({ controllerName: str, parametersRef: any, description: str }),
  KubernetesGateway: obj({
    gatewayClassName: str,
    listeners: list(listener),
    addresses: list(obj({ type: str, value: str })),
    infrastructure: any,
    backendTLS: any,
    allowedListeners: any,
  }),
  HTTPRoute: httpRoute,
  GRPCRoute: grpcRoute,
  ReferenceGrant: obj({ from: list(obj({ group: str, kind: str, namespace: str })), to: list(obj({ group: str, kind: str, name: str })) }),
  TLSRoute: tlsRoute,
  TCPRoute: tcpRoute,
};
const required = (r: Report, path: string, v: unknown): void => {
  if (v === undefined || v === '') r.error(path, 'Required value');
};

export function validateGatewayClass(c: Config<'GatewayClass'>, r: Report): void {
  required(r, 'spec.controllerName', c.spec.controllerName);
}

export function validateKubernetesGateway(c: Config<'KubernetesGateway'>, r: Report): void {
  required(r, 'spec.gatewayClassName', c.spec.gatewayClassName);
  const listeners = c.spec.listeners ?? [];
  if (listeners.length === 0) r.error('spec.listeners', 'Required value');
  const names = new Set<string>();
  listeners.forEach((l, i) => {
    const p = at('spec.listeners', i);
    required(r, dot(p, 'name'), l.name);
    required(r, dot(p, 'port'), l.port);
    required(r, dot(p, 'protocol'), l.protocol);
    if (l.port !== undefined && (l.port < 1 || l.port > 65535)) r.error(dot(p, 'port'), `Invalid value: ${l.port}: must be between 1 and 65535`);
    if (names.has(l.name)) r.error(dot(p, 'name'), `Duplicate value: ${JSON.stringify(l.name)}`);
    names.add(l.name);
  });
}

function validateRouteRefs(
  parentRefs: readonly { name?: string }[] | undefined,
  rules: readonly { backendRefs?: readonly { name?: string }[] }[] | undefined,
  r: Report,
): void {
  (parentRefs ?? []).forEach((p, i) => required(r, dot(at('spec.parentRefs', i), 'name'), p.name));
  (rules ?? []).forEach((rule, i) =>
    (rule.backendRefs ?? []).forEach((b, j) => required(r, dot(at(dot(at('spec.rules', i), 'backendRefs'), j), 'name'), b.name)),
  );
}

export function validateHTTPRoute(c: Config<'HTTPRoute'>, r: Report): void {
  validateRouteRefs(c.spec.parentRefs, c.spec.rules, r);
}

export function validateGRPCRoute(c: Config<'GRPCRoute'>, r: Report): void {
  validateRouteRefs(c.spec.parentRefs, c.spec.rules, r);
}

/** TLSRoute and TCPRoute: parents and backends name what they refer to (the CRD's required fields). */
export function validateStreamRoute(c: Config<'TLSRoute'> | Config<'TCPRoute'>, r: Report): void {
  validateRouteRefs(c.spec.parentRefs, c.spec.rules, r);
}

export function validateReferenceGrant(c: Config<'ReferenceGrant'>, r: Report): void {
  if ((c.spec.from ?? []).length === 0) r.error('spec.from', 'Required value');
  if ((c.spec.to ?? []).length === 0) r.error('spec.to', 'Required value');
}
