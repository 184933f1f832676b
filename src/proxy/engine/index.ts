// The data-plane engine: bootstrap → static clusters and listeners, admin API, ADS (CDS → EDS, then
// LDS → RDS/SDS) with Envoy's initialisation order, and the server states the agent watches
// (PRE_INITIALIZING → INITIALIZING → LIVE; DRAINING after /healthcheck/fail). The parts live beside this
// file: state.ts (stats and server state), sources.ts (ADS/SDS streams), managers.ts, workers.ts, admin.ts, init.ts.
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import type { AdminServer } from '../admin/server';
import { defaultFilterRegistry } from '../http/filters/index';
import { LoggerRegistry } from '../log';
import { dumpTypeRegistry, proxyTypeRegistry } from '../registry';
import type { StatsStore } from '../stats/store';
import { adminServer, bindAdmin } from './admin';
import { initialize } from './init';
import { buildManagers, type Managers } from './managers';
import { nodeText, withUserAgent } from './node';
import type { EngineOptions } from './options';
import { ConfigSources } from './sources';
import { engineStats, ServerStatus } from './state';
import type { Engine, EngineControl } from './types';
import type { WorkerPool } from './worker/pool';
import { startWorkerPool } from './workers';

export type { EngineOptions } from './options';
export type { Engine, EngineControl, ServerState } from './types';

function engineLoggers(options: EngineOptions): LoggerRegistry {
  const loggers = new LoggerRegistry(options.logLevel ?? 'info', options.logWriter);
  if (options.logFormat) loggers.setFormat(options.logFormat);
  if (options.componentLogLevel) loggers.applyComponentLevels(options.componentLogLevel);
  return loggers;
}

/** What the admin API does, here and (through the pool) in every worker thread. */
function engineControl(m: Managers, stats: StatsStore, status: ServerStatus, drainTimeMs: number, pool: () => WorkerPool | undefined): EngineControl {
  return {
    drainListeners: (o) => {
      m.listeners.drainListeners({ ...o, drainTimeMs });
      pool()?.drainListeners(o);
    },
    healthcheck: (fail) => {
      status.failHealth(fail);
      pool()?.healthcheck(fail);
    },
    resetCounters: () => {
      for (const c of stats.allCounters()) c.value = 0;
      pool()?.resetCounters();
    },
    refreshStats: () => status.refresh(m.listeners.activeConnections()),
  };
}

/** The engine's parts before anything listens: loggers, stats, server state, xDS sources and the managers. */
function assemble(bootstrap: Bootstrap, options: EngineOptions) {
  const startTime = Date.now();
  const loggers = engineLoggers(options);
  const log = loggers.get('main');
  for (const w of options.warnings ?? []) log.warn(w);
  const registry = proxyTypeRegistry();
  const filters = options.filters ?? defaultFilterRegistry();
  const { stats, tags } = engineStats(bootstrap);
  const node = withUserAgent(bootstrap.node, filters);
  const drainTimeMs = (options.drainTimeS ?? 600) * 1000;
  // the main thread serves as worker 0; worker threads make up the rest
  const concurrency = Math.max(1, options.concurrency ?? 1);
  const status = new ServerStatus(stats, startTime, concurrency, options.restartEpoch ?? 0);
  const sources = new ConfigSources(bootstrap, {
    node,
    loggers,
    stats,
    typeRegistry: registry,
    backoff: options.xdsBackoff ?? { baseMs: 500, maxMs: 30_000 },
    relay: options.worker !== undefined,
  });
  const worker = options.worker;
  if (worker) sources.relayTo = (key, m) => worker.registerMux(key, m);
  const m = buildManagers(bootstrap, {
    options,
    stats,
    loggers,
    registry,
    filters,
    sources,
    drainTimeMs,
    nodeText: nodeText(node),
    serverDraining: () => status.healthFailed,
  });
  return { startTime, loggers, log, registry, stats, tags, node, drainTimeMs, concurrency, status, sources, m };
}

type Parts = ReturnType<typeof assemble>;

/** The admin server over the engine's parts (not yet listening). */
function engineAdmin(
  bootstrap: Bootstrap,
  options: EngineOptions,
  p: Parts,
  extra: { control: EngineControl; pool: WorkerPool | undefined; quit: () => void },
): AdminServer {
  return adminServer({
    ...p.m,
    bootstrap,
    options,
    node: p.node,
    startTime: p.startTime,
    concurrency: p.concurrency,
    stats: p.stats,
    tags: p.tags,
    loggers: p.loggers,
    log: p.log,
    registry: p.registry,
    dumpRegistry: dumpTypeRegistry(),
    status: p.status,
    ...extra,
  });
}

/** Starts the engine. Throws BootstrapError/ConfigError for a configuration it cannot run. */
export async function startEngine(bootstrap: Bootstrap, options: EngineOptions = {}): Promise<Engine> {
  const p = assemble(bootstrap, options);
  const { m, sources, status, stats, log } = p;
  const worker = options.worker;
  let pool: WorkerPool | undefined;
  let admin: AdminServer | undefined;
  let exitResolve!: (code: number) => void;
  const exited = new Promise<number>((r) => (exitResolve = r));
  let closed = false;
  const close = async (code = 0): Promise<void> => {
    if (closed) return;
    closed = true;
    sources.close();
    await pool?.close();
    m.listeners.close();
    m.clusters.close();
    await admin?.close();
    exitResolve(code);
  };
  const control = engineControl(m, stats, status, p.drainTimeMs, () => pool);
  if (worker && sources.ads) worker.registerMux('ads', sources.ads);
  if (!worker && p.concurrency > 1) {
    pool = await startWorkerPool(bootstrap, options, p.concurrency, m.listeners, status, log);
    if (pool) sources.relayAllTo((key, mux) => pool!.attach(key, mux));
  }
  let adminAddress: { host: string; port: number } | undefined;
  try {
    // admin first: the agent polls /ready while we initialise
    if (!worker && (options.adminAddress || bootstrap.admin?.address?.address)) {
      const quit = () => {
        log.info('shutting down server instance (admin /quitquitquit)');
        void close(0);
      };
      admin = engineAdmin(bootstrap, options, p, { control, pool, quit });
      adminAddress = await bindAdmin(admin, bootstrap, options, log);
    }
    // static listeners bind now and serve once the server is initialised
    for (const l of bootstrap.staticResources?.listeners ?? []) await m.listeners.addStatic(l);
  } catch (e) {
    await close(1);
    throw e;
  }
  const initialized = initialize(bootstrap, { ...m, sources, status, log, pool, closed: () => closed });
  return {
    get adminAddress() {
      return adminAddress;
    },
    stats,
    loggers: p.loggers,
    state: () => status.effective(),
    initialized,
    listenerPort: (name) => m.listeners.list().find((l) => l.name === name)?.boundPort,
    exited,
    close,
    control,
    workerThreads: () => pool?.running() ?? 0,
  };
}
