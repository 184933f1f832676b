// The driver side of the xDS scale benchmarks (xds-scale.mjs, gateway-api-scale.mjs): the process of simulated
// proxies (./clients.mjs) forked and its events collected, and the waits on them. Child processes are kept in
// `children` so each script's exit handler can kill what is left.
import { fork } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const SETTLE_QUIET_MS = 1_000; // no responses for this long = the daemon is idle
const settleTimeoutMs = (n) => 2 * 60_000 + n * 500;
const PROGRESS_EVERY_MS = 30_000; // progress lines on stderr during long phases
const CLIENTS_SCRIPT = path.join(ROOT, 'scripts', 'bench', 'xds-scale', 'clients.mjs');

/** Processes started for a run; the script kills those still alive when it exits. */
export const children = new Set();

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const now = () => performance.timeOrigin + performance.now();

/** Nearest-rank quantile (p99 of 20 samples is the largest). */
export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}

/** Polls `check` until it returns something truthy; `progress()` (if given) is printed every 30 s. */
export async function until(check, timeoutMs, what, progress) {
  const start = Date.now();
  const deadline = start + timeoutMs;
  let nextProgress = start + PROGRESS_EVERY_MS;
  for (;;) {
    const r = check();
    if (r) return r;
    const t = Date.now();
    if (t > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    if (progress && t >= nextProgress) {
      console.error(`  … ${((t - start) / 1000).toFixed(0)} s: ${progress()}`);
      nextProgress += PROGRESS_EVERY_MS;
    }
    await sleep(10);
  }
}

// ---- the client process --------------------------------------------------------------------------------

/** Forks the client process; events from it land in `sink`. */
export async function startClients(sink) {
  const child = fork(CLIENTS_SCRIPT, [], {
    cwd: ROOT,
    execArgv: ['--import', 'tsx', '--max-old-space-size=4096'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  children.add(child);
  let ready = false;
  let exited = false;
  child.on('exit', (code, sig) => {
    exited = true;
    if (!sink.stopping) sink.fatal = `client process exited (${code ?? sig})`;
  });
  child.on('message', (m) => {
    switch (m.kind) {
      case 'ready':
        ready = true;
        break;
      case 'started':
        sink.startedAt = m.at;
        break;
      case 'events':
        for (const e of m.events) sink.onEvent(e);
        break;
      case 'initial':
        sink.initial.set(m.client, m.at);
        break;
      case 'streamError':
        sink.streamErrors.push(`client ${m.client}: ${m.message}`);
        break;
    }
  });
  await until(() => ready || exited, 120_000, 'the client process to load');
  if (!ready) throw new Error('the client process exited while loading');
  return {
    child,
    pid: child.pid,
    send: (m) => child.send(m),
    async stop() {
      sink.stopping = true;
      if (exited) return;
      try {
        child.send({ cmd: 'stop' });
      } catch {
        // channel closed
      }
      const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await until(() => exited, 10_000, 'the client process to exit').catch(() => child.kill('SIGKILL'));
      clearTimeout(t);
    },
  };
}

/** What the client process reports, plus the collector of the edit being measured. */
export function newSink() {
  return {
    startedAt: 0,
    initial: new Map(),
    streamErrors: [],
    fatal: undefined,
    stopping: false,
    lastEventAt: 0, // local receive time of the latest event
    totals: { responses: 0, bytes: 0 },
    bytesByType: {},
    edit: undefined, // {t0, events: [], reached: Set}
    onEvent(e) {
      const [client, type, , bytes, , ackAt] = e;
      this.lastEventAt = now();
      this.totals.responses++;
      this.totals.bytes += bytes;
      this.bytesByType[type] = (this.bytesByType[type] ?? 0) + bytes;
      if (this.edit && ackAt >= this.edit.t0) {
        this.edit.events.push(e);
        this.edit.reached.add(client);
        this.edit.byType[type] = (this.edit.byType[type] ?? 0) + 1;
      }
    },
  };
}

export function checkHealthy(sink, daemon) {
  if (sink.fatal) throw new Error(sink.fatal);
  if (sink.streamErrors.length > 0) throw new Error(`ADS streams failed (${sink.streamErrors.length}): ${sink.streamErrors.slice(0, 5).join('; ')}`);
  if (daemon.child.exitCode !== null || daemon.child.signalCode !== null) throw new Error(`the daemon exited:\n${daemon.log()}`);
}

/** Waits until no response arrived for SETTLE_QUIET_MS. */
export async function settle(sink, daemon, n) {
  await until(
    () => {
      checkHealthy(sink, daemon);
      return now() - sink.lastEventAt >= SETTLE_QUIET_MS;
    },
    settleTimeoutMs(n),
    'the daemon to stop pushing',
  );
}
