// The agent's memory (src/agent/memory.ts, src/native/memory.cc): it restarts itself once with a small V8 young
// generation (AGENT_NODE_OPTIONS) keeping its pid, descriptors and arguments, restores the NODE_OPTIONS it was
// given for what it starts, leaves a user's own heap flags alone, and gives memory back when idle.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildOriginalDstAddon } from '../../scripts/native-addon.mjs';
import { AGENT_NODE_OPTIONS, RESTARTED_MARKER } from '../../src/lib/agent-heap';
import { restartWithSmallHeap, startMemoryRelief } from '../../src/agent/memory';
import { ADDON_FILE, type MemoryBinding } from '../../src/native/original-dst';
import { freePort, tempDir, waitFor } from './helpers';
import { DIST, built } from '../helpers/binary';

function environ(pid: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)) {
    const i = kv.indexOf('=');
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}

/** `pilot-agent proxy router` of the built executable, pointed at a discovery address nobody serves. */
async function startAgent(t: Test, extraEnv: Record<string, string>) {
  const dir = tempDir(t);
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), 'defaultConfig:\n  discoveryAddress: 127.0.0.1:1\n  controlPlaneAuthPolicy: NONE\n');
  const child = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml'], {
    cwd: dir,
    env: {
      PATH: '/usr/bin:/bin', HOME: dir, POD_NAME: 'memory-0', POD_NAMESPACE: 'mesh-system', INSTANCE_IP: '127.0.0.1',
      PROXY_STATUS_PORT: String(await freePort()), PROXY_METRICS_PORT: String(await freePort()),
      PROXY_CONFIG: JSON.stringify({ statusPort: await freePort(), proxyAdminPort: await freePort() }), ...extraEnv,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  // its signal handlers are in place once the status server listens
  await waitFor(() => /status server listening/.test(out), 30_000, () => `the agent's status server did not start:\n${out}`);
  return { child, out: () => out };
}

t.test('the built agent restarts itself with the small heap: same pid, its output, the caller\'s NODE_OPTIONS restored', { skip: built() ? false : 'dist/mesh is not built' }, async (t) => {
  const agent = await startAgent(t, { NODE_OPTIONS: '--stack-trace-limit=20' });
  // /proc/<pid>/environ is the environment the process image was started with: the restarted one's
  // (tap adds its own options to a child's NODE_OPTIONS)
  const env = environ(agent.child.pid!);
  t.match(env[RESTARTED_MARKER], /^"?--stack-trace-limit=20/, 'the same pid is the restarted agent, which knows the NODE_OPTIONS it was given');
  t.equal(env['NODE_OPTIONS'], `${env[RESTARTED_MARKER]} ${AGENT_NODE_OPTIONS}`, 'and runs with the agent\'s V8 flags after them');
  t.equal(agent.out().match(/Version /g)?.length, 1, 'one start was logged (through the inherited stdout/stderr)');
  agent.child.kill('SIGTERM');
  const code = await new Promise((r) => agent.child.once('exit', (c, s) => r(c ?? s)));
  t.equal(code, 0, 'SIGTERM reaches the restarted agent, which exits cleanly');
});

t.test('a user\'s own heap flags in NODE_OPTIONS: no restart', { skip: built() ? false : 'dist/mesh is not built' }, async (t) => {
  const agent = await startAgent(t, { NODE_OPTIONS: '--max-old-space-size=300' });
  const env = environ(agent.child.pid!);
  t.match(env['NODE_OPTIONS'], /^"?--max-old-space-size=300/);
  t.notOk(env['NODE_OPTIONS']!.includes(AGENT_NODE_OPTIONS), 'not given the agent\'s flags');
  t.notOk(RESTARTED_MARKER in env, 'not restarted');
});

t.test('the restarted process restores NODE_OPTIONS for what it starts and does not restart again', async (t) => {
  let execs = 0;
  const exec = () => {
    execs++;
    return 0;
  };
  const given = { NODE_OPTIONS: `--stack-trace-limit=20 ${AGENT_NODE_OPTIONS}`, [RESTARTED_MARKER]: '--stack-trace-limit=20' };
  t.same(restartWithSmallHeap(given, exec), { restarted: false, reason: 'this is the restarted agent' });
  t.same(given, { NODE_OPTIONS: '--stack-trace-limit=20' });
  const none: NodeJS.ProcessEnv = { NODE_OPTIONS: AGENT_NODE_OPTIONS, [RESTARTED_MARKER]: '' };
  restartWithSmallHeap(none, exec);
  t.same(none, {}, 'no NODE_OPTIONS before: none after');
  t.same(restartWithSmallHeap({ NODE_OPTIONS: '--max-semi-space-size=8' }, exec), { restarted: false, reason: 'NODE_OPTIONS sets the heap (--max-semi-space-size=8)' });
  t.equal(execs, 0);
});

t.test('releaseMemory shrinks V8\'s heap and returns it; releaseExecutablePages unmaps the executable\'s pages; execve keeps the pid and the standard descriptors', async (t) => {
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
console.log(JSON.stringify({ before, after, pid: process.pid, fileBefore, fileAfter, advised, works }));
const errno = m.exports.execve('/bin/sh', ['sh', '-c', 'echo "$$ $GREETING"; echo to-stderr >&2'], ['GREETING=hello']);
console.log('execve returned ' + errno);`;
  const out = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8' });
  const [json, shell] = out.stdout.trim().split('\n');
  const { before, after, pid, fileBefore, fileAfter, advised, works } = JSON.parse(json!) as {
    before: Record<string, number>; after: Record<string, number>; pid: number; fileBefore: number; fileAfter: number; advised: number; works: string;
  };
  t.ok(after['new_space']! < before['new_space']!, `the young generation shrank (${before['new_space']} → ${after['new_space']} bytes)`);
  t.ok(after['old_space']! < before['old_space']!, `the old generation gave pages back (${before['old_space']} → ${after['old_space']} bytes)`);
  // node's own executable here: tens of MB of it are mapped after start
  t.ok(advised > 10 * 1048576, `releaseExecutablePages advised ${advised} bytes of the executable`);
  t.ok(fileAfter < fileBefore - 5 * 1024, `its resident file pages fell (${fileBefore} → ${fileAfter} kB)`);
  t.equal(works, 'still works', 'and the process runs on (what it uses faults back in)');
  t.equal(shell, `${pid} hello`, 'the new image has the same pid, the given environment and the same stdout');
  t.equal(out.stderr.trim(), 'to-stderr', 'and the same stderr');
  t.equal(out.status, 0);
});

t.test('memory is released when the event loop was idle and has grown since, never while busy', async (t) => {
  let released = 0;
  const fake: MemoryBinding = { releaseMemory: () => void released++, trimMalloc: () => undefined, releaseExecutablePages: () => 0, execve: () => 0 };
  // busy: the loop is blocked for most of every interval
  const busy = startMemoryRelief({ intervalMs: 50, idleUtilisation: 0.5, growthBytes: 0 }, fake);
  const until = Date.now() + 400;
  while (Date.now() < until) {
    const spin = Date.now() + 45;
    while (Date.now() < spin);
    await new Promise((r) => setImmediate(r));
  }
  busy.stop();
  t.equal(released, 0, 'not while busy');
  // idle, no growth asked: released at every interval
  const idle = startMemoryRelief({ intervalMs: 30, idleUtilisation: 0.5, growthBytes: 0 }, fake);
  await new Promise((r) => setTimeout(r, 200));
  idle.stop();
  t.ok(released >= 2, `idle: released ${released} times`);
  // idle, but the RSS has not grown by the threshold since the first release: once only
  released = 0;
  const once = startMemoryRelief({ intervalMs: 30, idleUtilisation: 0.5, growthBytes: 1 << 30 }, fake);
  await new Promise((r) => setTimeout(r, 200));
  once.stop();
  t.equal(released, 1, 'once until the process grows');
});
