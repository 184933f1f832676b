// The engine started as Envoy starts (Envoy's server/options_impl.cc defaults, then the bootstrap from
// --config-path/--config-yaml): shared by `pilot-agent envoy` (a process of its own, options from its flag
// table in commands/) and by `pilot-agent proxy`, which runs the engine inside its own process with typed
// options when no external `envoy` is used (src/agent/process.ts).
import os from 'node:os';
import { BootstrapError, loadBootstrap } from './bootstrap';
import { startEngine, type Engine, type EngineOptions } from './engine';
import { parseLogLevel, type LogLevel } from './log';
import { ConfigError } from './common/config-error';

/** An engine that cannot be started as asked; `exitCode` is the status Envoy exits with for it. */
export class LaunchError extends Error {
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'LaunchError';
  }
}

/** Envoy's `-l`: empty is its default, info. */
export function engineLogLevel(level: string): LogLevel {
  const parsed = parseLogLevel(level || 'info');
  if (!parsed) throw new LaunchError(`error: invalid log level specified '${level}'`);
  return parsed;
}

/** `pilot-agent envoy`'s flags (a plain record of the flag table's values) as engine options. */
export function engineOptionsFromFlags(f: Readonly<Record<string, unknown>>): EngineOptions {
  const str = (n: string) => (typeof f[n] === 'string' ? (f[n] as string) : '');
  const num = (n: string) => (typeof f[n] === 'number' ? (f[n] as number) : undefined);
  const configPath = str('config-path');
  const configYaml = str('config-yaml');
  return {
    logLevel: engineLogLevel(str('log-level')),
    ...(str('component-log-level') ? { componentLogLevel: str('component-log-level') } : {}),
    ...(str('log-format') ? { logFormat: str('log-format') } : {}),
    ...(num('concurrency') ? { concurrency: num('concurrency')! } : {}),
    drainTimeS: num('drain-time-s') ?? 600,
    drainStrategy: str('drain-strategy') === 'immediate' ? 'immediate' : 'gradual',
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
  };
}

/**
 * Loads the bootstrap the options name and starts the engine with Envoy's default concurrency (one worker
 * per core, as Istio leaves a gateway's concurrency 0). Throws LaunchError for a bootstrap it cannot run.
 */
export async function launchEngine(options: EngineOptions): Promise<Engine> {
  let loaded;
  try {
    loaded = loadBootstrap({
      ...(options.configPath ? { configPath: options.configPath } : {}),
      ...(options.configYaml ? { configYaml: options.configYaml } : {}),
      allowUnknownFields: options.allowUnknownStaticFields === true,
      ...(options.serviceCluster ? { serviceCluster: options.serviceCluster } : {}),
      ...(options.serviceNode ? { serviceNode: options.serviceNode } : {}),
    });
  } catch (e) {
    if (e instanceof BootstrapError) throw new LaunchError(e.message);
    throw e;
  }
  try {
    return await startEngine(loaded.bootstrap, {
      ...options,
      warnings: [...(options.warnings ?? []), ...loaded.warnings],
      concurrency: options.concurrency || os.availableParallelism(),
    });
  } catch (e) {
    if (e instanceof ConfigError || e instanceof BootstrapError) throw new LaunchError(e.message);
    throw e;
  }
}
