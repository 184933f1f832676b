// The Kubernetes Gateway API: kinds, translation to the Gateway/VirtualService model, status, the store that serves it.
export * from './types';
export { GatewayApiConfigStore } from './store';
export {
  translateGatewayApi,
  type GatewayApiInput,
  type GatewayApiOptions,
  type GatewayApiOutput,
  GATEWAY_NAME_LABEL,
  KUBERNETES_GATEWAY_NAME,
  ROUTE_SEMANTICS_ANNOTATION,
} from './translate';
export type { GatewayApiStatus, Condition, GatewayStatus, RouteStatus, GatewayClassStatus, StatusObject } from './status';
export { gatewayApiOptions, ISTIO_GATEWAY_CONTROLLER } from './options';
