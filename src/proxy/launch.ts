// The engine started from Envoy's command-line flags (the `pilot-agent envoy` table in commands/): shared by
// that command (a process of its own) and by `pilot-agent proxy`, which runs the engine inside its own
// process when no external `envoy` is used.
import os from 'node:os';
import { CommandError, type FlagValue } from '../cli/context';
import { BootstrapError, loadBootstrap } from './bootstrap';
import { startEngine, type Engine } from './engine';
import { parseLogLevel } from './log';
import { ConfigError } from './common/config-error';

/** Starts the engine; throws CommandError (exit status 1) for flags or a bootstrap it cannot run. */
export async function launchEngine(f: Readonly<Record<string, FlagValue>>, logWriter: (line: string) => void): Promise<Engine> {
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
  const drainStrategy = str('drain-strategy') === 'immediate' ? 'immediate' : 'gradual';
  try {
    return await startEngine(loaded.bootstrap, {
      logLevel,
      ...(str('component-log-level') ? { componentLogLevel: str('component-log-level') } : {}),
      ...(str('log-format') ? { logFormat: str('log-format') } : {}),
      logWriter,
      warnings: loaded.warnings,
      // Envoy's default (and Istio's for a gateway, concurrency 0): one worker per core
      concurrency: num('concurrency') || os.availableParallelism(),
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
}
