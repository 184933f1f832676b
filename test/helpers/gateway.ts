// An ingress gateway made of the built programs, as a user runs it: `pilot-discovery discovery
// --configDir` and `pilot-agent proxy router` (our engine), with an HTTP backend on loopback. The config
// is written by the test from the ports the rig picked.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Test } from 'tap';
import { DIST } from './binary';
import { freePort, startDiscovery, summarize, tempDir, waitFor, type Discovery } from '../agent/helpers';

export interface GatewayPorts {
  gw: number;
  backend: number;
  grpc: number;
  status: number;
  admin: number;
}

export interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

export interface GatewayRig {
  ports: GatewayPorts;
  dir: string;
  configDir: string;
  daemon: Discovery;
  get(p: string, headers?: Record<string, string>): Promise<Reply>;
  agentOut(): string;
}

export interface GatewayOptions {
  /** The config directory's `mesh.yaml`, made from the rig's ports. */
  config(ports: GatewayPorts): string;
  /** Environment of the daemon. */
  daemonEnv?: NodeJS.ProcessEnv;
  /** Environment of the agent beyond the pod's identity and ports. */
  agentEnv?: NodeJS.ProcessEnv;
}

/** The backend answers JSON naming itself, the path and the headers it saw. */
async function startBackend(t: Test): Promise<number> {
  const backend = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ workload: 'demo', path: req.url, headers: req.headers }));
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.teardown(
    () =>
      new Promise<void>((r) => {
        backend.close(() => r());
        backend.closeAllConnections(); // the gateway's pooled keep-alive connections
      }),
  );
  return (backend.address() as { port: number }).port;
}

export function httpGet(port: number, p: string, headers: Record<string, string> = {}, timeoutMs = 10_000): Promise<Reply> {
  return new Promise<Reply>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`GET ${p.slice(0, 80)} timed out`)));
    req.end();
  });
}

export async function startGateway(t: Test, o: GatewayOptions): Promise<GatewayRig> {
  const dir = tempDir(t, 'mesh-gateway-rig-');
  const ports: GatewayPorts = { gw: await freePort(), backend: await startBackend(t), grpc: await freePort(), status: await freePort(), admin: await freePort() };
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'mesh.yaml'), o.config(ports));
  const daemon = await startDiscovery({ configDir, grpcPort: ports.grpc, env: o.daemonEnv ?? {} });
  t.teardown(() => daemon.stop());
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${ports.grpc}\n  controlPlaneAuthPolicy: NONE\n`);
  const agent = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml'], {
    cwd: dir,
    env: {
      PATH: process.env['PATH'],
      HOME: process.env['HOME'],
      POD_NAME: 'gateway-0',
      POD_NAMESPACE: 'mesh-system',
      INSTANCE_IP: '127.0.0.1',
      MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
      PROXY_STATUS_PORT: String(await freePort()),
      PROXY_METRICS_PORT: String(await freePort()),
      PROXY_CONFIG: JSON.stringify({ statusPort: ports.status, proxyAdminPort: ports.admin, binaryPath: path.join(dir, 'no-envoy-here'), terminationDrainDuration: '1s' }),
      ...o.agentEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  agent.stdout!.on('data', (d) => (out += d));
  agent.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => agent.on('exit', () => r()));
  t.teardown(async () => {
    if (agent.exitCode === null && agent.signalCode === null) agent.kill('SIGKILL');
    await exited;
  });
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${ports.status}/healthz/ready`).then((r) => r.status).catch(() => 0)) === 200,
    60_000,
    () => `gateway not ready:\n${summarize(out)}\n--- daemon:\n${daemon.log()}`,
  );
  return { ports, dir, configDir, daemon, get: (p, headers) => httpGet(ports.gw, p, headers), agentOut: () => out };
}
