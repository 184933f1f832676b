// The benchmarks' open-loop load generator: ./loadgen.go (why Go and how it keeps its schedule: its opening comment),
// built on first use with the Go toolchain into .cache/loadgen/<hash of source and Go version>/ (ignored by git;
// MESH_GO names the `go` to use), run as a child process whose one JSON line this module returns. Used by the
// fixed-rate runs of scripts/bench/gateway.mjs and scripts/bench/mesh.mjs (inside a pod's network namespace there).
// The method is wrk2's: latency from the scheduled send time (Envoy's Nighthawk times from the actual start and
// reports the queueing apart; loadgen.go says why this one does not).
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import path from 'node:path';

const HERE = path.dirname(new URL(import.meta.url).pathname);
const ROOT = path.resolve(HERE, '../..');
const SOURCE = path.join(HERE, 'loadgen.go');

/** A fixed-rate run whose send lateness p99 exceeds this (ms) measured the generator, not the path: refused. */
export const SCHEDULE_SLACK_MS = 0.2;

/** The options of the generator, shared by the scripts that use it (spread into their options table). */
export const LOADGEN_OPTIONS = {
  generatorPolicy: {
    type: 'string',
    oneOf: ['fifo', 'normal'],
    default: 'fifo',
    help: 'scheduling of the open-loop generator: SCHED_FIFO priority 1 (chrt; a normal thread can wait milliseconds for a core on a busy machine), or the normal policy',
  },
  generatorSpin: {
    type: 'number',
    min: 0,
    default: 0,
    help: 'microseconds before each due time the open-loop generator stops sleeping and polls the clock (less send lateness for that much CPU per request)',
  },
};

function goCommand() {
  if (process.env.MESH_GO) return process.env.MESH_GO;
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(path.join(dir, 'go'))) return path.join(dir, 'go');
  return existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : undefined;
}

/** Why the generator cannot be built here (no Go toolchain), for a script's error; undefined when it can. */
export function loadgenMissing() {
  if (goCommand()) return undefined;
  return 'the open-loop load generator (scripts/lib/loadgen.go) needs a Go toolchain to build once: none on PATH nor at /usr/local/go/bin/go (set MESH_GO)';
}

/** The generator's executable, built first if this source and Go version have not been built before. */
export function loadgenBinary() {
  const go = goCommand();
  if (!go) throw new Error(loadgenMissing());
  const env = { ...process.env, GOTOOLCHAIN: 'local', CGO_ENABLED: '0', GOFLAGS: '' };
  // `go build` needs a build cache; root under sudo may have neither HOME nor XDG_CACHE_HOME
  if (!env.GOCACHE && !env.HOME && !env.XDG_CACHE_HOME) env.GOCACHE = path.join(ROOT, '.cache/loadgen/go-build');
  const version = spawnSync(go, ['env', 'GOVERSION'], { encoding: 'utf8', env });
  if (version.status !== 0) throw new Error(`${go} env GOVERSION: ${version.error?.message ?? version.stderr.trim()}`);
  const hash = createHash('sha256').update(readFileSync(SOURCE)).update(version.stdout.trim()).digest('hex').slice(0, 16);
  const dir = path.join(ROOT, '.cache/loadgen', hash);
  const bin = path.join(dir, 'loadgen');
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  // built beside and renamed into place: two scripts building at once both end with a whole binary
  const tmp = `${bin}.${process.pid}`;
  const r = spawnSync(go, ['build', '-trimpath', '-o', tmp, SOURCE], { encoding: 'utf8', env, cwd: HERE });
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`building the load generator (${go} build ${SOURCE}): ${r.error?.message ?? r.stderr.trim()}`);
  }
  renameSync(tmp, bin);
  return bin;
}

/**
 * The command prefix that gives the generator the scheduling `policy` asks for, or why it cannot (a note for the
 * caller; the generator then runs with the normal policy).
 */
export function policyPrefix(policy) {
  if (policy !== 'fifo') return { prefix: [] };
  const r = spawnSync('chrt', ['-f', '1', 'true'], { encoding: 'utf8' });
  if (r.status !== 0)
    return { prefix: [], note: `chrt -f 1 failed (${r.error?.message ?? r.stderr.trim()}): the generator runs with the normal policy` };
  return { prefix: ['chrt', '-f', '1'] };
}

/**
 * Runs the generator as `wrap([binary, json])` (the caller adds taskset, chrt, ip netns exec, setpriv…) and resolves
 * with its result: sent, ok, non2xx, errors, unanswered, retries, queued, connections, rps, p50, p90, p99, p999, max,
 * mean, sendLateP50, sendLateP99, sendLateMax (ms; null where nothing was answered) and generatorCpu (s).
 * `o`: host, port, path, authority, headers, rate, duration, warmup, connections, maxConnections, timeout, spinUs.
 * `onMeasuring` is called when the measured part starts (after the warm-up).
 */
export function runLoadgen(binary, o, wrap = (argv) => argv, onMeasuring) {
  return new Promise((resolve, reject) => {
    const [file, ...args] = wrap([binary, JSON.stringify(o)]);
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (onMeasuring && out.includes('{"measuring":true}\n')) {
        onMeasuring();
        onMeasuring = undefined;
      }
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code, signal) => {
      const last = out.trim().split('\n').at(-1);
      if (code !== 0 || !last) return reject(new Error(`load generator exited ${signal ?? code}: ${err}${out}`));
      try {
        resolve(JSON.parse(last));
      } catch {
        reject(new Error(`load generator output is not JSON: ${out}${err}`));
      }
    });
  });
}

/** Why a fixed-rate result says nothing about the path measured (the generator fell behind), or undefined. */
export function offSchedule(r) {
  if (!(r.sendLateP99 <= SCHEDULE_SLACK_MS))
    return `the load generator fell behind its schedule (send lateness p99 ${r.sendLateP99} ms > ${SCHEDULE_SLACK_MS} ms)`;
  return undefined;
}
