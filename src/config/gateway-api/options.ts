// The translation's options from the daemon's environment, as Istio 1.26 reads them (pilot/pkg/features and
// pilot/pkg/config/kube/gateway's builtinClasses/classInfos): our controller (PILOT_GATEWAY_API_CONTROLLER_NAME, class
// PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME) and Istio's, so that Istio's `istio` class is served unchanged.
import type { GatewayApiOptions } from './translate';

export const ISTIO_GATEWAY_CONTROLLER = 'istio.io/gateway-controller';

export interface GatewayApiEnv {
  controllerName: string;
  defaultClassName: string;
  alpha: boolean;
  domain: string;
}

export function gatewayApiOptions(e: GatewayApiEnv): GatewayApiOptions {
  return {
    domain: e.domain,
    controllerName: e.controllerName,
    controllers: [e.controllerName, ISTIO_GATEWAY_CONTROLLER],
    builtinClasses: { [e.defaultClassName]: e.controllerName, istio: ISTIO_GATEWAY_CONTROLLER },
    alpha: e.alpha,
  };
}
