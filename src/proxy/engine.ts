// The data-plane engine: bootstrap → static clusters and listeners, admin API, ADS (CDS → EDS, then
// LDS → RDS/SDS) with Envoy's initialisation order, and the server states the agent watches
// (PRE_INITIALIZING → INITIALIZING → LIVE; DRAINING after /healthcheck/fail).
import path from 'node:path';
import { create, toBinary, toJson, type Registry } from '@bufbuild/protobuf';
import { DurationSchema } from '@bufbuild/protobuf/wkt';
import * as grpc from '@grpc/grpc-js';
import { ServerInfoSchema, ServerInfo_State, CommandLineOptions_DrainStrategy, CommandLineOptions_IpVersion } from '../gen/envoy/admin/v3/server_info_pb';
import { BootstrapSchema, type Bootstrap } from '../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { BuildVersionSchema, NodeSchema, type Node } from '../gen/envoy/config/core/v3/base_pb';
import type { ConfigSource } from '../gen/envoy/config/core/v3/config_source_pb';
import type { Cluster } from '../gen/envoy/config/cluster/v3/cluster_pb';
import { UpstreamTlsContextSchema } from '../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { buildInfo } from '../lib/buildinfo';
import { certsJson } from './admin/certs';
import { originalDstAddon, type OriginalDstSource } from '../native/original-dst';
import { configDump } from './admin/config-dump';
import { clustersJson, clustersText, listenersJson, listenersText } from './admin/clusters';
import { AdminServer } from './admin/server';
import { defaultFilterRegistry } from './http/filters/index';
import type { HttpFilterRegistry, UpstreamCall, UpstreamCallResult } from './http/filter-api';
import { perFilterParser } from './http/per-filter';
import { ListenerManager } from './listener/manager';
import { LoggerRegistry, type LogLevel } from './log';
import { compileListStringMatcher } from './matchers/string';
import { ConfigError } from './common/config-error';
import { readDataSource } from './common/data-source';
import { durationToMs } from './common/duration';
import { RouteManager } from './route/rds';
import { StatsStore } from './stats/store';
import { TagProducer } from './stats/tags';
import { SecretManager } from './tls/secrets';
import { ClusterManager } from './upstream/cluster-manager';
import { startUpstreamRequest } from './upstream/pool';
import { dumpTypeRegistry, proxyTypeRegistry } from './registry';
import { engineExtensions } from './extensions';
import { GrpcMux } from './xds/grpc-mux';
import { searcher } from '../lib/re2';
import { joinHostPort } from '../lib/hostport';

export const ENVOY_API_VERSION = '1.34.0';

export interface EngineOptions {
  logLevel?: LogLevel;
  componentLogLevel?: string;
  logFormat?: string;
  /** Where log lines go (default stderr). */
  logWriter?: (line: string) => void;
  concurrency?: number;
  drainTimeS?: number;
  drainStrategy?: 'gradual' | 'immediate';
  parentShutdownTimeS?: number;
  localAddressIpVersion?: 'v4' | 'v6';
  allowUnknownStaticFields?: boolean;
  disableHotRestart?: boolean;
  baseId?: number;
  restartEpoch?: number;
  configPath?: string;
  configYaml?: string;
  serviceCluster?: string;
  serviceNode?: string;
  /** Replaces the bootstrap's admin address (tests use 127.0.0.1:0). */
  adminAddress?: { host: string; port: number };
  /** HTTP filter registry (default: the built-in filters plus whatever was registered there). */
  filters?: HttpFilterRegistry;
  /** Start-up warnings to log (bootstrap sections that were ignored). */
  warnings?: readonly string[];
  /** xDS reconnect backoff (Envoy: 500 ms base, 30 s max). */
  xdsBackoff?: { baseMs: number; maxMs: number };
  /**
   * How captured connections' original destinations are read: default the native addon
   * (SO_ORIGINAL_DST); `false` runs without it (destinations guessed from Host / SNI), as where the
   * addon could not be built.
   */
  originalDst?: OriginalDstSource | false;
  /** Set by an engine worker thread (src/proxy/worker/thread.ts): what the main thread provides. */
  worker?: WorkerSide;
}

/** An engine worker thread's links to the main thread. */
export interface WorkerSide {
  id: number;
  /** A relay mux was made for a config source: `ads`, or the static cluster of an SDS stream. */
  registerMux(key: string, mux: GrpcMux): void;
  /** A descriptor of the main thread's socket for a listener address key. */
  sharedSocket(key: string, listener: string): Promise<number>;
}

/** What the admin API does to the engine, also done in each worker thread on the main thread's word. */
export interface EngineControl {
  drainListeners(o: { graceful: boolean; inboundOnly: boolean }): void;
  healthcheck(fail: boolean): void;
  resetCounters(): void;
  /** Brings server.* gauges (uptime, memory, total_connections) up to date. */
  refreshStats(): void;
}

export type ServerState = 'LIVE' | 'DRAINING' | 'PRE_INITIALIZING' | 'INITIALIZING';

export interface Engine {
  /** Where the admin API listens (undefined without admin in the bootstrap). */
  readonly adminAddress: { host: string; port: number } | undefined;
  readonly stats: StatsStore;
  readonly loggers: LoggerRegistry;
  state(): ServerState;
  /** Resolves when the server is LIVE (CDS/LDS applied, listeners serving). */
  readonly initialized: Promise<void>;
  /** The port a listener is bound to (0 in a bootstrap means an ephemeral port), by listener name. */
  listenerPort(name: string): number | undefined;
  /** Resolves with the exit code when /quitquitquit or close() ends the engine. */
  readonly exited: Promise<number>;
  close(code?: number): Promise<void>;
  readonly control: EngineControl;
  /** Worker threads running besides the main thread (0 with concurrency 1). */
  workerThreads(): number;
}

/** gRPC target and credentials of a static cluster used as a config source. */
function grpcTarget(c: Cluster, where: string): { target: string; credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  const ep = c.loadAssignment?.endpoints[0]?.lbEndpoints[0];
  const a = ep?.hostIdentifier.case === 'endpoint' ? ep.hostIdentifier.value.address?.address : undefined;
  let target: string;
  if (a?.case === 'pipe') target = `unix:${path.resolve(a.value.path)}`;
  else if (a?.case === 'socketAddress' && a.value.portSpecifier.case === 'portValue') {
    const h = a.value.address;
    target = joinHostPort(h, a.value.portSpecifier.value);
  } else throw new ConfigError(`${where}: cluster '${c.name}' has no address to connect to`);
  let credentials = grpc.credentials.createInsecure();
  const options: grpc.ChannelOptions = {};
  const ts = c.transportSocket;
  if (ts?.configType.case === 'typedConfig' && ts.configType.value.typeUrl.endsWith('UpstreamTlsContext')) {
    const u = anyUnpack(ts.configType.value, UpstreamTlsContextSchema);
    const common = u?.commonTlsContext;
    const cert = common?.tlsCertificates[0];
    const vc = common?.validationContextType;
    const ca = vc?.case === 'validationContext' ? readDataSource(vc.value.trustedCa, `${where}.trusted_ca`) : vc?.case === 'combinedValidationContext' ? readDataSource(vc.value.defaultValidationContext?.trustedCa, `${where}.trusted_ca`) : undefined;
    credentials = grpc.credentials.createSsl(ca ?? null, readDataSource(cert?.privateKey, `${where}.private_key`) ?? null, readDataSource(cert?.certificateChain, `${where}.certificate_chain`) ?? null);
    if (u?.sni) options['grpc.ssl_target_name_override'] = u.sni;
  }
  return { target, credentials, options };
}

/** `node <id> with labels {k: v, …}`: how an operator recognises this proxy in a warning. */
function nodeText(node: Node): string {
  const labels = node.metadata?.['LABELS'];
  const entries = labels && typeof labels === 'object' && !Array.isArray(labels) ? Object.entries(labels).map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`) : [];
  return `node ${node.id || '(no id)'} with labels {${entries.sort().join(', ')}}`;
}

/**
 * As Envoy's server does at start (InstanceBase::initialize): the node names this build, whatever the
 * bootstrap said, in xDS requests and in the bootstrap of the config dump (`meshctl pc bootstrap` prints it
 * as "Envoy Version"), with Envoy's BuildVersion metadata keys (the version is the Envoy API we follow), and
 * lists the extensions the engine has, as Envoy lists its own (the daemon reads them: capabilities.ts).
 */
function withUserAgent(n: Node | undefined, filters: HttpFilterRegistry): Node {
  const node = create(NodeSchema, n ?? {});
  node.userAgentName = 'envoy';
  const [majorNumber, minorNumber, patch] = ENVOY_API_VERSION.split('.').map(Number) as [number, number, number];
  const b = buildInfo();
  node.userAgentVersionType = {
    case: 'userAgentBuildVersion',
    value: create(BuildVersionSchema, {
      version: { majorNumber, minorNumber, patch },
      metadata: { 'revision.sha': b.revision, 'revision.status': b.status, 'build.type': 'RELEASE', 'ssl.version': `OpenSSL/${process.versions.openssl}` },
    }),
  };
  if (node.extensions.length === 0) node.extensions = engineExtensions(filters);
  return node;
}

/** Starts the engine. Throws BootstrapError/ConfigError for a configuration it cannot run. */
export async function startEngine(bootstrap: Bootstrap, options: EngineOptions = {}): Promise<Engine> {
  const startTime = Date.now();
  const loggers = new LoggerRegistry(options.logLevel ?? 'info', options.logWriter);
  if (options.logFormat) loggers.setFormat(options.logFormat);
  if (options.componentLogLevel) loggers.applyComponentLevels(options.componentLogLevel);
  const log = loggers.get('main');
  for (const w of options.warnings ?? []) log.warn(w);
  const registry: Registry = proxyTypeRegistry();
  const dumpRegistry: Registry = dumpTypeRegistry();
  const filters = options.filters ?? defaultFilterRegistry();
  const sc = bootstrap.statsConfig;
  const tags = new TagProducer(
    (sc?.statsTags ?? []).map((t) => ({ name: t.tagName, ...(t.tagValue.case === 'regex' ? { regex: t.tagValue.value } : {}), ...(t.tagValue.case === 'fixedValue' ? { fixedValue: t.tagValue.value } : {}) })),
    sc?.useAllDefaultTags ?? true,
  );
  const sm = sc?.statsMatcher?.statsMatcher;
  let visible: ((name: string) => boolean) | undefined;
  if (sm?.case === 'rejectAll' && sm.value) visible = () => false;
  else if (sm?.case === 'inclusionList') visible = compileListStringMatcher(sm.value, 'stats_config.stats_matcher.inclusion_list');
  else if (sm?.case === 'exclusionList') {
    const m = compileListStringMatcher(sm.value, 'stats_config.stats_matcher.exclusion_list');
    visible = (n) => !m(n);
  }
  const stats = new StatsStore(visible);
  const node = withUserAgent(bootstrap.node, filters);
  const drainTimeMs = (options.drainTimeS ?? 600) * 1000;
  let state: ServerState = 'PRE_INITIALIZING';
  let healthFailed = false;
  const server = stats.scope('server.');
  const gLive = server.gauge('live');
  const gState = server.gauge('state');
  const gUptime = server.gauge('uptime');
  const gConcurrency = server.gauge('concurrency');
  const gMemAllocated = server.gauge('memory_allocated');
  const gMemHeap = server.gauge('memory_heap_size');
  const gMemPhysical = server.gauge('memory_physical_size');
  const gTotalConnections = server.gauge('total_connections');
  const gCertExpiry = server.gauge('days_until_first_cert_expiring');
  const gEpoch = server.gauge('hot_restart_epoch');
  server.gauge('version').set(0);
  const worker = options.worker;
  // the main thread serves as worker 0; worker threads make up the rest
  const concurrency = Math.max(1, options.concurrency ?? 1);
  gConcurrency.set(concurrency);
  gEpoch.set(options.restartEpoch ?? 0);
  gCertExpiry.set(2147483647);
  const stateCode = (s: ServerState) => (s === 'LIVE' ? 0 : s === 'DRAINING' ? 1 : s === 'PRE_INITIALIZING' ? 2 : 3);
  const effectiveState = (): ServerState => (state === 'LIVE' && healthFailed ? 'DRAINING' : state);
  const setState = (s: ServerState) => {
    state = s;
    gState.set(stateCode(effectiveState()));
    gLive.set(effectiveState() === 'LIVE' ? 1 : 0);
  };
  setState('PRE_INITIALIZING');

  // config sources: one ADS stream, and SDS streams per static cluster
  const muxes: GrpcMux[] = [];
  let ads: GrpcMux | undefined;
  const staticByName = new Map((bootstrap.staticResources?.clusters ?? []).map((c) => [c.name, c]));
  const backoff = options.xdsBackoff ?? { baseMs: 500, maxMs: 30_000 };
  const dr = bootstrap.dynamicResources;
  let pool: import('./worker/pool').WorkerPool | undefined;
  const relayed = (key: string, m: GrpcMux) => {
    if (worker) worker.registerMux(key, m);
    else pool?.attach(key, m);
    return m;
  };
  if (dr?.adsConfig) {
    const svc = dr.adsConfig.grpcServices[0]!;
    let t: { target: string; credentials: grpc.ChannelCredentials };
    if (svc.targetSpecifier.case === 'envoyGrpc') t = grpcTarget(staticByName.get(svc.targetSpecifier.value.clusterName)!, 'dynamic_resources.ads_config');
    else if (svc.targetSpecifier.case === 'googleGrpc') t = { target: svc.targetSpecifier.value.targetUri, credentials: grpc.credentials.createInsecure() };
    else throw new ConfigError('dynamic_resources.ads_config.grpc_services[0]: envoy_grpc or google_grpc is required');
    ads = new GrpcMux({
      target: t.target,
      credentials: t.credentials,
      node,
      service: 'ads',
      setNodeOnFirstMessageOnly: dr.adsConfig.setNodeOnFirstMessageOnly,
      log: loggers.get('config'),
      controlPlaneStats: stats.scope('control_plane.'),
      typeRegistry: registry,
      backoffBaseMs: backoff.baseMs,
      backoffMaxMs: backoff.maxMs,
      relay: worker !== undefined,
    });
    muxes.push(ads);
  }
  const sdsMuxes = new Map<string, GrpcMux>();
  const resolveMux = (source: ConfigSource, where: string): { key: string; mux: GrpcMux } => {
    const k = source.configSourceSpecifier;
    if (k.case === 'ads') {
      if (!ads) throw new ConfigError(`${where}: ads config source used but dynamic_resources.ads_config is not set`);
      return { key: 'ads', mux: ads };
    }
    if (k.case === 'apiConfigSource') {
      const g = k.value.grpcServices[0];
      if (g?.targetSpecifier.case !== 'envoyGrpc') throw new ConfigError(`${where}.api_config_source: only envoy_grpc services are supported`);
      const name = g.targetSpecifier.value.clusterName;
      const c = staticByName.get(name);
      if (!c) throw new ConfigError(`${where}.api_config_source: envoy.config.core.v3.ApiConfigSource must have a statically defined non-EDS cluster: '${name}' does not exist, was added via api, or is an EDS cluster`);
      let m = sdsMuxes.get(name);
      if (!m) {
        const t = grpcTarget(c, where);
        m = new GrpcMux({ target: t.target, credentials: t.credentials, node, service: 'sds', setNodeOnFirstMessageOnly: k.value.setNodeOnFirstMessageOnly, log: loggers.get('secret'), typeRegistry: registry, backoffBaseMs: backoff.baseMs, backoffMaxMs: backoff.maxMs, relay: worker !== undefined });
        relayed(name, m);
        sdsMuxes.set(name, m);
        muxes.push(m);
      }
      return { key: name, mux: m };
    }
    throw new ConfigError(`${where}: only ADS and gRPC api_config_source are supported for secrets`);
  };
  const secrets = new SecretManager(resolveMux, loggers.get('secret'), stats, bootstrap.staticResources?.secrets ?? []);
  const clusters = new ClusterManager(stats, loggers.get('upstream'), secrets);
  for (const c of bootstrap.staticResources?.clusters ?? []) clusters.addStatic(c);
  const routes: RouteManager = new RouteManager(() => ({ parsePerFilter: perFilterParser(filters, registry), clusterExists: (n) => clusters.has(n) }), loggers.get('router'), stats);
  const upstreamCall = (cluster: string, call: UpstreamCall): Promise<UpstreamCallResult> => callCluster(clusters, cluster, call);
  const addon = options.originalDst === undefined ? originalDstAddon() : options.originalDst ? { ok: true as const, source: options.originalDst } : { ok: false as const, reason: 'disabled for this engine' };
  const listeners = new ListenerManager(
    {
      stats, log: loggers, clusters, routes, filters, typeRegistry: registry, upstreamCall, secrets, serverDraining: () => healthFailed,
      originalDst: addon.ok ? addon.source : undefined,
      ...(addon.ok ? {} : { originalDstMissing: addon.reason }),
      ...(worker ? { sharedSocket: (key: string, name: string) => worker.sharedSocket(key, name) } : {}),
    },
    stats,
    loggers.get('config'),
    drainTimeMs,
    nodeText(node),
  );
  let exitResolve!: (code: number) => void;
  const exited = new Promise<number>((r) => (exitResolve = r));
  let closed = false;
  // admin first: the agent polls /ready while we initialise
  let admin: AdminServer | undefined;
  let adminAddress: { host: string; port: number } | undefined;
  const close = async (code = 0): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const m of muxes) m.close();
    await pool?.close();
    listeners.close();
    clusters.close();
    await admin?.close();
    exitResolve(code);
  };
  const refreshStats = () => {
    gUptime.set(Math.floor((Date.now() - startTime) / 1000));
    const m = process.memoryUsage();
    gMemAllocated.set(m.heapUsed);
    gMemHeap.set(m.heapTotal);
    gMemPhysical.set(m.rss);
    gTotalConnections.set(listeners.activeConnections());
  };
  const control: EngineControl = {
    drainListeners: (o) => {
      listeners.drainListeners({ ...o, drainTimeMs });
      pool?.drainListeners(o);
    },
    healthcheck: (fail) => {
      healthFailed = fail;
      setState(state);
      pool?.healthcheck(fail);
    },
    resetCounters: () => {
      for (const c of stats.allCounters()) c.value = 0;
      pool?.resetCounters();
    },
    refreshStats,
  };
  if (ads) relayed('ads', ads);
  if (!worker && concurrency > 1) {
    const dup = originalDstAddon();
    const dupFd = dup.ok ? dup.source.dupFd : undefined;
    if (!dupFd) {
      log.warn(`concurrency ${concurrency}: running one engine thread: worker threads share listening sockets through the native addon, which ${dup.ok ? 'has no dupFd in this build' : `is not loaded (${dup.reason})`}`);
      gConcurrency.set(1);
    } else {
      const { WorkerPool } = await import('./worker/pool');
      pool = new WorkerPool({
        threads: concurrency - 1,
        bootstrap: toBinary(BootstrapSchema, bootstrap),
        engineOptions: {
          concurrency,
          drainTimeS: options.drainTimeS ?? 600,
          ...(options.logLevel ? { logLevel: options.logLevel } : {}),
          ...(options.componentLogLevel ? { componentLogLevel: options.componentLogLevel } : {}),
          ...(options.logFormat ? { logFormat: options.logFormat } : {}),
          ...(options.drainStrategy ? { drainStrategy: options.drainStrategy } : {}),
          ...(options.parentShutdownTimeS !== undefined ? { parentShutdownTimeS: options.parentShutdownTimeS } : {}),
          ...(options.localAddressIpVersion ? { localAddressIpVersion: options.localAddressIpVersion } : {}),
          ...(options.xdsBackoff ? { xdsBackoff: options.xdsBackoff } : {}),
        },
        log,
        logWriter: options.logWriter ?? ((line) => process.stderr.write(`${line}\n`)),
        shareSocket: (key) => listeners.shareSocket(key, dupFd, 15_000),
        restarts: server.counter('worker_restarts'),
      });
      if (ads) pool.attach('ads', ads);
      for (const [k, m] of sdsMuxes) pool.attach(k, m);
    }
  }
  const adminCfg = bootstrap.admin?.address?.address;
  if (!worker && (options.adminAddress || adminCfg)) {
    admin = new AdminServer({
      stats,
      tags,
      loggers,
      refreshServerStats: refreshStats,
      ...(pool
        ? {
            mergedStats: async () => {
              const { mergeStats } = await import('./worker/merge');
              return mergeStats(stats, await pool!.stats());
            },
            loggingChanged: (q: URLSearchParams) => pool!.logging(q),
          }
        : {}),
      ...(pool && process.env['MESH_ENGINE_WORKER_TEST_HOOKS'] === 'true'
        ? {
            extraRoutes: {
              '/mesh/crash_worker': {
                help: 'test hook: make engine worker thread ?id=N throw (MESH_ENGINE_WORKER_TEST_HOOKS=true)',
                handle: async (q: URLSearchParams) => {
                  pool!.crash(Number(q.get('id') ?? '1'));
                  return 'OK\n';
                },
              },
            },
          }
        : {}),
      state: effectiveState,
      serverInfo: () => {
        const uptime = create(DurationSchema, { seconds: BigInt(Math.floor((Date.now() - startTime) / 1000)) });
        const b = buildInfo();
        const info = create(ServerInfoSchema, {
          version: `${b.revision}/${ENVOY_API_VERSION}/${b.status}/RELEASE/mesh-${b.version}/node${process.versions.node}`,
          state: ServerInfo_State[effectiveState()],
          hotRestartVersion: 'disabled',
          uptimeCurrentEpoch: uptime,
          uptimeAllEpochs: uptime,
          node,
          commandLineOptions: {
            baseId: BigInt(options.baseId ?? 0),
            concurrency,
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
        return toJson(ServerInfoSchema, info, { registry, useProtoFieldName: true, alwaysEmitImplicit: true });
      },
      configDump: (q) => {
        const nameRe = q.get('name_regex');
        return configDump({ bootstrap: { ...bootstrap, node }, startTime, clusters, listeners, routes, secrets }, dumpRegistry, {
          includeEds: q.has('include_eds'),
          ...(q.get('resource') ? { resource: q.get('resource')! } : {}),
          ...(nameRe ? { nameRegex: searcher(nameRe) } : {}),
        });
      },
      certs: () => certsJson([...secrets.contexts].map((c) => c.certsInUse())),
      clustersText: () => clustersText(clusters.all()),
      clustersJson: () => clustersJson(clusters.all(), dumpRegistry),
      listenersText: () => listenersText(listeners),
      listenersJson: () => listenersJson(listeners, dumpRegistry),
      drainListeners: control.drainListeners,
      healthcheck: control.healthcheck,
      quit: () => {
        log.info('shutting down server instance (admin /quitquitquit)');
        void close(0);
      },
      memory: () => {
        const m = process.memoryUsage();
        return { allocated: String(m.heapUsed), heap_size: String(m.heapTotal), pageheap_unmapped: '0', pageheap_free: '0', total_thread_cache: '0', total_physical_bytes: String(m.rss) };
      },
      resetCounters: control.resetCounters,
    });
    let addr: { host: string; port: number } | { path: string };
    if (options.adminAddress) addr = options.adminAddress;
    else if (adminCfg?.case === 'socketAddress') addr = { host: adminCfg.value.address, port: adminCfg.value.portSpecifier.case === 'portValue' ? adminCfg.value.portSpecifier.value : 0 };
    else addr = { path: adminCfg?.case === 'pipe' ? adminCfg.value.path : '' };
    try {
      const bound = await admin.listen(addr);
      if ('port' in bound) adminAddress = bound;
      log.info(`admin address: ${'port' in bound ? `${bound.host}:${bound.port}` : bound.path}`);
    } catch (e) {
      await close(1);
      throw new ConfigError(`cannot bind admin address: ${(e as Error).message}`);
    }
  }

  // static listeners bind now and serve once the server is initialised
  try {
    for (const l of bootstrap.staticResources?.listeners ?? []) await listeners.addStatic(l);
  } catch (e) {
    await close(1);
    throw e;
  }

  const initialized = (async () => {
    setState('INITIALIZING');
    await clusters.initializeStatics();
    const fetchTimeout = (cs: ConfigSource | undefined) => durationToMs(cs?.initialFetchTimeout) ?? 15_000;
    const waitFirst = (subscribe: (onFirst: () => void) => void, cs: ConfigSource | undefined, what: string) =>
      new Promise<void>((resolve) => {
        const ms = fetchTimeout(cs);
        const t = ms > 0 ? setTimeout(() => {
          log.warn(`${what}: initial fetch timed out after ${ms}ms; continuing initialization`);
          resolve();
        }, ms) : undefined;
        subscribe(() => {
          if (t) clearTimeout(t);
          resolve();
        });
      });
    if (dr?.cdsConfig && ads) {
      await waitFirst((done) => {
        clusters.onFirstCds = () => void clusters.whenWarm().then(done);
        clusters.subscribeCds(ads!);
        ads!.start();
      }, dr.cdsConfig, 'CDS');
    }
    if (ads) routes.setMux(ads);
    if (dr?.ldsConfig && ads) {
      await waitFirst((done) => {
        listeners.onFirstLds = () => void listeners.whenWarm().then(done);
        listeners.subscribeLds(ads!);
        ads!.start();
      }, dr.ldsConfig, 'LDS');
    }
    ads?.start();
    if (closed) return;
    pool?.start();
    listeners.startWorkers();
    setState('LIVE');
    log.info('all dependencies initialized. starting workers');
  })();

  return {
    get adminAddress() {
      return adminAddress;
    },
    stats,
    loggers,
    state: effectiveState,
    initialized,
    listenerPort: (name) => listeners.list().find((l) => l.name === name)?.boundPort,
    exited,
    close,
    control,
    workerThreads: () => pool?.running() ?? 0,
  };
}

/** A filter's request through a cluster (remote JWKS and the like): buffered, one attempt. */
export function callCluster(clusters: ClusterManager, name: string, call: UpstreamCall): Promise<UpstreamCallResult> {
  const c = clusters.get(name);
  if (!c) return Promise.reject(new Error(`cluster '${name}' not found`));
  const host = c.chooseHost({});
  if (!host) return Promise.reject(new Error(`no healthy upstream in cluster '${name}'`));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      h.abort();
      reject(new Error('upstream request timeout'));
    }, call.timeoutMs);
    const h = startUpstreamRequest(c, host, c.protocol === 'http2' ? 'http2' : 'http1', { method: call.method, path: call.path, authority: call.authority, scheme: c.transportFor(host).tls ? 'https' : 'http', headers: { ...(call.headers ?? {}) } }, {
      onResponse: (r) => {
        const chunks: Buffer[] = [];
        r.body.read({
          onData: (d) => chunks.push(d),
          onEnd: () => {
            clearTimeout(timer);
            resolve({ status: r.status, headers: r.headers, body: Buffer.concat(chunks) });
          },
          onAbort: (detail) => {
            clearTimeout(timer);
            reject(new Error(detail));
          },
        });
      },
      onError: (_k, detail) => {
        clearTimeout(timer);
        reject(new Error(detail));
      },
    });
    h.body.end(call.body);
  });
}
