// Starts the built `pilot-discovery discovery` with every address on 127.0.0.1 and an ephemeral port (as
// test/helpers/daemon.ts does), learns the chosen ports from its log and waits for /ready.
import { spawn } from 'node:child_process';
import { ephemeralListeners } from '../../lib/daemon-flags.mjs';

const PURPOSES = { grpc: 'discovery gRPC', http: 'discovery HTTP', monitoring: 'monitoring HTTP', ctrlz: 'ControlZ' };
const LOG_TAIL_LINES = 400;

/** The environment the daemon gets: a minimal one plus the caller's PILOT_, MESH_, XDS_ and ISTIO_ tuning variables. */
function daemonEnv(extra) {
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root' };
  for (const [k, v] of Object.entries(process.env)) if (/^(PILOT_|MESH_|XDS_|ISTIO_)/.test(k) && v !== undefined) env[k] = v;
  return { ...env, ...extra };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs the daemon; resolves once it listens and /ready answers 200. The returned handle keeps the last
 * log lines and counts warn/error lines (Istio log format: `<time>\t<level>\t<scope>\t<message>`).
 */
export async function startDaemon(command, args, { env = {}, timeoutMs = 120_000 } = {}) {
  // command: the program and the arguments before `discovery` (e.g. node --cpu-prof dist/mesh.cjs pilot-discovery)
  const [file, ...prefix] = command;
  const child = spawn(file, [...prefix, 'discovery', ...ephemeralListeners(), '--ctrlz_address', '127.0.0.1', ...args], {
    env: daemonEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const tail = [];
  const counts = { lines: 0, warn: 0, error: 0 };
  const firstProblems = [];
  let head = ''; // start-up log, kept whole until the listeners are known
  let partial = '';
  const onData = (d) => {
    const text = partial + d;
    const lines = text.split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      counts.lines++;
      if (head.length < 200_000) head += `${line}\n`;
      const level = line.split('\t')[1];
      if (level === 'warn' || level === 'error') {
        counts[level]++;
        if (firstProblems.length < 10) firstProblems.push(line);
      }
      tail.push(line);
      if (tail.length > LOG_TAIL_LINES) tail.shift();
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal)));
  const handle = {
    child,
    pid: child.pid,
    counts,
    firstProblems,
    log: () => tail.join('\n'),
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
  const deadline = Date.now() + timeoutMs;
  const addr = (purpose) => new RegExp(`${purpose} listening on (\\S+)`).exec(head)?.[1];
  for (;;) {
    const found = Object.fromEntries(Object.entries(PURPOSES).map(([k, p]) => [k, addr(p)]));
    if (Object.values(found).every(Boolean)) {
      Object.assign(handle, found);
      break;
    }
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`pilot-discovery exited (${child.exitCode ?? child.signalCode}):\n${head}${partial}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`pilot-discovery did not report its listeners within ${timeoutMs} ms:\n${head}`);
    }
    await sleep(20);
  }
  for (;;) {
    try {
      if ((await fetch(`http://${handle.http}/ready`, { signal: AbortSignal.timeout(5000) })).status === 200) return handle;
    } catch {
      // not listening yet
    }
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`pilot-discovery exited before ready:\n${handle.log()}`);
    if (Date.now() > deadline) {
      await handle.stop(2000);
      throw new Error(`pilot-discovery not ready within ${timeoutMs} ms:\n${handle.log()}`);
    }
    await sleep(50);
  }
}

/** Sum of the samples of a metric family in Prometheus text (optionally only lines containing `filter`). */
export function metricSum(text, name, filter = '') {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name) || (line[name.length] !== '{' && line[name.length] !== ' ')) continue;
    if (filter && !line.includes(filter)) continue;
    const v = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(v)) sum += v;
  }
  return sum;
}

export async function scrape(handle) {
  const r = await fetch(`http://${handle.monitoring}/metrics`, { signal: AbortSignal.timeout(30_000) });
  return r.text();
}

/** The daemon's V8 heap in use right after a full collection (ControlZ: PUT /memj/forcecollection, GET /memj). */
export async function heapAfterGc(handle) {
  const r = await fetch(`http://${handle.ctrlz}/memj/forcecollection`, { method: 'PUT', signal: AbortSignal.timeout(30_000) });
  if (!r.ok) throw new Error(`ControlZ forcecollection: HTTP ${r.status}`);
  const mem = await (await fetch(`http://${handle.ctrlz}/memj`, { signal: AbortSignal.timeout(30_000) })).json();
  return mem.memoryUsage.heapUsed;
}
