// The Gateway API controllers that write to the orchestrator, each under its election as Istio 1.26 starts them
// (pilot/pkg/bootstrap/configcontroller.go): the status writer under the gateway status election
// (PILOT_ENABLE_GATEWAY_API_STATUS), writing through a status manager of PILOT_STATUS_MAX_WORKERS workers; the
// deployment controller under the per-revision gateway deployment election
// (PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER), rendering the injector's `kube-gateway` template; and, on every
// replica, the default GatewayClass controller.
import type { RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { type GatewayApiConfigStore, gatewayApiOptions } from '../config/gateway-api';
import { GatewayDeploymentController } from '../config/gateway-api/deploy';
import { GatewayClassController } from '../config/gateway-api/gatewayclass';
import type { ProxyNack } from '../config/gateway-api/status-merge';
import { GatewayStatusWriter } from '../config/gateway-api/status-writer';
import { GATEWAY_NAME_LABEL } from '../config/gateway-api/translate';
import type { OrchClient } from '../config/orch/client';
import { ELECTIONS } from '../leader';
import { builtinInjectorState, renderKubeGateway } from './gateway-deploy-render';
import type { InjectionWebhook } from './inject-webhook';
import type { XdsServerHandle } from './providers';
import { StatusManager } from './status-manager';

interface Controller {
  start(): unknown;
  stop(): Promise<void>;
}

export interface GatewayControllerContext {
  ctx: RunContext;
  env: EnvTable;
  client: OrchClient;
  store: GatewayApiConfigStore;
  /** The running injector, whose configuration the deployments are rendered from. */
  inject: InjectionWebhook | undefined;
  /** The NACKs of connected gateway proxies, for the route status (beyond Istio). */
  nacks?: () => readonly ProxyNack[];
}

/** Each connected proxy serving a Gateway (its gateway-name label) whose last answer for a type was a NACK. */
export function proxyNacks(xds: XdsServerHandle | undefined): ProxyNack[] {
  const out: ProxyNack[] = [];
  for (const con of xds?.connections() ?? []) {
    const gateway = con.proxy.labels[GATEWAY_NAME_LABEL];
    if (!gateway) continue;
    for (const w of con.watched)
      if (w.lastError !== undefined)
        out.push({ proxy: con.proxy.id, namespace: con.proxy.namespace, gateway, typeUrl: w.typeUrl, message: w.lastError });
  }
  return out.sort((a, b) => (`${a.proxy} ${a.typeUrl}` < `${b.proxy} ${b.typeUrl}` ? -1 : 1));
}

export interface ElectedController {
  election: string;
  perRevision?: boolean;
  name: string;
  make: () => Controller;
}

function statusWriter(c: GatewayControllerContext): Controller {
  const { ctx, env } = c;
  const queue = new StatusManager(c.client, env.int('PILOT_STATUS_MAX_WORKERS'));
  const writer = new GatewayStatusWriter({
    client: c.client,
    store: c.store,
    queue,
    controllerName: env.string('PILOT_GATEWAY_API_CONTROLLER_NAME'),
    domain: ctx.flags['domain'] as string,
    ...(c.nacks ? { nacks: c.nacks } : {}),
  });
  return {
    start: () => writer.start(),
    stop: async () => {
      await writer.stop();
      await queue.stop();
    },
  };
}

function deploymentController(c: GatewayControllerContext): Controller {
  const { ctx, env } = c;
  const controllerName = env.string('PILOT_GATEWAY_API_CONTROLLER_NAME');
  const opts = gatewayApiOptions({
    controllerName,
    defaultClassName: env.string('PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME'),
    alpha: false,
    domain: ctx.flags['domain'] as string,
  });
  let builtin: ReturnType<typeof builtinInjectorState> | undefined;
  return new GatewayDeploymentController({
    client: c.client,
    controllers: opts.controllers,
    builtinClasses: opts.builtinClasses,
    fieldManager: controllerName,
    clusterId: ctx.flags['clusterID'] as string,
    revision: env.string('REVISION'),
    render: (input) => renderKubeGateway(c.inject?.current() ?? (builtin ??= builtinInjectorState(ctx.env)), input, ctx.env),
  });
}

/**
 * The default GatewayClass controller (PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER), started on every replica as
 * Istio runs it; undefined when off.
 */
export function startGatewayClassController(c: GatewayControllerContext): Controller | undefined {
  if (!c.env.bool('PILOT_ENABLE_GATEWAY_API_GATEWAYCLASS_CONTROLLER')) return undefined;
  const gcc = new GatewayClassController(
    c.client,
    c.env.string('PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME'),
    c.env.string('PILOT_GATEWAY_API_CONTROLLER_NAME'),
  );
  void gcc.start();
  return gcc;
}

/** The elected Gateway API controllers to run: election, name, and the maker of one run. */
export function gatewayControllers(c: GatewayControllerContext): ElectedController[] {
  const out: ElectedController[] = [];
  if (c.env.bool('PILOT_ENABLE_GATEWAY_API_STATUS'))
    out.push({ election: ELECTIONS.GatewayStatusController, name: 'gateway status writer', make: () => statusWriter(c) });
  if (c.env.bool('PILOT_ENABLE_GATEWAY_API_DEPLOYMENT_CONTROLLER'))
    out.push({
      election: ELECTIONS.GatewayDeploymentController,
      perRevision: true,
      name: 'gateway deployment controller',
      make: () => deploymentController(c),
    });
  return out;
}
