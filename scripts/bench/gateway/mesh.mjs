// The gateway under test: a config directory for pilot-discovery (Gateway + VirtualService routing
// everything to a ServiceEntry/WorkloadEntry that is the benchmark backend), and `pilot-agent proxy
// router` started on loopback with every port chosen by the benchmark, in a working directory of its own.
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../../lib/ports.mjs';

/**
 * `routes`: `prefix` routes everything with one catch-all route; `regex` puts the bench path behind ten
 * RE2 routes that do not match and one that does, so the route hot path evaluates eleven regexes.
 */
function httpRoutes(routes) {
  const dest = `    route:\n    - destination: {host: backend.bench.svc.cluster.local, port: {number: 8000}}\n`;
  if (routes === 'prefix') return `  - route:\n    - destination: {host: backend.bench.svc.cluster.local, port: {number: 8000}}\n`;
  let out = '';
  for (let i = 0; i < 10; i++) out += `  - match: [{uri: {regex: "/api/v[0-9]+/item-${i}/[a-z0-9-]+(/.*)?"}}]\n${dest}`;
  return `${out}  - match: [{uri: {regex: "/(bench|test)(/[a-z]+)*"}}]\n${dest}`;
}

export function writeGatewayConfig(dir, gatewayPort, backendPort, routes = 'prefix', { upstreamIdleSeconds } = {}) {
  writeFileSync(
    path.join(dir, 'gateway.yaml'),
    `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bench, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: ${gatewayPort}, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bench, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [mesh-system/bench]
  http:
${httpRoutes(routes)}`,
  );
  writeFileSync(
    path.join(dir, 'backend.yaml'),
    `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: bench}
spec:
  hosts: [backend.bench.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8000, name: http, protocol: HTTP}]
  workloadSelector: {labels: {app: backend}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: backend-0, namespace: bench}
spec:
  address: 127.0.0.1
  ports: {http: ${backendPort}}
  labels: {app: backend}
---
# Plain HTTP to the backend: with auto mTLS its cluster would wait for a workload certificate, which the
# benches' plaintext control plane (no CA on :15010) never issues.
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend, namespace: bench}
spec:
  host: backend.bench.svc.cluster.local
  trafficPolicy:
    tls: {mode: DISABLE}${
      upstreamIdleSeconds
        ? `
    connectionPool:
      http: {idleTimeout: ${upstreamIdleSeconds}s}`
        : ''
    }
`,
  );
}

/**
 * Starts `pilot-agent proxy router` (`command` = the words that run it, e.g. [taskset, -c, 1, dist/pilot-agent]).
 * Returns the child and the ports; the engine is the agent's child (`pilot-agent envoy`). `proxyConfig`: more
 * ProxyConfig fields for PROXY_CONFIG (e.g. proxyStatsMatcher, to see the upstream clusters' counters).
 */
export async function startGateway({ command, dir, discovery, concurrency = 1, extraEnv = {}, proxyConfig = {} }) {
  const ports = { status: await freePort(), admin: await freePort(), proxyStatus: await freePort(), proxyMetrics: await freePort() };
  writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${discovery}\n  controlPlaneAuthPolicy: NONE\n`);
  const env = {
    PATH: '/usr/bin:/bin', // no `envoy` on it: the built-in engine serves
    HOME: process.env.HOME ?? '/root',
    POD_NAME: 'gw-bench-0',
    POD_NAMESPACE: 'mesh-system',
    INSTANCE_IP: '127.0.0.1',
    MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
    PROXY_STATUS_PORT: String(ports.proxyStatus),
    PROXY_METRICS_PORT: String(ports.proxyMetrics),
    PROXY_CONFIG: JSON.stringify({
      statusPort: ports.status,
      proxyAdminPort: ports.admin,
      drainDuration: '1s',
      terminationDrainDuration: '1s',
      ...proxyConfig,
    }),
    ...extraEnv,
  };
  const [file, ...args] = command;
  const child = spawn(file, [...args, 'proxy', 'router', '--meshConfig', 'mesh.yaml', '--concurrency', String(concurrency)], {
    cwd: dir,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (d) => {
    out += d;
    if (out.length > 200_000) out = out.slice(-100_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  child.output = () => out;
  return { child, ports };
}

/** Children of a process (from /proc). */
export function childPids(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    const found = [];
    for (const d of readdirSync('/proc')) {
      if (!/^\d+$/.test(d)) continue;
      try {
        const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(d));
      } catch {
        // gone
      }
    }
    return found;
  }
}

/** The process's command line, words separated by spaces. */
export function cmdline(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}

/**
 * Stops `children` newest first (SIGTERM, SIGKILL after 8 s), then signals each of `grandchildren` (the engines
 * the agents started) still running as an engine: a pid that now names another program was reused.
 */
export async function stopProcesses(children, grandchildren) {
  for (const c of [...children].reverse()) {
    if (c.exitCode === null && c.signalCode === null) {
      c.kill('SIGTERM');
      const exited = new Promise((r) => c.once('exit', r));
      const t = setTimeout(() => c.kill('SIGKILL'), 8000);
      await exited;
      clearTimeout(t);
    }
  }
  for (const pid of grandchildren) {
    if (!/ envoy /.test(` ${cmdline(pid)} `)) continue;
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone, as it should be
    }
  }
}

/**
 * The commands of pilot-agent and pilot-discovery from the packaged `binary`, which picks its program by the
 * name it is called by: links under `<dir>/bin`.
 */
export function programLinks(binary, dir) {
  const bin = path.join(dir, 'bin');
  mkdirSync(bin);
  for (const name of ['pilot-agent', 'pilot-discovery']) symlinkSync(binary, path.join(bin, name));
  return { agentCommand: [path.join(bin, 'pilot-agent')], discoveryCommand: [path.join(bin, 'pilot-discovery')] };
}
