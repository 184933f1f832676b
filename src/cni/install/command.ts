// `install-cni`: the node agent of the mesh CNI plugin (Istio's cni/pkg/cmd). It installs the plugin on
// the node and keeps it installed, serves /readyz on :8000 and metrics on --monitoring-port, runs the
// race repair controller when asked, and on SIGTERM takes back everything it installed.
import { recordComponentBuildTag } from '../../lib/build-metric';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { CommandError, flagBool, flagNumber, flagString, type Handler, type RunContext } from '../../cli/context';
import { buildInfo } from '../../lib/buildinfo';
import { registerScope } from '../../lib/log';
import { findScopeState } from '../../lib/log/scope';
import { levelName } from '../../lib/log/levels';
import { METRICS_CONTENT_TYPE, metricsText } from '../../lib/metrics';
import { isSea } from '../../lib/sea';
import { SERVICE_ACCOUNT_DIR } from '../../config/orch/client';
import { startControlZ } from '../../serve/ctrlz/server';
import type { Listener } from '../../serve/listeners';
import { PLUGIN_TYPE } from '../plugin/config';
import { RepairController, type RepairConfig } from '../repair/controller';
import { Installer, Readiness, type InstallConfig } from './installer';

const log = registerScope('cni-agent', 'CNI agent');

/** Istio's fixed readiness port of the CNI node agent (liveness /healthz, readiness /readyz). */
export const READINESS_PORT = 8000;
/** Where the host's CNI binary directory is mounted in the installer's container. */
export const DEFAULT_HOST_CNI_BIN_DIR = '/host/opt/cni/bin';

/** The level the plugin logs at: --log_output_level for cni-plugin (or all) when given, else --log-level. */
function pluginLogLevel(ctx: RunContext): string {
  const given = String(ctx.flags['log_output_level'] ?? '');
  const named = given.split(',').some((e) => /^(cni-plugin|all):/.test(e.trim()));
  const state = findScopeState('cni-plugin');
  if (named && state) return levelName(state.outputLevel);
  return flagString(ctx, 'log-level');
}

/** POD_NAMESPACE, else the namespace of the installer's own service account (a pod always has one). */
function podNamespace(env: NodeJS.ProcessEnv, saPath: string): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  try {
    return readFileSync(path.join(saPath, 'namespace'), 'utf8').trim();
  } catch {
    return '';
  }
}

export function installConfigFromContext(ctx: RunContext): InstallConfig {
  const env = ctx.env;
  const serviceAccountPath = env.ORCH_SERVICE_ACCOUNT_PATH || SERVICE_ACCOUNT_DIR;
  if (!isSea()) {
    throw new CommandError(
      'install-cni copies this executable onto the node as the mesh-cni plugin, so it must run as the single executable (dist/mesh), not under Node',
    );
  }
  const mode = flagNumber(ctx, 'orchconfig-mode');
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)
    throw new CommandError(`--orchconfig-mode ${mode}: not a file mode (decimal, e.g. 384 for 0600)`);
  return {
    mountedCNINetDir: flagString(ctx, 'mounted-cni-net-dir'),
    cniConfName: flagString(ctx, 'cni-conf-name'),
    chainedCNIPlugin: flagBool(ctx, 'chained-cni-plugin'),
    pluginLogLevel: pluginLogLevel(ctx),
    cniAgentRunDir: flagString(ctx, 'cni-agent-run-dir'),
    ambientEnabled: flagBool(ctx, 'ambient-enabled'),
    excludeNamespaces: env.EXCLUDE_NAMESPACES ?? '',
    podNamespace: podNamespace(env, serviceAccountPath),
    serviceHost: env.ORCH_SERVICE_HOST || env.KUBERNETES_SERVICE_HOST || '',
    servicePort: env.ORCH_SERVICE_PORT || env.KUBERNETES_SERVICE_PORT || '',
    serviceProtocol: env.ORCH_SERVICE_PROTOCOL || env.KUBERNETES_SERVICE_PROTOCOL || '',
    orchCAFile: flagString(ctx, 'orch-ca-file'),
    skipTLSVerify: flagBool(ctx, 'skip-tls-verify'),
    serviceAccountPath,
    orchconfigMode: mode,
    binarySources: [{ name: PLUGIN_TYPE, path: process.execPath }],
    binaryTargetDirs: [env.HOST_CNI_BIN_DIR || DEFAULT_HOST_CNI_BIN_DIR],
  };
}

export function repairConfigFromContext(ctx: RunContext): RepairConfig & { enabled: boolean } {
  return {
    enabled: flagBool(ctx, 'repair-enabled'),
    deletePods: flagBool(ctx, 'repair-delete-pods'),
    labelPods: flagBool(ctx, 'repair-label-pods'),
    labelKey: flagString(ctx, 'repair-broken-pod-label-key'),
    labelValue: flagString(ctx, 'repair-broken-pod-label-value'),
    nodeName: flagString(ctx, 'repair-node-name'),
    sidecarAnnotation: flagString(ctx, 'repair-sidecar-annotation'),
    initContainerName: flagString(ctx, 'repair-init-container-name'),
    initTerminationMsg: flagString(ctx, 'repair-init-container-termination-message'),
    initExitCode: flagNumber(ctx, 'repair-init-container-exit-code'),
    labelSelectors: flagString(ctx, 'repair-label-selectors'),
    fieldSelectors: flagString(ctx, 'repair-field-selectors'),
  };
}

/** Listens on every address of `port`; a failure is logged and the agent goes on (as Istio's does). */
function serve(name: string, port: number, handler: http.RequestListener): Promise<http.Server | undefined> {
  return new Promise((resolve) => {
    const server = http.createServer(handler);
    server.once('error', (e) => {
      log.error(`unable to serve ${name} on :${port}: ${e.message}`);
      resolve(undefined);
    });
    server.listen(port, () => {
      server.on('error', () => {});
      resolve(server);
    });
  });
}

async function startRepair(ctx: RunContext, cfg: RepairConfig): Promise<RepairController> {
  const { createOrchClient } = await import('../../config/orch/client');
  // Like Istio's kube.DefaultRestConfig: $KUBECONFIG when set, else the in-cluster service account.
  const kubeconfig = ctx.env.KUBECONFIG ?? '';
  let client;
  try {
    client = await createOrchClient({ orchconfig: kubeconfig || undefined, env: ctx.env, contentType: 'json' });
  } catch (e) {
    throw new CommandError(`CNI repair could not construct its orchestrator client: ${(e as Error).message}`);
  }
  const rc = new RepairController(client, cfg);
  rc.start();
  return rc;
}

function logStartup(cfg: InstallConfig, repairCfg: RepairConfig): void {
  const info = buildInfo();
  recordComponentBuildTag('cni', info.tag);
  log.info(`CNI version: ${info.version}-${info.revision}-${info.status}`);
  log.info(`CNI logging level: ${levelName(findScopeState('cni-agent')?.outputLevel ?? 2)}`);
  log.info(`CNI install configuration: ${JSON.stringify({ ...cfg, binarySources: cfg.binarySources.map((b) => b.path) })}`);
  log.info(`CNI race repair configuration: ${JSON.stringify(repairCfg)}`);
}

/** The node agent's servers: ControlZ, metrics (when --monitoring-port is set) and readiness on :8000. */
interface Servers {
  ctrlz?: Listener;
  metrics?: http.Server;
  health?: http.Server;
}

async function startServers(ctx: RunContext, readiness: Readiness, stop: (why: string) => void): Promise<Servers> {
  let ctrlz: Listener | undefined;
  try {
    ctrlz = await startControlZ({
      address: flagString(ctx, 'ctrlz_address'),
      port: flagNumber(ctx, 'ctrlz_port'),
      onExit: () => stop('ControlZ exit request'),
    });
  } catch (e) {
    log.error(`Unable to start ControlZ: ${(e as Error).message}`);
  }
  const monitoringPort = flagNumber(ctx, 'monitoring-port');
  const metrics =
    monitoringPort > 0
      ? await serve('metrics', monitoringPort, (req, res) => {
          if (new URL(req.url ?? '/', 'http://x').pathname !== '/metrics') return void res.writeHead(404).end('404 page not found\n');
          metricsText().then(
            (text) => res.writeHead(200, { 'Content-Type': METRICS_CONTENT_TYPE }).end(text),
            (e: Error) => res.writeHead(500).end(e.message),
          );
        })
      : undefined;
  // Without the ambient node agent the agent's own half of readiness is always there.
  const health = await serve('readiness', READINESS_PORT, (req, res) => {
    const p = new URL(req.url ?? '/', 'http://x').pathname;
    if (p === '/healthz') return void res.writeHead(200).end();
    if (p === '/readyz') {
      if (readiness.get()) return void res.writeHead(200).end();
      return void res
        .writeHead(503, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' })
        .end('Service Unavailable\n');
    }
    res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('404 page not found\n');
  });
  return { ctrlz, metrics, health };
}

async function closeServers(s: Servers): Promise<void> {
  for (const server of [s.metrics, s.health]) {
    server?.closeAllConnections();
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
  }
  await s.ctrlz?.drain(Date.now());
}

export const run: Handler = async (ctx) => {
  const cfg = installConfigFromContext(ctx);
  if (cfg.ambientEnabled) {
    throw new CommandError(
      '--ambient-enabled: the ambient node agent is not available in this build of install-cni; it installs the sidecar-mode plugin only',
    );
  }
  const repairCfg = repairConfigFromContext(ctx);
  logStartup(cfg, repairCfg);

  const abort = new AbortController();
  const stop = (why: string) => {
    if (abort.signal.aborted) return;
    log.info(`${why}: shutting down`);
    abort.abort(new Error(why));
  };
  const readiness = new Readiness();
  readiness.set(false);
  const servers = await startServers(ctx, readiness, stop);
  const onSignal = (sig: NodeJS.Signals) => stop(`received ${sig}`);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const installer = new Installer(cfg, readiness);
  let repair: RepairController | undefined;
  let failure: Error | undefined;
  try {
    if (repairCfg.enabled) repair = await startRepair(ctx, repairCfg);
    else log.info('CNI repair controller is disabled');
    log.info('initialization complete, watching node CNI dir');
    await installer.run(abort.signal);
  } catch (e) {
    if (!abort.signal.aborted) {
      failure = e as Error;
      log.error(`installer failed: ${failure.message}`);
    } else {
      log.info(`installer complete: ${(abort.signal.reason as Error).message}`);
    }
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    log.info('CNI node agent shutting down');
    try {
      await installer.cleanup();
    } catch (e) {
      log.error((e as Error).message);
    }
    await repair?.stop();
    await closeServers(servers);
  }
  if (failure) throw failure instanceof CommandError ? failure : new CommandError(failure.message);
  return 0;
};
