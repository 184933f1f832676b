// The Gateway API's alpha stream routes (gateway.networking.k8s.io/v1alpha2, experimental channel v1.3.0): TLSRoute
// and TCPRoute, as users write them. Follows sigs.k8s.io/gateway-api apis/v1alpha2 (tlsroute_types.go,
// tcproute_types.go); only the fields Istio 1.26's pilot/pkg/config/kube/gateway reads are typed. Istio serves them
// only with PILOT_ENABLE_ALPHA_GATEWAY_API=true, and so do we (translate.ts ignores them otherwise).
import type { BackendObjectReference, ParentReference } from './types';

export interface StreamBackendRef extends BackendObjectReference {
  weight?: number;
}

export interface StreamRouteRule {
  name?: string;
  backendRefs?: StreamBackendRef[];
}

export interface TLSRouteSpec {
  parentRefs?: ParentReference[];
  /** SNI names the route matches; none means any. */
  hostnames?: string[];
  rules?: StreamRouteRule[];
}

export interface TCPRouteSpec {
  parentRefs?: ParentReference[];
  rules?: StreamRouteRule[];
}
