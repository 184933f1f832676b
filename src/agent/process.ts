// Starting and stopping the data-plane proxy process: which executable (a real `envoy`, else this binary's
// hidden `envoy` command), with which flags (the ones Istio's agent passes to Envoy), and how it is stopped.
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import path from 'node:path';
import { constants as osConstants } from 'node:os';
import { programByInvocation } from '../cli/programs';
import { isSea } from '../lib/sea';

export interface CommandLine {
  file: string;
  args: string[];
}


/**
 * This program's hidden `envoy` command as a command line. The packaged binary dispatches on its first word
 * whatever it is called, so `<execPath> agent envoy` works; under Node (bundle or tsx) the entry script is
 * run again with the same Node flags. The script's real path is used so a `pilot-agent` symlink does not
 * turn `agent` into an unknown subcommand; a script that is itself named pilot-agent needs only `envoy`.
 */
export function selfCommand(p: Pick<NodeJS.Process, 'execPath' | 'execArgv' | 'argv'> = process, sea = isSea()): CommandLine {
  if (sea) return { file: p.execPath, args: ['agent', 'envoy'] };
  const script = p.argv[1] ?? '';
  let real = script;
  try {
    real = fs.realpathSync(script);
  } catch {
    // keep it as given
  }
  const words = programByInvocation(path.basename(real))?.name === 'pilot-agent' ? ['envoy'] : ['agent', 'envoy'];
  return { file: p.execPath, args: [...p.execArgv, real, ...words] };
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

export interface ProxyArgsInputs {
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
export function proxyArgs(i: ProxyArgsInputs): string[] {
  const args = [
    '-c', i.configFile,
    '--drain-time-s', String(Math.floor(i.drainDurationMs / 1000)),
    '--drain-strategy', 'immediate',
    '--parent-shutdown-time-s', String(Math.floor(i.parentShutdownDurationMs / 1000)),
    '--local-address-ip-version', i.ipv6 ? 'v6' : 'v4',
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

export class ProxyProcess {
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

  get pid(): number | undefined {
    return this.child?.pid;
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
