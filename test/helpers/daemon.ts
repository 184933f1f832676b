// Starts the built `pilot-discovery discovery` on loopback with ephemeral ports, as a user would, and
// learns the chosen addresses from its log lines. The daemon runs in its own working directory (a fresh
// temporary one unless `cwd` is given), since its CA keeps its root under ./var/lib/mesh/ca there.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DIST } from './binary';
import { waitFor } from './wait';

export interface RunningDaemon {
  child: ChildProcess;
  grpc: string;
  http: string;
  monitoring: string;
  /** --secureGRPCAddr and --httpsAddr, when those listeners started. */
  secureGrpc?: string;
  https?: string;
  /** The daemon's working directory. */
  cwd: string;
  log: () => string;
  stop: () => Promise<number | null>;
}

const PURPOSES = { grpc: 'discovery gRPC', http: 'discovery HTTP', monitoring: 'monitoring HTTP' } as const;

export async function startDaemon(args: readonly string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 30_000, opts: { cwd?: string } = {}): Promise<RunningDaemon> {
  const cwd = opts.cwd ?? fs.mkdtempSync(path.join(os.tmpdir(), 'meshd-cwd-'));
  const ownCwd = opts.cwd === undefined;
  const child = spawn(
    path.join(DIST, 'pilot-discovery'),
    [
      'discovery',
      '--grpcAddr', '127.0.0.1:0', '--httpAddr', '127.0.0.1:0', '--monitoringAddr', '127.0.0.1:0',
      '--httpsAddr', '127.0.0.1:0', '--secureGRPCAddr', '127.0.0.1:0', '--ctrlz_address', '127.0.0.1', '--ctrlz_port', '0',
      ...args,
    ],
    { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, PILOT_DEBOUNCE_AFTER: '10ms', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      if (ownCwd) fs.rmSync(cwd, { recursive: true, force: true });
      resolve(code);
    }),
  );
  const addr = (purpose: string) => new RegExp(`${purpose} listening on (\\S+)`).exec(out)?.[1];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = Object.fromEntries(Object.entries(PURPOSES).map(([k, p]) => [k, addr(p)]));
    if (Object.values(found).every(Boolean)) {
      const d: RunningDaemon = {
        child,
        grpc: found.grpc!,
        http: found.http!,
        monitoring: found.monitoring!,
        cwd,
        log: () => out,
        stop: async () => {
          if (child.exitCode === null) child.kill('SIGTERM');
          return exited;
        },
      };
      await waitFor(() => `daemon not ready:\n${out}`, async () => (await fetch(`http://${d.http}/ready`)).status === 200, { timeoutMs });
      // Ready means every listener has started and logged its address.
      d.secureGrpc = addr('secure discovery gRPC');
      d.https = addr('webhook HTTPS');
      return d;
    }
    if (child.exitCode !== null) {
      await exited;
      throw new Error(`pilot-discovery exited ${child.exitCode}:\n${out}`);
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`pilot-discovery did not report its listeners:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
