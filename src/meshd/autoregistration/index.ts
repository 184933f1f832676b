// Composes WorkloadEntry auto-registration for the daemon. Istio needs a writable config store for it (its
// CRD client); mesh writes through the orchestrator API the same way. Without a cluster (--configDir only)
// there is nowhere to write: proxies that ask to be registered still get their configuration, and the
// daemon says once per workload why no WorkloadEntry appears.
import os from 'node:os';
import type { RunContext } from '../../cli/context';
import type { EnvTable } from '../../lib/env';
import type { ConfigStore } from '../../config/store';
import type { OrchClient } from '../../config/orch/client';
import { registerScope } from '../../lib/log';
import type { ConnectionHooks } from '../../xds/server';
import { AutoRegistration } from './controller';
import { maxConnectionAge } from './entry';
import { OrchWorkloadEntries } from './orch-api';
import './metrics';

const log = registerScope('wle', 'wle controller debugging');

export interface WorkloadEntryController {
  hooks: ConnectionHooks | undefined;
  stop(): Promise<void>;
}

export function startAutoRegistration(o: {
  ctx: RunContext;
  env: EnvTable;
  store: ConfigStore;
  client: OrchClient | undefined;
}): WorkloadEntryController {
  const { ctx, env } = o;
  const autoRegistration = env.bool('PILOT_ENABLE_WORKLOAD_ENTRY_AUTOREGISTRATION');
  const healthChecks = env.bool('PILOT_ENABLE_WORKLOAD_ENTRY_HEALTHCHECKS');
  // Istio's NewController returns nil with both off: no hooks at all.
  if (!autoRegistration && !healthChecks) return { hooks: undefined, stop: async () => undefined };
  if (!o.client) {
    const told = new Set<string>();
    const hooks: ConnectionHooks = {
      connect: async (c) => {
        const md = c.proxy.metadata;
        const what =
          autoRegistration && md.autoRegisterGroup
            ? `WorkloadGroup ${c.proxy.namespace}/${md.autoRegisterGroup}`
            : healthChecks && md.workloadEntry
              ? `WorkloadEntry ${c.proxy.namespace}/${md.workloadEntry}`
              : undefined;
        if (!what || told.has(`${c.proxy.id} ${what}`)) return;
        told.add(`${c.proxy.id} ${what}`);
        log.warn(
          `${c.proxy.id} asks for ${what}: WorkloadEntry auto-registration and health checks write to the orchestrator API, and this daemon has none (--configDir only); the proxy is served without a WorkloadEntry`,
        );
      },
      disconnect: () => undefined,
      health: () => undefined,
    };
    return { hooks, stop: async () => undefined };
  }
  const controller = new AutoRegistration({
    store: o.store,
    api: new OrchWorkloadEntries(o.client),
    instanceId: ctx.env['POD_NAME'] || os.hostname(),
    autoRegistration,
    healthChecks,
    gracePeriodMs: env.duration('PILOT_WORKLOAD_ENTRY_GRACE_PERIOD'),
    maxConnectionAgeMs: maxConnectionAge(ctx.flags['keepaliveMaxServerConnectionAge'] as number),
    validateIdentity: env.bool('MESH_WORKLOAD_ENTRY_VALIDATE_IDENTITY'),
  }).start();
  return { hooks: controller, stop: () => controller.stop() };
}
