// Gateway data-plane benchmark: requests per second and latency through our ingress gateway (`pilot-agent
// proxy router`, the built-in engine) against the same backend reached directly, through the same gateway with a
// real Envoy as the agent's data plane (target `envoy`: the yardstick of issue 27, found by scripts/lib/envoy.mjs,
// one worker) and through nginx. The summary gives engine/Envoy ratios from the same run.
//   node scripts/bench/gateway.mjs [--duration 10] [--connections 50] [--rate 1000] [--rateConnections 1]
//        [--rateDuration <duration>] [--rateMaxConnections <n>] [--generatorPolicy fifo|normal] [--generatorSpin 0]
//        [--warmup 2] [--repeat 1] [--targets direct,gateway,envoy,nginx]
//        [--binary dist/mesh | path/to/mesh.cjs] [--backend raw|node] [--proxyCpu 1] [--loadCpu 0] [--noPin]
//        [--cpuProf <dir>] [--keep] [--routes prefix|regex]
//
// Processes, all on loopback with ephemeral ports: the backend (./gateway/backend.mjs, one small fixed
// response); `pilot-discovery discovery --configDir` holding a Gateway, a VirtualService and a ServiceEntry +
// WorkloadEntry for the backend; the gateway (`pilot-agent proxy router --concurrency 1`, whose child
// `pilot-agent envoy` is the engine); nginx (/usr/sbin/nginx, one worker, upstream keep-alive) as a plain
// reverse proxy to the same backend; and for every measurement a fresh load-generator process
// (./gateway/load.mjs, autocannon, for the saturating run; scripts/lib/loadgen.go, built with Go on first use, for
// the fixed rate). On a machine with two or more cores the proxies (gateway, nginx) are
// pinned with taskset to --proxyCpu and everything else (backend, discovery, load generator) to --loadCpu,
// so each proxy has one core to itself.
//
// Per target and repetition: a saturating run (--connections for --duration s: completed requests per second, and the
// proxy's CPU use, from which requests per proxy-core-second follow), then a run at a fixed --rate, an open loop:
// request i is due at start + i/rate whatever the answers do and its latency runs from then, so a stall of the proxy
// counts in every request it delays (autocannon's overallRate, used before, sends each connection's share of the
// second back to back and times each request from when it actually left: a stall hid the requests it held back,
// coordinated omission). --rateConnections keep-alive connections are opened first; a request that finds all of them
// busy waits for one (timed from its due time, as wrk2 does), or with --rateMaxConnections opens another up to that
// many. The generator sleeps to each due time on an OS thread of its own under SCHED_FIFO priority 1
// (--generatorPolicy) and reports how late it sent; a round whose send lateness p99 exceeds 0.2 ms has its latencies
// left out of the medians (the generator, not the proxy, was measured). RSS (VmRSS) of the gateway's agent and engine
// processes at idle (ready, before any load) and the largest seen under load. The summary shows medians over --repeat
// rounds.
// --cpuProf <dir> runs the gateway from the bundle under `node --cpu-prof` (agent and engine) and leaves the
// profiles there.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { startBackend } from './gateway/backend-run.mjs';
import { runLoad } from './gateway/load-run.mjs';
import { childPids, cmdline, startGateway, writeGatewayConfig, stopProcesses, programLinks } from './gateway/mesh.mjs';
import { freePort } from '../lib/ports.mjs';
import { nginxAvailable, NGINX, startNginx } from './gateway/nginx.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { cpuSeconds, rssBytes } from './xds-scale/proc.mjs';
import { waitFor } from '../lib/wait.mjs';
import { envoyBinary, envoyMissing } from '../lib/envoy.mjs';
import { cannotPin, median, parseOptions, PIN_OPTIONS, pinPrefix } from '../lib/bench.mjs';
import { LOADGEN_OPTIONS, loadgenBinary, loadgenMissing, offSchedule, policyPrefix, runLoadgen, SCHEDULE_SLACK_MS } from '../lib/loadgen.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  duration: { type: 'number', min: 1, default: 10, help: 'seconds measured per target and round' },
  connections: { type: 'integer', min: 1, default: 50, help: 'load connections' },
  rate: { type: 'number', min: 1, default: 1000, help: 'requests per second of the fixed-rate run' },
  rateConnections: { type: 'integer', min: 1, default: 1, help: 'connections of the fixed-rate run, opened before it starts' },
  rateMaxConnections: {
    type: 'integer',
    min: 1,
    help: 'connections the fixed-rate run may open while every open one is busy at a due time (default --rateConnections: a request due while all are busy waits for one, timed from its due time)',
  },
  rateDuration: { type: 'number', min: 1, help: 'seconds of the fixed-rate run (default --duration)' },
  warmup: { type: 'number', min: 0, default: 2, help: 'seconds of warm-up' },
  repeat: { type: 'integer', min: 1, default: 1, help: 'rounds' },
  targets: {
    type: 'list',
    oneOf: ['direct', 'gateway', 'envoy', 'nginx'],
    default: ['direct', 'gateway', 'envoy', 'nginx'],
    help: 'what is measured (envoy: the same gateway with a real Envoy as the data plane)',
  },
  binary: { type: 'path', default: path.join(ROOT, 'dist', 'mesh'), help: 'the build measured (dist/mesh or a mesh.cjs bundle)' },
  backend: { type: 'string', oneOf: ['raw', 'node'], default: 'raw', help: 'the backend server' },
  ...PIN_OPTIONS,
  ...LOADGEN_OPTIONS,
  cpuProf: { type: 'path', help: 'CPU profiles of the engine in this directory' },
  keep: { type: 'boolean', help: 'keep the work directory' },
  routes: {
    type: 'string',
    oneOf: ['prefix', 'regex'],
    default: 'prefix',
    help: 'the route table: prefix matches, or ten regex routes before the one that matches',
  },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
let workDir;
let opts;

async function get(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(3000) });
  const body = await r.text();
  return { status: r.status, body };
}

/** One autocannon run in a fresh process on the load core; resolves with its JSON result. */
function load(url, o) {
  return runLoad(url, o, pinPrefix(opts.pin, opts.loadCpu));
}

/** The fixed-rate run: the open-loop generator (scripts/lib/loadgen.go) on the load core; resolves with its result. */
function openLoop(url) {
  const u = new URL(url);
  const o = {
    host: u.hostname,
    port: Number(u.port),
    path: u.pathname,
    rate: opts.rate,
    duration: opts.rateDuration,
    warmup: opts.warmup > 0 ? 1 : 0,
    connections: opts.rateConnections,
    maxConnections: Math.max(opts.rateConnections, opts.rateMaxConnections ?? 0),
    spinUs: opts.generatorSpin,
  };
  return runLoadgen(opts.loadgen.binary, o, (argv) => [...pinPrefix(opts.pin, opts.loadCpu), ...opts.loadgen.prefix, ...argv]);
}

/** CPU seconds and the largest RSS of `pids` while `fn` runs. */
async function observe(pids, fn) {
  const cpu0 = pids.map((p) => cpuSeconds(p) ?? 0);
  const maxRss = pids.map((p) => rssBytes(p) ?? 0);
  const timer = setInterval(() => pids.forEach((p, i) => (maxRss[i] = Math.max(maxRss[i], rssBytes(p) ?? 0))), 100);
  const t0 = process.hrtime.bigint();
  try {
    const result = await fn();
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = pids.map((p, i) => (cpuSeconds(p) ?? cpu0[i]) - cpu0[i]);
    return { result, cpu, wall, maxRss };
  } finally {
    clearInterval(timer);
  }
}

const mib = (b) => (b / 1048576).toFixed(1);
const fmt = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');

/** Processes started indirectly (the gateway's engine): signalled at the end if they outlive their parent. */
const grandchildren = [];

async function stopAll() {
  await stopProcesses(children, grandchildren);
  if (workDir && !opts?.keep) rmSync(workDir, { recursive: true, force: true });
}

/**
 * A gateway pod as a target: its own discovery daemon and config (the Gateway names the port), the agent with the
 * built-in engine (`gateway`) or with a real Envoy as its child (`envoy`: ProxyConfig.binaryPath, --concurrency 1).
 */
async function startGatewayTarget(kind, backendPort, { agentCommand, discoveryCommand }) {
  const configDir = path.join(workDir, `config-${kind}`);
  const gwDir = path.join(workDir, kind);
  mkdirSync(configDir);
  mkdirSync(gwDir);
  const gwPort = await freePort();
  writeGatewayConfig(configDir, gwPort, backendPort, opts.routes);
  const daemon = await startDaemon([...pinPrefix(opts.pin, opts.loadCpu), ...discoveryCommand], ['--configDir', configDir]);
  children.push(daemon.child);
  const proxyConfig = kind === 'envoy' ? { binaryPath: envoyBinary() } : {};
  const gw = await startGateway({
    command: [...pinPrefix(opts.pin, opts.proxyCpu), ...agentCommand],
    dir: gwDir,
    discovery: daemon.grpc,
    proxyConfig,
  });
  children.push(gw.child);
  await waitFor(
    () => `the ${kind} did not become ready:\n${gw.child.output()}`,
    async () => (await get(`http://127.0.0.1:${gw.ports.status}/healthz/ready`)).status === 200,
    { timeoutMs: 60_000, intervalMs: 100 },
  );
  const url = `http://127.0.0.1:${gwPort}/bench`;
  await waitFor(
    () => `the ${kind} does not route to the backend:\n${gw.child.output()}`,
    async () => (await get(url)).status === 200,
    { timeoutMs: 30_000, intervalMs: 100 },
  );
  // A real `envoy` runs as the agent's child; the built-in engine runs inside the agent's process.
  const envoy = childPids(gw.child.pid).find((p) => /envoy/.test(cmdline(p).split(' ')[0] ?? ''));
  if (kind === 'envoy' && !envoy) throw new Error(`the agent did not start Envoy as its child:\n${gw.child.output()}`);
  if (envoy) {
    grandchildren.push(envoy);
    return { target: { url, pids: [envoy, gw.child.pid], names: ['envoy', 'agent'] } };
  }
  return { target: { url, pids: [gw.child.pid], names: ['agent with the engine'] } };
}

async function main() {
  const { noPin, ...o } = parseOptions(
    'scripts/bench/gateway.mjs',
    'Gateway throughput and latency: direct, through our gateway, through it with Envoy as the data plane and through nginx, in one run.\n' +
      'Saturating run: autocannon (closed loop). Fixed rate: an open loop (scripts/lib/loadgen.go, built with Go on first use): request i\n' +
      `is due at start + i/rate and its latency runs from then (no coordinated omission); a round whose send lateness p99 exceeds ${SCHEDULE_SLACK_MS} ms\n` +
      'has its latencies left out.',
    OPTIONS,
  );
  opts = { ...o, pin: !noPin, rateDuration: o.rateDuration ?? o.duration };
  const ncpu = availableParallelism();
  const whyNot = opts.pin ? cannotPin(opts.proxyCpu, opts.loadCpu) : undefined;
  if (whyNot) {
    console.log(`note: not pinning (${whyNot})`);
    opts.pin = false;
  }
  // the gateway's command: the packaged binary (through its pilot-agent name) or a bundle run by node
  let agentCommand;
  let discoveryCommand;
  const bundle = opts.cpuProf
    ? opts.binary.endsWith('.cjs')
      ? opts.binary
      : path.join(path.dirname(opts.binary), 'mesh.cjs')
    : opts.binary.endsWith('.cjs')
      ? opts.binary
      : undefined;
  if (bundle) {
    if (!existsSync(bundle)) throw new Error(`${bundle} is missing: run \`npm run build\` first`);
    const prof = opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProf}`] : [];
    if (opts.cpuProf) mkdirSync(opts.cpuProf, { recursive: true });
    agentCommand = [process.execPath, ...prof, bundle, 'pilot-agent'];
    discoveryCommand = [process.execPath, bundle, 'pilot-discovery'];
  } else {
    if (!existsSync(opts.binary)) throw new Error(`${opts.binary} is missing: run \`npm run build\` first`);
    // the program is chosen by the name it is called by: run the binary through a pilot-agent link
    workDir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-gateway-'));
    ({ agentCommand, discoveryCommand } = programLinks(opts.binary, workDir));
  }
  workDir ??= mkdtempSync(path.join(tmpdir(), 'mesh-bench-gateway-'));
  if (loadgenMissing()) throw new Error(loadgenMissing());
  const policy = policyPrefix(opts.generatorPolicy);
  if (policy.note) console.log(`note: ${policy.note}`);
  opts.loadgen = { binary: loadgenBinary(), prefix: policy.prefix };
  if (opts.targets.includes('envoy') && envoyMissing()) {
    console.log(`note: ${envoyMissing()}; the envoy target is skipped`);
    opts.targets = opts.targets.filter((t) => t !== 'envoy');
  }
  const haveNginx = nginxAvailable();
  if (opts.targets.includes('nginx') && !haveNginx) {
    console.log(`note: ${NGINX} is not installed (Debian package nginx-light); nginx is skipped`);
    opts.targets = opts.targets.filter((t) => t !== 'nginx');
  }
  const model = cpus()[0]?.model ?? 'unknown cpu';
  console.log(`gateway benchmark, node ${process.version}, ${ncpu} cpus (${model}), ${new Date().toISOString()}`);
  console.log(
    `saturating: ${opts.connections} connections × ${opts.duration} s; fixed rate: ${opts.rate} rps open loop over ${opts.rateConnections} connection(s) (up to ${Math.max(opts.rateConnections, opts.rateMaxConnections ?? 0)}; generator ${opts.generatorPolicy === 'fifo' && opts.loadgen.prefix.length ? 'SCHED_FIFO' : 'normal policy'}) × ${opts.rateDuration} s; warm-up ${opts.warmup} s; ` +
      `${opts.repeat} round(s); backend ${opts.backend}; routes ${opts.routes}; ${opts.pin ? `proxies on cpu ${opts.proxyCpu}, backend/discovery/load generator on cpu ${opts.loadCpu}` : 'not pinned'}`,
  );
  console.log(`gateway: ${agentCommand.join(' ')}`);

  const backend = await startBackend(pinPrefix(opts.pin, opts.loadCpu), ['--kind', opts.backend]);
  children.push(backend.child);
  const targets = { direct: { url: `http://127.0.0.1:${backend.port}/bench` } };

  const gateways = {};
  for (const kind of ['gateway', 'envoy']) {
    if (!opts.targets.includes(kind)) continue;
    gateways[kind] = await startGatewayTarget(kind, backend.port, { agentCommand, discoveryCommand });
    targets[kind] = gateways[kind].target;
  }
  if (opts.targets.includes('nginx')) {
    const port = await freePort();
    const ng = startNginx({
      dir: path.join(workDir, 'nginx'),
      listenPort: port,
      backendPort: backend.port,
      prefix: pinPrefix(opts.pin, opts.proxyCpu),
    });
    children.push(ng);
    const url = `http://127.0.0.1:${port}/bench`;
    await waitFor(
      () => `nginx does not proxy to the backend: ${ng.output()}`,
      async () => {
        if (ng.exitCode !== null) throw new Error(`nginx exited ${ng.exitCode}: ${ng.output()}`);
        return (await get(url)).status === 200;
      },
      { timeoutMs: 15_000, intervalMs: 100 },
    );
    const workers = childPids(ng.pid);
    targets.nginx = { url, pids: [...workers, ng.pid], names: [...workers.map(() => 'worker'), 'master'] };
  }

  // idle RSS: ready, one routed request, a moment to settle
  await sleep(2000);
  const idle = Object.fromEntries(Object.entries(gateways).map(([k, g]) => [k, g.target.pids.map((p) => rssBytes(p))]));

  const runs = Object.fromEntries(opts.targets.map((t) => [t, []]));
  for (let round = 1; round <= opts.repeat; round++) {
    for (const name of opts.targets) {
      const t = targets[name];
      const pids = t.pids ?? [];
      const sat = await observe(pids, () => load(t.url, { connections: opts.connections, duration: opts.duration, warmup: opts.warmup }));
      const fixed = await observe(pids, () => openLoop(t.url));
      // nor says a p99 anything when requests went unanswered
      const late = offSchedule(fixed.result) ?? (fixed.result.unanswered > 0 ? `${fixed.result.unanswered} requests went unanswered` : undefined);
      const proxyCpu = sat.cpu.reduce((a, b) => a + b, 0) / sat.wall;
      const r = {
        rps: sat.result.rps,
        satP50: sat.result.latency.p50,
        satP99: sat.result.latency.p99,
        errors: sat.result.errors + sat.result.non2xx + fixed.result.errors + fixed.result.non2xx + fixed.result.unanswered,
        proxyCpu: pids.length ? proxyCpu : NaN,
        rpsPerCore: pids.length ? sat.result.rps / proxyCpu : NaN,
        rateRps: fixed.result.rps,
        // a round whose generator fell behind its schedule measured the generator: its latencies are left out
        p50: late ? NaN : (fixed.result.p50 ?? NaN),
        p99: late ? NaN : (fixed.result.p99 ?? NaN),
        p999: late ? NaN : (fixed.result.p999 ?? NaN),
        sendLateP99: fixed.result.sendLateP99 ?? NaN,
        late,
        maxRss: sat.maxRss.map((x, i) => Math.max(x, fixed.maxRss[i])),
      };
      runs[name].push(r);
      const rss = t.names ? t.names.map((n, i) => `${n} ${mib(r.maxRss[i])} MiB`).join(', ') : '';
      console.log(
        `round ${round} ${name.padEnd(8)} ${fmt(r.rps, 0).padStart(7)} rps` +
          (pids.length ? ` (proxy cpu ${fmt(r.proxyCpu * 100, 0)}%, ${fmt(r.rpsPerCore, 0)} rps/core)` : '') +
          ` | at ${fmt(r.rateRps, 0)} rps: p50 ${fmt(r.p50, 3)} ms p99 ${fmt(r.p99, 3)} ms p99.9 ${fmt(r.p999, 3)} ms` +
          (r.errors ? ` | ${r.errors} errors/non-2xx` : '') +
          (rss ? ` | max RSS ${rss}` : '') +
          ` | send lateness p99 ${fmt(r.sendLateP99, 3)} ms, connections ${fixed.result.connections}, queued ${fixed.result.queued}` +
          (late ? `\n  ${late}: this round's latencies are left out` : ''),
      );
    }
  }

  // summary
  const m = (name, k) => median(runs[name]?.map((r) => r[k]) ?? []);
  console.log('');
  console.log(`median of ${opts.repeat} round(s)`);
  const head = `${'target'.padEnd(9)} ${'rps'.padStart(8)} ${'proxy cpu'.padStart(9)} ${'rps/core'.padStart(9)} ${'sat p50'.padStart(8)} ${'sat p99'.padStart(8)} ${`p50@${opts.rate}`.padStart(9)} ${`p99@${opts.rate}`.padStart(9)} ${'+p50'.padStart(7)} ${'+p99'.padStart(7)}`;
  console.log(head);
  console.log('-'.repeat(head.length));
  const d50 = m('direct', 'p50');
  const d99 = m('direct', 'p99');
  for (const name of opts.targets) {
    const isProxy = name !== 'direct';
    console.log(
      `${name.padEnd(9)} ${fmt(m(name, 'rps'), 0).padStart(8)} ${(isProxy ? `${fmt(m(name, 'proxyCpu') * 100, 0)}%` : '-').padStart(9)} ${(isProxy ? fmt(m(name, 'rpsPerCore'), 0) : '-').padStart(9)} ` +
        `${fmt(m(name, 'satP50'), 2).padStart(8)} ${fmt(m(name, 'satP99'), 2).padStart(8)} ${fmt(m(name, 'p50'), 3).padStart(9)} ${fmt(m(name, 'p99'), 3).padStart(9)} ` +
        `${(isProxy && runs.direct ? fmt(m(name, 'p50') - d50, 3) : '-').padStart(7)} ${(isProxy && runs.direct ? fmt(m(name, 'p99') - d99, 3) : '-').padStart(7)}`,
    );
  }
  console.log('(latencies in ms; "sat" = under the saturating load; +p50/+p99 = added over direct at the fixed rate)');
  const lateRounds = Object.entries(runs).flatMap(([name, rs]) => rs.filter((r) => r.late).map(() => name));
  if (lateRounds.length)
    console.log(
      `note: the load generator fell behind its schedule (send lateness p99 > ${SCHEDULE_SLACK_MS} ms) or requests went unanswered in ${lateRounds.length} fixed-rate run(s) (${lateRounds.join(', ')}): their latencies are left out of the medians`,
    );
  if (runs.gateway && runs.nginx) {
    const ratio = m('gateway', 'rps') / m('nginx', 'rps');
    const perCore = m('gateway', 'rpsPerCore') / m('nginx', 'rpsPerCore');
    console.log(`gateway/nginx rps: ${fmt(ratio, 2)}  (per proxy core: ${fmt(perCore, 2)})  goal ≥ 0.5`);
    if (runs.direct && m('nginx', 'rps') > 0.85 * m('direct', 'rps')) {
      console.log('note: nginx is close to the direct rate: the load-generator core, not nginx, limits it; the per-core ratio is the fairer one');
    }
  }
  if (runs.gateway && runs.direct) console.log(`gateway added p99 at ${opts.rate} rps: ${fmt(m('gateway', 'p99') - d99, 3)} ms  goal < 1 ms`);
  if (runs.envoy && runs.direct) console.log(`envoy added p99 at ${opts.rate} rps: ${fmt(m('envoy', 'p99') - d99, 3)} ms`);
  if (runs.nginx && runs.direct) console.log(`nginx added p99 at ${opts.rate} rps: ${fmt(m('nginx', 'p99') - d99, 3)} ms`);
  for (const [kind, rss] of Object.entries(idle)) {
    const t = targets[kind];
    const loadMax = (i) => Math.max(...runs[kind].map((r) => r.maxRss[i]));
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    console.log(
      `${kind} RSS idle: ${t.names.map((n, i) => `${n} ${mib(rss[i])} MiB`).join(', ')}; under load (max): ${t.names.map((n, i) => `${n} ${mib(loadMax(i))} MiB`).join(', ')}` +
        (t.names.length > 1 ? `; pod ${mib(sum(rss))} / ${mib(sum(t.names.map((_, i) => loadMax(i))))} MiB` : ''),
    );
  }
  if (runs.gateway && runs.envoy) {
    // the yardstick: Envoy in the same run, on the same cores, under the same load (issue 27)
    const perCore = m('gateway', 'rpsPerCore') / m('envoy', 'rpsPerCore');
    console.log(`engine/Envoy requests per proxy core-second (saturated): ${fmt(perCore, 2)}×  goal ≥ 0.7× (stretch ≥ 1.0×)`);
    if (runs.direct) {
      const added = (k) => m(k, 'p99') - d99;
      console.log(
        `engine/Envoy added p99 at ${opts.rate} rps: ${fmt(added('gateway'), 3)} / ${fmt(added('envoy'), 3)} ms = ${fmt(added('gateway') / added('envoy'), 2)}×  goal ≤ 1.5×`,
      );
    }
  }
  if (runs.nginx) {
    const t = targets.nginx;
    console.log(
      `nginx RSS under load (max): ${t.names.map((n, i) => `${n} ${mib(Math.max(...runs.nginx.map((r) => r.maxRss[i])))} MiB`).join(', ')}`,
    );
  }
}

let exitCode = 0;
try {
  await main();
} catch (e) {
  console.error(`gateway benchmark failed: ${e.stack ?? e.message}`);
  exitCode = 1;
}
await stopAll();
if (opts?.cpuProf) console.log(`cpu profiles in ${opts.cpuProf}`);
process.exit(exitCode);
