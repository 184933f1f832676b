// `pilot-discovery discovery`: composes the config sources, registries, identity, writers, push controller
// and ADS server into the daemon shell (Istio's pilot/pkg/bootstrap NewServer). Every part is registered on
// one closer stack as it is opened, so a failed start and a shutdown both close them in reverse.
import os from 'node:os';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import { EnvTable } from '../lib/env';
import type { ConfigStore } from '../config/store';
import { loadEnvoyFilterTypes } from '../config/validate';
import type { Proxy } from '../discovery/model';
import type { PushContext } from '../discovery/push-context';
import { XdsCache } from '../discovery/push/xds-cache';
import { proxyFromNode } from '../discovery/proxy';
import { Closers } from '../lib/closers';
import { registerScope } from '../lib/log';
import { enableQueueMetrics } from '../lib/reconcile-queue';
import { createDaemonSecurity, type DaemonSecurity } from '../security';
import { generatorsFor } from '../xds/gen';
import { ALL_SECRETS_OF } from '../xds/gen/sds';
import { PushController } from '../xds/push/controller';
import { AdsServer, adsSettingsFromEnv, type ConnectionHooks, xdsCacheSettingsFromEnv } from '../xds/server';
import type { Generator } from '../xds/types';
import { startAutoRegistration } from './autoregistration';
import { openConfigSources } from './config-sources';
import { runDaemon } from './daemon';
import { discoveryProviders } from './discovery-providers';
import { pushOptions, watchPushOptions } from './discovery-options';
import { startIdentity, type DaemonIdentity } from './identity';
import { orchestratorAvailable } from './orchestrator';
import { SecretAccessReviews } from './secret-access';
import { startWriters } from './writers';
import { proxyNacks } from './gateway-controllers';
import { controlPlaneIdentifier, debugAccessDenied, debugGenerators, isDebugType, TYPE_DEBUG_SYNCZ } from './xds-debug';
import { type DaemonXds, xdsServerHandle } from './xds-handle';

const log = registerScope('model', 'mesh model');

/**
 * --clusterAliases: a proxy that says it is in cluster `alias` (CLUSTER_ID) is treated as in the cluster
 * the alias names (Istio's DiscoveryServer.ClusterAliases).
 */
function withClusterAlias(proxy: Proxy, aliases: Readonly<Record<string, string>>): Proxy {
  const id = proxy.metadata.clusterId;
  const to = id !== undefined ? aliases[id] : undefined;
  return to === undefined ? proxy : { ...proxy, metadata: { ...proxy.metadata, clusterId: to } };
}

interface AdsParts {
  ctx: RunContext;
  env: EnvTable;
  store: ConfigStore;
  security: DaemonSecurity;
  identity: DaemonIdentity;
  reviews: SecretAccessReviews | undefined;
  hooks: ConnectionHooks | undefined;
  /** The push controller's current push context and debug push (the controller is made once the server exists). */
  current: () => PushContext;
  debugPush: () => number;
}

/** The ADS server with the mesh's generators (one table per proxy), the debug types and the daemon's authentication. */
function adsServer(o: AdsParts): { server: AdsServer<PushContext>; xds: DaemonXds } {
  const { ctx, env, identity } = o;
  const clusterAliases = (ctx.flags['clusterAliases'] ?? {}) as Readonly<Record<string, string>>;
  const generatorOptions = {
    ...o.security.generatorOptions,
    nameTable: { multiclusterHeadless: env.bool('ENABLE_MULTICLUSTER_HEADLESS'), dualStack: env.bool('MESH_DUAL_STACK') },
    secrets: {
      secrets: { get: (ns: string, name: string) => o.store.get('Secret', ns, name) },
      authorize: o.reviews ? o.reviews.authorize : () => true,
    },
  };
  // A proxy's generator table depends only on the proxy, so it is made once per proxy.
  const tables = new WeakMap<Proxy, Record<string, Generator<PushContext>>>();
  const debugGens: Record<string, Generator<PushContext>> = debugGenerators<PushContext>({
    connections: () => server.connections(),
    configDump: (id: string): unknown => xds.configDump(id, { includeEds: true, types: [] }),
    debugPage: (name) => xds.debugPage(name),
  });
  const server: AdsServer<PushContext> = new AdsServer<PushContext>({
    ...(o.hooks ? { connectionHooks: o.hooks } : {}),
    controlPlaneIdentifier: controlPlaneIdentifier(ctx.env['POD_NAME'] || os.hostname()),
    controlPlaneTypes: new Set([TYPE_DEBUG_SYNCZ]),
    generators: (proxy, typeUrl): Generator<PushContext> | undefined => {
      if (isDebugType(typeUrl)) return debugGens[typeUrl];
      let t = tables.get(proxy);
      if (!t) tables.set(proxy, (t = generatorsFor(proxy, generatorOptions) as Record<string, Generator<PushContext>>));
      return t[typeUrl];
    },
    parseNode: (node) => withClusterAlias(proxyFromNode(node), clusterAliases),
    pushContext: o.current,
    settings: adsSettingsFromEnv(ctx.env),
    // Istio: with XDS_AUTH the xDS server uses the CA's authenticators.
    authenticate: identity.authenticateXds,
    authorizeRequest: (c, typeUrl) => debugAccessDenied(c, typeUrl, ctx.flags['namespace'] as string),
  });
  const xds = xdsServerHandle(server, o.debugPush);
  return { server, xds };
}

function daemonSecurity(env: NodeJS.ProcessEnv): DaemonSecurity {
  try {
    return createDaemonSecurity(env);
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
}

export const run: Handler = async (ctx) => {
  // Config sources validate EnvoyFilters as they load them.
  await loadEnvoyFilterTypes();
  const env = new EnvTable(ctx.program.env, ctx.env);
  const closers = new Closers();
  return closers.unwindOnError(async () => {
    const sources = await openConfigSources(ctx, env, closers);
    const { store, orchestrator, registry } = sources;
    const options = pushOptions(ctx, env);
    const security = closers.closing(daemonSecurity(ctx.env));
    const identity = closers.closing(await startIdentity({ ctx, env, orchestrator: orchestratorAvailable(ctx) }));
    options.trustDomain = identity.trustDomain;
    // The controllers that write (root ConfigMaps, webhook configurations, untainting) and the injector.
    enableQueueMetrics(env.bool('MESH_ENABLE_CONTROLLER_QUEUE_METRICS'));
    // The ADS server is made below; the gateway status writer reads its proxies' NACKs once it exists.
    let adsHandle: DaemonXds | undefined;
    const writers = await startWriters({
      ctx,
      env,
      ...(orchestrator ? { orchestrator } : {}),
      identity,
      ...(sources.gatewayApi ? { gatewayApi: sources.gatewayApi, gatewayNacks: () => proxyNacks(adsHandle) } : {}),
    });
    closers.add(() => writers.stop());
    // WorkloadEntry auto-registration and health of workloads outside the cluster (every replica, its own proxies).
    const wle = startAutoRegistration({ ctx, env, store, client: orchestrator?.client });
    closers.add(() => wle.stop());
    // Credentials: with a cluster, reading a key pair needs the right to list Secrets (SubjectAccessReview);
    // from files alone there is no such right to ask about, and a proxy reads its own namespace's.
    const reviews = orchestrator ? new SecretAccessReviews(orchestrator.client, (ns) => pushes.onSecret([ALL_SECRETS_OF(ns)])) : undefined;
    const parts = { ctx, env, store, security, identity, reviews, hooks: wle.hooks };
    const { server, xds } = adsServer({ ...parts, current: () => pushes.current(), debugPush: () => pushes.onDebug() });
    adsHandle = xds;
    const cache = new XdsCache(xdsCacheSettingsFromEnv(ctx.env));
    const pushes = closers.closing(new PushController({ server, store, registry, options, cache, prefetchJwks: security.prefetch }));
    security.onKeysChanged(() => pushes.onKeysChanged());
    closers.add(store.subscribe((events) => pushes.onConfig(events)));
    closers.add(watchPushOptions(ctx, (changes) => pushes.onMeshConfig(changes)));
    closers.add(registry.subscribe((ev) => pushes.onRegistry(ev)));
    store.whenSynced().then(
      () => pushes.onSynced(),
      (e: unknown) => log.error(`config source failed to sync: ${(e as Error).message}`),
    );
    return runDaemon(ctx, discoveryProviders({ ...sources, pushes, xds, identity, writers, closers }));
  });
};
