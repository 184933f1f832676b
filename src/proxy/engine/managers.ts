// The engine's resource managers, wired to one another as Envoy's server wires its cluster, listener, route
// and secret managers: secrets first (clusters and listeners reference them), static clusters added at once.
import type { Registry } from '@bufbuild/protobuf';
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { originalDstAddon } from '../../native/original-dst';
import type { ClusterCall } from '../common/cluster-call';
import type { HttpFilterRegistry } from '../http/filter-api';
import { perFilterParser } from '../http/per-filter';
import { ListenerManager } from '../listener/manager';
import type { LoggerRegistry } from '../log';
import { RouteManager } from '../route/rds';
import type { StatsStore } from '../stats/store';
import { SecretManager } from '../tls/secrets';
import { localInfoOf } from '../common/local-info';
import { engineVersion } from './node';
import { ClusterManager } from '../upstream/cluster-manager';
import { callCluster } from './call-cluster';
import type { EngineOptions } from './options';
import type { ConfigSources } from './sources';

export interface Managers {
  secrets: SecretManager;
  clusters: ClusterManager;
  routes: RouteManager;
  listeners: ListenerManager;
}

export interface ManagersContext {
  options: EngineOptions;
  stats: StatsStore;
  loggers: LoggerRegistry;
  registry: Registry;
  filters: HttpFilterRegistry;
  sources: ConfigSources;
  drainTimeMs: number;
  /** `node <id> with labels …`, for the listener manager's warnings. */
  nodeText: string;
  serverDraining: () => boolean;
}

export function buildManagers(bootstrap: Bootstrap, x: ManagersContext): Managers {
  const { options, stats, loggers, registry, filters } = x;
  const secrets = new SecretManager(x.sources.resolve, loggers.get('secret'), stats, bootstrap.staticResources?.secrets ?? []);
  // a worker thread builds an EDS cluster on first use; the main thread builds all (it ACKs and dumps them)
  const clusters = new ClusterManager(stats, loggers.get('upstream'), secrets, options.worker !== undefined);
  for (const c of bootstrap.staticResources?.clusters ?? []) clusters.addStatic(c);
  // a worker thread compiles a virtual host on its first request without validating the configuration first: it
  // only gets what the main thread accepted
  const routeLog = loggers.get('router');
  const routes: RouteManager = new RouteManager(
    () => ({
      parsePerFilter: perFilterParser(filters, registry),
      clusterExists: (n) => clusters.has(n),
      validate: options.worker === undefined,
      onLazyError: (e) => routeLog.error(`virtual host not compiled, it matches no request: ${e.message}`),
    }),
    routeLog,
    stats,
  );
  const upstreamCall: ClusterCall = (cluster, call) => callCluster(clusters, cluster, call);
  const addon =
    options.originalDst === undefined
      ? originalDstAddon()
      : options.originalDst
        ? { ok: true as const, source: options.originalDst }
        : { ok: false as const, reason: 'disabled for this engine' };
  const worker = options.worker;
  const listeners = new ListenerManager(
    {
      stats,
      log: loggers,
      clusters,
      routes,
      filters,
      typeRegistry: registry,
      upstreamCall,
      local: localInfoOf(bootstrap.node, engineVersion()),
      secrets,
      serverDraining: x.serverDraining,
      originalDst: addon.ok ? addon.source : undefined,
      ...(addon.ok ? {} : { originalDstMissing: addon.reason }),
      ...(worker ? { sharedSocket: (key: string, name: string) => worker.sharedSocket(key, name) } : {}),
    },
    stats,
    loggers.get('config'),
    x.drainTimeMs,
    x.nodeText,
  );
  return { secrets, clusters, routes, listeners };
}
