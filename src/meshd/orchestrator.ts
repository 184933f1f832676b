// The daemon's side of the orchestrator (`--registries Orchestrator` with --orchconfig or in-cluster
// configuration): one client, the config store of this cluster (filtered by meshConfig
// discoverySelectors, which are watched on disk), and the leader elections of the controllers that write.
import type { RunContext } from '../cli/context';
import { CommandError } from '../cli/context';
import type { EnvTable } from '../cli/env';
import { readMeshConfig, watchMeshConfig } from '../config/meshconfig';
import type { OrchClient } from '../config/orch/client';
import type { OrchConfigStore } from '../config/orch/source';
import { buildInfo } from '../lib/buildinfo';
import { ELECTIONS, Leadership } from '../leader';

export interface Orchestrator {
  client: OrchClient;
  store: OrchConfigStore;
  leadership: Leadership;
  nodeLocality(nodeName: string): string | undefined;
  subscribeNodes(handler: (nodeName: string) => void): () => void;
  close(): Promise<void>;
}

/** Whether orchestrator client configuration is available: a file, or the in-cluster variables. */
export function orchestratorAvailable(ctx: RunContext): boolean {
  return Boolean(ctx.flags['orchconfig']) || Boolean(ctx.env['ORCH_SERVICE_HOST'] ?? ctx.env['KUBERNETES_SERVICE_HOST']);
}

export async function startOrchestrator(ctx: RunContext, env: EnvTable): Promise<Orchestrator> {
  const meshConfigFile = ctx.flags['meshConfig'] as string;
  let mesh;
  try {
    mesh = readMeshConfig(meshConfigFile);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  const { createOrchClient, OrchConfigStore, localityString } = await import('../config/orch');
  const client = await createOrchClient({
    orchconfig: (ctx.flags['orchconfig'] as string) || undefined,
    qps: ctx.flags['orchApiQPS'] as number,
    burst: ctx.flags['orchApiBurst'] as number,
    contentType: env.string('MESH_ORCH_CLIENT_CONTENT_TYPE'),
    env: ctx.env,
    userAgent: `${ctx.program.name}/${buildInfo().version}`,
  });
  const store = new OrchConfigStore({
    client,
    closeClient: false,
    watchNamespace: env.string('MESH_WATCH_NAMESPACE') || undefined,
    clusterID: ctx.flags['clusterID'] as string,
    discoverySelectors: mesh.discoverySelectors,
  }).start();
  const stopWatchingMesh = watchMeshConfig(meshConfigFile, mesh, (m) => store.setDiscoverySelectors(m.discoverySelectors));

  const leadership = new Leadership({
    client,
    namespace: ctx.flags['namespace'] as string,
    podName: env.string('POD_NAME'),
    revision: env.string('REVISION'),
    enabled: env.bool('ENABLE_LEADER_ELECTION'),
  });
  // Istio's namespace controller election (the root-certificate ConfigMap writer runs under it): joined
  // on every cluster the daemon manages, so exactly one replica writes.
  leadership.election(ELECTIONS.NamespaceController);

  return {
    client,
    store,
    leadership,
    nodeLocality: (n) => {
      const l = store.nodeLocality(n);
      return l ? localityString(l) || undefined : undefined;
    },
    subscribeNodes: (h) => store.subscribeNodes(h),
    close: async () => {
      stopWatchingMesh();
      await leadership.stop();
      await store.close();
      client.close();
    },
  };
}
