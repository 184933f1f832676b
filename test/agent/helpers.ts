// Shared pieces of the agent tests: temp dirs, free ports, the built discovery daemon (restartable on the
// same port), the agent run from source as a child process, the fake proxy, and small polling helpers.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Test } from 'tap';
import { DIST } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { waitFor } from '../helpers/wait';

export const FIXTURES = path.join(REPO, 'test/agent/fixtures');
export const FAKE_ENVOY = path.join(FIXTURES, 'fake-envoy.ts');
/** tsx by absolute URL: the agent's children run in temp dirs, where a bare `tsx` does not resolve. */
export const TSX = pathToFileURL(path.join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

export function tempDir(t: Test, prefix = 'mesh-agent-'): string {
  const dir = fs.mkdtempSync(path.join(tmpdir(), prefix));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A port nothing listens on right now (bound and released; the tests bind it again at once). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Writes an executable `envoy` that runs the fake proxy (absolute paths, so any cwd works). */
export function fakeEnvoyBinary(dir: string): string {
  const file = path.join(dir, 'envoy');
  fs.writeFileSync(file, `#!/bin/sh\nexec "${process.execPath}" --import "${TSX}" "${FAKE_ENVOY}" "$@"\n`, { mode: 0o755 });
  return file;
}

export interface Discovery {
  child: ChildProcess;
  /** The daemon's working directory. */
  cwd: string;
  /** Where the daemon publishes the mesh root with no cluster. */
  rootCertPath: string;
  grpc: string;
  secureGrpc?: string;
  http: string;
  /** host:port of --monitoringAddr (/metrics). */
  monitoring: string;
  log: () => string;
  stop: () => Promise<void>;
}

function listening(out: string, flag: string): string | undefined {
  return new RegExp(`listening on (\\S+)\\s+flag=--${flag}\\b`).exec(out)?.[1];
}

/**
 * Starts dist/pilot-discovery on loopback; `grpcPort` / `securePort` pin the xDS ports (for restarts). The daemon
 * runs in `cwd` (default: a temporary directory of its own), where its CA keeps the root (./var/lib/mesh/ca) and
 * publishes it (./var/run/secrets/mesh/root-cert.pem), so a restart in the same directory keeps the root.
 */
export async function startDiscovery(o: {
  configDir: string;
  grpcPort?: number;
  securePort?: number;
  tls?: { cert: string; key: string };
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}): Promise<Discovery> {
  const cwd = o.cwd ?? fs.mkdtempSync(path.join(tmpdir(), 'meshd-cwd-'));
  const args = [
    'discovery',
    '--configDir', path.resolve(o.configDir),
    '--grpcAddr', `127.0.0.1:${o.grpcPort ?? 0}`,
    '--httpAddr', '127.0.0.1:0',
    '--monitoringAddr', '127.0.0.1:0',
    '--httpsAddr', '127.0.0.1:0',
    '--secureGRPCAddr', `127.0.0.1:${o.securePort ?? 0}`,
    '--ctrlz_address', '127.0.0.1', '--ctrlz_port', '0',
    '--shutdownDuration', '1s',
  ];
  if (o.tls) args.push('--tlsCertFile', o.tls.cert, '--tlsKeyFile', o.tls.key);
  const child = spawn(path.join(DIST, 'pilot-discovery'), args, {
    cwd,
    env: { PATH: process.env['PATH'], HOME: process.env['HOME'], PILOT_DEBOUNCE_AFTER: '10ms', ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((resolve) =>
    child.on('exit', () => {
      if (o.cwd === undefined) fs.rmSync(cwd, { recursive: true, force: true });
      resolve();
    }),
  );
  await waitFor(
    () => `pilot-discovery did not report its listeners:\n${out}`,
    () => {
      if (child.exitCode !== null) throw new Error(`pilot-discovery exited ${child.exitCode}:\n${out}`);
      return Boolean(listening(out, 'grpcAddr') && listening(out, 'httpAddr') && listening(out, 'monitoringAddr') && (!o.tls || listening(out, 'secureGRPCAddr')));
    },
    { timeoutMs: 30_000, intervalMs: 50 },
  ).catch((e) => {
    child.kill('SIGKILL');
    throw e;
  });
  const d: Discovery = {
    child,
    cwd,
    rootCertPath: path.join(cwd, 'var/run/secrets/mesh/root-cert.pem'),
    grpc: listening(out, 'grpcAddr')!,
    secureGrpc: listening(out, 'secureGRPCAddr'),
    http: listening(out, 'httpAddr')!,
    monitoring: listening(out, 'monitoringAddr')!,
    log: () => out,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  await waitFor(() => `daemon not ready:\n${out}`, async () => (await fetch(`http://${d.http}/ready`)).status === 200, { timeoutMs: 30_000, intervalMs: 50 });
  // Ready means every listener has started and logged its address.
  d.secureGrpc = listening(out, 'secureGRPCAddr');
  return d;
}

export const GATEWAY_NS = 'mesh-system';

/**
 * A Gateway for `mesh: ingressgateway` proxies on `port`, and a VirtualService routing to a ServiceEntry
 * (127.0.0.1, on `backendPort` when given, else 80).
 */
export function gatewayConfig(port: number, backendPort?: number): string {
  return `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: ${GATEWAY_NS}}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${port}, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: ${GATEWAY_NS}}
spec:
  hosts: [backend.example.com]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 127.0.0.1${backendPort ? `, ports: {http: ${backendPort}}` : ''}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: gw, namespace: ${GATEWAY_NS}}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - route:
    - destination: {host: backend.example.com, port: {number: 80}}
`;
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
      await waitFor(() => `no ${re} in agent output:\n${summarize(out)}`, () => re.test(out), { timeoutMs, intervalMs: 50 });
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
  return [...lines.filter((l) => !l.includes('proxy is NOT ready')), ...(notReady.length ? [`(${notReady.length}×) ${notReady[notReady.length - 1]}`] : [])].join('\n');
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

/** The value of a metric (optionally with labels) in a Prometheus text exposition; undefined when absent. */
export function metricValue(text: string, name: string, labels = ''): number | undefined {
  const re = new RegExp(`^${name}${labels ? `\\{${labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\}` : '(?:\\{\\})?'} (\\S+)$`, 'm');
  const m = re.exec(text);
  return m ? Number(m[1]) : undefined;
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
  run(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'server.crt', '-days', '2', '-extfile', 'server.ext']);
  return { ca: path.join(dir, 'ca.crt'), cert: path.join(dir, 'server.crt'), key: path.join(dir, 'server.key') };
}
