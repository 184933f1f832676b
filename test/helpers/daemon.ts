// Starts the built `pilot-discovery discovery` on loopback with ephemeral ports, as a user would, and
// learns the chosen addresses from its log lines (`<purpose> listening on <addr> flag=--<flag>`, meshd/daemon.ts).
// The daemon runs in its own working directory (a fresh temporary one unless `cwd` is given), since its CA
// keeps its root under ./var/lib/mesh/ca there and publishes it under ./var/run/secrets/mesh, so a restart in
// the same directory keeps the root. Two entry points, one process starter: `startDaemon` with the flags a
// test is about, `startDiscovery` with a config directory and pinned xDS ports (for restarts on the same port).
import { ephemeralListeners } from '../../scripts/lib/daemon-flags.mjs';
// One list of ephemeral listener flags for tests and scripts (scripts/lib/daemon-flags.mjs).
export { ephemeralListeners };
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
  /** host:port of --monitoringAddr (/metrics). */
  monitoring: string;
  /** --secureGRPCAddr and --httpsAddr, when those listeners started. */
  secureGrpc?: string;
  https?: string;
  /** The daemon's working directory. */
  cwd: string;
  /** Where the daemon publishes the mesh root with no cluster. */
  rootCertPath: string;
  log: () => string;
  stop: () => Promise<number | null>;
}

function listening(out: string, flag: string): string | undefined {
  return new RegExp(`listening on (\\S+)\\s+flag=--${flag}\\b`).exec(out)?.[1];
}

/** Starts dist/pilot-discovery with every listener on an ephemeral loopback port; `args` come after (and win). */
export async function startDaemon(
  args: readonly string[],
  env: NodeJS.ProcessEnv = {},
  timeoutMs = 30_000,
  opts: { cwd?: string } = {},
): Promise<RunningDaemon> {
  const cwd = opts.cwd ?? fs.mkdtempSync(path.join(os.tmpdir(), 'meshd-cwd-'));
  const ownCwd = opts.cwd === undefined;
  const child = spawn(path.join(DIST, 'pilot-discovery'), ['discovery', ...ephemeralListeners(), '--ctrlz_address', '127.0.0.1', ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PILOT_DEBOUNCE_AFTER: '10ms', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      if (ownCwd) fs.rmSync(cwd, { recursive: true, force: true });
      resolve(code);
    }),
  );
  await waitFor(
    () => `pilot-discovery did not report its listeners:\n${out}`,
    () => {
      if (child.exitCode !== null) throw new Error(`pilot-discovery exited ${child.exitCode}:\n${out}`);
      return Boolean(listening(out, 'grpcAddr') && listening(out, 'httpAddr') && listening(out, 'monitoringAddr'));
    },
    { timeoutMs, intervalMs: 20 },
  ).catch(async (e) => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    throw e;
  });
  const d: RunningDaemon = {
    child,
    cwd,
    rootCertPath: path.join(cwd, 'var/run/secrets/mesh/root-cert.pem'),
    grpc: listening(out, 'grpcAddr')!,
    http: listening(out, 'httpAddr')!,
    monitoring: listening(out, 'monitoringAddr')!,
    log: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
  };
  await waitFor(
    () => `daemon not ready:\n${out}`,
    async () => (await fetch(`http://${d.http}/ready`)).status === 200,
    { timeoutMs, intervalMs: 50 },
  );
  // Ready means every listener has started and logged its address.
  d.secureGrpc = listening(out, 'secureGRPCAddr');
  d.https = listening(out, 'httpsAddr');
  return d;
}

/**
 * Starts dist/pilot-discovery on `configDir`; `grpcPort` / `securePort` pin the xDS ports (for restarts), `tls`
 * gives the serving certificate; a short --shutdownDuration keeps teardown quick.
 */
export function startDiscovery(o: {
  configDir: string;
  grpcPort?: number;
  securePort?: number;
  tls?: { cert: string; key: string };
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}): Promise<RunningDaemon> {
  const args = [
    '--configDir',
    path.resolve(o.configDir),
    '--grpcAddr',
    `127.0.0.1:${o.grpcPort ?? 0}`,
    '--secureGRPCAddr',
    `127.0.0.1:${o.securePort ?? 0}`,
    '--shutdownDuration',
    '1s',
  ];
  if (o.tls) args.push('--tlsCertFile', o.tls.cert, '--tlsKeyFile', o.tls.key);
  return startDaemon(args, o.env, 30_000, { cwd: o.cwd });
}
