// A daemon that cannot do its job fails at start with one clear line and a non-zero exit, instead of
// running unready forever or logging on after its error (issue 16, item 4). Runs the built binary.
import t from 'tap';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DIST, built, exec } from '../helpers/binary';
import { tempDir } from '../helpers/temp';
import { ephemeralListeners } from '../helpers/daemon';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first (npm test does)');

const DISCOVERY = path.join(DIST, 'pilot-discovery');
const EPHEMERAL = ephemeralListeners('httpAddr');

function lastLine(s: string): string {
  const lines = s.trimEnd().split('\n');
  return lines[lines.length - 1] ?? '';
}

t.test('--configDir that does not exist or is a file', async (t) => {
  const tmp = tempDir(t, 'mesh-startup-');
  const missing = path.join(tmp, 'nope');
  const r1 = await exec(DISCOVERY, ['discovery', '--configDir', missing, '--httpAddr', '127.0.0.1:0', ...EPHEMERAL]);
  t.equal(r1.code, 255);
  t.equal(lastLine(r1.stderr), `Error: --configDir ${missing}: no such directory`);
  const file = path.join(tmp, 'a-file');
  writeFileSync(file, 'x');
  const r2 = await exec(DISCOVERY, ['discovery', '--configDir', file, '--httpAddr', '127.0.0.1:0', ...EPHEMERAL]);
  t.equal(r2.code, 255);
  t.equal(lastLine(r2.stderr), `Error: --configDir ${file}: not a directory`);
  t.equal(r2.stdout, '', 'nothing started, so nothing logged');
});

t.test('a port clash ends with its Error: line and nothing after it', async (t) => {
  const tmp = mkdtempSync(path.join(tmpdir(), 'mesh-startup-'));
  const taken = net.createServer();
  await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    taken.close();
    rmSync(tmp, { recursive: true, force: true });
  });
  const port = (taken.address() as net.AddressInfo).port;
  const started = Date.now();
  // One pipe for both streams, as a terminal shows them, so the order of log and error lines is kept.
  const args = ['discovery', '--configDir', tmp, '--httpAddr', `127.0.0.1:${port}`, ...EPHEMERAL];
  const r = await exec('/bin/sh', ['-c', 'exec "$0" "$@" 2>&1', DISCOVERY, ...args], {
    cwd: tmp,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PILOT_DEBOUNCE_AFTER: '10ms' },
  });
  t.equal(r.code, 255);
  t.match(lastLine(r.stdout), new RegExp(`^Error: --httpAddr 127\\.0\\.0\\.1:${port}: listen EADDRINUSE`), 'the error is the last line');
  t.ok(Date.now() - started < 10_000, 'exits promptly: no background work keeps the process alive');
});

t.test('PILOT_ENABLE_ANALYSIS without a cluster: analysis writes status to cluster resources, so the start fails', async (t) => {
  const tmp = tempDir(t, 'mesh-startup-');
  const r = await exec(DISCOVERY, ['discovery', '--configDir', tmp, '--httpAddr', '127.0.0.1:0', ...EPHEMERAL], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmp, PILOT_ENABLE_ANALYSIS: 'true' },
  });
  t.equal(r.code, 255);
  t.match(lastLine(r.stderr), /^Error: PILOT_ENABLE_ANALYSIS=true needs the configuration of a cluster: .*--orchconfig/);
});
