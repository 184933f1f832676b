// The discovery daemon's shell: every listener of spec doc 1 §4.2 started from the parsed flags, the HTTP
// surfaces on them (readiness, debug, metrics, version, validation webhook, ControlZ), and the shutdown
// sequence of istiod (stop accepting, let in-flight pushes finish, close within --shutdownDuration).
// The work itself — config, registries, pushes — comes in through MeshdProviders.
import * as grpc from '@grpc/grpc-js';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CommandError, flagBool, flagList, flagNumber, flagString, type RunContext } from '../cli/context';
import { EnvTable } from '../lib/env';
import { formatDurationMs } from '../lib/duration';
import { registerScope } from '../lib/log';
import { CTRLZ_FLAG, controlzAddress, startControlZ } from '../serve/ctrlz/server';
import { DebugPages } from './debug/handlers';
import { Router, writeText } from '../serve/router';
import {
  type BoundAddress,
  grpcServerOptions,
  type GrpcServerSettings,
  ListenError,
  type Listener,
  type ListenerName,
  startGrpcListener,
  startHttpListener,
} from '../serve/listeners';
import { clearDaemonMetrics, metricsHandler, recordDaemonMetrics, versionHandler } from './monitoring';
import type { MeshdProviders, Readiness } from './providers';
import {
  checkCompliancePolicy,
  enforceCompliance,
  loadTlsMaterial,
  staticTlsSource,
  TlsConfigError,
  type TlsFiles,
  type TlsSource,
} from '../serve/tls';
import { validateHandler } from './webhook';

const log = registerScope('default');

/** Everything the daemon shell takes from flags and environment. Durations in ms. */
export interface DaemonOptions {
  grpcAddr: string;
  secureGRPCAddr: string;
  httpAddr: string;
  httpsAddr: string;
  monitoringAddr: string;
  ctrlzAddress: string;
  ctrlzPort: number;
  grpc: GrpcServerSettings;
  tls: TlsFiles & { cipherSuites: readonly string[] };
  shutdownDurationMs: number;
  profile: boolean;
  /** ENABLE_DEBUG_ON_HTTP: the debug pages on --httpAddr (they stay on --monitoringAddr). */
  enableDebugOnHttp: boolean;
  /** UNSAFE_ENABLE_ADMIN_ENDPOINTS. */
  unsafeAdminEndpoints: boolean;
  /** METRICS_LOCALHOST_ACCESS_ONLY. */
  metricsLocalhostOnly: boolean;
  /** COMPLIANCE_POLICY: applied over every TLS server setting. */
  compliancePolicy?: string;
}

/** Istio's keepalive MaxServerConnectionAgeGrace default (no flag sets it). */
const CONNECTION_AGE_GRACE_MS = 10_000;

export function daemonOptionsFromContext(ctx: RunContext): DaemonOptions {
  const env = new EnvTable(ctx.program.env, ctx.env);
  return {
    grpcAddr: flagString(ctx, 'grpcAddr'),
    secureGRPCAddr: flagString(ctx, 'secureGRPCAddr'),
    httpAddr: flagString(ctx, 'httpAddr'),
    httpsAddr: flagString(ctx, 'httpsAddr'),
    monitoringAddr: flagString(ctx, 'monitoringAddr'),
    ctrlzAddress: flagString(ctx, 'ctrlz_address'),
    ctrlzPort: flagNumber(ctx, 'ctrlz_port'),
    grpc: {
      keepaliveIntervalMs: flagNumber(ctx, 'keepaliveInterval'),
      keepaliveTimeoutMs: flagNumber(ctx, 'keepaliveTimeout'),
      maxServerConnectionAgeMs: flagNumber(ctx, 'keepaliveMaxServerConnectionAge'),
      maxServerConnectionAgeGraceMs: CONNECTION_AGE_GRACE_MS,
      maxConcurrentStreams: env.int('MESH_GPRC_MAXSTREAMS'),
      maxRecvMsgSize: env.int('MESH_GPRC_MAXRECVMSGSIZE'),
    },
    tls: {
      certFile: flagString(ctx, 'tlsCertFile'),
      keyFile: flagString(ctx, 'tlsKeyFile'),
      caCertFile: flagString(ctx, 'caCertFile'),
      cipherSuites: flagList(ctx, 'tls-cipher-suites'),
    },
    shutdownDurationMs: flagNumber(ctx, 'shutdownDuration'),
    profile: flagBool(ctx, 'profile'),
    enableDebugOnHttp: env.bool('ENABLE_DEBUG_ON_HTTP'),
    unsafeAdminEndpoints: env.bool('UNSAFE_ENABLE_ADMIN_ENDPOINTS'),
    metricsLocalhostOnly: env.bool('METRICS_LOCALHOST_ACCESS_ONLY'),
    compliancePolicy: env.string('COMPLIANCE_POLICY'),
  };
}

export interface Daemon {
  /** Where each started listener is bound (ephemeral ports resolved). */
  readonly addresses: Readonly<Partial<Record<ListenerName, BoundAddress>>>;
  /** What `/ready` answers. */
  readiness(): Readiness;
  /** Graceful shutdown within --shutdownDuration; idempotent, resolves when everything is closed. */
  shutdown(reason: string): Promise<void>;
  /** Resolves once shut down (whoever started it). */
  readonly stopped: Promise<void>;
}

export interface DaemonHooks {
  /** Called when shutdown begins (signal, ControlZ exit, or shutdown()). */
  onShutdown?(reason: string, deadline: number): void;
}

/** A start-up failure the user must act on (bad address, port in use, unreadable certificate). */
export class DaemonStartError extends Error {
  override name = 'DaemonStartError';
}

const PURPOSE: Readonly<Record<ListenerName, string>> = {
  grpc: 'discovery gRPC',
  secureGrpc: 'secure discovery gRPC',
  http: 'discovery HTTP',
  https: 'webhook HTTPS',
  monitoring: 'monitoring HTTP',
  ctrlz: 'ControlZ',
};

const LISTENERS_STARTING = 'listeners are still starting';

function readyHandler(readiness: () => Readiness) {
  let lastReason: string | undefined;
  return (_req: IncomingMessage, res: ServerResponse): void => {
    const r = readiness();
    if (r.ready) {
      lastReason = undefined;
      res.writeHead(200).end();
      return;
    }
    // Probes poll this: a reason is worth a warning once, not at every poll, and the listeners' own start
    // (a few milliseconds) not at all.
    if (r.reason !== lastReason && r.reason !== LISTENERS_STARTING) log.warn(`not ready: ${r.reason}`);
    else log.debug(`not ready: ${r.reason}`);
    lastReason = r.reason;
    writeText(res, 503, `not ready: ${r.reason}\n`);
  };
}

/** The TLS of the secure listeners: the identity's certificate (rotated) or the flag files', under COMPLIANCE_POLICY. */
function serverTls(options: DaemonOptions, providers: MeshdProviders): TlsSource | undefined {
  try {
    checkCompliancePolicy(options.compliancePolicy ?? '');
    const files = loadTlsMaterial(options.tls, options.tls.cipherSuites);
    const source = providers.identity ? providers.identity.serverTls(files) : files && staticTlsSource(files);
    return source && compliant(source, options.compliancePolicy ?? '');
  } catch (e) {
    if (e instanceof TlsConfigError) throw new DaemonStartError(e.message);
    throw e;
  }
}

interface Routers {
  http: Router;
  /** The HTTP router itself when --monitoringAddr is empty (monitoring multiplexed on the HTTP listener). */
  monitoring: Router;
}

/** `/ready` on the HTTP listener; metrics, version and the debug pages on the monitoring one (and on HTTP with ENABLE_DEBUG_ON_HTTP). */
function daemonRouters(options: DaemonOptions, providers: MeshdProviders, readiness: () => Readiness): Routers {
  const debug = new DebugPages(providers, { profile: options.profile, unsafeAdminEndpoints: options.unsafeAdminEndpoints });
  providers.xds.setDebugPages?.((name) => debug.serveInternal(name));
  const http = new Router().handle('/ready', readyHandler(readiness));
  const monitoringShared = options.monitoringAddr === '';
  const monitoring = monitoringShared ? http : new Router();
  monitoring.handle('/metrics', metricsHandler(options.metricsLocalhostOnly)).handle('/version', versionHandler);
  debug.register(monitoring);
  if (!monitoringShared && options.enableDebugOnHttp) debug.register(http);
  return { http, monitoring };
}

/** What the listeners are started with; `started` records each one. */
interface ListenerStart {
  options: DaemonOptions;
  providers: MeshdProviders;
  routers: Routers;
  tls: TlsSource | undefined;
  /** Why the TLS listeners do not start when `tls` is undefined. */
  noTls: string;
  started(l: Listener): void;
}

/**
 * HTTP first, so the readiness probe answers (503) while the rest starts. An empty --httpAddr is, as for
 * Go's net.Listen, every interface on an automatically chosen port.
 */
async function startHttpListeners({ options, routers, started }: ListenerStart): Promise<void> {
  started(await startHttpListener({ name: 'http', flag: '--httpAddr', address: options.httpAddr, handler: routers.http.listener }));
  if (routers.monitoring === routers.http) {
    log.info(`monitoring is multiplexed on the HTTP listener (--monitoringAddr is empty)`);
    return;
  }
  started(
    await startHttpListener({ name: 'monitoring', flag: '--monitoringAddr', address: options.monitoringAddr, handler: routers.monitoring.listener }),
  );
}

/** Discovery on plain and TLS gRPC; the CA service on the secure server, or on the plain one when there is none (as in Istio). */
async function startGrpcListeners({ options, providers, tls, noTls, started }: ListenerStart): Promise<void> {
  const grpcOptions = grpcServerOptions(options.grpc);
  const secureGrpc = options.secureGRPCAddr !== '' && tls !== undefined;
  if (options.grpcAddr === '') {
    log.info('plain discovery gRPC is off: --grpcAddr is empty (multiplexing gRPC on the HTTP port is not supported)');
  } else {
    const server = new grpc.Server(grpcOptions);
    providers.xds.attach(server, { secure: false });
    if (!secureGrpc) providers.identity?.registerGrpc(server, { secure: false });
    started(await startGrpcListener({ name: 'grpc', flag: '--grpcAddr', address: options.grpcAddr, server }));
  }
  if (options.secureGRPCAddr === '') {
    log.info('secure discovery gRPC is off: --secureGRPCAddr is empty');
  } else if (!tls) {
    log.info(`secure discovery gRPC (--secureGRPCAddr ${options.secureGRPCAddr}) not started: ${noTls}`);
  } else {
    const server = new grpc.Server(grpcOptions);
    providers.xds.attach(server, { secure: true });
    providers.identity?.registerGrpc(server, { secure: true });
    started(await startGrpcListener({ name: 'secureGrpc', flag: '--secureGRPCAddr', address: options.secureGRPCAddr, server, tls }));
  }
}

/** The webhooks (validation, injection) on --httpsAddr. */
async function startHttpsListener({ options, providers, tls, noTls, started }: ListenerStart): Promise<void> {
  if (options.httpsAddr === '') {
    log.info('webhook HTTPS is off: --httpsAddr is empty');
    return;
  }
  if (!tls) {
    log.info(`webhook HTTPS (--httpsAddr ${options.httpsAddr}) not started: ${noTls}`);
    return;
  }
  const validate = validateHandler((obj) => providers.validate(obj));
  const httpsRouter = new Router().handle('/validate', validate).handle('/validate/', validate);
  if (providers.inject) httpsRouter.handle('/inject', providers.inject).handlePrefix('/inject/', providers.inject);
  started(await startHttpListener({ name: 'https', flag: '--httpsAddr', address: options.httpsAddr, handler: httpsRouter.listener, tls }));
}

/** Istio keeps running when ControlZ cannot start (it only logs); so does the daemon. */
async function startCtrlz({ options, started }: ListenerStart, shutdown: (reason: string) => Promise<void>): Promise<void> {
  try {
    started(await startControlZ({ address: options.ctrlzAddress, port: options.ctrlzPort, onExit: () => void shutdown('ControlZ exit request') }));
  } catch (e) {
    if (!(e instanceof ListenError)) throw e;
    log.error(`Unable to start ControlZ: ${e.message}`, { address: controlzAddress(options.ctrlzAddress, options.ctrlzPort), flag: CTRLZ_FLAG });
  }
}

/**
 * istiod's shutdown: stop accepting, let in-flight pushes finish, drain the listeners, then close the
 * providers, all within --shutdownDuration.
 */
async function shutDown(
  options: DaemonOptions,
  providers: MeshdProviders,
  hooks: DaemonHooks,
  listeners: readonly Listener[],
  reason: string,
): Promise<void> {
  const deadline = Date.now() + options.shutdownDurationMs;
  // Work still running at `graceEnd` is cut, leaving a moment to close everything before the deadline.
  const graceEnd = deadline - Math.min(500, options.shutdownDurationMs / 10);
  hooks.onShutdown?.(reason, deadline);
  log.info(`shutting down (${reason}): ${formatDurationMs(options.shutdownDurationMs)} allowed for in-flight pushes`);
  for (const l of listeners) l.stopAccepting();
  const xdsDone = await settleBy(providers.xds.stop(Math.max(0, graceEnd - Date.now())), graceEnd);
  if (!xdsDone) log.warn('in-flight pushes did not finish within --shutdownDuration; closing the remaining streams');
  await Promise.all(listeners.map((l) => l.drain(graceEnd)));
  if (providers.close) await settleBy(providers.close(), deadline);
  clearDaemonMetrics(providers);
  log.info('shutdown complete');
}

export async function startDaemon(options: DaemonOptions, providers: MeshdProviders, hooks: DaemonHooks = {}): Promise<Daemon> {
  const startedAt = Date.now();
  const tls = serverTls(options, providers);
  const noTls = providers.identity?.noTlsReason ?? 'no --tlsCertFile/--tlsKeyFile given';

  const listeners: Listener[] = [];
  const addresses: Partial<Record<ListenerName, BoundAddress>> = {};
  let listenersUp = false;
  let shuttingDown: Promise<void> | undefined;
  let resolveStopped!: () => void;
  const stopped = new Promise<void>((r) => (resolveStopped = r));

  const readiness = (): Readiness => {
    if (shuttingDown) return { ready: false, reason: 'shutting down' };
    if (!listenersUp) return { ready: false, reason: LISTENERS_STARTING };
    const synced = providers.synced();
    return synced.ready ? synced : { ready: false, reason: synced.reason };
  };
  const shutdown = (reason: string): Promise<void> => {
    shuttingDown ??= shutDown(options, providers, hooks, listeners, reason).then(() => resolveStopped());
    return shuttingDown;
  };

  const start: ListenerStart = {
    options,
    providers,
    routers: daemonRouters(options, providers, readiness),
    tls,
    noTls,
    started: (l) => {
      listeners.push(l);
      addresses[l.name] = l.bound;
      log.info(`${PURPOSE[l.name]} listening on ${l.bound.address}`, { flag: l.flag });
    },
  };
  try {
    await startHttpListeners(start);
    await startGrpcListeners(start);
    await startHttpsListener(start);
    await startCtrlz(start, shutdown);
  } catch (e) {
    await Promise.all(listeners.map((l) => l.drain(Date.now())));
    if (e instanceof ListenError) throw new DaemonStartError(e.message);
    throw e;
  }

  recordDaemonMetrics(providers, startedAt);
  listenersUp = true;
  return { addresses, readiness, shutdown, stopped };
}

/** COMPLIANCE_POLICY applied over a source, now and after each change. */
function compliant(source: TlsSource, policy: string): TlsSource {
  if (policy === '') return source;
  return { current: () => enforceCompliance(source.current(), policy), subscribe: (fn) => source.subscribe(fn) };
}

/** Waits for `p` until `deadline`; true when it settled in time (a rejection is logged, not thrown). */
async function settleBy(p: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()));
  });
  try {
    return await Promise.race([
      p.then(
        () => true,
        (e: unknown) => {
          log.error(`during shutdown: ${(e as Error).message ?? String(e)}`);
          return true;
        },
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs the daemon until SIGTERM/SIGINT (or a ControlZ exit request), then shuts down gracefully and returns
 * 0. If anything still holds the process after --shutdownDuration, it exits anyway. Start-up failures
 * become CommandErrors naming the flag.
 */
export async function runDaemon(ctx: RunContext, providers: MeshdProviders): Promise<number> {
  const options = daemonOptionsFromContext(ctx);
  const onShutdown = (_reason: string, deadline: number) => {
    // Unref'd: it only fires if something keeps the process alive past the deadline.
    setTimeout(
      () => {
        log.warn('shutdown did not complete within --shutdownDuration; exiting');
        process.exit(0);
      },
      Math.max(0, deadline - Date.now()),
    ).unref();
  };
  let daemon: Daemon;
  try {
    daemon = await startDaemon(options, providers, { onShutdown });
  } catch (e) {
    if (e instanceof DaemonStartError) throw new CommandError(e.message);
    throw e;
  }
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn(`received ${signal} again during shutdown; exiting now`);
      process.exit(1);
    }
    log.info(`received ${signal}`);
    void daemon.shutdown(signal);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    await daemon.stopped;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  }
  return 0;
}
