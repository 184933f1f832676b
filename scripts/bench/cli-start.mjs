// Cold start of the packaged programs against the honest floor: a hello-world single executable built by this
// script from the same Node binary the same way build.mjs builds dist/mesh (SEA blob with a code cache,
// postject), measured in the same run. Every child runs with NODE_EXTRA_CA_CERTS unset: with it set, every Node
// start loads that CA bundle first (61 ms instead of 22 ms here), which no user of a released binary pays.
// `node -e 0` is printed too, as a second reference.
//   node scripts/bench/cli-start.mjs [--runs 20] (or the count alone, as before)
// Prints the median and p90 wall time of each command and its ratio to the floor, and the binary size.
import { spawnSync, execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseOptions } from '../lib/bench.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const dist = path.join(root, 'dist');
const { runs } = parseOptions(
  'scripts/bench/cli-start.mjs',
  'Cold start of the packaged programs against a hello-world single executable of the same Node, in the same run.',
  {
    runs: { type: 'integer', min: 1, default: 20, positional: true, help: 'runs of each command' },
  },
);

/** A hello-world single executable of this Node (build.mjs's recipe), in a temporary directory. */
function buildHello() {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-hello-sea-'));
  writeFileSync(path.join(dir, 'hello.js'), 'console.log("hello")\n');
  const cfg = { main: path.join(dir, 'hello.js'), output: path.join(dir, 'hello.blob'), disableExperimentalSEAWarning: true, useCodeCache: true };
  writeFileSync(path.join(dir, 'sea.json'), JSON.stringify(cfg));
  execFileSync(process.execPath, ['--experimental-sea-config', path.join(dir, 'sea.json')], { stdio: 'ignore' });
  const exe = path.join(dir, 'hello');
  copyFileSync(process.execPath, exe);
  chmodSync(exe, 0o755);
  execFileSync(
    path.join(root, 'node_modules/.bin/postject'),
    [exe, 'NODE_SEA_BLOB', cfg.output, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'],
    { stdio: 'ignore' },
  );
  return { dir, exe };
}

const hello = buildHello();
process.on('exit', () => rmSync(hello.dir, { recursive: true, force: true }));
const env = { ...process.env };
delete env.NODE_EXTRA_CA_CERTS;

const cases = [
  ['hello-world single executable (floor)', hello.exe, []],
  ['node -e 0', process.execPath, ['-e', '0']],
  ['meshctl version --short', path.join(dist, 'meshctl'), ['version', '--short']],
  ['meshctl version --short --remote=false', path.join(dist, 'meshctl'), ['version', '--short', '--remote=false']],
  ['meshctl --help', path.join(dist, 'meshctl'), ['--help']],
  ['pilot-agent --help', path.join(dist, 'pilot-agent'), ['--help']],
  ['pilot-discovery --help', path.join(dist, 'pilot-discovery'), ['--help']],
  ['pilot-agent mesh-iptables --help', path.join(dist, 'pilot-agent'), ['mesh-iptables', '--help']],
  ['node dist/mesh.cjs meshctl version --short', process.execPath, [path.join(dist, 'mesh.cjs'), 'meshctl', 'version', '--short', '--remote=false']],
];

function time(file, args) {
  const t0 = process.hrtime.bigint();
  const r = spawnSync(file, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return ms;
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
// Interleave the cases run by run so that machine noise hits them alike; one warm-up round first.
for (const [, f, a] of cases) time(f, a);
const samples = cases.map(() => []);
for (let i = 0; i < runs; i++) cases.forEach(([, f, a], j) => samples[j].push(time(f, a)));

const floor = quantile(samples[0], 0.5);
console.log(`runs per command: ${runs}, node ${process.version}, ${new Date().toISOString()}`);
console.log(`${'command'.padEnd(44)} ${'median ms'.padStart(10)} ${'p90 ms'.padStart(8)} ${'× floor'.padStart(8)}`);
cases.forEach(([name], j) => {
  const med = quantile(samples[j], 0.5);
  console.log(
    `${name.padEnd(44)} ${med.toFixed(1).padStart(10)} ${quantile(samples[j], 0.9).toFixed(1).padStart(8)} ${(med / floor).toFixed(2).padStart(8)}`,
  );
});
const size = statSync(path.join(dist, 'mesh')).size;
const chunkFiles = readdirSync(path.join(dist, 'chunks'));
const bytes = (fs) => fs.reduce((n, f) => n + statSync(path.join(dist, 'chunks', f)).size, 0);
const code = bytes(chunkFiles.filter((f) => f.endsWith('.js')));
const caches = bytes(chunkFiles.filter((f) => f.endsWith('.cache')));
console.log(
  `dist/mesh: ${(size / 1048576).toFixed(1)} MiB (node runtime ${(statSync(process.execPath).size / 1048576).toFixed(1)} MiB + ${chunkFiles.length / 2} chunks: ${(code / 1024).toFixed(0)} KiB of code, ${(caches / 1024).toFixed(0)} KiB of code caches)`,
);
