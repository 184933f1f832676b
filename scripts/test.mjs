// The test command (README, .ci/run): type-check, build the real binary, run the tap suite, and end
// with one line `N passed, N failed` counted over every assertion, exiting non-zero on any failure. Failed
// assertions are listed again just before that line, with the file and subtests they sit in, because a CI
// log is often read from its tail. What counts as a failure besides a `not ok`: a failing `# TODO` point, a
// subtest that made no assertion (a test that cannot fail), and, with CI=true, every skip: CI's machine is
// provisioned by .ci/run, so a skipped test there is a missing prerequisite, named by the skip's reason.
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { readFileSync } from 'node:fs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const bin = (name) => path.join(root, 'node_modules/.bin', name);

function step(title, cmd, args) {
  process.stdout.write(`# ${title}\n`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) {
    process.stdout.write(`${title} failed (exit ${r.status})\n0 passed, 1 failed\n`);
    process.exit(1);
  }
}

// tap compiles its plugin list into node_modules; .taprc drops @tapjs/typescript (tsx runs the TS), and a
// fresh install still has the default list until `tap build` runs (postinstall does it; this covers
// installs made with --ignore-scripts).
const tapIndex = path.join(root, 'node_modules/@tapjs/test/dist/esm/index.js');
if (readFileSync(tapIndex, 'utf8').includes('@tapjs/typescript')) step('tap build', bin('tap'), ['build']);
step('type check', bin('tsc'), ['--noEmit', '-p', '.']);
if (!process.argv.includes('--no-build')) step('build', process.execPath, ['build.mjs']);

// tap's TAP output: count every leaf assertion ("ok N" / "not ok N" at any depth, skips and todos apart).
const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const tap = spawn(bin('tap'), ['--reporter=tap', ...(files.length ? files : [])], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
const inCI = process.env.CI === 'true';
let passed = 0;
let failed = 0;
let skipped = 0;
let buf = '';
const lines = [];
tap.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  buf += chunk.toString();
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    lines.push(buf.slice(0, i));
    buf = buf.slice(i + 1);
  }
});
tap.on('close', (code) => {
  if (buf) lines.push(buf);
  const points = [];
  // names of the subtests open at each indent: a `# Subtest:` header at indent h holds the points at h + 4
  const open = [];
  lines.forEach((line, at) => {
    const header = /^(\s*)# Subtest: (.*)$/.exec(line);
    if (header) {
      open.length = header[1].length / 4;
      open.push(header[2]);
      return;
    }
    const m = /^(\s*)(not ok|ok) \d+/.exec(line);
    if (!m) return;
    const depth = m[1].length;
    const directive = /# (SKIP|TODO)\b/i.exec(line)?.[1]?.toUpperCase();
    // tap closes a subtest that asserted nothing with the plan `1..0` (a skipped one says `1..0 # SKIP`)
    const empty = !directive && lines[at - 1] === `${' '.repeat(depth + 4)}1..0`;
    points.push({ depth, ok: m[2] === 'ok', directive, empty, at, within: open.slice(0, depth / 4) });
  });
  const failures = [];
  const skips = [];
  points.forEach((p, idx) => {
    // A subtest's summary line comes right after its (deeper) children: count leaves only.
    const prev = points[idx - 1];
    if (prev !== undefined && prev.depth > p.depth) return;
    if (!p.ok && p.directive === 'TODO') p.why = 'a failing TODO point';
    else if (p.empty) p.why = 'a subtest that made no assertion';
    else if (p.directive && inCI) p.why = 'skipped in CI, where every prerequisite must be present';
    if (p.why) {
      failed++;
      failures.push(p);
    } else if (p.directive) {
      skipped++;
      skips.push(p);
    } else if (p.ok) passed++;
    else {
      failed++;
      failures.push(p);
    }
  });
  if (skips.length)
    process.stdout.write(
      `\n# skipped (each fails the run with CI=true):\n${skips.map((p) => `${p.within.join(' > ')}\n  ${lines[p.at].trim()}\n`).join('')}`,
    );
  if (failures.length) process.stdout.write(`\n# failed assertions:\n${failures.map(describeFailure).join('')}`);
  if (code !== 0 && failed === 0) failed = 1;
  process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
  process.exit(failed > 0 || code !== 0 ? 1 : 0);
});

// A failed assertion with where it sits and the first lines of its diagnostic block (tap's YAML).
function describeFailure(p) {
  let text = `${p.within.join(' > ')}\n  ${lines[p.at].trim()}${p.why ? `  (${p.why})` : ''}\n`;
  const inBlock = ' '.repeat(p.depth + 2);
  for (let i = p.at + 1; i < lines.length && i <= p.at + 24 && lines[i].startsWith(inBlock) && lines[i].trim() !== '...'; i++) {
    text += `    ${lines[i].slice(inBlock.length)}\n`;
  }
  return text;
}
