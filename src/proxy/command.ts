// `pilot-agent envoy …`: the built-in engine with Envoy's command line, so `pilot-agent proxy` starts it
// exactly as it would start Envoy. Exits 0 on SIGTERM/SIGINT or /quitquitquit, 1 on a bad bootstrap.
import { CommandError, type Handler } from '../cli/context';
import { BootstrapError, loadBootstrap } from './bootstrap';
import { startEngine } from './engine';
import { parseLogLevel } from './log';
import { ConfigError } from './matchers/string';

export const run: Handler = async (ctx) => {
  const f = ctx.flags;
  const str = (n: string) => (typeof f[n] === 'string' ? (f[n] as string) : '');
  const num = (n: string) => (typeof f[n] === 'number' ? (f[n] as number) : undefined);
  const logLevel = parseLogLevel(str('log-level') || 'info');
  if (!logLevel) throw new CommandError(`error: invalid log level specified '${str('log-level')}'`, 1);
  const configPath = str('config-path');
  const configYaml = str('config-yaml');
  let loaded;
  try {
    loaded = loadBootstrap({
      ...(configPath ? { configPath } : {}),
      ...(configYaml ? { configYaml } : {}),
      allowUnknownFields: f['allow-unknown-static-fields'] === true,
      ...(str('service-cluster') ? { serviceCluster: str('service-cluster') } : {}),
      ...(str('service-node') ? { serviceNode: str('service-node') } : {}),
    });
  } catch (e) {
    if (e instanceof BootstrapError) throw new CommandError(e.message, 1);
    throw e;
  }
  const bootstrap = loaded.bootstrap;
  const drainStrategy = str('drain-strategy') === 'immediate' ? 'immediate' : 'gradual';
  let engine;
  try {
    engine = await startEngine(bootstrap, {
      logLevel,
      ...(str('component-log-level') ? { componentLogLevel: str('component-log-level') } : {}),
      ...(str('log-format') ? { logFormat: str('log-format') } : {}),
      logWriter: (l) => ctx.stderr.write(l),
      warnings: loaded.warnings,
      ...(num('concurrency') !== undefined ? { concurrency: num('concurrency')! } : {}),
      drainTimeS: num('drain-time-s') ?? 600,
      drainStrategy,
      parentShutdownTimeS: num('parent-shutdown-time-s') ?? 900,
      localAddressIpVersion: str('local-address-ip-version') === 'v6' ? 'v6' : 'v4',
      allowUnknownStaticFields: f['allow-unknown-static-fields'] === true,
      disableHotRestart: f['disable-hot-restart'] === true,
      ...(num('base-id') !== undefined ? { baseId: num('base-id')! } : {}),
      ...(num('restart-epoch') !== undefined ? { restartEpoch: num('restart-epoch')! } : {}),
      ...(configPath ? { configPath } : {}),
      ...(configYaml ? { configYaml } : {}),
      ...(str('service-cluster') ? { serviceCluster: str('service-cluster') } : {}),
      ...(str('service-node') ? { serviceNode: str('service-node') } : {}),
    });
  } catch (e) {
    if (e instanceof ConfigError || e instanceof BootstrapError) throw new CommandError(e.message, 1);
    throw e;
  }
  const stop = (sig: string) => {
    engine.loggers.get('main').warn(`caught ${sig}`);
    void engine.close(0);
  };
  const onTerm = () => stop('SIGTERM');
  const onInt = () => stop('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  // Started by the agent, the engine must not outlive it: an agent killed outright (SIGKILL, a crash) cannot
  // stop its child, and an orphaned engine would keep the listener ports. Node has no parent-death signal,
  // so watch for being re-parented.
  const parent = process.ppid;
  const orphanWatch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(orphanWatch);
    stop('parent exit');
  }, 500);
  orphanWatch.unref();
  try {
    return await engine.exited;
  } finally {
    clearInterval(orphanWatch);
    process.off('SIGTERM', onTerm);
    process.off('SIGINT', onInt);
  }
};
