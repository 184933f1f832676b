// The engine's admin API (Envoy's /stats, /server_info, /config_dump, /clusters, /listeners, /certs, /ready,
// /healthcheck/*, /drain_listeners, /quitquitquit…): the handlers over the engine's managers and state, and
// the bind to the bootstrap's (or the starter's) admin address. The main thread only; workers have none.
import { create, toJson, type JsonValue, type Registry } from '@bufbuild/protobuf';
import { DurationSchema } from '@bufbuild/protobuf/wkt';
import {
  ServerInfoSchema,
  ServerInfo_State,
  CommandLineOptions_DrainStrategy,
  CommandLineOptions_IpVersion,
} from '../../gen/envoy/admin/v3/server_info_pb';
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import type { Node } from '../../gen/envoy/config/core/v3/base_pb';
import { searcher } from '../../lib/re2';
import { certsJson } from '../admin/certs';
import { clustersJson, clustersText, listenersJson, listenersText } from '../admin/clusters';
import { configDump } from '../admin/config-dump';
import { AdminServer, type AdminHandlers } from '../admin/server';
import { ConfigError } from '../common/config-error';
import type { Logger, LoggerRegistry } from '../log';
import type { StatsStore } from '../stats/store';
import type { TagProducer } from '../stats/tags';
import type { Managers } from './managers';
import { engineVersion } from './node';
import type { EngineOptions } from './options';
import type { ServerStatus } from './state';
import type { EngineControl } from './types';
import type { WorkerPool } from './worker/pool';

export interface AdminContext extends Managers {
  bootstrap: Bootstrap;
  options: EngineOptions;
  node: Node;
  startTime: number;
  concurrency: number;
  stats: StatsStore;
  tags: TagProducer;
  loggers: LoggerRegistry;
  log: Logger;
  registry: Registry;
  dumpRegistry: Registry;
  status: ServerStatus;
  control: EngineControl;
  pool: WorkerPool | undefined;
  /** /quitquitquit. */
  quit: () => void;
}

/** Envoy's /server_info: version, state, uptime, node and the command-line options the engine runs with. */
function serverInfo(x: AdminContext): JsonValue {
  const { options } = x;
  const uptime = create(DurationSchema, { seconds: BigInt(x.status.uptimeS()) });
  const info = create(ServerInfoSchema, {
    version: engineVersion(),
    state: ServerInfo_State[x.status.effective()],
    hotRestartVersion: 'disabled',
    uptimeCurrentEpoch: uptime,
    uptimeAllEpochs: uptime,
    node: x.node,
    commandLineOptions: {
      baseId: BigInt(options.baseId ?? 0),
      concurrency: x.concurrency,
      configPath: options.configPath ?? '',
      configYaml: options.configYaml ?? '',
      allowUnknownStaticFields: options.allowUnknownStaticFields ?? false,
      logLevel: options.logLevel ?? 'info',
      componentLogLevel: options.componentLogLevel ?? '',
      logFormat: options.logFormat ?? '',
      serviceCluster: options.serviceCluster ?? '',
      serviceNode: options.serviceNode ?? '',
      drainTime: create(DurationSchema, { seconds: BigInt(options.drainTimeS ?? 600) }),
      drainStrategy: options.drainStrategy === 'immediate' ? CommandLineOptions_DrainStrategy.Immediate : CommandLineOptions_DrainStrategy.Gradual,
      parentShutdownTime: create(DurationSchema, { seconds: BigInt(options.parentShutdownTimeS ?? 900) }),
      disableHotRestart: options.disableHotRestart ?? false,
      restartEpoch: options.restartEpoch ?? 0,
      localAddressIpVersion: options.localAddressIpVersion === 'v6' ? CommandLineOptions_IpVersion.v6 : CommandLineOptions_IpVersion.v4,
    },
  });
  // Envoy prints server_info with primitive defaults (state LIVE is enum value 0)
  return toJson(ServerInfoSchema, info, { registry: x.registry, useProtoFieldName: true, alwaysEmitImplicit: true });
}

/** With worker threads: /stats merges every thread's, /logging reaches them, and the crash test hook. */
function workerHandlers(stats: StatsStore, pool: WorkerPool | undefined): Partial<AdminHandlers> {
  if (!pool) return {};
  return {
    mergedStats: (() => {
      // one merged view kept across scrapes, one round of worker answers at a time (see WorkerPool.stats)
      let merger: import('./worker/merge').StatsMerger | undefined;
      let last: Promise<unknown> = Promise.resolve();
      const round = async () => {
        const { StatsMerger } = await import('./worker/merge');
        merger ??= new StatsMerger();
        return merger.merge(stats, await pool.stats());
      };
      return () => {
        const next = last.then(round, round);
        last = next.catch(() => undefined);
        return next;
      };
    })(),
    loggingChanged: (q: URLSearchParams) => pool.logging(q),
    ...(process.env['MESH_ENGINE_WORKER_TEST_HOOKS'] === 'true'
      ? {
          extraRoutes: {
            '/mesh/crash_worker': {
              help: 'test hook: make engine worker thread ?id=N throw (MESH_ENGINE_WORKER_TEST_HOOKS=true)',
              handle: async (q: URLSearchParams) => {
                pool.crash(Number(q.get('id') ?? '1'));
                return 'OK\n';
              },
            },
          },
        }
      : {}),
  };
}

/** The admin server over the engine (not yet listening). */
export function adminServer(x: AdminContext): AdminServer {
  const { clusters, listeners, routes, secrets, control } = x;
  return new AdminServer({
    stats: x.stats,
    tags: x.tags,
    loggers: x.loggers,
    refreshServerStats: control.refreshStats,
    ...workerHandlers(x.stats, x.pool),
    state: () => x.status.effective(),
    serverInfo: () => serverInfo(x),
    configDump: (q) => {
      const nameRe = q.get('name_regex');
      return configDump(
        { bootstrap: { ...x.bootstrap, node: x.node }, startTime: x.startTime, clusters, listeners, routes, secrets },
        x.dumpRegistry,
        {
          includeEds: q.has('include_eds'),
          ...(q.get('resource') ? { resource: q.get('resource')! } : {}),
          ...(nameRe ? { nameRegex: searcher(nameRe) } : {}),
        },
      );
    },
    certs: () => certsJson([...secrets.contexts].map((c) => c.certsInUse())),
    clustersText: () => clustersText(clusters.all()),
    clustersJson: () => clustersJson(clusters.all(), x.dumpRegistry),
    listenersText: () => listenersText(listeners),
    listenersJson: () => listenersJson(listeners, x.dumpRegistry),
    drainListeners: control.drainListeners,
    healthcheck: control.healthcheck,
    quit: x.quit,
    memory: () => {
      const m = process.memoryUsage();
      return {
        allocated: String(m.heapUsed),
        heap_size: String(m.heapTotal),
        pageheap_unmapped: '0',
        pageheap_free: '0',
        total_thread_cache: '0',
        total_physical_bytes: String(m.rss),
      };
    },
    resetCounters: control.resetCounters,
  });
}

/** Binds the admin server to the starter's address, else the bootstrap's; undefined for a pipe. */
export async function bindAdmin(
  admin: AdminServer,
  bootstrap: Bootstrap,
  options: EngineOptions,
  log: Logger,
): Promise<{ host: string; port: number } | undefined> {
  const adminCfg = bootstrap.admin?.address?.address;
  let addr: { host: string; port: number } | { path: string };
  if (options.adminAddress) addr = options.adminAddress;
  else if (adminCfg?.case === 'socketAddress')
    addr = { host: adminCfg.value.address, port: adminCfg.value.portSpecifier.case === 'portValue' ? adminCfg.value.portSpecifier.value : 0 };
  else addr = { path: adminCfg?.case === 'pipe' ? adminCfg.value.path : '' };
  try {
    const bound = await admin.listen(addr);
    log.info(`admin address: ${'port' in bound ? `${bound.host}:${bound.port}` : bound.path}`);
    return 'port' in bound ? bound : undefined;
  } catch (e) {
    throw new ConfigError(`cannot bind admin address: ${(e as Error).message}`);
  }
}
