// Where the discovery daemon's configuration and services come from (Istio's initConfigController and
// initServiceControllers in pilot/pkg/bootstrap): --configDir files and/or this cluster's objects
// (--registries Orchestrator), one store over both, and the service registries read from it, with remote
// clusters joined by secrets and Node localities feeding the endpoints on them. Each part is registered on
// the daemon's closer stack as it is opened.
import fs from 'node:fs';
import { CommandError, type RunContext } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { AggregateConfigStore } from '../config/aggregate';
import { FileConfigStore } from '../config/file';
import { GatewayApiConfigStore, gatewayApiOptions } from '../config/gateway-api';
import type { ConfigStore } from '../config/store';
import { buildRegistries, OrchestratorRegistry, type OrchestratorOptions } from '../discovery/registry';
import type { AggregateRegistry } from '../discovery/registry/aggregate';
import type { Closers } from '../lib/closers';
import { registerScope } from '../lib/log';
import { type Orchestrator, orchestratorAvailable, startOrchestrator } from './orchestrator';

const log = registerScope('model', 'mesh model');

export interface ConfigSources {
  store: ConfigStore;
  /** The orchestrator side (client, this cluster's store, leader elections) when it is used. */
  orchestrator?: Orchestrator;
  registry: AggregateRegistry;
  /** The Gateway API translation over `store` (PILOT_ENABLE_GATEWAY_API): its computed status. */
  gatewayApi?: GatewayApiConfigStore;
}

/** An unusable --configDir is a start-up error, not a daemon that is never ready. */
function checkConfigDir(dir: string): void {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new CommandError(`--configDir ${dir}: ${code === 'ENOENT' ? 'no such directory' : (e as Error).message}`);
  }
  if (!st.isDirectory()) throw new CommandError(`--configDir ${dir}: not a directory`);
  try {
    fs.accessSync(dir, fs.constants.R_OK | fs.constants.X_OK);
    fs.readdirSync(dir);
  } catch (e) {
    throw new CommandError(`--configDir ${dir}: cannot read the directory: ${(e as Error).message}`);
  }
}

/** The orchestrator side when --registries names it and a cluster is configured; undefined to run from files. */
async function openOrchestrator(ctx: RunContext, env: EnvTable, closers: Closers): Promise<Orchestrator | undefined> {
  const configDir = ctx.flags['configDir'] as string;
  if (!(ctx.flags['registries'] as readonly string[]).includes('Orchestrator')) {
    if (!configDir) log.info('no --configDir and no Orchestrator registry: serving an empty configuration');
    return undefined;
  }
  if (orchestratorAvailable(ctx)) return closers.closing(await startOrchestrator(ctx, env));
  if (!configDir) {
    throw new CommandError('no orchestrator configuration: give --orchconfig, run inside a cluster, or serve from files with --configDir');
  }
  // Istio would fail without a cluster; mesh runs from files alone, and Service/EndpointSlice YAML in the
  // folder still feeds the Orchestrator registry.
  log.info('no orchestrator configuration (--orchconfig or in-cluster): reading Orchestrator objects from --configDir only');
  return undefined;
}

async function openStore(
  ctx: RunContext,
  env: EnvTable,
  closers: Closers,
): Promise<{ store: ConfigStore; orchestrator?: Orchestrator; gatewayApi?: GatewayApiConfigStore }> {
  const configDir = ctx.flags['configDir'] as string;
  if (configDir) checkConfigDir(configDir);
  const orchestrator = await openOrchestrator(ctx, env, closers);
  const stores: ConfigStore[] = configDir ? [new FileConfigStore({ dir: configDir })] : [];
  if (orchestrator) stores.push(orchestrator.store);
  const store: ConfigStore = closers.closing(stores.length === 1 ? stores[0]! : new AggregateConfigStore(stores));
  // The Gateway API is served as the Gateway/VirtualService configs Istio translates it to (PILOT_ENABLE_GATEWAY_API).
  if (!env.bool('PILOT_ENABLE_GATEWAY_API')) return { store, ...(orchestrator ? { orchestrator } : {}) };
  const gatewayApi = closers.closing(new GatewayApiConfigStore(store, gatewayApiEnvOptions(ctx, env)));
  return { store: gatewayApi, gatewayApi, ...(orchestrator ? { orchestrator } : {}) };
}

function gatewayApiEnvOptions(ctx: RunContext, env: EnvTable): ReturnType<typeof gatewayApiOptions> {
  return gatewayApiOptions({
    controllerName: env.string('PILOT_GATEWAY_API_CONTROLLER_NAME'),
    defaultClassName: env.string('PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME'),
    alpha: env.bool('PILOT_ENABLE_ALPHA_GATEWAY_API'),
    domain: ctx.flags['domain'] as string,
  });
}

/** The registries' options from flags and environment (shared by this cluster's and remote clusters' registries). */
function registryOptions(ctx: RunContext, env: EnvTable): OrchestratorOptions {
  return {
    domain: ctx.flags['domain'] as string,
    clusterId: ctx.flags['clusterID'] as string,
    selectWorkloadEntries: env.bool('PILOT_ENABLE_ORCH_SELECT_WORKLOAD_ENTRIES'),
    persistentSessionLabels: [env.string('PILOT_PERSISTENT_SESSION_LABEL'), env.string('PILOT_PERSISTENT_SESSION_HEADER_LABEL')],
  };
}

function openRegistries(ctx: RunContext, env: EnvTable, closers: Closers, store: ConfigStore, orchestrator?: Orchestrator): AggregateRegistry {
  const registries = ctx.flags['registries'] as readonly string[];
  const options = registryOptions(ctx, env);
  let registry: AggregateRegistry;
  try {
    registry = closers.closing(
      buildRegistries(store, registries, { ...options, ...(orchestrator ? { nodeLocality: (n: string) => orchestrator.nodeLocality(n) } : {}) }),
    );
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  if (!orchestrator) return registry;
  // Remote clusters joined by secrets add their registries beside this cluster's.
  if (registries.includes('Orchestrator')) orchestrator.startMulticluster(registry, options);
  // Locality comes from Nodes, which are not configs: their label changes reach the endpoints on them.
  const local = registry.getRegistries().find((r): r is OrchestratorRegistry => r instanceof OrchestratorRegistry);
  if (local) closers.add(orchestrator.subscribeNodes((n) => local.nodeChanged(n)));
  return registry;
}

/** The config store, orchestrator side and service registries, each on `closers` as it is opened. */
export async function openConfigSources(ctx: RunContext, env: EnvTable, closers: Closers): Promise<ConfigSources> {
  const { store, orchestrator, gatewayApi } = await openStore(ctx, env, closers);
  const registry = openRegistries(ctx, env, closers, store, orchestrator);
  return { store, registry, ...(orchestrator ? { orchestrator } : {}), ...(gatewayApi ? { gatewayApi } : {}) };
}
