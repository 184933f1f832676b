// Starting and stopping the data-plane proxy: a real `envoy` as a child process, else the built-in engine
// inside the agent's own process (one Node heap per pod instead of two), both run as Istio's agent runs
// Envoy (pkg/envoy/proxy.go args()): argv for Envoy, the same settings as typed engine options for the
// engine, and how each is stopped.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import path from 'node:path';
import { constants as osConstants } from 'node:os';
import type { Engine, EngineOptions } from '../proxy/engine';
import type { LogLevel } from '../proxy/log';

export interface CommandLine {
  file: string;
  args: string[];
}

function isExecutableFile(f: string): boolean {
  try {
    const st = fs.statSync(f);
    if (!st.isFile()) return false;
    fs.accessSync(f, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** ProxyConfig.binaryPath when it is an executable file, else `envoy` on PATH, else undefined. */
export function findProxyBinary(binaryPath: string, pathEnv: string | undefined, cwd: string): string | undefined {
  if (binaryPath && isExecutableFile(path.resolve(cwd, binaryPath))) return path.resolve(cwd, binaryPath);
  for (const dir of (pathEnv ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.resolve(cwd, dir, 'envoy');
    if (isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** How the agent runs its proxy (the inputs of Istio's envoy.args()), before it is rendered for one. */
export interface ProxyRun {
  configFile: string;
  drainDurationMs: number;
  parentShutdownDurationMs: number;
  ipv6: boolean;
  /** `-l`; empty omits it. */
  logLevel: string;
  componentLogLevel: string;
  concurrency?: number;
  /** MESH_BOOTSTRAP_OVERRIDE as JSON, passed with --config-yaml. */
  override?: string;
  /** Extra flags only a real Envoy understands. */
  realEnvoy: boolean;
  skipDeprecatedLogs: boolean;
  enableCoreDump: boolean;
}

/** Istio's envoy.args(): the flags the agent starts the proxy with. */
export function proxyArgs(i: ProxyRun): string[] {
  const args = [
    '-c',
    i.configFile,
    '--drain-time-s',
    String(Math.floor(i.drainDurationMs / 1000)),
    '--drain-strategy',
    'immediate',
    '--parent-shutdown-time-s',
    String(Math.floor(i.parentShutdownDurationMs / 1000)),
    '--local-address-ip-version',
    i.ipv6 ? 'v6' : 'v4',
  ];
  if (i.realEnvoy) args.push('--file-flush-interval-msec', '1000');
  args.push('--disable-hot-restart', '--allow-unknown-static-fields');
  if (i.logLevel) args.push('-l', i.logLevel);
  if (i.componentLogLevel) args.push('--component-log-level', i.componentLogLevel);
  if (i.realEnvoy && i.skipDeprecatedLogs) args.push('--skip-deprecated-logs');
  if (i.realEnvoy && i.enableCoreDump) args.push('--enable-core-dump');
  if (i.override) args.push('--config-yaml', i.override);
  if (i.concurrency !== undefined && i.concurrency > 0) args.push('--concurrency', String(i.concurrency));
  return args;
}

/**
 * The built-in engine's options for what proxyArgs gives Envoy (the flags only a real Envoy understands
 * have no counterpart); `logLevel` is `i.logLevel` checked by the engine's launcher (engineLogLevel).
 */
export function builtinEngineOptions(i: ProxyRun, logLevel: LogLevel): EngineOptions {
  return {
    configPath: i.configFile,
    drainTimeS: Math.floor(i.drainDurationMs / 1000),
    drainStrategy: 'immediate',
    parentShutdownTimeS: Math.floor(i.parentShutdownDurationMs / 1000),
    localAddressIpVersion: i.ipv6 ? 'v6' : 'v4',
    disableHotRestart: true,
    allowUnknownStaticFields: true,
    logLevel,
    ...(i.componentLogLevel ? { componentLogLevel: i.componentLogLevel } : {}),
    ...(i.override ? { configYaml: i.override } : {}),
    // Unset or 0 is one worker here, not Envoy's one per core: the built-in engine's worker threads receive their
    // SDS secrets relayed from the main thread and can serve a TLS listener or cluster before they arrive (resets,
    // and an origination that does not check its CA yet). Until that is fixed a worker pool is opted into by
    // setting concurrency (the sidecar injector's default is 2).
    concurrency: i.concurrency !== undefined && i.concurrency > 0 ? i.concurrency : 1,
  };
}

export interface ProxyExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A shell-style exit status: the code, or 128 + the signal's number. */
export function exitStatus(e: ProxyExit): number {
  if (e.code !== null) return e.code;
  const n = e.signal ? (osConstants.signals as Record<string, number>)[e.signal] : undefined;
  return n ? 128 + n : 1;
}

/** What the agent supervises: an Envoy process, or the built-in engine in this process. */
export interface Proxy {
  /** Resolves with how the proxy ended (a shell-style status for the engine, see exitStatus). */
  readonly exited: Promise<ProxyExit>;
  /** Starts the proxy; rejects when it cannot be started at all. */
  start(): Promise<void>;
  running(): boolean;
  /** Asks the proxy to stop (Envoy: SIGTERM), forcing it after `graceMs`. */
  stop(graceMs: number): Promise<ProxyExit>;
  /** How the agent's log names it. */
  readonly description: string;
}

/** How the agent runs its proxy: an executable (Envoy) with its command line, or the built-in engine. */
export type ProxyLaunch = { kind: 'exec'; command: CommandLine } | { kind: 'builtin'; run: ProxyRun };

export function proxyFor(launch: ProxyLaunch, opts: { env: NodeJS.ProcessEnv; cwd: string }): Proxy {
  return launch.kind === 'exec' ? new ProxyProcess(launch.command, opts) : new BuiltinEngine(launch.run);
}

/**
 * The built-in engine inside the agent's process, started with the options `pilot-agent envoy` would take
 * from proxyArgs' command line. What a separate process gave is kept: a bad bootstrap is `Error: …` on
 * stderr and exit status 1; stopping is the engine's own close (what SIGTERM did in the child), and an
 * engine that has not finished closing after the grace period is left behind as a killed process would be
 * (status 137), since the agent exits next. The engine cannot outlive the agent.
 */
export class BuiltinEngine implements Proxy {
  private engine: Engine | undefined;
  private done = false;
  readonly exited: Promise<ProxyExit>;
  private resolveExit!: (e: ProxyExit) => void;

  constructor(
    readonly run: ProxyRun,
    private readonly stderr: (line: string) => void = (l) => void process.stderr.write(l),
  ) {
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
    void this.exited.then(() => (this.done = true));
  }

  get description(): string {
    return `built-in engine in the agent process (pid ${process.pid}): envoy ${proxyArgs(this.run).join(' ')}`;
  }

  async start(): Promise<void> {
    // Loaded only here: an agent in front of a real Envoy never loads the engine.
    const { engineLogLevel, launchEngine, LaunchError } = await import('../proxy/launch');
    try {
      const options = builtinEngineOptions(this.run, engineLogLevel(this.run.logLevel));
      this.engine = await launchEngine({ ...options, logWriter: this.stderr });
    } catch (e) {
      // As the separate process ended: the message on stderr and its exit status.
      if (e instanceof LaunchError) {
        this.stderr(`Error: ${e.message}\n`);
        this.resolveExit({ code: e.exitCode, signal: null });
        return;
      }
      this.stderr(`Error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      this.resolveExit({ code: 255, signal: null });
      return;
    }
    void this.engine.exited.then((code) => this.resolveExit({ code, signal: null }));
  }

  running(): boolean {
    return this.engine !== undefined && !this.done;
  }

  async stop(graceMs: number): Promise<ProxyExit> {
    if (this.running()) {
      this.engine!.loggers.get('main').warn('caught SIGTERM');
      void this.engine!.close(0);
      const timer = setTimeout(() => this.resolveExit({ code: null, signal: 'SIGKILL' }), graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    return this.exited;
  }
}

export class ProxyProcess implements Proxy {
  private child: ChildProcess | undefined;
  readonly exited: Promise<ProxyExit>;
  private resolveExit!: (e: ProxyExit) => void;

  constructor(
    readonly command: CommandLine,
    private readonly opts: { env: NodeJS.ProcessEnv; cwd: string },
  ) {
    this.exited = new Promise((resolve) => (this.resolveExit = resolve));
  }

  /** Starts the process; rejects when it cannot be started at all. */
  start(): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.command.file, this.command.args, { env: this.opts.env, cwd: this.opts.cwd, stdio: ['ignore', 'inherit', 'inherit'] });
      this.child = child;
      child.once('spawn', () => resolve());
      child.once('error', (e) => {
        reject(new Error(`failed to start the proxy ${this.command.file}: ${e.message}`));
        this.resolveExit({ code: 127, signal: null });
      });
      child.once('exit', (code, signal) => this.resolveExit({ code, signal }));
    });
  }

  get description(): string {
    return [this.command.file, ...this.command.args].join(' ');
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM, then SIGKILL if the proxy has not exited after `graceMs`. */
  async stop(graceMs: number): Promise<ProxyExit> {
    if (this.running()) {
      this.child!.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (this.running()) this.child!.kill('SIGKILL');
      }, graceMs);
      await this.exited;
      clearTimeout(timer);
    }
    return this.exited;
  }
}
