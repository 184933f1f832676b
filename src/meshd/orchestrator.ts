// The daemon's side of the orchestrator (`--registries Orchestrator` with --orchconfig or in-cluster
// configuration): one client, the config store of this cluster (filtered by meshConfig
// discoverySelectors, which are watched on disk), and the leader elections of the controllers that write.
import type { RunContext } from '../cli/context';
import { CommandError } from '../cli/context';
import type { EnvTable } from '../lib/env';
import { type LabelSelector, readMeshConfig, watchMeshConfig } from '../config/meshconfig';
import type { OrchClient } from '../config/orch/client';
import type { OrchConfigStore } from '../config/orch/source';
import { buildInfo } from '../lib/buildinfo';
import { Leadership } from '../leader';
import type { AggregateRegistry } from '../discovery/registry/aggregate';
import { OrchestratorRegistry, type OrchestratorOptions } from '../discovery/registry/orchestrator';
import { type ClusterDebugInfo, MulticlusterController } from '../multicluster';

export interface Orchestrator {
  client: OrchClient;
  store: OrchConfigStore;
  /** The elections of the controllers that write (src/meshd/writers.ts joins them). */
  leadership: Leadership;
  /** meshConfig discoverySelectors as they are now (the mesh config file is watched). */
  discoverySelectors(): readonly LabelSelector[];
  subscribeDiscoverySelectors(fn: () => void): () => void;
  /**
   * Starts the remote-cluster secret controller: each remote cluster's registry joins `registry` (and
   * leaves it with its secret). Readiness should wait for hasSynced().
   */
  startMulticluster(registry: AggregateRegistry, registryOptions: OrchestratorOptions): MulticlusterController;
  /** Local store and remote clusters synced (remote ones within PILOT_REMOTE_CLUSTER_TIMEOUT). */
  hasSynced(): boolean;
  /** `/debug/clusterz`: this (config) cluster, then the remote clusters. */
  clusters(): ClusterDebugInfo[];
  nodeLocality(nodeName: string): string | undefined;
  subscribeNodes(handler: (nodeName: string) => void): () => void;
  close(): Promise<void>;
}

/** Whether orchestrator client configuration is available: a file, or the in-cluster variables. */
export function orchestratorAvailable(ctx: RunContext): boolean {
  return Boolean(ctx.flags['orchconfig']) || Boolean(ctx.env['ORCH_SERVICE_HOST'] ?? ctx.env['KUBERNETES_SERVICE_HOST']);
}

/** The daemon's orchestrator client from its flags: one place for the options (store, CA, writers). */
export async function daemonOrchClient(ctx: RunContext, env: EnvTable): Promise<OrchClient> {
  const { createOrchClient } = await import('../config/orch');
  return createOrchClient({
    orchconfig: (ctx.flags['orchconfig'] as string) || undefined,
    qps: ctx.flags['orchApiQPS'] as number,
    burst: ctx.flags['orchApiBurst'] as number,
    contentType: env.string('MESH_ORCH_CLIENT_CONTENT_TYPE'),
    env: ctx.env,
    userAgent: `${ctx.program.name}/${buildInfo().version}`,
  });
}

/** The daemon's leader elections (ENABLE_LEADER_ELECTION, revision-aware), on `client`. */
export function daemonLeadership(ctx: RunContext, env: EnvTable, client: OrchClient): Leadership {
  return new Leadership({
    client,
    namespace: ctx.flags['namespace'] as string,
    podName: env.string('POD_NAME'),
    revision: env.string('REVISION'),
    enabled: env.bool('ENABLE_LEADER_ELECTION'),
  });
}

/**
 * The remote-cluster secret controller: each remote cluster's registry joins `registry` while its secret
 * exists (Istio's multicluster.Controller adding a kube registry per cluster).
 */
function startRemoteClusters(
  ctx: RunContext,
  env: EnvTable,
  client: OrchClient,
  discoverySelectors: readonly LabelSelector[],
  registry: AggregateRegistry,
  registryOptions: OrchestratorOptions,
): MulticlusterController {
  const registries = new Map<string, OrchestratorRegistry>();
  return new MulticlusterController({
    client,
    namespace: ctx.flags['clusterRegistriesNamespace'] as string,
    localClusterId: ctx.flags['clusterID'] as string,
    remoteSyncTimeoutMs: env.duration('PILOT_REMOTE_CLUSTER_TIMEOUT'),
    allowInsecure: env
      .string('PILOT_INSECURE_MULTICLUSTER_KUBECONFIG_OPTIONS')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
    qps: ctx.flags['orchApiQPS'] as number,
    burst: ctx.flags['orchApiBurst'] as number,
    userAgent: `${ctx.program.name}/${buildInfo().version}`,
    ...(env.string('MESH_WATCH_NAMESPACE') ? { watchNamespace: env.string('MESH_WATCH_NAMESPACE') } : {}),
    discoverySelectors,
    added: (c) => {
      const reg = new OrchestratorRegistry(c.store, {
        ...registryOptions,
        id: `Orchestrator/${c.id}`,
        clusterId: c.id,
        nodeLocality: (n) => c.nodeLocality(n),
        synced: () => c.hasSynced(),
      });
      c.store.subscribeNodes((n) => reg.nodeChanged(n));
      registries.set(c.id, reg);
      registry.addRegistry(reg);
    },
    removed: (c) => {
      const reg = registries.get(c.id);
      if (!reg) return;
      registries.delete(c.id);
      registry.removeRegistry(reg.id);
      reg.close();
    },
  }).start();
}

export async function startOrchestrator(ctx: RunContext, env: EnvTable): Promise<Orchestrator> {
  const meshConfigFile = ctx.flags['meshConfig'] as string;
  let mesh;
  try {
    mesh = readMeshConfig(meshConfigFile);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  const { OrchConfigStore, localityString } = await import('../config/orch');
  const client = await daemonOrchClient(ctx, env);
  const store = new OrchConfigStore({
    client,
    closeClient: false,
    watchNamespace: env.string('MESH_WATCH_NAMESPACE') || undefined,
    clusterID: ctx.flags['clusterID'] as string,
    discoverySelectors: mesh.discoverySelectors,
  }).start();
  let multicluster: MulticlusterController | undefined;
  let selectors: readonly LabelSelector[] = mesh.discoverySelectors;
  const selectorSubscribers = new Set<() => void>();
  const stopWatchingMesh = watchMeshConfig(meshConfigFile, mesh, (m) => {
    selectors = m.discoverySelectors;
    store.setDiscoverySelectors(m.discoverySelectors);
    multicluster?.setDiscoverySelectors(m.discoverySelectors);
    for (const s of selectorSubscribers) s();
  });
  const leadership = daemonLeadership(ctx, env, client);
  return {
    client,
    store,
    leadership,
    discoverySelectors: () => selectors,
    subscribeDiscoverySelectors(fn) {
      selectorSubscribers.add(fn);
      return () => void selectorSubscribers.delete(fn);
    },
    nodeLocality: (n) => {
      const l = store.nodeLocality(n);
      return l ? localityString(l) || undefined : undefined;
    },
    subscribeNodes: (h) => store.subscribeNodes(h),
    startMulticluster(registry, registryOptions) {
      // The selectors the mesh config had at start; changes reach it through setDiscoverySelectors.
      multicluster = startRemoteClusters(ctx, env, client, mesh.discoverySelectors, registry, registryOptions);
      return multicluster;
    },
    hasSynced: () => store.hasSynced() && (multicluster?.hasSynced() ?? true),
    clusters: () => [
      { id: ctx.flags['clusterID'] as string, secretName: '', syncStatus: store.hasSynced() ? 'synced' : 'syncing' },
      ...(multicluster?.debugInfo() ?? []),
    ],
    close: async () => {
      stopWatchingMesh();
      await multicluster?.close();
      await leadership.stop();
      await store.close();
      client.close();
    },
  };
}
