// The agent's memory (src/proxy/common/memory-relief.ts, src/native/memory.cc): the addon's releaseMemory shrinks V8's heap and
// releaseExecutablePages unmaps the executable's clean pages, and the agent does both when idle, never when busy.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { buildOriginalDstAddon } from '../../scripts/native-addon.mjs';
import { startMemoryRelief } from '../../src/proxy/common/memory-relief';
import { ADDON_FILE, type MemoryBinding } from '../../src/native/original-dst';
import { freePort } from '../helpers/ports';
import { tempDir } from '../helpers/temp';
import { DIST, built } from '../helpers/binary';
import { waitFor } from '../helpers/wait';
import { opensslIdentities } from '../../scripts/lib/mesh-pods.mjs';

t.test("releaseMemory shrinks V8's heap and returns it; releaseExecutablePages unmaps the executable's pages, and the process runs on", async (t) => {
  const dir = tempDir(t, 'mesh-addon-');
  const addon = path.join(dir, ADDON_FILE);
  const r = buildOriginalDstAddon(addon);
  if (!r.ok || r.note) {
    t.fail(`the addon with its memory functions does not build here: ${r.ok ? r.note : r.reason}`);
    return;
  }
  const script = `const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(addon)});
const v8 = require('node:v8');
const heap = () => Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_size]));
let keep = []; for (let i = 0; i < 400000; i++) keep.push({ i, s: 'x' + i }); keep = null;
const before = heap();
m.exports.releaseMemory();
const after = heap();
const fileKb = () => Number(/^RssFile:\\s+(\\d+)/m.exec(require('node:fs').readFileSync('/proc/self/status', 'utf8'))[1]);
const fileBefore = fileKb();
const advised = m.exports.releaseExecutablePages();
const fileAfter = fileKb();
// the process goes on running code and reading data from those pages
const works = require('node:zlib').gunzipSync(require('node:zlib').gzipSync('still works')).toString();
console.log(JSON.stringify({ before, after, fileBefore, fileAfter, advised, works }));`;
  const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  const { before, after, fileBefore, fileAfter, advised, works } = JSON.parse(out.stdout) as {
    before: Record<string, number>;
    after: Record<string, number>;
    fileBefore: number;
    fileAfter: number;
    advised: number;
    works: string;
  };
  t.ok(after['new_space']! < before['new_space']!, `the young generation shrank (${before['new_space']} → ${after['new_space']} bytes)`);
  t.ok(after['old_space']! < before['old_space']!, `the old generation gave pages back (${before['old_space']} → ${after['old_space']} bytes)`);
  // node's own executable here: tens of MB of it are mapped after start
  t.ok(advised > 10 * 1048576, `releaseExecutablePages advised ${advised} bytes of the executable`);
  t.ok(fileAfter < fileBefore - 5 * 1024, `its resident file pages fell (${fileBefore} → ${fileAfter} kB)`);
  t.equal(works, 'still works', 'and the process runs on (what it uses faults back in)');
  t.equal(out.status, 0);
});

t.test('memory is released when the event loop was idle and has grown since, never while busy', async (t) => {
  let released = 0;
  const fake: MemoryBinding = { releaseMemory: () => void released++, releaseExecutablePages: () => 0 };
  // busy: the loop is blocked for most of every interval
  const busy = startMemoryRelief({ intervalMs: 50, idleUtilisation: 0.5, quietIntervals: 1, growthBytes: 0 }, fake);
  const until = Date.now() + 400;
  while (Date.now() < until) {
    const spin = Date.now() + 45;
    while (Date.now() < spin);
    await new Promise((r) => setImmediate(r));
  }
  busy.stop();
  t.equal(released, 0, 'not while busy');
  // idle, no growth asked: released at every interval
  const idle = startMemoryRelief({ intervalMs: 30, idleUtilisation: 0.5, quietIntervals: 1, growthBytes: 0 }, fake);
  await new Promise((r) => setTimeout(r, 200));
  idle.stop();
  t.ok(released >= 2, `idle: released ${released} times`);
  // idle, but the RSS has not grown by the threshold since the first release: once only
  released = 0;
  const once = startMemoryRelief({ intervalMs: 30, idleUtilisation: 0.5, quietIntervals: 1, growthBytes: 1 << 30 }, fake);
  await new Promise((r) => setTimeout(r, 200));
  once.stop();
  t.equal(released, 1, 'once until the process grows');
  // three quiet intervals in a row before each release
  released = 0;
  const patient = startMemoryRelief({ intervalMs: 40, idleUtilisation: 0.5, quietIntervals: 3, growthBytes: 0 }, fake);
  await new Promise((r) => setTimeout(r, 100));
  t.equal(released, 0, 'not before the third quiet interval');
  await new Promise((r) => setTimeout(r, 300));
  patient.stop();
  t.ok(released >= 1 && released <= 3, `then every third interval (${released} in 10 intervals)`);
});

t.test("the built agent gives start-up's memory back once idle", { skip: built() ? false : 'dist/mesh is not built' }, async (t) => {
  // `pilot-agent proxy router` with the built-in engine, its discovery address unserved: it starts and idles.
  // Its certificate is mounted (FILE_MOUNTED_CERTS), as with an external CA: with the CA unreachable instead, its
  // certificate retries keep ~1 % of the event loop busy on a slow machine, the very threshold of idleness, and the
  // test would measure the machine's speed rather than the release.
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), 'defaultConfig:\n  discoveryAddress: 127.0.0.1:1\n  controlPlaneAuthPolicy: NONE\n');
  const id = 'spiffe://cluster.local/ns/mesh-system/sa/memory';
  const ids = opensslIdentities(path.join(dir, 'openssl'), [id]);
  fs.mkdirSync(path.join(dir, 'etc', 'certs'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'etc/certs/cert-chain.pem'), ids.certs[id]!.cert);
  fs.writeFileSync(path.join(dir, 'etc/certs/key.pem'), ids.certs[id]!.key);
  fs.writeFileSync(path.join(dir, 'etc/certs/root-cert.pem'), ids.root);
  const child = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml'], {
    cwd: dir,
    env: {
      PATH: '/usr/bin:/bin',
      HOME: dir,
      POD_NAME: 'memory-0',
      POD_NAMESPACE: 'mesh-system',
      INSTANCE_IP: '127.0.0.1',
      FILE_MOUNTED_CERTS: 'true',
      PROXY_STATUS_PORT: String(await freePort()),
      PROXY_METRICS_PORT: String(await freePort()),
      PROXY_CONFIG: JSON.stringify({ statusPort: await freePort(), proxyAdminPort: await freePort() }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(fs.readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]);
  await waitFor(
    () => `the agent did not start:\n${out}`,
    () => /status server listening/.test(out),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const started = kb('RssFile');
  // start-up maps ~45 MB of the executable; once idle the agent unmaps what it no longer runs. Idle means three
  // quiet 2 s intervals in a row; its xDS reconnects back off to intervals longer than that within ~20 s, and the
  // wait leaves room for a busy machine.
  await waitFor(
    () => `RssFile stayed at ${kb('RssFile')} kB (${started} kB after start):\n${out}`,
    () => kb('RssFile') < started / 2,
    { timeoutMs: 90_000, intervalMs: 50 },
  );
  t.pass(`the agent's resident file pages fell from ${started} to ${kb('RssFile')} kB`);
  child.kill('SIGTERM');
  t.equal(await new Promise((r) => child.once('exit', (c, sig) => r(c ?? sig))), 0, 'and it still stops cleanly on SIGTERM');
});
