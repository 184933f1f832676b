// Engine workers benchmark (issue 15): a saturated gateway (`pilot-agent proxy router --concurrency N`, the
// built-in engine in the agent's process) with 1 worker and with N, interleaved in one run: requests per
// second, the gateway process's CPU (all its threads), and requests per proxy core-second. The same with a real
// Envoy as the agent's data plane (--planes engine,envoy; Envoy --concurrency N, its CPU and memory added to the
// agent's): the engine's 2 ÷ 1 ratio against Envoy's from the same run (issue 27), on the same cores.
//   node scripts/bench/workers.mjs [--workers 1,2] [--duration 10] [--connections 64] [--warmup 2] [--repeat 1]
//        [--binary dist/mesh] [--proxyCpus 2,3] [--loadCpus 0,1] [--backend raw|node] [--planes engine,envoy]
//
// Goals: rps with 2 workers ≥ 1.7× rps with 1 when the load generator and the backend run on other cores
// (pin them with --proxyCpus/--loadCpus: a machine with ≥ 4 cores); and, on any machine, rps per proxy
// core-second with 2 workers ≥ 0.9× that with 1 (the threads must not waste what they use). Without
// enough cores nothing is pinned and the rps ratio only shows that a second worker does not hurt.
// Everything on loopback with ephemeral ports: the backend (./gateway/backend.mjs), `pilot-discovery
// discovery --configDir` with a Gateway, VirtualService and ServiceEntry for it, and per measurement a
// fresh autocannon process (./gateway/load.mjs).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { runLoad } from './gateway/load-run.mjs';
import { childPids, cmdline, startGateway, writeGatewayConfig } from './gateway/mesh.mjs';
import { envoyBinary, envoyMissing } from '../lib/envoy.mjs';
import { freePort } from '../lib/ports.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { cpuSeconds, rssBytes } from './xds-scale/proc.mjs';
import { waitFor } from '../lib/wait.mjs';
import { parseOptions } from '../lib/bench.mjs';
import { startBackend } from './gateway/backend-run.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  workers: { type: 'list', of: 'integer', min: 1, default: [1, 2], help: 'worker counts measured, interleaved' },
  duration: { type: 'number', min: 1, default: 10, help: 'seconds measured per run' },
  connections: { type: 'integer', min: 1, default: 64, help: 'load connections' },
  warmup: { type: 'number', min: 0, default: 2, help: 'seconds of warm-up' },
  repeat: { type: 'integer', min: 1, default: 1, help: 'rounds' },
  binary: { type: 'path', default: path.join(ROOT, 'dist', 'mesh'), help: 'the build measured' },
  proxyCpus: { type: 'cpus', help: 'CPUs of the gateway (with --loadCpus)' },
  loadCpus: { type: 'cpus', help: 'CPUs of the backend and load (with --proxyCpus)' },
  backend: { type: 'string', oneOf: ['raw', 'node'], default: 'raw', help: 'the backend server' },
  planes: {
    type: 'list',
    oneOf: ['engine', 'envoy'],
    default: ['engine', 'envoy'],
    help: "data planes: the built-in engine, and a real Envoy as the agent's child (--concurrency N as well)",
  },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
let workDir;

const status = (url) => fetch(url, { signal: AbortSignal.timeout(3000) }).then((r) => r.status);

async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  const t = setTimeout(() => child.kill('SIGKILL'), 8000);
  await exited;
  clearTimeout(t);
}

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const mib = (b) => (b / 1048576).toFixed(1);

async function main() {
  const o = parseOptions('scripts/bench/workers.mjs', 'A saturated gateway with 1 engine worker and with N, interleaved in one run.', OPTIONS);
  if ((o.proxyCpus === undefined) !== (o.loadCpus === undefined)) throw new Error('--proxyCpus and --loadCpus go together');
  if (!existsSync(o.binary)) throw new Error(`${o.binary} is missing: run \`node build.mjs\` first`);
  const pin = o.proxyCpus !== undefined;
  if (pin && spawnSync('taskset', ['-c', o.loadCpus, 'true']).status !== 0) throw new Error('taskset cannot pin to --loadCpus here');
  const proxyPrefix = pin ? ['taskset', '-c', o.proxyCpus] : [];
  const loadPrefix = pin ? ['taskset', '-c', o.loadCpus] : [];
  workDir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-workers-'));
  const bin = path.join(workDir, 'bin');
  mkdirSync(bin);
  for (const n of ['pilot-agent', 'pilot-discovery']) spawnSync('ln', ['-s', o.binary, path.join(bin, n)]);
  const ncpu = availableParallelism();
  console.log(`engine workers benchmark, node ${process.version}, ${ncpu} cpus (${cpus()[0]?.model ?? 'unknown cpu'}), ${new Date().toISOString()}`);
  console.log(
    `saturating: ${o.connections} connections × ${o.duration} s, warm-up ${o.warmup} s, ${o.repeat} round(s), workers ${o.workers.join(' vs ')}; ` +
      (pin
        ? `gateway on cpus ${o.proxyCpus}, backend/discovery/load generator on cpus ${o.loadCpus}`
        : `not pinned (everything shares ${ncpu} cpus: the rps ratio cannot show scaling; rps per proxy core-second can)`),
  );

  const { child: backend, port: backendPort } = await startBackend(loadPrefix, ['--kind', o.backend]);
  children.push(backend);

  const configDir = path.join(workDir, 'config');
  mkdirSync(configDir);
  const gwPort = await freePort();
  writeGatewayConfig(configDir, gwPort, backendPort);

  const daemon = await startDaemon([...loadPrefix, path.join(bin, 'pilot-discovery')], ['--configDir', configDir]);
  children.push(daemon.child);
  const url = `http://127.0.0.1:${gwPort}/bench`;

  if (o.planes.includes('envoy') && envoyMissing()) {
    console.log(`note: ${envoyMissing()}; only the engine is measured`);
    o.planes = o.planes.filter((p) => p !== 'envoy');
  }
  const runsOf = Object.fromEntries(o.planes.map((plane) => [plane, new Map(o.workers.map((n) => [n, []]))]));
  for (let round = 1; round <= o.repeat; round++) {
    for (const plane of o.planes) {
      for (const n of o.workers) await measure(o, { plane, n, round, runs: runsOf[plane], bin, proxyPrefix, loadPrefix, daemon, url });
    }
  }
  for (const plane of o.planes) summary(o, plane, runsOf[plane], pin);
  if (runsOf.engine && runsOf.envoy && o.workers.includes(1) && o.workers.includes(2)) {
    const ratio = (runs) => median(runs.get(2).map((r) => r.rps)) / median(runs.get(1).map((r) => r.rps));
    const [e, v] = [ratio(runsOf.engine), ratio(runsOf.envoy)];
    console.log(
      `saturated rps 2 ÷ 1 workers: engine ×${fmt(e)}, Envoy ×${fmt(v)}; engine ÷ Envoy ${fmt(e / v)}  goal ≥ 1.0 (engine's ratio ≥ Envoy's)`,
    );
  }
}

/** One gateway pod (agent with the engine, or with Envoy as its child) with `n` workers, saturated once. */
async function measure(o, { plane, n, round, runs, bin, proxyPrefix, loadPrefix, url, daemon }) {
  const dir = path.join(workDir, `gw-${plane}-${n}-${round}`);
  mkdirSync(dir);
  const proxyConfig = plane === 'envoy' ? { binaryPath: envoyBinary() } : {};
  const gw = await startGateway({
    command: [...proxyPrefix, path.join(bin, 'pilot-agent')],
    dir,
    discovery: daemon.grpc,
    concurrency: n,
    proxyConfig,
  });
  children.push(gw.child);
  let envoy;
  try {
    await waitFor(
      () => `the gateway did not become ready:\n${gw.child.output()}`,
      async () => (await status(`http://127.0.0.1:${gw.ports.status}/healthz/ready`)) === 200,
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    await waitFor(
      () => `the gateway does not route to the backend:\n${gw.child.output()}`,
      async () => (await status(url)) === 200,
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    // worker threads start once the main thread is live: give them a moment, then check they all serve
    await sleep(1500);
    // with Envoy the pod's data plane is the agent's child: its CPU and memory count with the agent's
    envoy = childPids(gw.child.pid).find((p) => /envoy/.test(cmdline(p).split(' ')[0] ?? ''));
    if (plane === 'envoy' && !envoy) throw new Error(`the agent did not start Envoy:\n${gw.child.output()}`);
    const pids = [gw.child.pid, ...(envoy ? [envoy] : [])];
    const sum = (f) => pids.reduce((a, p) => a + (f(p) ?? 0), 0);
    const idleRss = sum(rssBytes);
    const cpu0 = sum(cpuSeconds);
    const t0 = process.hrtime.bigint();
    const res = await runLoad(url, { connections: o.connections, duration: o.duration, warmup: o.warmup }, loadPrefix);
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = (sum(cpuSeconds) - cpu0) / wall;
    const loadRss = sum(rssBytes);
    const text = await fetch(`http://127.0.0.1:${gw.ports.admin}/stats?filter=^server\\.(concurrency|worker_restarts)$`).then((r) => r.text());
    const conc = Number(/server\.concurrency: (\d+)/.exec(text)?.[1] ?? NaN);
    // the load's rps counts only the timed part; the process CPU covers the warm-up too
    const r = { rps: res.rps, cpu, perCore: res.rps / cpu, errors: res.errors + res.non2xx, idleRss, loadRss, conc };
    runs.get(n).push(r);
    console.log(
      `round ${round} ${plane} workers ${n} (server.concurrency ${conc}): ${fmt(r.rps, 0)} rps, gateway cpu ${fmt(cpu * 100, 0)}%, ${fmt(r.perCore, 0)} rps per proxy core-second` +
        `${r.errors ? `, ${r.errors} errors/non-2xx` : ''}, RSS idle ${mib(idleRss)} MiB, after load ${mib(loadRss)} MiB`,
    );
  } finally {
    await stop(gw.child);
    if (envoy) {
      try {
        process.kill(envoy, 'SIGKILL');
      } catch {
        // gone with the agent
      }
    }
  }
}

function summary(o, plane, runs, pin) {
  console.log('');
  console.log(`${plane}: median of ${o.repeat} round(s)`);
  const m = (n, k) => median(runs.get(n).map((r) => r[k]));
  const base = o.workers[0];
  for (const n of o.workers) {
    console.log(
      `workers ${String(n).padStart(2)}: ${fmt(m(n, 'rps'), 0).padStart(7)} rps  cpu ${fmt(m(n, 'cpu') * 100, 0).padStart(4)}%  ${fmt(m(n, 'perCore'), 0).padStart(6)} rps/core-s  RSS idle ${mib(m(n, 'idleRss'))} MiB` +
        (n !== base
          ? `  | vs ${base}: rps ×${fmt(m(n, 'rps') / m(base, 'rps'))}, rps per core-second ×${fmt(m(n, 'perCore') / m(base, 'perCore'))}`
          : ''),
    );
  }
  if (runs.has(1) && runs.has(2)) {
    const scale = m(2, 'rps') / m(1, 'rps');
    const eff = m(2, 'perCore') / m(1, 'perCore');
    console.log(
      `scaling 1 → 2 workers: ×${fmt(scale)} (goal ≥ 1.7 with the gateway on cores of its own${pin ? '' : ': not pinned here, so not a measure of it'})`,
    );
    console.log(`rps per proxy core-second 2 vs 1 workers: ×${fmt(eff)} (goal ≥ 0.90)`);
  }
}

let exitCode = 0;
try {
  await main();
} catch (e) {
  console.error(`workers benchmark failed: ${e.stack ?? e.message}`);
  exitCode = 1;
}
for (const c of children.reverse()) await stop(c);
if (workDir) rmSync(workDir, { recursive: true, force: true });
process.exit(exitCode);
