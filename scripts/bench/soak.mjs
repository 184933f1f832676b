// Soak benchmark (issue 16, item 7): many keep-alive connections through the gateway for a long time, in
// several rounds, and nothing may fail, leak descriptors or keep growing.
//   node scripts/bench/soak.mjs [--duration 60] [--connections 1000] [--rounds 3] [--binary dist/mesh | mesh.cjs]
//        [--timeout 10] [--settle 30] [--rest 10] [--upstreamIdle 5] [--fdLimit 65536] [--backend raw|node]
//        [--proxyCpu 1] [--loadCpu 0] [--noPin] [--keep] [--pattern steady|burst] [--spacing 2] [--batches 5] [--hold]
//        [--concurrency 1]
//
// --pattern burst (issue 24, item 5) replaces autocannon in each round by ./gateway/burst.mjs: --connections
// keep-alive connections opened --spacing ms apart, each sending a GET as soon as it is connected (the first batch;
// with --hold, once all of them are open, all at once), then --batches - 1 more GETs on every connection, all at
// once, batch after batch; --duration is not used. The issue's run: `--pattern burst --connections 1000 --spacing 2
// --timeout 15`. --concurrency n runs the gateway with n engine workers (default 1; Istio's gateway default, 0,
// means one per core).
//
// Processes, all on loopback with ephemeral ports, as in ./gateway.mjs: the backend (./gateway/backend.mjs),
// `pilot-discovery discovery --configDir` (a Gateway, a VirtualService and a ServiceEntry + WorkloadEntry for
// the backend, plus a DestinationRule giving the backend's connection pool an idle timeout of --upstreamIdle s,
// see below), the gateway (`pilot-agent proxy router --concurrency 1`, whose child `pilot-agent envoy` is the
// engine) pinned to --proxyCpu, and for each round a fresh autocannon process (./gateway/load.mjs) with
// --connections keep-alive connections for --duration s, pinned with the backend and the daemon to --loadCpu.
// Every process is started through `bash -c 'ulimit -n <n>'` with n = --fdLimit, or the hard limit when that is
// lower (an unprivileged process cannot raise its hard limit); the engine's and the load generator's limits
// are checked against what the connections need before the first round.
//
// Per round: completed requests and rps; the three kinds of failure autocannon tells apart — connection errors
// (with their codes), time-outs (no response within --timeout s: autocannon then drops the connection and opens
// a new one) and non-2xx answers (with their statuses) — and the second of the run each failure happened in;
// the engine's own counters for the round (admin /stats: downstream and upstream connections, 5xx, connect
// failures, overflows, resets) and the kernel's (TcpExt ListenOverflows/ListenDrops: connections the kernel
// dropped because an accept queue was full, SYN retransmissions); open file descriptors (entries of
// /proc/<pid>/fd) of the agent and the engine, the most seen under load and how long they take to come back
// to the baseline after the round (polled up to --settle s); RSS (VmRSS) of both, the largest under load and
// at rest --rest s after the descriptors came back (with the engine's V8 heap in use then); the first answer on each connection (slowest, and how many took a second or more:
// connection set-up and accept queues); the CPU the engine, the backend and the load generator got; and what
// else used the machine during the round (CPU-seconds of every process on it, from /proc/stat, minus this
// benchmark's processes, as cores; load average; the busiest other processes).
//
// The baseline (descriptors, RSS) is taken at rest after the gateway routed one request and its pooled
// upstream connection closed. Upstream connections the engine keeps for reuse are pooled until the cluster's
// idle timeout (Istio's default: 1 h, as in Envoy); --upstreamIdle (a DestinationRule
// connectionPool.http.idleTimeout) makes the pool let them go a few seconds after a round, so "back to the
// baseline" means every downstream and upstream socket was closed. --upstreamIdle 0 leaves Istio's default and
// then the upstream connections still pooled (the cluster's upstream_cx_active) are allowed above the baseline.
//
// Pass: every round has 0 connection errors, 0 time-outs and 0 non-2xx, descriptors back to the baseline, and
// the RSS at rest after the last round within 10 % of that after the first (the growth over the soak: a leak grows
// round after round and shows at the end). The rounds in between are reported, not judged: V8 collects garbage
// when it chooses, and a round after which no major collection ran yet shows up to ~20 % more at rest (its V8 heap
// in use, printed beside, says so) that is gone after the next round. Exit status 0 on pass, 1 otherwise.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { startBackend } from './gateway/backend-run.mjs';
import { runLoad } from './gateway/load-run.mjs';
import { childPids, cmdline, startGateway, writeGatewayConfig, stopProcesses, programLinks } from './gateway/mesh.mjs';
import { freePort } from '../lib/ports.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { cpuSeconds, rssBytes } from './xds-scale/proc.mjs';
import { cannotPin, median, parseOptions, PIN_OPTIONS, pinPrefix, usage } from '../lib/bench.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const HERE = path.join(ROOT, 'scripts', 'bench', 'gateway');
const BURST = path.join(HERE, 'burst.mjs');
/** RSS at rest after a later round may exceed the first round's by less than this. */
const RSS_GROWTH_LIMIT = 0.1;

const OPTIONS = {
  duration: { type: 'number', min: 1, default: 60, help: 'seconds of load per round (steady pattern)' },
  connections: { type: 'integer', min: 1, default: 1000, help: 'keep-alive connections' },
  rounds: { type: 'integer', min: 1, default: 3, help: 'rounds' },
  binary: { type: 'path', default: path.join(ROOT, 'dist', 'mesh'), help: 'the build measured (dist/mesh or a mesh.cjs bundle)' },
  timeout: { type: 'number', min: 1, default: 10, help: 'seconds without a response that count as a time-out' },
  settle: { type: 'number', min: 1, default: 30, help: 'seconds before the first reading at rest' },
  rest: { type: 'number', min: 0, default: 10, help: 'seconds of rest between rounds' },
  upstreamIdle: { type: 'number', min: 0, default: 5, help: "idle timeout (s) of the backend's connection pool" },
  fdLimit: { type: 'integer', min: 64, default: 65536, help: 'file descriptor limit of every process' },
  backend: { type: 'string', oneOf: ['raw', 'node'], default: 'raw', help: 'the backend server' },
  ...PIN_OPTIONS,
  keep: { type: 'boolean', help: 'keep the work directory' },
  pattern: { type: 'string', oneOf: ['steady', 'burst'], default: 'steady', help: 'autocannon for --duration, or ./gateway/burst.mjs' },
  spacing: { type: 'number', min: 0, default: 2, help: 'ms between connections opened (burst pattern)' },
  batches: { type: 'integer', min: 1, default: 5, help: 'GETs on every connection (burst pattern)' },
  concurrency: { type: 'integer', min: 0, default: 1, help: "the gateway's engine workers" },
  hold: { type: 'boolean', help: 'send the first batch once all connections are open (burst pattern)' },
};

/** A failed check of this script (reported without a stack trace). */
class SoakError extends Error {}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const children = [];
/** Processes started indirectly (the gateway's engine): signalled at the end if they outlive their parent. */
const grandchildren = [];
let workDir;
let opts;

async function waitFor(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      if (await check()) return;
    } catch (e) {
      last = e.message;
    }
    if (Date.now() > deadline) throw new SoakError(`${what()} (after ${timeoutMs} ms${last ? `; last error: ${last}` : ''})`);
    await sleep(100);
  }
}

async function get(url) {
  const r = await fetch(url, { signal: AbortSignal.timeout(3000) });
  const body = await r.text();
  return { status: r.status, body };
}

// ---- the file-descriptor limit every process is started with

/** The soft and hard `ulimit -n` a child of this process gets. */
function currentFdLimits() {
  const r = spawnSync('/bin/bash', ['-c', 'ulimit -Sn; ulimit -Hn'], { encoding: 'utf8' });
  const [soft, hard] = r.stdout
    .trim()
    .split('\n')
    .map((x) => (x === 'unlimited' ? Infinity : Number(x)));
  return { soft, hard };
}

let fdLimit;
/** Command words that run the rest with `ulimit -n fdLimit`. */
function ulimitPrefix() {
  return ['/bin/bash', '-c', `ulimit -n ${fdLimit} && exec "$@"`, 'bash'];
}

/** The "Max open files" soft limit of a running process. */
function processFdLimit(pid) {
  try {
    const m = /^Max open files\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    return m ? (m[1] === 'unlimited' ? Infinity : Number(m[1])) : undefined;
  } catch {
    return undefined;
  }
}

// ---- readings

/** Open file descriptors of a process (entries of /proc/<pid>/fd), or undefined when it is gone. */
function fdCount(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return undefined;
  }
}

/** Busy CPU-seconds of the whole machine so far (every cpu: all but idle and iowait). */
function machineBusySeconds() {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal (guest time is already in user)
  const busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  return busy / clockTicks;
}
const clockTicks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100;

/** The kernel's TCP counters that say an accept queue overflowed or a handshake had to be repeated. */
const KERNEL_COUNTERS = ['ListenOverflows', 'ListenDrops', 'TCPSynRetrans', 'TCPTimeouts', 'TCPReqQFullDrop', 'TCPBacklogDrop'];
function kernelTcp() {
  const out = {};
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    for (let i = 0; i + 1 < lines.length; i += 2) {
      const names = lines[i].trim().split(/\s+/);
      const values = lines[i + 1].trim().split(/\s+/);
      if (names[0] !== 'TcpExt:') continue;
      names.forEach((n, j) => KERNEL_COUNTERS.includes(n) && (out[n] = Number(values[j])));
    }
  } catch {
    // not Linux, or no procfs: reported as empty
  }
  return out;
}

/**
 * The engine's counters and gauges from its admin /stats (Envoy text format `name: value`); histograms
 * (`name: P0(a,b) … P100(a,b)`) as `name:P99` and `name:P100`.
 */
async function engineStats(adminPort) {
  const out = new Map();
  const r = await fetch(`http://127.0.0.1:${adminPort}/stats`, { signal: AbortSignal.timeout(10_000) });
  for (const line of (await r.text()).split('\n')) {
    const i = line.indexOf(': ');
    if (i < 0) continue;
    const name = line.slice(0, i);
    const rest = line.slice(i + 2);
    const v = Number(rest);
    if (Number.isFinite(v) && rest !== '') out.set(name, v);
    else for (const m of rest.matchAll(/P(99|100)\(([^,]+),/g)) out.set(`${name}:P${m[1]}`, Number(m[2]));
  }
  return out;
}

/** The longest request the engine has held so far (cumulative since it started, ms): HCM and backend cluster. */
function engineLongest(stats) {
  let downstream = NaN;
  let upstream = NaN;
  for (const [k, v] of stats) {
    if (/^http\.outbound_.*\.downstream_rq_time:P100$/.test(k)) downstream = v;
    if (k.startsWith('cluster.outbound|') && k.includes('backend.bench') && k.endsWith('.upstream_rq_time:P100')) upstream = v;
  }
  return { downstream, upstream };
}

/** Counters worth reporting when they moved in a round: connection and failure accounting. */
const INTERESTING =
  /(^|\.)(downstream_cx_total|downstream_cx_destroy\w*|downstream_cx_overflow|downstream_rq_[45]xx|downstream_rq_timeout|downstream_rq_rx_reset|downstream_rq_tx_reset|downstream_cx_idle_timeout|upstream_cx_total|upstream_cx_connect_fail|upstream_cx_connect_timeout|upstream_cx_overflow|upstream_cx_destroy\w*|upstream_cx_idle_timeout|upstream_rq_pending_overflow|upstream_rq_pending_total|upstream_rq_timeout|upstream_rq_[45]xx|upstream_rq_rx_reset|upstream_rq_tx_reset|upstream_cx_close_notify|no_route)$/;
function statDeltas(before, after) {
  const out = [];
  for (const [k, v] of after) {
    if (!INTERESTING.test(k) || k.includes('xds') || k.includes('admin') || k.includes('prometheus') || k.includes('agent')) continue;
    const d = v - (before.get(k) ?? 0);
    if (d !== 0) out.push([k, d]);
  }
  return out;
}

/** upstream_cx_active of the backend's cluster: upstream connections the engine holds (busy or pooled). */
function pooledUpstream(stats) {
  let n = 0;
  for (const [k, v] of stats) if (k.startsWith('cluster.outbound|') && k.includes('backend.bench') && k.endsWith('.upstream_cx_active')) n += v;
  return n;
}

/** The busiest processes not started by this benchmark (name and %CPU over their lifetime, from ps). */
function otherProcesses(ours) {
  const r = spawnSync('ps', ['-eo', 'pid=,ppid=,pcpu=,etimes=,args=', '--sort=-pcpu'], { encoding: 'utf8' });
  if (r.status !== 0) return [];
  const out = [];
  for (const line of r.stdout.split('\n')) {
    const m = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(.*)$/.exec(line);
    if (!m) continue;
    const pid = Number(m[1]);
    if (ours.has(pid) || ours.has(Number(m[2])) || m[5].startsWith('ps ')) continue;
    if (Number(m[3]) < 5) break;
    out.push(`${m[5].slice(0, 60)} (${m[3]} %)`);
    if (out.length === 4) break;
  }
  return out;
}

const mib = (b) => (b / 1048576).toFixed(1);
const fmt = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const list = (o) =>
  Object.entries(o ?? {})
    .map(([k, v]) => `${k} ×${v}`)
    .join(', ');
const seconds = (o) =>
  Object.entries(o ?? {})
    .map(([k, v]) => `${k}s:${v}`)
    .join(' ');

async function stopAll() {
  await stopProcesses(children, grandchildren);
  if (workDir && !opts?.keep) rmSync(workDir, { recursive: true, force: true });
}

async function main() {
  const ncpu = availableParallelism();
  const whyNot = opts.pin ? cannotPin(opts.proxyCpu, opts.loadCpu) : undefined;
  if (whyNot) {
    console.log(`note: not pinning (${whyNot})`);
    opts.pin = false;
  }
  // descriptors: the engine holds one per downstream and one per upstream connection, the load generator
  // and the backend one per connection each
  const limits = currentFdLimits();
  fdLimit = Math.min(opts.fdLimit, limits.hard);
  const need = 2 * opts.connections + 256;
  if (fdLimit < need) {
    throw new SoakError(
      `the open-files limit is too low for ${opts.connections} connections: the engine needs about ${need} descriptors, ` +
        `but the hard limit is ${limits.hard} (raise it, e.g. \`ulimit -Hn ${need}\` as root or LimitNOFILE= in a unit, or use fewer --connections)`,
    );
  }

  let agentCommand;
  let discoveryCommand;
  workDir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-soak-'));
  if (opts.binary.endsWith('.cjs')) {
    if (!existsSync(opts.binary)) throw new SoakError(`${opts.binary} is missing: run \`node build.mjs --bundle\` first`);
    agentCommand = [process.execPath, opts.binary, 'pilot-agent'];
    discoveryCommand = [process.execPath, opts.binary, 'pilot-discovery'];
  } else {
    if (!existsSync(opts.binary)) throw new SoakError(`${opts.binary} is missing: run \`node build.mjs\` first`);
    // the program is chosen by the name it is called by: run the binary through pilot-agent/pilot-discovery links
    ({ agentCommand, discoveryCommand } = programLinks(opts.binary, workDir));
  }

  const model = cpus()[0]?.model ?? 'unknown cpu';
  console.log(`soak benchmark, node ${process.version}, ${ncpu} cpus (${model}), ${new Date().toISOString()}`);
  console.log(
    `${opts.rounds} round(s) of ${opts.connections} keep-alive connections ${opts.pattern === 'burst' ? `opened ${opts.spacing} ms apart, ${opts.batches} batches of GETs` : `× ${opts.duration} s`}, client time-out ${opts.timeout} s; backend ${opts.backend}; ` +
      `upstream idle timeout ${opts.upstreamIdle > 0 ? `${opts.upstreamIdle} s` : "Istio's default (1 h)"}; ` +
      `${opts.pin ? `gateway on cpu ${opts.proxyCpu}, backend/discovery/load generator on cpu ${opts.loadCpu}` : 'not pinned'}; ` +
      `ulimit -n ${fdLimit} (was ${limits.soft}, hard ${limits.hard})`,
  );
  console.log(`gateway: ${agentCommand.join(' ')}`);

  const backend = await startBackend([...ulimitPrefix(), ...pinPrefix(opts.pin, opts.loadCpu)], ['--kind', opts.backend]);
  children.push(backend.child);
  const configDir = path.join(workDir, 'config');
  const gwDir = path.join(workDir, 'gateway');
  mkdirSync(configDir);
  mkdirSync(gwDir);
  const gwPort = await freePort();
  writeGatewayConfig(configDir, gwPort, backend.port, 'prefix', { upstreamIdleSeconds: opts.upstreamIdle });
  const daemon = await startDaemon([...ulimitPrefix(), ...pinPrefix(opts.pin, opts.loadCpu), ...discoveryCommand], ['--configDir', configDir]);
  children.push(daemon.child);
  // Istio's bootstrap keeps only a few stat prefixes: ask for the listeners', the HCM's and the backend cluster's too
  // (a safe_regex stats matcher must match the whole name, as in Envoy)
  const proxyStatsMatcher = { inclusionRegexps: ['^(http\\.|listener\\.|cluster\\.outbound\\|).*'] };
  const gw = await startGateway({
    command: [...ulimitPrefix(), ...pinPrefix(opts.pin, opts.proxyCpu), ...agentCommand],
    dir: gwDir,
    discovery: daemon.grpc,
    concurrency: opts.concurrency,
    proxyConfig: { proxyStatsMatcher },
  });
  children.push(gw.child);
  await waitFor(
    async () => (await get(`http://127.0.0.1:${gw.ports.status}/healthz/ready`)).status === 200,
    60_000,
    () => `the gateway did not become ready:\n${gw.child.output()}`,
  );
  const url = `http://127.0.0.1:${gwPort}/bench`;
  await waitFor(
    async () => (await get(url)).status === 200,
    30_000,
    () => `the gateway does not route to the backend:\n${gw.child.output()}`,
  );
  // A real `envoy` runs as the agent's child; the built-in engine runs inside the agent's process.
  const child = childPids(gw.child.pid).find((p) => / envoy /.test(` ${cmdline(p)} `));
  if (child) grandchildren.push(child);
  const engine = child ?? gw.child.pid;
  const pids = { agent: gw.child.pid, engine };
  const engineLimit = processFdLimit(engine);
  console.log(
    `engine pid ${engine} (open-files limit ${engineLimit}), agent pid ${pids.agent} (limit ${processFdLimit(pids.agent)}), backend pid ${backend.child.pid}, discovery pid ${daemon.pid}`,
  );
  if (engineLimit !== undefined && engineLimit < need)
    throw new SoakError(`the engine runs with an open-files limit of ${engineLimit}, below the ${need} the connections need`);
  const stats = () => engineStats(gw.ports.admin);

  // baseline at rest: the routed request's pooled connection gone (idle timeout), nothing else moving
  const fdsAll = () => ({ agent: fdCount(pids.agent), engine: fdCount(pids.engine) });
  await sleep(Math.max(3000, (opts.upstreamIdle + 2) * 1000));
  if (opts.upstreamIdle > 0)
    await waitFor(
      async () => pooledUpstream(await stats()) === 0,
      30_000,
      () => "the routed request's upstream connection was not released by the pool",
    );
  let stable;
  await waitFor(
    () => {
      const a = fdsAll();
      const same = stable && a.agent === stable.agent && a.engine === stable.engine;
      stable = a;
      return same;
    },
    15_000,
    () => `descriptors do not settle at rest: ${JSON.stringify(stable)}`,
  );
  const base = { fds: fdsAll(), rss: { agent: rssBytes(pids.agent), engine: rssBytes(pids.engine) }, pooled: pooledUpstream(await stats()) };
  console.log(
    `baseline at rest: fds engine ${base.fds.engine}, agent ${base.fds.agent}; RSS engine ${mib(base.rss.engine)} MiB, agent ${mib(base.rss.agent)} MiB; pooled upstream connections ${base.pooled}`,
  );

  const ours = new Set([process.pid, backend.child.pid, daemon.pid, pids.agent, pids.engine]);
  const oursCpu = () => [...ours].reduce((s, p) => s + (cpuSeconds(p) ?? 0), 0);
  const rounds = [];
  for (let round = 1; round <= opts.rounds; round++) {
    const busy0 = machineBusySeconds();
    const ours0 = oursCpu();
    const cpu0 = { engine: cpuSeconds(pids.engine) ?? 0, agent: cpuSeconds(pids.agent) ?? 0, backend: cpuSeconds(backend.child.pid) ?? 0 };
    const load0 = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
    const others = otherProcesses(ours);
    const k0 = kernelTcp();
    const s0 = await stats();
    const max = { fds: { agent: 0, engine: 0 }, rss: { agent: 0, engine: 0 } };
    const sample = () => {
      for (const k of ['agent', 'engine']) {
        max.fds[k] = Math.max(max.fds[k], fdCount(pids[k]) ?? 0);
        max.rss[k] = Math.max(max.rss[k], rssBytes(pids[k]) ?? 0);
      }
    };
    const timer = setInterval(sample, 250);
    const t0 = Date.now();
    let result;
    try {
      const prefix = [...ulimitPrefix(), ...pinPrefix(opts.pin, opts.loadCpu)];
      result =
        opts.pattern === 'burst'
          ? await runLoad(
              url,
              { connections: opts.connections, spacing: opts.spacing, batches: opts.batches, hold: opts.hold, timeout: opts.timeout },
              prefix,
              BURST,
            )
          : await runLoad(url, { connections: opts.connections, duration: opts.duration, warmup: 0, timeout: opts.timeout }, prefix);
    } finally {
      clearInterval(timer);
    }
    const wall = (Date.now() - t0) / 1000;
    const otherCores = (machineBusySeconds() - busy0 - (oursCpu() - ours0) - (result.cpu ?? 0)) / wall;
    const cores = {
      engine: ((cpuSeconds(pids.engine) ?? 0) - cpu0.engine) / wall,
      agent: ((cpuSeconds(pids.agent) ?? 0) - cpu0.agent) / wall,
      backend: ((cpuSeconds(backend.child.pid) ?? 0) - cpu0.backend) / wall,
      load: (result.cpu ?? 0) / wall,
    };
    const s1 = await stats();
    const k1 = kernelTcp();
    // back to the baseline: every connection of the round closed (pooled upstream ones after the idle timeout)
    const tEnd = Date.now();
    let fds;
    let pooled;
    let settled = false;
    while (Date.now() - tEnd < opts.settle * 1000) {
      fds = fdsAll();
      pooled = pooledUpstream(await stats());
      const allowed = opts.upstreamIdle > 0 ? 0 : Math.max(0, pooled - base.pooled);
      if (fds.agent <= base.fds.agent && fds.engine <= base.fds.engine + allowed) {
        settled = true;
        break;
      }
      await sleep(250);
    }
    const settleSeconds = (Date.now() - tEnd) / 1000;
    // at rest: --rest s after the descriptors came back, time for V8 to shrink its heap after the load
    await sleep(opts.rest * 1000);
    const rest = { agent: rssBytes(pids.agent), engine: rssBytes(pids.engine) };
    const restHeap = (await stats()).get('server.memory_allocated');
    const r = {
      round,
      result,
      wall,
      otherCores,
      cores,
      load0,
      others,
      fds,
      pooled,
      settled,
      settleSeconds,
      rest,
      max,
      kernel: Object.fromEntries(KERNEL_COUNTERS.map((k) => [k, (k1[k] ?? 0) - (k0[k] ?? 0)])),
      longest: engineLongest(s1),
      restHeap,
      engineCounters: statDeltas(s0, s1),
    };
    rounds.push(r);
    const fail = result.connErrors + result.timeouts + result.non2xx;
    console.log('');
    console.log(
      `round ${round}: ${result.requests} requests, ${fmt(result.rps, 0)} rps, p50 ${fmt(result.latency.p50, 1)} ms p99 ${fmt(result.latency.p99, 1)} ms max ${fmt(result.latency.max, 0)} ms | ` +
        `errors ${result.connErrors}, time-outs ${result.timeouts}, non-2xx ${result.non2xx}${fail ? '  <-- FAILURES' : ''}`,
    );
    if (result.connErrors || result.timeouts) console.log(`  errors by code: ${list(result.errorCodes)}`);
    if (result.batches)
      console.log(
        `  batches (requests/time-outs/errors/non-2xx/slowest ms): ${result.batches.map((b) => `${b.requests}/${b.timeouts}/${b.errors}/${b.non2xx}/${b.slowestMs}`).join('  ')}`,
      );
    if (result.non2xx) console.log(`  answers by status: ${list(result.statusCodes)}`);
    if (fail) console.log(`  failures per second of the run: ${seconds(result.errorSeconds)}`);
    console.log(
      `  first answer per connection: ${result.first.count} connections, slowest ${fmt(result.first.max, 0)} ms, ${result.first.slow} took 1 s or more`,
    );
    if (Object.keys(result.slowSeconds ?? {}).length) console.log(`  answers slower than 1 s per second of the run: ${seconds(result.slowSeconds)}`);
    console.log(
      `  engine: longest request so far (since start) ${fmt(r.longest.downstream, 0)} ms downstream, ${fmt(r.longest.upstream, 0)} ms upstream`,
    );
    console.log(
      `  engine counters: ${r.engineCounters.map(([k, v]) => `${k.replace(/^cluster\.outbound\|[^.]*\.svc\.cluster\.local\./, 'backend.')} +${v}`).join(', ') || '-'}`,
    );
    console.log(
      `  kernel TcpExt: ${
        Object.entries(r.kernel)
          .map(([k, v]) => `${k} +${v}`)
          .join(', ') || '-'
      }`,
    );
    console.log(
      `  fds: under load max engine ${max.fds.engine}, agent ${max.fds.agent}; after ${fmt(settleSeconds, 1)} s engine ${fds?.engine}, agent ${fds?.agent} ` +
        `(baseline ${base.fds.engine}/${base.fds.agent}; pooled upstream ${pooled}) ${settled ? 'back to baseline' : '<-- NOT back to baseline'}`,
    );
    console.log(
      `  RSS: under load max engine ${mib(max.rss.engine)} MiB, agent ${mib(max.rss.agent)} MiB; at rest engine ${mib(rest.engine)} MiB (V8 heap in use ${mib(restHeap)} MiB), agent ${mib(rest.agent)} MiB`,
    );
    console.log(
      `  cpu (cores): engine ${fmt(cores.engine, 2)}, agent ${fmt(cores.agent, 2)}, backend ${fmt(cores.backend, 2)}, load generator ${fmt(cores.load, 2)}`,
    );
    console.log(
      `  machine: other processes used ${fmt(otherCores, 2)} cores during the round; load average at start ${load0}${others.length ? `; busiest others: ${others.join('; ')}` : ''}`,
    );
  }

  // summary
  console.log('');
  console.log(`summary of ${opts.rounds} round(s) (median and each round)`);
  const col = (f, d = 0) => `${fmt(median(rounds.map(f)), d).padStart(8)}  [${rounds.map((r) => fmt(f(r), d)).join(', ')}]`;
  console.log(`rps                     ${col((r) => r.result.rps)}`);
  console.log(`p99 ms                  ${col((r) => r.result.latency.p99, 1)}`);
  console.log(`slowest first answer ms ${col((r) => r.result.first.max)}`);
  console.log(`engine cpu, cores       ${col((r) => r.cores.engine, 2)}`);
  console.log(`errors                  ${col((r) => r.result.connErrors)}`);
  console.log(`time-outs               ${col((r) => r.result.timeouts)}`);
  console.log(`non-2xx                 ${col((r) => r.result.non2xx)}`);
  console.log(`engine fds max          ${col((r) => r.max.fds.engine)}`);
  console.log(`engine fds after        ${col((r) => r.fds?.engine)}  baseline ${base.fds.engine}`);
  console.log(`agent fds after         ${col((r) => r.fds?.agent)}  baseline ${base.fds.agent}`);
  console.log(`engine RSS max MiB      ${col((r) => r.max.rss.engine / 1048576, 1)}`);
  console.log(`engine RSS rest MiB     ${col((r) => r.rest.engine / 1048576, 1)}  baseline ${mib(base.rss.engine)}`);
  console.log(`engine heap rest MiB    ${col((r) => r.restHeap / 1048576, 1)}`);
  console.log(`agent RSS rest MiB      ${col((r) => r.rest.agent / 1048576, 1)}  baseline ${mib(base.rss.agent)}`);
  console.log(`other load, cores       ${col((r) => r.otherCores, 2)}`);
  const problems = [];
  for (const r of rounds) {
    if (r.result.connErrors) problems.push(`round ${r.round}: ${r.result.connErrors} connection errors`);
    if (r.result.timeouts) problems.push(`round ${r.round}: ${r.result.timeouts} time-outs`);
    if (r.result.non2xx) problems.push(`round ${r.round}: ${r.result.non2xx} non-2xx`);
    if (!r.settled)
      problems.push(
        `round ${r.round}: descriptors not back to the baseline within ${opts.settle} s (engine ${r.fds?.engine}/${base.fds.engine}, agent ${r.fds?.agent}/${base.fds.agent})`,
      );
  }
  const first = rounds[0].rest;
  const last = rounds[rounds.length - 1];
  for (const r of rounds.slice(1)) {
    for (const k of ['engine', 'agent']) {
      const g = (r.rest[k] - first[k]) / first[k];
      console.log(
        `${k} RSS growth at rest, round ${r.round} vs round 1: ${fmt(g * 100, 1)} %${r === last ? ` (judged: limit ${RSS_GROWTH_LIMIT * 100} %)` : ''}`,
      );
      if (r === last && !(g < RSS_GROWTH_LIMIT))
        problems.push(`${k} RSS at rest grew ${fmt(g * 100, 1)} % from round 1 to round ${r.round} (limit ${RSS_GROWTH_LIMIT * 100} %)`);
    }
  }
  console.log(
    problems.length
      ? `FAIL: ${problems.join('; ')}`
      : 'PASS: 0 errors, 0 time-outs, 0 non-2xx in every round; descriptors back to the baseline; RSS growth from round 1 to the last under 10 %',
  );
  return problems.length === 0;
}

// stopped early (Ctrl-C, a closed output pipe): the processes started here go too
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.once(sig, () => {
    console.error(`soak benchmark: ${sig}, stopping`);
    void stopAll().then(() => process.exit(130));
  });
}
process.stdout.on('error', () => {});

const ABOUT =
  'Many keep-alive connections through the gateway for a long time, in several rounds: nothing may fail, leak descriptors or keep growing.';
try {
  const { noPin, ...o } = parseOptions('scripts/bench/soak.mjs', ABOUT, OPTIONS);
  opts = { ...o, pin: !noPin };
} catch (e) {
  console.error(`soak: ${e.message}\n${usage('scripts/bench/soak.mjs', ABOUT, OPTIONS)}`);
  process.exit(2);
}
let exitCode = 0;
try {
  if (!(await main())) exitCode = 1;
} catch (e) {
  console.error(`soak benchmark failed: ${e instanceof SoakError ? e.message : (e.stack ?? e.message)}`);
  exitCode = 1;
}
await stopAll();
process.exit(exitCode);
