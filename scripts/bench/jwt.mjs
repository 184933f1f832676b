// JWT validation cost at the ingress gateway: requests per second through a gateway whose route needs a
// RequestAuthentication-validated RS256 token (a valid one on every request) against the same route on a
// gateway without RequestAuthentication, in the same run. Goal: ≥ 0.8×.
//   node scripts/bench/jwt.mjs [--duration 10] [--connections 50] [--repeat 3] [--warmup 2] [--proxyCpu 1] [--loadCpu 0] [--noPin]
//        [--cpuProf <dir>]   (gateways from dist/mesh.cjs under node --cpu-prof; profiles land in <dir>)
//
// One daemon (`dist/pilot-discovery discovery --configDir`) serves two Gateways on their own ports, selected
// by the label `bench: plain` / `bench: jwt`, both routing everything to one backend; a RequestAuthentication
// (issuer examples/claim-routing/issuer.mjs, JWKS fetched by the daemon and inlined) selects only the `jwt`
// gateway. Both gateways (`pilot-agent proxy router --concurrency 1`, built-in engine) are pinned to
// --proxyCpu and measured one after the other, alternating, --repeat times; the backend, daemon and the
// autocannon process (../gateway/load.mjs) run on --loadCpu. Every jwt request must be answered 200, so a
// token that stopped verifying shows as non-2xx, not as speed.
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { startIssuer } from '../../examples/claim-routing/issuer.mjs';
import { runLoad } from './gateway/load-run.mjs';
import { childPids, cmdline, startGateway } from './gateway/mesh.mjs';
import { freePort } from '../lib/ports.mjs';
import { cpuSeconds } from './xds-scale/proc.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { waitFor } from '../lib/wait.mjs';
import { median, parseOptions, PIN_OPTIONS, pinPrefix } from '../lib/bench.mjs';
import { startBackend } from './gateway/backend-run.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  duration: { type: 'number', min: 0, default: 10, help: 'seconds measured per route and round' },
  connections: { type: 'number', min: 0, default: 50, help: 'load connections' },
  repeat: { type: 'number', min: 0, default: 3, help: 'rounds' },
  warmup: { type: 'number', min: 0, default: 2, help: 'seconds of warm-up' },
  ...PIN_OPTIONS,
  cpuProf: { type: 'path', help: 'gateways from dist/mesh.cjs under node --cpu-prof, profiles in this directory' },
};

const { noPin, ...opts } = parseOptions(
  'scripts/bench/jwt.mjs',
  'A gateway route with JWT authentication against the same route without, in the same run.',
  OPTIONS,
);
opts.pin = !noPin && availableParallelism() >= 2;
const pin = (cpu) => pinPrefix(opts.pin, cpu);
const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function config(dir, ports, backendPort, issuer) {
  const gateway = (name, port) => `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ${name}, namespace: mesh-system}
spec:
  selector: {mesh: ingressgateway, bench: ${name}}
  servers:
  - port: {number: ${port}, name: http, protocol: HTTP}
    hosts: ["*"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [mesh-system/${name}]
  http:
  - route:
    - destination: {host: backend.bench.svc.cluster.local, port: {number: 8000}}
---
`;
  writeFileSync(
    path.join(dir, 'bench.yaml'),
    `${gateway('plain', ports.plain)}${gateway('jwt', ports.jwt)}apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector: {matchLabels: {bench: jwt}}
  jwtRules:
  - issuer: ${issuer.issuer}
    jwksUri: ${issuer.jwksUri}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: backend, namespace: bench}
spec:
  hosts: [backend.bench.svc.cluster.local]
  location: MESH_INTERNAL
  resolution: STATIC
  ports: [{number: 8000, name: http, protocol: HTTP}]
  endpoints: [{address: 127.0.0.1, ports: {http: ${backendPort}}}]
---
# Plain HTTP to the backend: with auto mTLS its cluster would wait for a workload certificate, which the
# bench's plaintext control plane (no CA on :15010) never issues.
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: backend, namespace: bench}
spec:
  host: backend.bench.svc.cluster.local
  trafficPolicy: {tls: {mode: DISABLE}}
`,
  );
}

function load(url, o) {
  return runLoad(url, o, pin(opts.loadCpu));
}

async function status(url, headers = {}) {
  const r = await fetch(url, { headers, signal: AbortSignal.timeout(3000) });
  await r.arrayBuffer();
  return r.status;
}

const binary = (name) => path.join(ROOT, 'dist', name);
for (const b of ['pilot-discovery', 'pilot-agent']) if (!existsSync(binary(b))) throw new Error(`dist/${b} is missing: run npm run build first`);

const work = mkdtempSync(path.join(tmpdir(), 'mesh-jwt-bench-'));
const issuer = await startIssuer({ port: 0 });
try {
  const { child: backend, port: backendPort } = await startBackend(pin(opts.loadCpu));
  children.push(backend);

  const ports = { plain: await freePort(), jwt: await freePort() };
  const configDir = path.join(work, 'config');
  mkdirSync(configDir);
  config(configDir, ports, backendPort, issuer);
  const daemon = await startDaemon([...pin(opts.loadCpu), binary('pilot-discovery')], ['--configDir', configDir]);
  children.push(daemon.child);

  const gateways = {};
  for (const name of ['plain', 'jwt']) {
    const dir = path.join(work, name);
    mkdirSync(dir);
    const g = await startGateway({
      // The agent hands its node flags to the engine it starts, so both write profiles.
      command: opts.cpuProf
        ? [
            ...pin(opts.proxyCpu),
            process.execPath,
            '--cpu-prof',
            `--cpu-prof-dir=${path.join(opts.cpuProf, name)}`,
            binary('mesh.cjs'),
            'pilot-agent',
          ]
        : [...pin(opts.proxyCpu), binary('pilot-agent')],
      dir,
      discovery: daemon.grpc,
      extraEnv: {
        POD_NAME: `gw-${name}-0`,
        MESH_METAJSON_LABELS: JSON.stringify({ mesh: 'ingressgateway', bench: name }),
      },
    });
    children.push(g.child);
    gateways[name] = g;
    await waitFor(
      () => `gateway ${name} not ready:\n${g.child.output()}`,
      async () => (await status(`http://127.0.0.1:${g.ports.status}/healthz/ready`)) === 200,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    // A real `envoy` runs as the agent's child; the built-in engine runs inside the agent's process.
    g.engine = childPids(g.child.pid).find((pid) => / envoy /.test(` ${cmdline(pid)} `)) ?? g.child.pid;
  }
  const token = await issuer.mint({ groups: ['group1'], sub: 'bench' });
  const auth = { authorization: `Bearer ${token}` };
  const plainUrl = `http://127.0.0.1:${ports.plain}/`;
  const jwtUrl = `http://127.0.0.1:${ports.jwt}/`;
  // The gateway's first listener may carry the reject-all keys until the daemon's fetch lands.
  await waitFor(
    () => 'a valid token never passed the jwt gateway',
    async () => (await status(jwtUrl, auth)) === 200,
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  const bad = await status(jwtUrl, { authorization: `Bearer ${await issuer.mintBadSignature()}` });
  if (bad !== 401) throw new Error(`a bad signature got ${bad} at the jwt gateway, expected 401: not validating`);

  console.log(
    `jwt: node ${process.version}, ${availableParallelism()} cores, ${new Date().toISOString()}; gateways pinned to cpu ${opts.proxyCpu}${opts.pin ? '' : ' (not pinned)'}`,
  );
  console.log(
    `load: autocannon, ${opts.connections} connections, ${opts.duration} s (+${opts.warmup} s warm-up) per run, ${opts.repeat} alternating rounds`,
  );
  // Requests per second of the engine's own CPU time as well: on two cores the load generator shares a core
  // with the backend and may saturate first, and a token makes every request ~700 bytes bigger for it too.
  const measure = async (name, url, headers) => {
    const engine = gateways[name].engine;
    const cpu0 = cpuSeconds(engine);
    const r = await load(url, { connections: opts.connections, duration: opts.duration, warmup: opts.warmup, ...(headers ? { headers } : {}) });
    const busy = (cpuSeconds(engine) - cpu0) / (opts.duration + opts.warmup);
    return { ...r, perCore: r.rps / Math.max(busy, 1e-9), busy };
  };
  const rounds = [];
  for (let r = 0; r < opts.repeat; r++) {
    const plain = await measure('plain', plainUrl);
    const jwt = await measure('jwt', jwtUrl, auth);
    if (jwt.non2xx > 0 || jwt.errors > 0) throw new Error(`round ${r + 1}: ${jwt.non2xx} non-2xx and ${jwt.errors} errors with a valid token`);
    rounds.push({ plain, jwt });
    console.log(
      `  round ${r + 1}: no RequestAuthentication ${plain.rps.toFixed(0)} rps (engine ${(plain.busy * 100).toFixed(0)} % busy, ${plain.perCore.toFixed(0)} per core-second); ` +
        `valid RS256 token ${jwt.rps.toFixed(0)} rps (engine ${(jwt.busy * 100).toFixed(0)} % busy, ${jwt.perCore.toFixed(0)} per core-second); ${(jwt.rps / plain.rps).toFixed(2)}× rps, ${(jwt.perCore / plain.perCore).toFixed(2)}× per core`,
    );
  }
  const m = (f) => median(rounds.map(f));
  console.log(`\n| route | rps (median) | per engine core-second | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|`);
  console.log(
    `| no RequestAuthentication | ${m((x) => x.plain.rps).toFixed(0)} | ${m((x) => x.plain.perCore).toFixed(0)} | ${m((x) => x.plain.latency.p50).toFixed(2)} | ${m((x) => x.plain.latency.p99).toFixed(2)} |`,
  );
  console.log(
    `| valid RS256 token on every request | ${m((x) => x.jwt.rps).toFixed(0)} | ${m((x) => x.jwt.perCore).toFixed(0)} | ${m((x) => x.jwt.latency.p50).toFixed(2)} | ${m((x) => x.jwt.latency.p99).toFixed(2)} |`,
  );
  const ratio = m((x) => x.jwt.rps / x.plain.rps);
  const perCore = m((x) => x.jwt.perCore / x.plain.perCore);
  console.log(
    `\nratio (medians of per-round ratios): ${ratio.toFixed(2)}× rps, ${perCore.toFixed(2)}× per engine core-second — goal ≥ 0.8×: ${ratio >= 0.8 ? 'met' : perCore >= 0.8 ? 'met per core (rps limited by the shared load core)' : 'NOT met'}`,
  );
} finally {
  for (const c of children.reverse()) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  await sleep(500);
  await issuer.close();
  rmSync(work, { recursive: true, force: true });
}
