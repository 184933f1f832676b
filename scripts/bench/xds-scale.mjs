// xDS scale: how fast a config edit on disk reaches N connected proxies, and what the daemon costs.
//   node scripts/bench/xds-scale.mjs [--clients 100,1000] [--services 1000] [--edits 20] [--editKinds vs,dr,se,we]
//        [--perChannel 50] [--routerEvery 10] [--ramp 0] [--scoped] [--vhds] [--maxRssMB 6000] [--build] [--keep] [--maxMinutes 300]
//        [--mesh <executable>] [--baseline <executable>] [--cpuProf <dir>] [--heapSnapshot <dir>]
//
// For each N: a fresh `dist/pilot-discovery discovery --configDir <generated>` (loopback, ephemeral ports),
// and a separate process (./xds-scale/clients.mjs) of N simulated Envoy ADS clients (every routerEvery-th
// an ingress gateway `router`, the rest `sidecar`s of app workloads) that fetch CDS, EDS, LDS and RDS and ACK
// every response. Once every client holds its initial config, svc-0000's objects (which every unscoped proxy
// sees) are rewritten `--edits` times, in turn its VirtualService (bound to the mesh and the ingress gateway,
// so every proxy's routes contain it), DestinationRule, ServiceEntry and a WorkloadEntry (an endpoint-only
// change), or those --editKinds names; each edit is timed from the file write to the last ACK any client sends for the push it causes. The daemon's RSS
// (VmRSS, sampled every 100 ms) and CPU (utime+stime) come from /proc. PILOT_*/MESH_* variables in this
// process's environment are passed to the daemon (its defaults otherwise: 100 ms file and push debounce).
// All N streams open at once (a control plane restart) unless --ramp k opens k at a time, each batch once the
// previous one holds its initial config. A run whose daemon passes --maxRssMB (a guard for the shared
// machine, far above the 600 MB goal) or fails otherwise is reported as failed, with what was measured.
// --mesh <executable> measures that mesh executable instead of dist/mesh (another worktree's build, as a
// baseline run after or before this one). --baseline <executable> runs that build too, before the measured
// one at each N, and prints the measured build's figures as ratios of the baseline's (same run, same machine). The daemon inherits PILOT_*, MESH_*, XDS_* and ISTIO_* variables
// from this process (e.g. PILOT_ENABLE_XDS_CACHE=false).
// --vhds: the clients use delta xDS and advertise VHDS (node client feature `mesh.io/vhds`, as the engine
// does), so route configurations come without virtual hosts and an edit sends only the changed virtual host.
// --cpuProf <dir> runs the daemon's bundle under `node --cpu-prof` and leaves one .cpuprofile per N there.
// --heapSnapshot <dir> runs the daemon's bundle under node and writes a .heapsnapshot there once the clients
// hold their initial config and once more after the edits (what the daemon keeps, not its transient peak).
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { EDITS, seesEditedService, writeConfigDir } from './xds-scale/config.mjs';
import { metricSum, scrape, startDaemon } from './xds-scale/daemon.mjs';
import { cpuSeconds, RssSampler } from './xds-scale/proc.mjs';
import { checkHealthy, children, newSink, now, quantile, settle, sleep, startClients, until } from './xds-scale/driver.mjs';
import { parseOptions } from '../lib/bench.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BINARY = path.join(ROOT, 'dist', 'pilot-discovery');

// ---- limits: everything below stops by itself (the per-N ones grow with N: pushes are per proxy) ------
const connectTimeoutMs = (n) => 5 * 60_000 + n * 1_500; // all N clients hold their initial config
const EDIT_QUIET_MS = 300; // after every client got the edit, wait this long for further responses
const EDIT_PARTIAL_QUIET_MS = 15_000; // not every client got it: give up after this long without responses
const editTimeoutMs = (n) => 2 * 60_000 + n * 1_500;
const firstResponseTimeoutMs = (n) => 60_000 + n * 200;

// ---- arguments ---------------------------------------------------------------------------------------

const OPTIONS = {
  clients: { type: 'list', of: 'integer', min: 1, default: [100, 1000], help: 'proxies connected, one measurement each' },
  services: { type: 'integer', min: 1, default: 1000, help: 'services in the generated config' },
  edits: { type: 'integer', min: 1, default: 20, help: 'config edits pushed per measurement' },
  editKinds: {
    type: 'list',
    oneOf: Object.keys(EDITS),
    default: Object.keys(EDITS),
    help: 'what the edits change, in turn: vs VirtualService, dr DestinationRule, se ServiceEntry, we WorkloadEntry',
  },
  perChannel: { type: 'integer', min: 1, default: 50, help: 'proxies per gRPC channel' },
  routerEvery: { type: 'integer', min: 1, default: 10, help: 'one proxy in this many is a router' },
  ramp: { type: 'integer', min: 0, default: 0, help: 'open the streams k at a time, each batch once the previous holds its config (0: all at once)' },
  scoped: { type: 'boolean', help: 'the generated config scopes proxies with Sidecar resources' },
  vhds: { type: 'boolean', help: 'the clients use delta xDS and advertise VHDS' },
  maxRssMB: { type: 'integer', min: 100, default: 6000, help: "stop when the daemon's RSS passes this" },
  build: { type: 'boolean', help: 'build dist/ first' },
  keep: { type: 'boolean', help: 'keep the temporary directories' },
  maxMinutes: { type: 'integer', min: 1, default: 300, help: 'stop the benchmark after this long' },
  mesh: { type: 'path', help: 'the mesh binary measured (default dist/mesh)' },
  baseline: { type: 'path', help: 'a mesh binary run first at each N as the yardstick (e.g. the previous build)' },
  cpuProf: { type: 'string', help: "the daemon's bundle under node --cpu-prof, one profile per N in this directory" },
  heapSnapshot: { type: 'string', help: "the daemon's heap snapshots (connected, edited) in this directory" },
};

// ---- small helpers -----------------------------------------------------------------------------------

const MB = 1e6;

function newestMtime(dir) {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

function ensureBinary(build) {
  if (build || !existsSync(BINARY)) {
    console.log('building dist/ (node build.mjs) …');
    const r = spawnSync(process.execPath, ['build.mjs'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'], timeout: 10 * 60_000 });
    if (r.status !== 0) throw new Error(`node build.mjs failed (${r.status ?? r.signal})`);
  } else if (newestMtime(path.join(ROOT, 'src')) > statSync(path.join(ROOT, 'dist', 'mesh')).mtimeMs) {
    console.log('note: src/ changed after dist/mesh was built; pass --build to measure the current sources');
  }
}

/** src/main.ts bundled like build.mjs does, but unminified, for readable CPU profiles. */
async function profileBundle(dir) {
  const { build } = await import('esbuild');
  mkdirSync(dir, { recursive: true });
  const outfile = path.join(dir, 'mesh-unminified.cjs');
  await build({
    entryPoints: [path.join(ROOT, 'src/main.ts')],
    outfile,
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    minify: false,
    legalComments: 'none',
    define: { __MESH_BUILD__: JSON.stringify({ version: 'profile', revision: 'unknown', status: 'unknown', tag: 'profile' }) },
    logLevel: 'warning',
  });
  return outfile;
}

// ---- cleanup: child processes never outlive the benchmark ----------------------------------------------

let tempDir;
function cleanup() {
  for (const c of children) {
    if (c.exitCode === null && c.signalCode === null) {
      try {
        c.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  if (tempDir && !keepTemp) rmSync(tempDir, { recursive: true, force: true });
}
let keepTemp = false;
process.on('exit', cleanup);
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    console.error(`\n${sig}: stopping`);
    process.exit(130);
  });
}

/** Signals the daemon to write a heap snapshot (node --heapsnapshot-signal) and renames it once written. */
async function heapSnapshot(daemon, dir, label) {
  const before = new Set(readdirSync(dir));
  process.kill(daemon.pid, 'SIGUSR2');
  let file;
  await until(() => (file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f))), 10 * 60_000, 'the heap snapshot');
  // The file grows while V8 writes it: done once its size has not changed for a second.
  let size = -1;
  let since = Date.now();
  await until(
    () => {
      const s = statSync(path.join(dir, file)).size;
      if (s !== size) [size, since] = [s, Date.now()];
      return s > 0 && Date.now() - since >= 1_000;
    },
    10 * 60_000,
    'the heap snapshot to be written',
  );
  const target = path.join(dir, `daemon-${label}.heapsnapshot`);
  renameSync(path.join(dir, file), target);
  return target;
}

// ---- one run (one N) -------------------------------------------------------------------------------------

async function runOne(n, opts, configDir) {
  for (const e of Object.values(EDITS)) writeFileSync(path.join(configDir, e.file), e.text(0));
  // With --cpuProf an unminified bundle runs under `node --cpu-prof` (the single executable takes no node
  // flags, and minified names make the profile unreadable).
  const nodeFlags = [
    ...(opts.cpuProf ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProf}`, `--cpu-prof-name=daemon-n${n}.cpuprofile`] : []),
    ...(opts.heapSnapshot ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${opts.heapSnapshot}`] : []),
  ];
  const command = nodeFlags.length > 0 ? [process.execPath, ...nodeFlags, opts.profileBundle, 'pilot-discovery'] : [opts.binary];
  const daemon = await startDaemon(command, ['--configDir', configDir]);
  children.add(daemon.child);
  const sink = newSink();
  const result = { n, routers: Math.ceil(n / opts.routerEvery), channels: Math.ceil(n / opts.perChannel), phase: 'start' };
  result.sidecars = n - result.routers;
  let clients;
  const rss = new RssSampler(daemon.pid, 100, opts.maxRssMB * MB, (bytes) => {
    sink.fatal = `daemon RSS ${(bytes / MB).toFixed(0)} MB passed the --maxRssMB ${opts.maxRssMB} guard`;
  });
  let cpu0;
  try {
    const metrics0 = await scrape(daemon);
    result.rejectedConfigs = metricSum(metrics0, 'pilot_total_rejected_configs');
    result.servicesSeen = metricSum(metrics0, 'pilot_services');
    result.rssIdle = rss.sample() ?? 0;
    daemon.counts.warn = 0;
    daemon.counts.error = 0;
    daemon.firstProblems.length = 0;

    clients = await startClients(sink);
    cpu0 = cpuSeconds(daemon.pid);
    const clientCpuConnect0 = cpuSeconds(clients.pid);
    const sent = now();
    result.phase = 'connect';
    result.connectStart = sent;
    clients.send({
      cmd: 'start',
      address: daemon.grpc,
      clients: n,
      perChannel: opts.perChannel,
      services: opts.services,
      routerEvery: opts.routerEvery,
      ramp: opts.ramp,
      vhds: !!opts.vhds,
    });
    await until(
      () => {
        checkHealthy(sink, daemon);
        return sink.initial.size === n;
      },
      connectTimeoutMs(n),
      `${n} clients to get their initial config`,
      () => `N=${n}: ${sink.initial.size}/${n} clients have their initial config, ${sink.totals.responses} responses`,
    );
    const initialTimes = [...sink.initial.values()].map((t) => t - sent);
    result.connectMs = Math.max(...initialTimes);
    result.connectP50Ms = quantile(initialTimes, 0.5);
    await settle(sink, daemon, n);
    result.cpuConnect = cpuSeconds(daemon.pid) - cpu0;
    result.clientCpuConnect = cpuSeconds(clients.pid) - clientCpuConnect0;
    result.initialBytesByType = { ...sink.bytesByType };
    result.rssConnected = rss.sample() ?? 0;
    result.initialResponses = sink.totals.responses;
    result.initialBytes = sink.totals.bytes;
    result.rssMaxConnect = rss.max;
    if (opts.heapSnapshot) result.snapshots = [await heapSnapshot(daemon, opts.heapSnapshot, `n${n}-connected`)];

    // ---- edits
    result.phase = 'edits';
    rss.reset();
    const cpuEdits0 = cpuSeconds(daemon.pid);
    const clientCpu0 = cpuSeconds(clients.pid);
    const edits = [];
    // Clients whose config contains the edited VirtualService (all of them unless --scoped).
    let expected = 0;
    for (let c = 0; c < n; c++) if (seesEditedService(c, opts.services, opts.routerEvery, opts.scoped)) expected++;
    result.expected = expected;
    for (let k = 1; k <= opts.edits; k++) {
      const pushes0 = metricSum(await scrape(daemon), 'pilot_xds_pushes');
      const edit = { t0: 0, events: [], reached: new Set(), byType: {} };
      const kind = opts.editKinds[(k - 1) % opts.editKinds.length];
      const text = EDITS[kind].text(k);
      edit.t0 = now();
      sink.edit = edit;
      writeFileSync(path.join(configDir, EDITS[kind].file), text);
      const tEditStart = Date.now();
      await until(
        () => {
          checkHealthy(sink, daemon);
          const quiet = now() - sink.lastEventAt;
          if (edit.reached.size === expected && quiet >= EDIT_QUIET_MS) return true;
          if (edit.events.length > 0 && quiet >= EDIT_PARTIAL_QUIET_MS) return true;
          if (edit.events.length === 0 && Date.now() - tEditStart > firstResponseTimeoutMs(n)) {
            throw new Error(`edit ${k}: no client got a response within ${firstResponseTimeoutMs(n)} ms`);
          }
          return false;
        },
        editTimeoutMs(n),
        `edit ${k} to reach the clients`,
        () => `N=${n} edit ${k}/${opts.edits}: ${edit.reached.size}/${expected} clients reached`,
      );
      if (n >= 500)
        console.error(`  … N=${n} edit ${k}/${opts.edits} (${kind}): ${((Math.max(...edit.events.map((e) => e[5])) - edit.t0) / 1000).toFixed(1)} s`);
      sink.edit = undefined;
      const lastAck = Math.max(...edit.events.map((e) => e[5]));
      const firstAck = Math.min(...edit.events.map((e) => e[5]));
      const pushesDaemon = metricSum(await scrape(daemon), 'pilot_xds_pushes') - pushes0;
      edits.push({
        kind,
        ms: lastAck - edit.t0,
        firstMs: firstAck - edit.t0,
        responses: edit.events.length,
        bytes: edit.events.reduce((s, e) => s + e[3], 0),
        reached: edit.reached.size,
        byType: edit.byType,
        pushesDaemon,
        versions: new Set(edit.events.map((e) => e[2])).size,
      });
      await sleep(200); // quiet gap so consecutive edits are separate pushes
    }
    result.cpuEdits = cpuSeconds(daemon.pid) - cpuEdits0;
    result.clientCpuEdits = cpuSeconds(clients.pid) - clientCpu0;
    result.rssMaxEdits = rss.max;
    result.rssAfterEdits = rss.sample() ?? 0;
    if (opts.heapSnapshot) result.snapshots.push(await heapSnapshot(daemon, opts.heapSnapshot, `n${n}-edited`));
    result.edits = edits;
    result.daemonWarn = daemon.counts.warn;
    result.daemonError = daemon.counts.error;
    result.daemonProblems = [...daemon.firstProblems];
    result.streamErrors = sink.streamErrors.length;
    result.phase = 'done';
    return result;
  } catch (e) {
    // What was measured up to the failure is still a result.
    result.failure = e instanceof Error ? e.message.split('\n')[0] : String(e);
    result.failedAfterMs = result.connectStart ? now() - result.connectStart : 0;
    result.initialDone = sink.initial.size;
    result.responsesSoFar = sink.totals.responses;
    result.rssMaxFailed = rss.max;
    result.cpuSoFar = cpu0 !== undefined ? (cpuSeconds(daemon.pid) ?? NaN) - cpu0 : NaN;
    result.daemonLogTail = daemon.log().split('\n').slice(-15).join('\n');
    return result;
  } finally {
    rss.stop();
    if (clients) await clients.stop();
    const code = await daemon.stop();
    result.daemonExit = code;
    children.delete(daemon.child);
  }
}

// ---- report ------------------------------------------------------------------------------------------

const f0 = (x) => x.toFixed(0);
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

const names = ['CDS', 'EDS', 'LDS', 'RDS', 'VHDS'];

function printRun(r) {
  console.log(`\nN = ${r.n} (${r.routers} routers, ${r.sidecars} sidecars on ${r.channels} channels)`);
  if (r.failure) {
    console.log(`  FAILED during ${r.phase} after ${f1(r.failedAfterMs / 1000)} s: ${r.failure}`);
    console.log(
      `  by then: ${r.initialDone}/${r.n} clients had their initial config, ${r.responsesSoFar} responses received; daemon RSS max ${f0(r.rssMaxFailed / MB)} MB, CPU ${f2(r.cpuSoFar)} s`,
    );
    console.log(
      `  daemon log (last lines):\n${r.daemonLogTail
        .split('\n')
        .map((l) => `    ${l.slice(0, 200)}`)
        .join('\n')}`,
    );
    return;
  }
  const ms = r.edits.map((e) => e.ms);
  const byType = {};
  for (const e of r.edits) for (const [t, c] of Object.entries(e.byType)) byType[names[t] ?? t] = (byType[names[t] ?? t] ?? 0) + c;
  console.log(
    `  initial config: all ${r.n} clients in ${f0(r.connectMs)} ms (median client ${f0(r.connectP50Ms)} ms); ${r.initialResponses} responses, ${f1(r.initialBytes / MB)} MB (${Object.entries(
      r.initialBytesByType,
    )
      .map(([t, b]) => `${names[t] ?? t} ${f1(b / MB)}`)
      .join(
        ', ',
      )}); daemon CPU ${f2(r.cpuConnect)} s (simulated clients ${f2(r.clientCpuConnect)} s), RSS max ${f0(r.rssMaxConnect / MB)} MB, ${f0(r.rssConnected / MB)} MB once settled`,
  );
  console.log(`  daemon RSS during the edits: max ${f0(r.rssMaxEdits / MB)} MB, ${f0(r.rssAfterEdits / MB)} MB after them`);
  if (r.snapshots) console.log(`  heap snapshots: ${r.snapshots.join(', ')}`);
  console.log(`  edit → last ACK ms: ${ms.map(f0).join(' ')}`);
  const kinds = [...new Set(r.edits.map((e) => e.kind))];
  if (kinds.length > 1) {
    const per = kinds.map((k) => {
      const xs = r.edits.filter((e) => e.kind === k).map((e) => e.ms);
      return `${k} max ${f0(Math.max(...xs))} (first ${f0(xs[0])})`;
    });
    console.log(`  by kind, ms: ${per.join(', ')}`);
  }
  console.log(
    `  edit → first ACK ms (median): ${f0(
      quantile(
        r.edits.map((e) => e.firstMs),
        0.5,
      ),
    )}`,
  );
  console.log(
    `  per edit: clients reached ${Math.min(...r.edits.map((e) => e.reached))}–${Math.max(...r.edits.map((e) => e.reached))} of ${r.expected} expected, responses ${f1(mean(r.edits.map((e) => e.responses)))} (${Object.entries(
      byType,
    )
      .map(([t, c]) => `${t} ${f1(c / r.edits.length)}`)
      .join(
        ', ',
      )}), daemon pilot_xds_pushes +${f1(mean(r.edits.map((e) => e.pushesDaemon)))}, push versions ${Math.max(...r.edits.map((e) => e.versions))} max`,
  );
  console.log(
    `  daemon log during the run: ${r.daemonWarn} warn, ${r.daemonError} error${r.daemonProblems.length ? `; first: ${r.daemonProblems[0]}` : ''}`,
  );
}

function printTable(runs) {
  const head = [
    'N',
    'build',
    'connect+initial s',
    'edit p50 ms',
    'edit p99 ms',
    'pushes/edit',
    'MB/edit',
    'RSS max MB',
    'CPU s (edits)',
    'CPU s/edit',
    'client CPU s',
  ];
  const rows = runs.map((r) => {
    if (r.failure) return [String(r.n), r.build, `failed (${r.phase})`, '—', '—', '—', '—', `≥ ${f0(r.rssMaxFailed / MB)}`, '—', '—', '—'];
    const ms = r.edits.map((e) => e.ms);
    const rssMax = Math.max(r.rssMaxConnect, r.rssMaxEdits);
    return [
      String(r.n),
      r.build,
      f1(r.connectMs / 1000),
      f0(quantile(ms, 0.5)),
      f0(quantile(ms, 0.99)),
      f0(mean(r.edits.map((e) => e.responses))),
      f2(mean(r.edits.map((e) => e.bytes)) / MB),
      f0(rssMax / MB),
      f2(r.cpuEdits),
      f2(r.cpuEdits / r.edits.length),
      f2(r.clientCpuEdits),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  console.log(`\n${line(head)}`);
  console.log(`|${widths.map((w, i) => (i === 0 ? `-${'-'.repeat(w)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`);
  for (const row of rows) console.log(line(row));
}

/** The measured build's figures over the baseline's at each N (below 1: the measured build is faster or smaller). */
function printRatios(runs) {
  const figures = (r) => ({
    'connect+initial': r.connectMs,
    'edit p50': quantile(
      r.edits.map((e) => e.ms),
      0.5,
    ),
    'edit p99': quantile(
      r.edits.map((e) => e.ms),
      0.99,
    ),
    'daemon CPU connect': r.cpuConnect,
    'client CPU connect': r.clientCpuConnect,
    'daemon CPU/edit': r.cpuEdits / r.edits.length,
    'MB/edit': mean(r.edits.map((e) => e.bytes)),
    'RSS max': Math.max(r.rssMaxConnect, r.rssMaxEdits),
  });
  for (const r of runs.filter((x) => x.build === 'measured' && !x.failure)) {
    const base = runs.find((x) => x.n === r.n && x.build === 'baseline' && !x.failure);
    if (!base) continue;
    const a = figures(r);
    const b = figures(base);
    console.log(`
N = ${r.n}, measured / baseline (same run): ${Object.keys(a)
      .map((k) => `${k} ${f2(a[k] / b[k])}`)
      .join(', ')}`);
  }
}

function printGoal(runs) {
  const goal = runs.find((r) => r.n === 1000 && r.build === 'measured');
  if (!goal) {
    console.log('\ngoal check needs a run with --clients including 1000');
    return;
  }
  if (goal.failure) {
    console.log(`\ngoal at N = 1000 (issue 30): connect+initial < 30 s, edit p99 < 1 s, RSS < 600 MB → run failed (${goal.failure}): FAIL`);
    return;
  }
  const p99 = quantile(
    goal.edits.map((e) => e.ms),
    0.99,
  );
  const mbPerEdit = mean(goal.edits.map((e) => e.bytes)) / MB;
  const rss = Math.max(goal.rssMaxConnect, goal.rssMaxEdits);
  const verdict = (ok) => (ok ? 'met' : 'NOT met');
  const connect = goal.connectMs / 1000;
  const ok = connect < 30 && p99 < 1000 && rss < 600 * MB;
  console.log(
    `\ngoal at N = 1000 (issue 30): connect+initial < 30 s, edit p99 < 1 s, RSS < 600 MB → connect ${f1(connect)} s (${verdict(connect < 30)}; daemon CPU ${f1(goal.cpuConnect)} s, simulated clients ${f1(goal.clientCpuConnect)} s), p99 ${f0(p99)} ms (${verdict(p99 < 1000)}), ${f2(mbPerEdit)} MB per edit, RSS max ${f0(rss / MB)} MB (${verdict(rss < 600 * MB)}): ${ok ? 'PASS' : 'FAIL'}`,
  );
}

// ---- main ---------------------------------------------------------------------------------------------

/** A copy of a mesh executable in the run's directory, as `<dir>/pilot-discovery`. */
function privateCopy(mesh, name) {
  const dir = path.join(tempDir, name);
  mkdirSync(dir);
  copyFileSync(mesh, path.join(dir, 'mesh'));
  chmodSync(path.join(dir, 'mesh'), 0o755);
  symlinkSync('mesh', path.join(dir, 'pilot-discovery'));
  return path.join(dir, 'pilot-discovery');
}

async function main() {
  const opts = parseOptions(
    'scripts/bench/xds-scale.mjs',
    'The daemon under many proxies: connect, full pushes and edit pushes, with its CPU and memory.',
    OPTIONS,
  );
  keepTemp = opts.keep;
  const killer = setTimeout(() => {
    console.error(`benchmark exceeded --maxMinutes ${opts.maxMinutes}: stopping`);
    process.exit(1);
  }, opts.maxMinutes * 60_000);
  killer.unref();
  ensureBinary(opts.build);
  if (opts.baseline && (opts.cpuProf || opts.heapSnapshot)) throw new Error('--cpuProf and --heapSnapshot profile the sources: not with --baseline');
  if (opts.cpuProf || opts.heapSnapshot) {
    if (opts.cpuProf) opts.cpuProf = path.resolve(opts.cpuProf);
    if (opts.heapSnapshot) mkdirSync((opts.heapSnapshot = path.resolve(opts.heapSnapshot)), { recursive: true });
    opts.profileBundle = await profileBundle(opts.cpuProf ?? opts.heapSnapshot);
  }
  tempDir = mkdtempSync(path.join(tmpdir(), 'mesh-xds-scale-'));
  // Run private copies of the executables, so a rebuild of dist/ during a long run cannot mix two builds.
  const builds = [
    ...(opts.baseline ? [{ build: 'baseline', binary: privateCopy(opts.baseline, 'baseline') }] : []),
    { build: 'measured', binary: privateCopy(opts.mesh ?? path.join(ROOT, 'dist', 'mesh'), 'measured') },
  ];
  const configDir = path.join(tempDir, 'config');
  const counts = writeConfigDir(configDir, opts.services, { scoped: opts.scoped });
  console.log(
    `xds-scale: node ${process.version}, ${availableParallelism()} cores, ${new Date().toISOString()}; daemon ${opts.mesh ?? 'dist/mesh'} built ${statSync(opts.mesh ?? path.join(ROOT, 'dist', 'mesh')).mtime.toISOString()}${opts.baseline ? `; baseline ${opts.baseline} built ${statSync(opts.baseline).mtime.toISOString()}` : ''}`,
  );
  console.log(
    `config: ${counts.serviceEntries} ServiceEntries in ${counts.namespaces} namespaces, ${counts.workloadEntries} WorkloadEntries, ${counts.destinationRules} DestinationRules, ${counts.virtualServices} VirtualServices, ${counts.gateways} Gateway${counts.sidecars ? `, ${counts.sidecars} namespace Sidecars (egress ./* and mesh-system/*; the edit reaches the routers and app-00's sidecars)` : ''} (${counts.files} files${opts.keep ? ` in ${configDir}` : ''})`,
  );
  console.log(
    `edits: ${opts.edits} rewrites, in turn, of svc-0000's ${opts.editKinds.map((k) => `${EDITS[k].kind} (${EDITS[k].what})`).join(', ')}; measured file write → last client ACK; clients ${opts.vhds ? 'delta xDS with VHDS' : 'state of the world (full RDS)'}; ${opts.perChannel} streams per grpc channel; streams opened ${opts.ramp > 0 ? `${opts.ramp} at a time` : 'all at once'}`,
  );
  const runs = [];
  for (const n of opts.clients) {
    for (const { build, binary } of builds) {
      const r = { ...(await runOne(n, { ...opts, binary }, configDir)), build };
      if (r.rejectedConfigs) throw new Error(`the daemon rejected ${r.rejectedConfigs} generated configs`);
      if (builds.length > 1) console.log(`\n[${build}]`);
      printRun(r);
      runs.push(r);
    }
  }
  printTable(runs);
  printRatios(runs);
  printGoal(runs);
  // The figures are printed either way; a run that could not be measured makes the exit status say so.
  return runs.some((r) => r.failure) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    console.error(`xds-scale failed: ${e instanceof Error ? e.stack : e}`);
    process.exit(1);
  },
);
