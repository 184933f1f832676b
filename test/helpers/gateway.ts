// An ingress gateway made of the built programs, as a user runs it: `pilot-discovery discovery
// --configDir` and `pilot-agent proxy router` (our engine), with an HTTP backend on loopback. The config
// is written by the test from the ports the rig picked. By default the control plane is secured as it is
// out of the box: the gateway authenticates to the daemon's CA with a token from a loopback OIDC issuer
// (JWT_RULE, the no-cluster credential), gets its certificate, and speaks xDS over mutual TLS to :15012;
// daemon and agent share the rig's directory, where the daemon publishes the root the agent trusts.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { Test } from 'tap';
import { DIST } from './binary';
import { freePort, reservePorts, serveForTest } from './ports';
import { startDiscovery, type RunningDaemon } from './daemon';
import { summarize } from './agent';
import { tempDir } from './temp';
import { startIssuer, type Issuer } from '../ca/helpers';
import { envoyPath, type DataPlane } from './envoy';
import { waitFor } from './wait';

export interface GatewayPorts {
  gw: number;
  backend: number;
  grpc: number;
  /** The daemon's --secureGRPCAddr (xDS over TLS and the CA). */
  secureGrpc: number;
  status: number;
  admin: number;
}

/** The gateway's identity: namespace mesh-system, service account ingressgateway. */
export const GATEWAY_IDENTITY = 'spiffe://cluster.local/ns/mesh-system/sa/ingressgateway';

export interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

export interface GatewayRig {
  ports: GatewayPorts;
  dir: string;
  configDir: string;
  daemon: RunningDaemon;
  /** The OIDC issuer the daemon trusts (JWT_RULE); undefined with a plaintext control plane. */
  issuer?: Issuer;
  /** Stops the daemon and starts it again on the same ports and directory (the same root). */
  restartDaemon(): Promise<RunningDaemon>;
  get(p: string, headers?: Record<string, string>): Promise<Reply>;
  agentOut(): string;
  /** The agent's process id (to signal it). */
  agentPid: number;
  /** The proxy's own status listener (Istio's :15021, PROXY_STATUS_PORT), which forwards /healthz/ready. */
  proxyStatusPort: number;
}

export interface GatewayOptions {
  /** The config directory's `mesh.yaml`, made from the rig's ports. */
  config(ports: GatewayPorts): string;
  /** Environment of the daemon. */
  daemonEnv?: NodeJS.ProcessEnv;
  /** The daemon's mesh config (its default --meshConfig, ./etc/mesh/config/mesh), e.g. pathNormalization. */
  daemonMeshConfig?: string;
  /** Environment of the agent beyond the pod's identity and ports. */
  agentEnv?: NodeJS.ProcessEnv;
  /** `plaintext`: controlPlaneAuthPolicy NONE to the plaintext port, no certificates (default `mtls`). */
  controlPlane?: 'mtls' | 'plaintext';
  /** ProxyConfig fields beside the rig's own (PROXY_CONFIG), e.g. proxyStatsMatcher. */
  proxyConfig?: Record<string, unknown>;
  /** Flags of `pilot-agent proxy router` beyond --meshConfig (e.g. --concurrency 2). */
  agentArgs?: string[];
  /** `envoy`: the agent runs the installed real Envoy as its child (binaryPath); default our engine. */
  dataPlane?: DataPlane;
}

/** The backend answers JSON naming itself, the path and the headers it saw. */
async function startBackend(t: Test): Promise<number> {
  const backend = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ workload: 'demo', path: req.url, headers: req.headers }));
  });
  const port = await serveForTest(t, backend);
  return port;
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
  // The agent's ports stay bound until the daemon (whose other listeners take ephemeral ports) is up.
  const agentPorts = await reservePorts('gw', 'status', 'admin', 'proxyStatus', 'metrics');
  const ports: GatewayPorts = {
    gw: agentPorts.ports.gw,
    backend: await startBackend(t),
    grpc: await freePort(),
    secureGrpc: await freePort(),
    status: agentPorts.ports.status,
    admin: agentPorts.ports.admin,
  };
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.writeFileSync(path.join(configDir, 'mesh.yaml'), o.config(ports));
  if (o.daemonMeshConfig !== undefined) {
    fs.mkdirSync(path.join(dir, 'etc/mesh/config'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'etc/mesh/config/mesh'), o.daemonMeshConfig);
  }
  const mtls = (o.controlPlane ?? 'mtls') === 'mtls';
  const issuer = mtls ? await startIssuer(t) : undefined;
  const daemonOptions = {
    configDir,
    grpcPort: ports.grpc,
    securePort: ports.secureGrpc,
    cwd: dir,
    env: { ...(issuer ? { JWT_RULE: issuer.rule() } : {}), ...o.daemonEnv },
  };
  let daemon: RunningDaemon;
  try {
    daemon = await startDiscovery(daemonOptions);
  } finally {
    await agentPorts.release();
  }
  t.teardown(() => daemon.stop());
  if (issuer) {
    fs.mkdirSync(path.join(dir, 'var/run/secrets/tokens'), { recursive: true });
    fs.writeFileSync(
      path.join(dir, 'var/run/secrets/tokens/mesh-token'),
      await issuer.token({ ns: 'mesh-system', sa: 'ingressgateway', expSeconds: 4 * 3600 }),
    );
    fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${ports.secureGrpc}\n`);
  } else {
    fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${ports.grpc}\n  controlPlaneAuthPolicy: NONE\n`);
  }
  const proxyStatusPort = agentPorts.ports.proxyStatus;
  const router = await startRouter(t, {
    dir,
    ports: { status: ports.status, admin: ports.admin, proxyStatus: proxyStatusPort, metrics: agentPorts.ports.metrics },
    env: o.agentEnv,
    args: o.agentArgs,
    proxyConfig: o.proxyConfig,
    dataPlane: o.dataPlane,
    daemonLog: () => daemon.log(),
  });
  return {
    ports,
    dir,
    configDir,
    get daemon() {
      return daemon;
    },
    issuer,
    restartDaemon: async () => {
      await daemon.stop();
      daemon = await startDiscovery(daemonOptions);
      return daemon;
    },
    get: (p, headers) => httpGet(ports.gw, p, headers),
    agentOut: router.out,
    agentPid: router.pid,
    proxyStatusPort,
  };
}

export interface RouterPorts {
  status: number;
  admin: number;
  proxyStatus: number;
  metrics: number;
}

export interface RunningRouter {
  pid: number;
  out(): string;
  stop(): Promise<void>;
}

/**
 * Starts `pilot-agent proxy router` in `dir` (which holds its mesh.yaml: the discovery address) as the gateway pod
 * `gateway-0` of mesh-system with the given ports, `env` beside (e.g. its labels), and waits until it is ready.
 */
export async function startRouter(
  t: Test,
  o: {
    dir: string;
    ports: RouterPorts;
    env?: NodeJS.ProcessEnv;
    args?: string[];
    proxyConfig?: Record<string, unknown>;
    dataPlane?: DataPlane;
    daemonLog(): string;
  },
): Promise<RunningRouter> {
  const envoy = o.dataPlane === 'envoy' ? envoyPath() : undefined;
  if (o.dataPlane === 'envoy' && !envoy) throw new Error('dataPlane envoy asked for, but no Envoy is installed (test/helpers/envoy.ts)');
  const agent = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml', ...(o.args ?? [])], {
    cwd: o.dir,
    env: {
      PATH: process.env['PATH'],
      HOME: process.env['HOME'],
      POD_NAME: 'gateway-0',
      POD_NAMESPACE: 'mesh-system',
      SERVICE_ACCOUNT: 'ingressgateway',
      // The daemon's certificate names its service; the rig dials it by address.
      MESHD_SAN: 'meshd.mesh-system.svc',
      INSTANCE_IP: '127.0.0.1',
      MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
      PROXY_STATUS_PORT: String(o.ports.proxyStatus),
      PROXY_METRICS_PORT: String(o.ports.metrics),
      PROXY_CONFIG: JSON.stringify({
        statusPort: o.ports.status,
        proxyAdminPort: o.ports.admin,
        binaryPath: envoy ?? path.join(o.dir, 'no-envoy-here'),
        terminationDrainDuration: '1s',
        ...o.proxyConfig,
      }),
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // its own process group, so teardown's SIGKILL reaches a child Envoy too (Istio's agent does not take its
    // Envoy down when it is killed outright: the pod goes with both; here an orphan keeps the rig's pipes open)
    detached: true,
  });
  let out = '';
  agent.stdout!.on('data', (d) => (out += d));
  agent.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<void>((r) => agent.on('exit', () => r()));
  const stop = async (): Promise<void> => {
    if (agent.exitCode === null && agent.signalCode === null) process.kill(-agent.pid!, 'SIGKILL');
    await exited;
  };
  t.teardown(stop);
  await waitFor(
    () => `gateway not ready:\n${summarize(out)}\n--- daemon:\n${o.daemonLog()}`,
    async () =>
      (await fetch(`http://127.0.0.1:${o.ports.status}/healthz/ready`)
        .then((r) => r.status)
        .catch(() => 0)) === 200,
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  return { pid: agent.pid!, out: () => out, stop };
}
