// Whole-process behaviour: output before configure() (Istio configures defaults at init: text to stdout),
// stdout/stderr targets, nothing lost when the process exits right after logging, and fatal's exit code
// (Istio's pkg/log exits with 1 after writing the fatal entry).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { tempDir } from '../helpers/temp';

const LOG = fileURLToPath(new URL('../../src/lib/log/index.ts', import.meta.url));
const dir = tempDir(t, 'mesh-log-proc-');

let n = 0;
function run(body: string): { status: number | null; stdout: string; stderr: string } {
  const file = path.join(dir, `child${n++}.ts`);
  fs.writeFileSync(file, `import * as log from ${JSON.stringify(LOG)};\n${body}\n`);
  const r = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', cwd: path.dirname(LOG) });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const TS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

t.test('before configure: info and above as text on stdout', async (t) => {
  const r = run(`const ads = log.registerScope('ads'); ads.debug('hidden'); ads.info('hello', { k: 'v' }); log.warn('unscoped');`);
  t.equal(r.status, 0, r.stderr);
  const lines = r.stdout.split('\n');
  t.equal(lines.length, 3);
  const [ts, ...rest] = (lines[0] as string).split('\t');
  t.match(ts, TS);
  t.same(rest, ['info', 'ads', 'hello', 'k=v']);
  t.same((lines[1] as string).split('\t').slice(1), ['warn', 'unscoped']);
  t.equal(lines[2], '');
});

t.test('stderr target', async (t) => {
  const r = run(`log.configure(log.parseLogOptions({ log_target: ['stderr'], log_as_json: true })); log.info('to stderr');`);
  t.equal(r.status, 0, r.stderr);
  t.equal(r.stdout, '');
  const obj = JSON.parse(r.stderr) as Record<string, unknown>;
  t.same(Object.keys(obj), ['level', 'time', 'msg']);
  t.equal(obj.msg, 'to stderr');
});

t.test('nothing is lost on an immediate process.exit', async (t) => {
  const r = run(`const s = log.registerScope('ads'); for (let i = 0; i < 5000; i++) s.info('line ' + i + ' ' + 'x'.repeat(100)); process.exit(3);`);
  t.equal(r.status, 3);
  const lines = r.stdout.trimEnd().split('\n');
  t.equal(lines.length, 5000);
  t.match(lines[4999], /\tinfo\tads\tline 4999 x+$/);
});

t.test('fatal writes, then exits with 1', async (t) => {
  const file = path.join(dir, 'fatal.log');
  const r = run(
    `log.configure(log.parseLogOptions({ log_target: ['stdout', ${JSON.stringify(file)}] }), { scopes: ['ads'] });\n` +
      `log.registerScope('ads').fatal('giving up', { reason: 'test' });\n` +
      `console.log('not reached');`,
  );
  t.equal(r.status, 1);
  t.match(r.stdout, /^\S+\tfatal\tads\tgiving up\treason=test\n$/);
  t.equal(fs.readFileSync(file, 'utf8'), r.stdout);
});

t.test('package-level fatal on the default scope', async (t) => {
  const r = run(`log.fatal('bye');`);
  t.equal(r.status, 1);
  t.match(r.stdout, /^\S+\tfatal\tbye\n$/);
});
