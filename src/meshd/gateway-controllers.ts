// The Gateway API controllers that write to the orchestrator, each under its election as Istio 1.26 starts them
// (pilot/pkg/bootstrap/configcontroller.go): the status writer under the gateway status election
// (PILOT_ENABLE_GATEWAY_API_STATUS), writing through a status manager of PILOT_STATUS_MAX_WORKERS workers.
import type { RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import type { GatewayApiConfigStore } from '../config/gateway-api';
import { GatewayStatusWriter } from '../config/gateway-api/status-writer';
import type { OrchClient } from '../config/orch/client';
import { ELECTIONS } from '../leader';
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
}

/** The elected Gateway API controllers to run: election, name, and the maker of one run. */
export function gatewayControllers(c: GatewayControllerContext): Array<{ election: string; name: string; make: () => Controller }> {
  const out: Array<{ election: string; name: string; make: () => Controller }> = [];
  const { ctx, env } = c;
  if (env.bool('PILOT_ENABLE_GATEWAY_API_STATUS')) {
    out.push({
      election: ELECTIONS.GatewayStatusController,
      name: 'gateway status writer',
      make: () => {
        const queue = new StatusManager(c.client, env.int('PILOT_STATUS_MAX_WORKERS'));
        const writer = new GatewayStatusWriter({
          client: c.client,
          store: c.store,
          queue,
          controllerName: env.string('PILOT_GATEWAY_API_CONTROLLER_NAME'),
          domain: ctx.flags['domain'] as string,
        });
        return {
          start: () => writer.start(),
          stop: async () => {
            await writer.stop();
            await queue.stop();
          },
        };
      },
    });
  }
  return out;
}
