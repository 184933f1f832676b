// The Kubernetes Gateway API kinds (gateway.networking.k8s.io, v1.3.0) as users write them: GatewayClass,
// Gateway, HTTPRoute, GRPCRoute, ReferenceGrant. Follows sigs.k8s.io/gateway-api apis/v1 (*_types.go); only the
// fields Istio 1.26's pilot/pkg/config/kube/gateway reads are typed, the rest pass through untyped.
// The Gateway API Gateway is the Kind `KubernetesGateway` in our model (Istio's gvk.KubernetesGateway), so that
// it never collides with Istio's networking Gateway.

export interface ParentReference {
  group?: string;
  kind?: string;
  namespace?: string;
  name: string;
  sectionName?: string;
  port?: number;
}

export interface BackendObjectReference {
  group?: string;
  kind?: string;
  name: string;
  namespace?: string;
  port?: number;
}

export interface HTTPHeader {
  name: string;
  value: string;
}

export interface HTTPHeaderFilter {
  set?: HTTPHeader[];
  add?: HTTPHeader[];
  remove?: string[];
}

export interface HTTPPathModifier {
  type: 'ReplaceFullPath' | 'ReplacePrefixMatch';
  replaceFullPath?: string;
  replacePrefixMatch?: string;
}

export interface HTTPRouteFilter {
  type: string;
  requestHeaderModifier?: HTTPHeaderFilter;
  responseHeaderModifier?: HTTPHeaderFilter;
  requestRedirect?: {
    scheme?: string;
    hostname?: string;
    path?: HTTPPathModifier;
    port?: number;
    statusCode?: number;
  };
  urlRewrite?: { hostname?: string; path?: HTTPPathModifier };
  requestMirror?: {
    backendRef: BackendObjectReference;
    percent?: number;
    fraction?: { numerator: number; denominator?: number };
  };
  extensionRef?: { group: string; kind: string; name: string };
  /** Experimental channel in v1.3.0; Istio 1.26 serves it. */
  cors?: {
    allowOrigins?: string[];
    allowCredentials?: boolean;
    allowMethods?: string[];
    allowHeaders?: string[];
    exposeHeaders?: string[];
    maxAge?: number;
  };
}

export interface HTTPRouteMatch {
  path?: { type?: 'Exact' | 'PathPrefix' | 'RegularExpression'; value?: string };
  headers?: Array<{ type?: 'Exact' | 'RegularExpression'; name: string; value: string }>;
  queryParams?: Array<{ type?: 'Exact' | 'RegularExpression'; name: string; value: string }>;
  method?: string;
}

export interface HTTPBackendRef extends BackendObjectReference {
  weight?: number;
  filters?: HTTPRouteFilter[];
}

export interface HTTPRouteRule {
  name?: string;
  matches?: HTTPRouteMatch[];
  filters?: HTTPRouteFilter[];
  backendRefs?: HTTPBackendRef[];
  timeouts?: { request?: string; backendRequest?: string };
  retry?: { codes?: number[]; attempts?: number; backoff?: string };
}

export interface HTTPRouteSpec {
  parentRefs?: ParentReference[];
  hostnames?: string[];
  rules?: HTTPRouteRule[];
}

export interface GRPCRouteMatch {
  method?: { type?: 'Exact' | 'RegularExpression'; service?: string; method?: string };
  headers?: Array<{ type?: 'Exact' | 'RegularExpression'; name: string; value: string }>;
}

export interface GRPCRouteRule {
  name?: string;
  matches?: GRPCRouteMatch[];
  filters?: HTTPRouteFilter[];
  backendRefs?: HTTPBackendRef[];
}

export interface GRPCRouteSpec {
  parentRefs?: ParentReference[];
  hostnames?: string[];
  rules?: GRPCRouteRule[];
}

export interface SecretObjectReference {
  group?: string;
  kind?: string;
  name: string;
  namespace?: string;
}

export interface GatewayListener {
  name: string;
  hostname?: string;
  port: number;
  protocol: string;
  tls?: {
    mode?: 'Terminate' | 'Passthrough';
    certificateRefs?: SecretObjectReference[];
    options?: Record<string, string>;
  };
  allowedRoutes?: {
    namespaces?: {
      from?: 'All' | 'Same' | 'Selector';
      selector?: { matchLabels?: Record<string, string>; matchExpressions?: Array<{ key: string; operator: string; values?: string[] }> };
    };
    kinds?: Array<{ group?: string; kind: string }>;
  };
}

export interface KubernetesGatewaySpec {
  gatewayClassName: string;
  listeners: GatewayListener[];
  addresses?: Array<{ type?: string; value: string }>;
  infrastructure?: unknown;
}

export interface GatewayClassSpec {
  controllerName: string;
  parametersRef?: unknown;
  description?: string;
}

export interface ReferenceGrantSpec {
  from: Array<{ group: string; kind: string; namespace: string }>;
  to: Array<{ group: string; kind: string; name?: string }>;
}

/** The API group of every kind here. */
export const GATEWAY_API_GROUP = 'gateway.networking.k8s.io';
