// How long a file edit under --configDir takes to reach the push debounce (issue 15, item 5: the "floor" of
// every config change, before PILOT_DEBOUNCE_AFTER and generation start).
//   node scripts/bench/config-latency.mjs [--services 1000] [--edits 15] [--dist <dir>] [--baseline <dir>] [--cpuProf <dir>]
//
// A fresh `pilot-discovery discovery --configDir <tree>` per build, the tree xds-scale.mjs generates (1000
// services: 1271 files); no proxies connect. Each edit rewrites svc-0000's VirtualService, as xds-scale does,
// and the floor is the time from the write to the moment the push request reached the debouncer: the time of
// the daemon's "Push debounce stable" line minus the "ms since first change" it reports. The file watcher's
// own quiet time (FILE_DEBOUNCE_DURATION, 100 ms as in Istio) is part of the floor; the rest is the rescan,
// the parse of the changed file and the config store's update.
//
// --baseline <dir>: a second build (e.g. /work/main/dist) measured in the same invocation, interleaved edit by
// edit with --dist's, and the ratio printed. A 10-service tree is also measured for each build: the floor that
// does not grow with the tree.
// --cpuProf <dir>: the daemons run from their build's mesh.cjs under `node --cpu-prof` (figures not the record).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { EDITED_VS, virtualServiceFile, writeConfigDir } from './xds-scale/config.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { median, parseOptions } from '../lib/bench.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  services: { type: 'integer', min: 1, default: 1000, help: 'services in the generated tree' },
  edits: { type: 'integer', min: 1, default: 15, help: 'edits per build' },
  dist: { type: 'path', default: path.join(ROOT, 'dist'), help: 'the build measured' },
  baseline: { type: 'path', help: 'a second build measured in the same run, interleaved, and the ratio printed' },
  cpuProf: { type: 'path', help: 'run the daemons under node --cpu-prof into this directory' },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const STABLE = /^(\S+)\t\S+\t\S+\tPush debounce stable\[(\d+)\].*: (\d+)ms since first change/;

/** The debounce lines logged so far: dispatch number → when the request reached the debouncer (epoch ms). */
function debounceStarts(log) {
  const out = new Map();
  for (const line of log.split('\n')) {
    const m = STABLE.exec(line);
    if (m) out.set(Number(m[2]), Date.parse(m[1]) - Number(m[3]));
  }
  return out;
}

async function startBuild(dist, services, cpuProf) {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-config-latency-'));
  writeConfigDir(dir, services);
  const vsPath = path.join(dir, EDITED_VS);
  writeFileSync(vsPath, virtualServiceFile(0, 0));
  const command = cpuProf
    ? [
        process.execPath,
        '--cpu-prof',
        '--cpu-prof-dir',
        path.join(cpuProf, `${path.basename(path.dirname(dist))}-${services}`),
        path.join(dist, 'mesh.cjs'),
        'pilot-discovery',
      ]
    : [path.join(dist, 'pilot-discovery')];
  const daemon = await startDaemon(command, ['--configDir', dir], { timeoutMs: 300_000 });
  // Let the start-up pushes pass.
  await sleep(1500);
  return { dist, services, dir, vsPath, daemon, edit: 0, floors: [] };
}

async function editOnce(b) {
  const seen = new Set(debounceStarts(b.daemon.log()).keys());
  b.edit++;
  const text = virtualServiceFile(0, b.edit);
  const t0 = Date.now();
  writeFileSync(b.vsPath, text);
  const deadline = t0 + 30_000;
  for (;;) {
    await sleep(20);
    const fresh = [...debounceStarts(b.daemon.log())].filter(([k]) => !seen.has(k));
    if (fresh.length > 0) {
      b.floors.push(fresh[0][1] - t0);
      break;
    }
    if (Date.now() > deadline)
      throw new Error(`${b.dist}: no push debounce within 30 s of edit ${b.edit}:\n${b.daemon.log().split('\n').slice(-20).join('\n')}`);
  }
  // The push itself (debounce, generation) before the next edit.
  await sleep(600);
}

async function main() {
  const o = parseOptions('scripts/bench/config-latency.mjs', 'How long a file edit under --configDir takes to reach the push debounce.', OPTIONS);
  const builds = [o.dist, ...(o.baseline ? [o.baseline] : [])];
  const rows = [];
  for (const services of [10, o.services]) {
    const running = [];
    try {
      for (const d of builds) running.push(await startBuild(d, services, o.cpuProf));
      for (let k = 0; k < o.edits; k++) for (const b of running) await editOnce(b);
    } finally {
      for (const b of running) {
        await b.daemon.stop();
        rmSync(b.dir, { recursive: true, force: true });
      }
    }
    for (const b of running) rows.push(b);
  }
  console.log(
    `file write → push debounce (ms), ${o.edits} edits each, medians; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  for (const r of rows) {
    console.log(
      `  ${r.dist.padEnd(40)} ${String(r.services).padStart(5)} services  median ${median(r.floors).toFixed(0).padStart(5)}  min ${Math.min(
        ...r.floors,
      )
        .toFixed(0)
        .padStart(5)}  max ${Math.max(...r.floors)
        .toFixed(0)
        .padStart(5)}`,
    );
  }
  if (o.baseline) {
    const big = rows.filter((r) => r.services === o.services);
    const mine = median(big[0].floors);
    const base = median(big[1].floors);
    console.log(`  at ${o.services} services: ${mine.toFixed(0)} ms vs baseline ${base.toFixed(0)} ms = ${(mine / base).toFixed(2)}× (goal ≤ 0.5×)`);
  }
}

await main();
