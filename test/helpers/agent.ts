// Shared pieces of the agent tests: the built agent run as a child process, a gateway pod's identity, the
// context of `pilot-agent request`, the fake proxy it can supervise
// instead of Envoy (test/agent/fixtures), its output summarized for failure messages, and a server
// certificate made with openssl for the daemon's TLS listeners.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import path from 'node:path';
import type { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { pilotAgent } from '../../commands/pilot-agent';
import type { RunContext } from '../../src/cli/context';
import { DIST } from './binary';
import { REPO } from './spec';
import { GATEWAY_NS } from './mesh-yaml';
import { waitFor } from './wait';
import { signWith } from './openssl';

export const FIXTURES = path.join(REPO, 'test/agent/fixtures');
export const FAKE_ENVOY = path.join(FIXTURES, 'fake-envoy.ts');
/** tsx by absolute URL: the agent's children run in temp dirs, where a bare `tsx` does not resolve. */
export const TSX = pathToFileURL(path.join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

/** The downward-API identity of gateway pod gw-0 in mesh-system on loopback (labels are each test's own). */
export const GATEWAY_POD_ENV = { POD_NAME: 'gw-0', POD_NAMESPACE: GATEWAY_NS, INSTANCE_IP: '127.0.0.1' };

/** The context `pilot-agent request <args> --debug-port <port>` runs its handler with, printing to `out`. */
export function requestContext(args: string[], port: number, out: Writable): RunContext {
  return {
    program: pilotAgent,
    path: ['request'],
    command: pilotAgent.root.subcommands!.find((c) => c.name === 'request')!,
    flags: { 'debug-port': port },
    changed: new Set(),
    args,
    env: {},
    stdout: out,
    stderr: out,
  };
}

/** Writes an executable `envoy` that runs the fake proxy (absolute paths, so any cwd works). */
export function fakeEnvoyBinary(dir: string): string {
  const file = path.join(dir, 'envoy');
  fs.writeFileSync(file, `#!/bin/sh\nexec "${process.execPath}" --import "${TSX}" "${FAKE_ENVOY}" "$@"\n`, { mode: 0o755 });
  return file;
}

export interface AgentChild {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
  waitForLog: (re: RegExp, timeoutMs?: number) => Promise<void>;
  stop: () => Promise<number | null>;
}

/**
 * Runs the built `dist/pilot-agent <args>` with `cwd` as its working directory: the handler map, bundle, chunks
 * and code cache users get are what the agent tests exercise.
 */
export function runAgent(args: readonly string[], o: { cwd: string; env: NodeJS.ProcessEnv }): AgentChild {
  const child = spawn(path.join(DIST, 'pilot-agent'), args, {
    cwd: o.cwd,
    env: { PATH: process.env['PATH'], HOME: process.env['HOME'], ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    out: () => out,
    exited,
    waitForLog: async (re, timeoutMs = 30_000) => {
      await waitFor(
        () => `no ${re} in agent output:\n${summarize(out)}`,
        () => re.test(out),
        { timeoutMs, intervalMs: 50 },
      );
    },
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      return exited;
    },
  };
}

/** Agent output for failure messages: repeated readiness warnings collapsed to the last one. */
export function summarize(out: string): string {
  const lines = out.split('\n');
  const notReady = lines.filter((l) => l.includes('proxy is NOT ready'));
  return [
    ...lines.filter((l) => !l.includes('proxy is NOT ready')),
    ...(notReady.length ? [`(${notReady.length}×) ${notReady[notReady.length - 1]}`] : []),
  ].join('\n');
}

/** The events the fake proxy recorded. */
export function fakeEvents(file: string): Array<{ t: number; event: string; [k: string]: unknown }> {
  if (!fs.existsSync(file)) return [];
  return fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { t: number; event: string });
}

/** A CA and a server certificate for `san` (DNS), made with openssl. */
export function makeServerCert(dir: string, san: string): { ca: string; cert: string; key: string } {
  const run = (args: string[]) => {
    const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  fs.writeFileSync(path.join(dir, 'server.ext'), `subjectAltName=DNS:${san}\nextendedKeyUsage=serverAuth\n`);
  run(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test-ca']);
  run(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=meshd']);
  run([...signWith('server.csr', 'ca.crt', 'ca.key'), '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext']);
  return { ca: path.join(dir, 'ca.crt'), cert: path.join(dir, 'server.crt'), key: path.join(dir, 'server.key') };
}
