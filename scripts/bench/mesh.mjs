// East-west data-plane benchmark (issue 11): A's app → B's app on one machine, in the pods of
// scripts/lib/mesh-pods.mjs (network namespaces joined by veth pairs through a routing "world" namespace),
//   direct     two bare pods (no capture, no sidecar): the kernel's path between two pods, the baseline;
//   plaintext  pods A and B captured with sidecars (uid 1337), PeerAuthentication DISABLE (mesh-wide) and a
//              DestinationRule with tls DISABLE for B's service;
//   mtls       the same pods, PeerAuthentication STRICT, auto-mTLS (ISTIO_MUTUAL, both SPIFFE identities checked);
//   envoy      the mtls pair again in pods whose agents run a real Envoy as their data plane (ProxyConfig.binaryPath,
//              scripts/lib/envoy.mjs): the yardstick of issue 27, with engine/Envoy ratios from the same run.
// For each: a fixed rate (--rate, open loop: requests leave on a schedule whatever the answers do, latency is counted
// from the scheduled send time, so a stall is not hidden by the generator waiting for it; the generator is
// scripts/lib/loadgen.go, see below) and a saturated run (closed loop over --connections keep-alive connections:
// requests per second). The CPU seconds of both proxies (agent + engine processes of uid 1337 in pods A and B, from
// /proc/<pid>/stat) during the saturated run give requests per proxy core-second. Then, from the same run, the two
// goals of issue 11: the mTLS pair's p99 added over direct at the fixed rate (≤ 0.5 ms; Istio 1.20 publishes +0.298
// ms), and the mTLS pair's requests per proxy core-second against the plaintext pair's (≤ 30 % lower).
//
//   sudo node scripts/bench/mesh.mjs [--duration 10] [--rate 1000] [--connections 32] [--warmup 2] [--binary dist]
//        [--targets direct,plaintext,mtls,envoy] [--generator raw|http] [--generatorPolicy fifo|normal]
//        [--generatorSpin 0] [--rateConnections 1] [--rateMaxConnections 256] [--cpuProf <dir>] [--perf <dir>]
//        [--nodeArgs '<node flags>'] [--keep] [--concurrency N] [--proxyCpus 1 --otherCpus 0] [--nice -19]
//        (--rate 0: saturated runs only; --concurrency: the sidecars' engine workers, proxyConfig.concurrency;
//        unset: the agent's default, 2; --proxyCpus/--otherCpus: taskset CPU lists, both sidecars (every
//        thread) on the first, everything else — generator, apps, discovery, this script — on the second, as
//        on a benchmark cluster where the proxies do not share cores with the load; unset: nothing pinned;
//        --nice N: during the fixed-rate runs only, every thread of every process of the measured pods (apps,
//        agents with their engines) and the generator run at nice N (-20…19), for direct and sidecar runs
//        alike: the scheduler then prefers them to whatever else runs on the machine, the nearest a shared
//        2-core machine comes to the dedicated cores of published figures. Not a real-time policy: under
//        SCHED_FIFO, threads of equal priority that wait on each other on one core stalled whole runs)
// --cpuProf runs both sidecars from <binary>/mesh.cjs under `node --cpu-prof` (profiles in <dir>/a and <dir>/b);
// --nodeArgs passes node flags to them the same way (e.g. '--trace-gc', or a V8 flag to measure); --keep leaves
// the work directory (the programs' logs) in place. --perf records the proxies with `perf record -g` during each
// saturated run (<dir>/<target>.data, kernel and user time: the CPU profile samples wall-clock time of the main
// thread only, which on a busy machine blames whatever was running when the process was descheduled; add
// --nodeArgs --perf-basic-prof for JavaScript names).
//
// Needs root, iproute2, iptables, setpriv and openssl, the built binary (`node build.mjs`) and, for the fixed rate,
// a Go toolchain to build the open-loop generator once (scripts/lib/loadgen.mjs). Both load generators run inside
// the calling pod's network namespace as the application's user (no wrk/h2load on this machine). The fixed rate:
// scripts/lib/loadgen.go, one OS thread sleeping to each request's due time with clock_nanosleep (under
// SCHED_FIFO priority 1 unless --generatorPolicy normal), --rateConnections keep-alive connections (1) opened first
// and more (up to --rateMaxConnections, 256) whenever every open one is busy at a due time; it reports its send
// lateness, and a run whose p99 exceeds 0.2 ms gives no added-p99 figure (the JS generator it replaces sent 3–4 ms
// late at p99 on these two cores). The saturated run: this script run again (`--load <json>`), by default
// keep-alive connections on raw sockets writing one prepared request and reading responses only as far as their
// framing (`--generator raw`), or node's http client with a keep-alive agent (`--generator http`, the method of
// the figures recorded before; it spends as much CPU per request as a proxy, on the same two cores). Everything it
// makes is removed at the end, on Ctrl-C and on failure.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, unlinkSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { APP_UID, asUser, callIn, Cleanup, httpGetIn, meshAddr, meshPodsUnavailable, proxyPids, startMesh } from '../lib/mesh-pods.mjs';
import { waitFor } from '../lib/wait.mjs';
import { envoyBinary, envoyMissing } from '../lib/envoy.mjs';
import { parseOptions } from '../lib/bench.mjs';
import { LOADGEN_OPTIONS, loadgenBinary, loadgenMissing, offSchedule, policyPrefix, runLoadgen, SCHEDULE_SLACK_MS } from '../lib/loadgen.mjs';

const SELF = new URL(import.meta.url).pathname;
const ROOT = path.resolve(path.dirname(SELF), '../..');

// ---- the saturated run's load generator (runs inside a pod) ----

/** Saturated: `connections` loops, each sending its next request when the last one is answered. */
function closedLoop(o, agent, seconds) {
  return new Promise((resolve) => {
    const start = performance.now();
    const end = start + seconds * 1000;
    let ok = 0;
    let errors = 0;
    let running = o.connections;
    const loop = () => {
      if (performance.now() >= end) {
        if (--running === 0) resolve({ ok, errors, seconds: (performance.now() - start) / 1000, rps: ok / ((performance.now() - start) / 1000) });
        return;
      }
      agent.get((err, status) => {
        if (err) {
          errors++;
          setTimeout(loop, 10);
          return;
        }
        if (status >= 200 && status < 300) ok++;
        else errors++;
        loop();
      });
    };
    for (let i = 0; i < o.connections; i++) loop();
  });
}

/** Node's http client with a keep-alive agent (`--generator http`, the method of the first recorded runs). */
class HttpAgent {
  constructor(o, maxSockets) {
    this.o = o;
    this.agent = new http.Agent({ keepAlive: true, maxSockets });
  }
  get(cb) {
    const req = http.request({ host: this.o.host, port: this.o.port, path: '/hello', agent: this.agent }, (res) => {
      res.resume();
      res.on('end', () => cb(undefined, res.statusCode));
    });
    req.on('error', (e) => cb(e));
    req.end();
  }
  destroy() {
    this.agent.destroy();
  }
}

/**
 * The lighter generator (`--generator raw`, the default): keep-alive connections on raw sockets, one request
 * written as one prepared buffer, the response read only as far as its status line, Content-Length (or chunked
 * framing) needs. On two cores the generator competes with both apps and both proxies, and Node's http client
 * (ClientRequest/IncomingMessage streams, header objects) costs as much per request as a proxy does; this
 * costs a fraction of it, so the schedule is kept and less of the machine goes to measuring.
 */
class RawAgent {
  constructor(o, maxSockets) {
    this.o = o;
    this.max = maxSockets;
    this.idle = [];
    this.all = new Set();
    this.queue = [];
    this.request = Buffer.from(`GET /hello HTTP/1.1\r\nhost: ${o.host}:${o.port}\r\n\r\n`, 'latin1');
  }
  get(cb) {
    const c = this.idle.pop();
    if (c) this.send(c, cb);
    else if (this.all.size < this.max) this.open(cb);
    else this.queue.push(cb);
  }
  open(cb) {
    const s = net.connect({ host: this.o.host, port: this.o.port, noDelay: true });
    const c = { s, cb: undefined, buf: undefined, status: 0, remaining: -1, chunked: false, used: 0, got: false };
    this.all.add(c);
    s.on('data', (d) => {
      c.got = true;
      this.onData(c, d);
    });
    const gone = (e) => {
      if (!this.all.delete(c)) return;
      s.destroy();
      const i = this.idle.indexOf(c);
      if (i >= 0) this.idle.splice(i, 1);
      const cb2 = c.cb;
      c.cb = undefined;
      if (cb2 && c.used > 1 && !c.got && !this.destroyed) {
        // the keep-alive race (the server closed an idle connection as the request went out): once more on a
        // new connection, as a browser or Envoy would; not a failure of the path measured, but counted
        this.retries = (this.retries ?? 0) + 1;
        this.open(cb2);
        return;
      }
      cb2?.(e ?? new Error('connection closed'));
      // a queued request takes a new connection in its place
      if (this.queue.length > 0 && !this.destroyed) this.open(this.queue.shift());
    };
    s.on('error', gone);
    // the server closes an idle keep-alive connection (Node's 5 s): not reused from then on
    s.on('end', () => gone());
    s.on('close', () => gone());
    this.send(c, cb);
  }
  send(c, cb) {
    c.cb = cb;
    c.used++;
    c.got = false;
    c.status = 0;
    c.remaining = -1;
    c.chunked = false;
    c.s.write(this.request);
  }
  onData(c, d) {
    let b = c.buf ? Buffer.concat([c.buf, d]) : d;
    c.buf = undefined;
    for (;;) {
      if (!c.cb) return;
      if (c.status === 0) {
        const end = b.indexOf('\r\n\r\n');
        if (end < 0) {
          c.buf = b;
          return;
        }
        const head = b.toString('latin1', 0, end);
        c.status = Number(head.slice(9, 12));
        const len = /\r\ncontent-length: *(\d+)/i.exec(head);
        c.chunked = !len && /\r\ntransfer-encoding: *chunked/i.test(head);
        c.remaining = len ? Number(len[1]) : 0;
        b = b.subarray(end + 4);
      }
      if (c.chunked) {
        // chunks until the zero-size one and its final CRLF
        const nl = b.indexOf('\r\n');
        if (nl < 0) {
          c.buf = b;
          return;
        }
        const size = parseInt(b.toString('latin1', 0, nl), 16);
        if (b.length < nl + 2 + size + 2) {
          c.buf = b;
          return;
        }
        b = b.subarray(nl + 2 + size + 2);
        if (size > 0) continue;
      } else {
        const take = Math.min(c.remaining, b.length);
        c.remaining -= take;
        b = b.subarray(take);
        if (c.remaining > 0) return;
      }
      const cb = c.cb;
      const status = c.status;
      c.cb = undefined;
      c.status = 0;
      const next = this.queue.shift();
      if (next) this.send(c, next);
      else this.idle.push(c);
      cb(undefined, status);
      if (b.length === 0) return;
    }
  }
  destroy() {
    this.destroyed = true;
    for (const c of this.all) c.s.destroy();
  }
}

/** `--load <json>`: {host, port, connections, duration, warmup, generator} → one JSON line (the saturated run). */
async function loadMain(o) {
  const Agent = o.generator === 'http' ? HttpAgent : RawAgent;
  const newAgent = () => new Agent(o, o.connections);
  const run = closedLoop;
  if (o.warmup > 0) {
    // its own connections: what a warm-up left unanswered must not queue ahead of the measurement
    const warm = newAgent();
    await run(o, warm, o.warmup);
    warm.destroy();
  }
  const agent = newAgent();
  // the parent reads CPU counters between these two lines
  process.stdout.write('{"measuring":true}\n');
  const cpu0 = process.cpuUsage();
  const r = await run(o, agent, o.duration);
  const c = process.cpuUsage(cpu0);
  r.generatorCpu = (c.user + c.system) / 1e6;
  r.retries = agent.retries ?? 0;
  process.stdout.write(`${JSON.stringify(r)}\n`);
  agent.destroy();
  process.exit(0);
}

// ---- the benchmark ----

function taskset(args) {
  const r = spawnSync('taskset', args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`taskset ${args.join(' ')}: ${r.error?.message ?? r.stderr.trim()}`);
}

const OPTIONS = {
  duration: { type: 'number', min: 0, default: 10, help: 'seconds per run' },
  rate: { type: 'number', min: 0, default: 1000, help: 'requests per second of the fixed-rate run (0: saturated runs only)' },
  connections: { type: 'number', min: 0, default: 32, help: 'keep-alive connections of the saturated run' },
  rateConnections: { type: 'integer', min: 1, default: 1, help: 'keep-alive connections of the fixed-rate run, opened before it starts' },
  rateMaxConnections: {
    type: 'integer',
    min: 1,
    default: 256,
    help: 'connections the fixed-rate run may open while every open one is busy at a due time (beyond: a request waits for one, timed from its due time)',
  },
  warmup: { type: 'number', min: 0, default: 2, help: 'seconds of warm-up' },
  binary: { type: 'path', default: path.join(ROOT, 'dist'), help: 'the build directory measured' },
  targets: {
    type: 'list',
    oneOf: ['direct', 'plaintext', 'mtls', 'envoy'],
    default: ['direct', 'plaintext', 'mtls', 'envoy'],
    help: "what is measured (envoy: an mTLS pair with a real Envoy as each agent's data plane)",
  },
  cpuProf: { type: 'path', help: 'both sidecars from <binary>/mesh.cjs under node --cpu-prof, profiles in <dir>/a and <dir>/b' },
  perf: { type: 'path', help: 'record the proxies with perf record -g during each saturated run, into this directory' },
  nodeArgs: { type: 'string', default: '', help: "node flags for the sidecars run from mesh.cjs (e.g. '--trace-gc')" },
  keep: { type: 'boolean', help: "leave the work directory (the programs' logs) in place" },
  generator: {
    type: 'string',
    oneOf: ['raw', 'http'],
    default: 'raw',
    help: "the saturated run's closed-loop client: raw sockets, or node's http client (the fixed rate uses the open-loop generator, scripts/lib/loadgen.go)",
  },
  ...LOADGEN_OPTIONS,
  concurrency: { type: 'number', min: 0, help: "the sidecars' engine workers (proxyConfig.concurrency; default the agent's, 2)" },
  proxyCpus: { type: 'cpus', help: 'taskset CPU list of both sidecars' },
  otherCpus: { type: 'cpus', help: 'taskset CPU list of everything else' },
  nice: { type: 'integer', min: -20, max: 19, default: 0, help: 'nice value of the measured pods during the fixed-rate runs' },
};

const PLAINTEXT = {
  'peer-authentication.yaml': `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: DISABLE}
`,
  'destination-rule.yaml': `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: b, namespace: b}
spec:
  host: b.b.svc.cluster.local
  trafficPolicy: {tls: {mode: DISABLE}}
`,
};
const MTLS = {
  'peer-authentication.yaml': `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: mesh-system}
spec:
  mtls: {mode: STRICT}
`,
};

/**
 * Runs a load generator in `ns` as the application's user: for the fixed rate the open-loop one
 * (scripts/lib/loadgen.mjs, `generator`: its binary and scheduling prefix), for the saturated run this script's
 * closed loop (`--load`). `onMeasuring` is called when its measured part starts.
 */
function load(ns, o, generator, onMeasuring, nice = 0) {
  const inPod = (argv) => [
    // the policy and the nice value are inherited through ip's and setpriv's exec, and by every thread started
    ...(o.mode === 'fixed' ? generator.prefix : []),
    ...(nice !== 0 ? ['nice', '-n', String(nice)] : []),
    ...['ip', 'netns', 'exec', ns, ...asUser(APP_UID, argv)],
  ];
  const run =
    o.mode === 'fixed'
      ? runLoadgen(generator.binary, o, inPod, onMeasuring)
      : runLoadgen(process.execPath, o, ([node, json]) => inPod([node, SELF, '--load', json]), onMeasuring);
  return run.catch((e) => {
    throw new Error(`in ${ns}: ${e.message}`);
  });
}

/**
 * Upstream connections each sidecar has opened so far (cx_total of its hosts in the admin's /clusters): A's to B's
 * sidecar, B's to its app. A figure that grows with the requests means connections are not reused (with mTLS,
 * a handshake per request).
 */
function upstreamConnections(sidecars) {
  const out = {};
  for (const [name, ns] of Object.entries(sidecars)) {
    const r = httpGetIn(ns, 'http://127.0.0.1:15000/clusters');
    out[name] = 0;
    for (const m of String(r.body).matchAll(/^(outbound|inbound)\|8080\|[^:]*::[^:]+:\d+::cx_total::(\d+)$/gm)) out[name] += Number(m[2]);
  }
  return out;
}

/** User and system CPU seconds of the processes together (from /proc/<pid>/stat). */
function cpuOf(pids) {
  const t = { user: 0, system: 0 };
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      t.user += Number(rest[11]) / CLK_TCK;
      t.system += Number(rest[12]) / CLK_TCK;
    } catch {
      // gone
    }
  }
  return t;
}
const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** `perf record` of the proxies (kernel and user stacks) while `fn` runs, into `file`. */
async function perfRecord(pids, file, fn) {
  const perf = spawn('perf', ['record', '-q', '-F', '499', '-g', '-p', pids.join(','), '-o', file], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  perf.stderr.on('data', (d) => (err += d));
  const exited = new Promise((r) => perf.once('exit', r));
  try {
    return await fn();
  } finally {
    perf.kill('SIGINT');
    if ((await exited) !== 0 && err) console.log(`perf record: ${err.trim()}`);
  }
}

/** Every thread of every process in the namespaces to nice `nice` (0: back to the default). */
function schedule(namespaces, nice) {
  for (const ns of namespaces) {
    for (const pid of spawnSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).stdout.split(/\s+/).filter(Boolean)) {
      let tids;
      try {
        tids = readdirSync(`/proc/${pid}/task`);
      } catch {
        continue; // exited in between
      }
      const r = spawnSync('renice', ['-n', String(nice), '-p', ...tids], { encoding: 'utf8' });
      // a thread may have exited in between; anything else means the figures would not be what they say
      if (r.status !== 0 && existsSync(`/proc/${pid}`) && !/No such process/.test(r.stderr))
        throw new Error(`renice of pid ${pid}: ${r.error?.message ?? r.stderr.trim()}`);
    }
  }
}

async function measure(name, ns, target, pids, o, sidecars = {}, pods = [ns]) {
  const common = { host: target.host, port: target.port, duration: o.duration, warmup: o.warmup };
  const cx0 = upstreamConnections(sidecars);
  const fixedRun = async () => {
    if (o.nice !== 0) schedule(pods, o.nice);
    try {
      // --rateConnections opened first, more while every open one is busy at a due time, up to --rateMaxConnections
      const fixed = {
        ...common,
        mode: 'fixed',
        path: '/hello',
        rate: o.rate,
        connections: o.rateConnections,
        maxConnections: Math.max(o.rateConnections, o.rateMaxConnections),
        spinUs: o.generatorSpin,
      };
      return await load(ns, fixed, o.loadgen, undefined, o.nice);
    } finally {
      if (o.nice !== 0) schedule(pods, 0);
    }
  };
  // --rate 0: saturated runs only (the CPU comparison), no fixed-rate run
  const fixed =
    o.rate > 0 ? await fixedRun() : { sent: 0, ok: 0, errors: 0, non2xx: 0, unanswered: 0, p50: NaN, p90: NaN, p99: NaN, sendLateP99: NaN };
  let cpu0 = { user: 0, system: 0 };
  let perfStarted;
  const saturated = () =>
    load(ns, { ...common, mode: 'saturated', connections: o.connections, generator: o.generator }, o.loadgen, () => {
      cpu0 = cpuOf(pids);
      perfStarted?.();
    });
  const sat =
    o.perf && pids.length
      ? await (async () => {
          // perf records the measured part only: started when the generator says so
          const measuring = new Promise((r) => (perfStarted = r));
          const whole = saturated();
          await Promise.race([measuring, whole]);
          mkdirSync(o.perf, { recursive: true });
          return perfRecord(pids, path.join(o.perf, `${name}.data`), () => whole);
        })()
      : await saturated();
  const cpu1 = cpuOf(pids);
  const cpuUser = cpu1.user - cpu0.user;
  const cpuSystem = cpu1.system - cpu0.system;
  const cpu = cpuUser + cpuSystem;
  const cx1 = upstreamConnections(sidecars);
  const opened = Object.keys(cx1)
    .map((k) => `${k} ${cx1[k] - cx0[k]}`)
    .join(', ');
  const perCore = pids.length ? sat.ok / cpu : NaN;
  const f = (x) => (Number.isFinite(x) ? x.toFixed(3) : '-');
  console.log(
    `${name.padEnd(10)} fixed ${o.rate} rps: generator ${f(fixed.generatorCpu)} CPU s, p50 ${f(fixed.p50)} ms, p90 ${f(fixed.p90)} ms, p99 ${f(fixed.p99)} ms (sent ${fixed.sent}, ok ${fixed.ok}, errors ${fixed.errors + fixed.non2xx}, unanswered ${fixed.unanswered}, keep-alive retries ${fixed.retries ?? 0}, send lateness p99 ${f(fixed.sendLateP99)} ms, connections ${fixed.connections ?? '-'}, queued ${fixed.queued ?? '-'})\n` +
      (o.rate > 0 && (offSchedule(fixed) || fixed.unanswered > 0)
        ? `${''.padEnd(10)} ${offSchedule(fixed) ?? `${fixed.unanswered} requests unanswered`}: this machine is too busy for these figures\n`
        : '') +
      `${''.padEnd(10)} saturated (${o.connections} conns): ${sat.rps.toFixed(0)} rps (errors ${sat.errors}, keep-alive retries ${sat.retries ?? 0}, generator ${sat.generatorCpu.toFixed(2)} CPU s)` +
      (pids.length
        ? `, proxies ${cpu.toFixed(2)} CPU s (user ${cpuUser.toFixed(2)}, system ${cpuSystem.toFixed(2)}) → ${perCore.toFixed(0)} requests per proxy core-second`
        : '') +
      (opened ? `\n${''.padEnd(10)} upstream connections opened over both runs (${fixed.sent + sat.ok} requests): ${opened}` : ''),
  );
  return { fixed, sat, cpu, perCore };
}

async function main() {
  const parsed = parseOptions(
    'scripts/bench/mesh.mjs',
    'The mesh data plane: direct, plaintext and mTLS sidecar pairs (and the mTLS pair on Envoy) in network namespaces, in one run (as root).\n' +
      'Fixed rate: an open loop (scripts/lib/loadgen.go, built with Go on first use): request i is due at start + i/rate and its latency\n' +
      `runs from then (no coordinated omission); a run whose send lateness p99 exceeds ${SCHEDULE_SLACK_MS} ms gives no added-p99 figure.\n` +
      'Saturated: a closed loop over --connections keep-alive connections (--generator).',
    OPTIONS,
  );
  const o = { ...parsed, nodeArgs: parsed.nodeArgs.split(/\s+/).filter(Boolean) };
  const missing = meshPodsUnavailable({ openssl: true });
  if (missing) throw new Error(`scripts/bench/mesh.mjs ${missing} (it needs root, iproute2, iptables, setpriv and openssl)`);
  if (!existsSync(path.join(o.binary, 'pilot-agent')))
    throw new Error(`${path.join(o.binary, 'pilot-agent')} is missing: run \`node build.mjs\` first`);
  if (o.rate > 0 && loadgenMissing()) throw new Error(`scripts/bench/mesh.mjs: ${loadgenMissing()}`);
  const cleanup = new Cleanup();
  const onSignal = () => void cleanup.run().then(() => process.exit(130));
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-'));
  cleanup.teardown(() => (o.keep ? console.log(`kept ${dir} (logs/ has the programs' output)`) : rmSync(dir, { recursive: true, force: true })));
  chmodSync(dir, 0o755);
  if (o.rate > 0) {
    // the generator runs as the application's user: from the work directory, which that user can read
    const binary = path.join(dir, 'loadgen');
    copyFileSync(loadgenBinary(), binary);
    chmodSync(binary, 0o755);
    const { prefix, note } = policyPrefix(o.generatorPolicy);
    if (note) console.log(`note: ${note}`);
    o.loadgen = { binary, prefix };
  }
  try {
    console.log(
      `mesh data-plane benchmark: ${o.duration} s per run after ${o.warmup} s warm-up, fixed rate ${o.rate} rps${o.nice !== 0 ? ` (measured pods and generator at nice ${o.nice})` : ''}, saturated ${o.connections} connections`,
    );
    // profiling: the sidecars run from the bundle under node with --cpu-prof (one directory per pod) and/or
    // --nodeArgs (e.g. --trace-gc, whose lines land in the sidecar's log: keep them with --keep); SIGTERM
    // lets them exit normally so that node writes the profiles
    const bundle = path.join(o.binary, 'mesh.cjs');
    const profiled = o.cpuProf || o.nodeArgs.length > 0;
    if (profiled && !existsSync(bundle)) throw new Error(`${bundle} is missing: run \`node build.mjs\` first`);
    // the sidecars run as uid 1337: they must be able to write there
    if (o.cpuProf) for (const pod of ['a', 'b']) mkdirSync(path.join(o.cpuProf, pod), { recursive: true });
    if (o.cpuProf) for (const d of [o.cpuProf, path.join(o.cpuProf, 'a'), path.join(o.cpuProf, 'b')]) chmodSync(d, 0o777);
    const sidecarCommand = profiled
      ? (pod) => [
          process.execPath,
          ...(o.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${path.join(o.cpuProf, pod)}`] : []),
          ...o.nodeArgs,
          bundle,
          'pilot-agent',
        ]
      : undefined;
    if ((o.proxyCpus === undefined) !== (o.otherCpus === undefined)) throw new Error('--proxyCpus and --otherCpus go together');
    // Children inherit this process's affinity: the pods' apps, discovery and the generator stay on otherCpus.
    if (o.otherCpus) taskset(['-p', '-c', o.otherCpus, String(process.pid)]);
    // the yardstick (issue 27): the same pair with Envoy as the data plane, measured with mTLS in the same run
    if (o.targets.includes('envoy') && envoyMissing()) {
      console.log(`note: ${envoyMissing()}; the envoy pair is skipped`);
      o.targets = o.targets.filter((t) => t !== 'envoy');
    }
    const envoy = o.targets.includes('envoy') ? envoyBinary() : undefined;
    const mesh = await startMesh(cleanup, {
      sidecarCommand,
      sidecarConcurrency: o.concurrency,
      stopSignal: profiled ? 'SIGTERM' : undefined,
      dist: o.binary,
      dir,
      // pods 1, 2 (A, B) with sidecars; pods 3, 4 bare, for the direct baseline; 5, 6 with Envoy as the data plane
      pods: [
        { name: 'a' },
        { name: 'b' },
        { name: 'da', mesh: false },
        { name: 'db', mesh: false },
        ...(envoy
          ? [
              { name: 'ea', binaryPath: envoy },
              { name: 'eb', binaryPath: envoy },
            ]
          : []),
      ],
      config: PLAINTEXT,
      prefix: 'mesh-bench',
      progress: (what) => console.log(`  ${what}…`),
    });
    const pids = [...proxyPids(mesh.ns.a), ...proxyPids(mesh.ns.b)];
    console.log(`  proxies: pids ${pids.join(' ')} (agent and engine of A and B)`);
    if (o.proxyCpus) {
      // -a: every thread (engine workers, libuv's pool, V8's helpers); threads made later inherit it.
      for (const pid of pids) taskset(['-a', '-p', '-c', o.proxyCpus, String(pid)]);
      console.log(`  pinned: proxies on CPU ${o.proxyCpus}, everything else on CPU ${o.otherCpus}`);
    }
    const vip = { host: meshAddr.vip(2), port: 8080 };
    const xfcc = () => JSON.parse(String(callIn(mesh.ns.a, true, 'http', vip.host, '8080').body)).xfcc;

    const skipped = { fixed: { unanswered: 0, errors: 0, non2xx: 0, p99: NaN }, sat: { rps: NaN }, perCore: NaN };
    const direct = o.targets.includes('direct')
      ? await measure('direct', mesh.ns.da, { host: meshAddr.pod(4), port: 8080 }, [], o, {}, [mesh.ns.da, mesh.ns.db])
      : skipped;

    await waitFor(
      () => 'the plaintext config did not take effect',
      () => xfcc() === null,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const plain = o.targets.includes('plaintext')
      ? await measure('plaintext', mesh.ns.a, vip, pids, o, { 'A→B': mesh.ns.a, 'B→app': mesh.ns.b }, [mesh.ns.a, mesh.ns.b])
      : skipped;

    unlinkSync(path.join(mesh.configDir, 'destination-rule.yaml'));
    for (const [file, yaml] of Object.entries(MTLS)) writeFileSync(path.join(mesh.configDir, file), yaml);
    await waitFor(
      () => 'mTLS did not take effect',
      () => /URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a$/.test(String(xfcc())),
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const mtls = o.targets.includes('mtls')
      ? await measure('mtls', mesh.ns.a, vip, pids, o, { 'A→B': mesh.ns.a, 'B→app': mesh.ns.b }, [mesh.ns.a, mesh.ns.b])
      : skipped;

    let envoyPair = skipped;
    if (envoy) {
      const envoyPids = [...proxyPids(mesh.ns.ea), ...proxyPids(mesh.ns.eb)];
      if (o.proxyCpus) for (const pid of envoyPids) taskset(['-a', '-p', '-c', o.proxyCpus, String(pid)]);
      const evip = { host: meshAddr.vip(6), port: 8080 };
      await waitFor(
        () => 'mTLS did not take effect between the Envoy sidecars',
        () =>
          /URI=spiffe:\/\/cluster\.local\/ns\/ea\/sa\/ea$/.test(
            String(JSON.parse(String(callIn(mesh.ns.ea, true, 'http', evip.host, '8080').body)).xfcc),
          ),
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      envoyPair = await measure('envoy-mtls', mesh.ns.ea, evip, envoyPids, o, { 'A→B': mesh.ns.ea, 'B→app': mesh.ns.eb }, [mesh.ns.ea, mesh.ns.eb]);
    }

    // a run that left requests unanswered has no p99 worth the name
    const complete = (r) => r.fixed.unanswered === 0 && r.fixed.errors + r.fixed.non2xx === 0 && Number.isFinite(r.fixed.p99);
    // nor has one whose generator fell behind its schedule (the machine was too busy to say)
    const onSchedule = (r) => !offSchedule(r.fixed);
    const added = complete(mtls) && complete(direct) && onSchedule(mtls) && onSchedule(direct) ? mtls.fixed.p99 - direct.fixed.p99 : NaN;
    const drop = (1 - mtls.perCore / plain.perCore) * 100;
    console.log(`
mTLS pair p99 added over direct at ${o.rate} rps: ${Number.isFinite(added) ? `${added.toFixed(3)} ms (goal ≤ 0.5 ms) ${added <= 0.5 ? 'MET' : 'NOT MET'}` : 'not measured: requests failed or went unanswered at that rate, or the generator fell behind its schedule'}
plaintext pair p99 added over direct:       ${(plain.fixed.p99 - direct.fixed.p99).toFixed(3)} ms
mTLS requests per proxy core-second: ${mtls.perCore.toFixed(0)} vs plaintext pair ${plain.perCore.toFixed(0)}: ${drop >= 0 ? `${drop.toFixed(1)} % lower` : `${(-drop).toFixed(1)} % higher`} (goal ≤ 30 % lower) ${drop <= 30 ? 'MET' : 'NOT MET'}
saturated rps: direct ${direct.sat.rps.toFixed(0)}, plaintext pair ${plain.sat.rps.toFixed(0)}, mTLS pair ${mtls.sat.rps.toFixed(0)}`);
    if (envoy) {
      const envoyAdded =
        complete(envoyPair) && complete(direct) && onSchedule(envoyPair) && onSchedule(direct) ? envoyPair.fixed.p99 - direct.fixed.p99 : NaN;
      const f = (x) => (Number.isFinite(x) ? x.toFixed(3) : 'not measured');
      console.log(
        `engine/Envoy mTLS pair added p99 at ${o.rate} rps: ${f(added)} / ${f(envoyAdded)} ms = ${Number.isFinite(added / envoyAdded) ? (added / envoyAdded).toFixed(2) : '-'}×  goal ≤ 1.5×\n` +
          `engine/Envoy mTLS pair requests per proxy core-second: ${mtls.perCore.toFixed(0)} / ${envoyPair.perCore.toFixed(0)} = ${(mtls.perCore / envoyPair.perCore).toFixed(2)}×  goal ≥ 0.7×`,
      );
    }
  } finally {
    await cleanup.run();
    if (o.cpuProf) console.log(`cpu profiles of the sidecars in ${o.cpuProf}/{a,b}`);
  }
}

if (process.argv[2] === '--load') {
  await loadMain(JSON.parse(process.argv[3]));
} else {
  await main().catch((e) => {
    console.error(e.message);
    process.exit(1);
  });
}
