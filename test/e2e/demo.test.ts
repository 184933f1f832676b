// `npm run demo` as a newcomer meets it, from the checkout and from the release tarball: it starts clean
// (no warnings about its own files, nothing rejected), its first printed command works, and Ctrl-C leaves
// nothing behind, with the control plane secured (the gateway's certificate from the daemon's CA, xDS over
// mutual TLS on :15012). The demo binds fixed ports (15010, 15012, 15014, 15021, 18080, 19443…): each run gets a
// network namespace of its own.
import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { metricValue } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

async function runDemo(t: Test, script: string, cwd: string): Promise<void> {
  const ns = createNetns(t, 'mesh-demo');
  const tmp = tempDir(t, 'mesh-demo-tmp-');
  const child = spawnIn(ns, process.execPath, [script], { cwd, env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: tmp } });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const deadline = Date.now() + 60_000;
  while (!out.includes('Ctrl-C stops everything.')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the demo did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // The gateway's first config may predate the first key fetch: the printed command works once it has keys.
  const token = /TOKEN=(\S+)/.exec(out)?.[1];
  t.ok(token, 'the demo prints a token');
  let status = 0;
  for (let i = 0; i < 100 && status !== 200; i++) {
    status = httpGetIn(ns, 'http://127.0.0.1:18080/headers', { authorization: `Bearer ${token}` }).status;
    if (status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  t.equal(status, 200, 'the first printed curl command is answered by the workload');
  t.equal(httpGetIn(ns, 'http://127.0.0.1:18080/get').status, 403, 'the policy requires a token on /get');
  const metrics = httpGetIn(ns, 'http://127.0.0.1:15014/metrics').body;
  t.equal(metricValue(metrics, 'pilot_total_rejected_configs') ?? 0, 0, 'pilot_total_rejected_configs is 0');
  // The control plane is secured out of the box: the gateway's identity comes from the daemon's CA.
  const agentStats = httpGetIn(ns, 'http://127.0.0.1:15020/stats/prometheus').body;
  t.ok((metricValue(agentStats, 'cert_expiry_seconds', 'resource_name="default"') ?? 0) > 3600, 'the gateway holds a workload certificate');
  t.match(out, /\[gateway\] [^\n]*connected to upstream XDS server: localhost:15012/, 'xDS over mutual TLS on the secured port');
  t.notMatch(out, /\twarn\t|\terror\t/, 'no warnings or errors in the demo output');
  t.notMatch(out, /skipped/, 'no file of the demo is skipped');

  child.kill('SIGINT');
  t.equal(await exited, 0, 'Ctrl-C stops the demo with exit 0');
  t.same(fs.readdirSync(tmp), [], 'nothing is left in the temp directory');
}

t.test('npm run demo from the checkout', { skip }, async (t) => {
  await runDemo(t, path.join(REPO, 'scripts/demo.mjs'), REPO);
});

t.test('the demo from the release tarball, with no node_modules', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-tarball-');
  const tgz = fs.readdirSync(DIST).find((f) => f.endsWith('.tar.gz'))!;
  execFileSync('tar', ['-xzf', path.join(DIST, tgz), '-C', dir]);
  const top = path.join(dir, fs.readdirSync(dir)[0]!);
  for (const f of [
    'LICENSE',
    'NOTICE',
    'THIRD_PARTY_NOTICES',
    'README.md',
    'demo.mjs',
    'examples/claim-routing/config/gateway.yaml',
    'mesh',
    'meshctl',
  ]) {
    t.ok(fs.existsSync(path.join(top, f)), `the tarball holds ${f}`);
  }
  t.match(fs.readFileSync(path.join(top, 'LICENSE'), 'utf8'), /Apache License\s+Version 2\.0, January 2004/);
  await runDemo(t, path.join(top, 'demo.mjs'), top);
});

t.test('a port the demo needs is taken: one line naming the port and the program, no stack trace', { skip }, async (t) => {
  const ns = createNetns(t, 'mesh-demo-port');
  // another program on the daemon's metrics port, in the demo's namespace
  const holder = spawnIn(ns, process.execPath, ['-e', "require('net').createServer().listen(15014, '127.0.0.1', () => console.log('up'))"], {
    env: { PATH: process.env.PATH },
  });
  t.teardown(() => void holder.kill('SIGKILL'));
  await new Promise((r) => holder.stdout!.once('data', r));
  const demo = spawnIn(ns, process.execPath, [path.join(REPO, 'scripts/demo.mjs')], {
    cwd: REPO,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
  });
  let out = '';
  demo.stdout!.on('data', (d) => (out += d));
  demo.stderr!.on('data', (d) => (out += d));
  const code = await new Promise<number | null>((r) => demo.on('exit', (c) => r(c)));
  t.equal(code, 1, out);
  t.equal(out.trimEnd().split('\n').length, 1, `one line: ${out}`);
  t.match(out, /port 15014\b.*pilot-discovery \(metrics\).*in use/);
  t.notMatch(out, /^\s+at /m, 'no stack trace');
});

t.test('the gateway demo: the live edit it suggests visibly works, with no restart', { skip, timeout: 120_000 }, async (t) => {
  // a copy of the checkout's layout, so that the edit does not touch the repository's examples
  const dir = tempDir(t, 'mesh-demo-edit-');
  fs.cpSync(path.join(REPO, 'scripts'), path.join(dir, 'scripts'), { recursive: true });
  fs.cpSync(path.join(REPO, 'examples'), path.join(dir, 'examples'), { recursive: true });
  for (const l of ['dist', 'node_modules']) fs.symlinkSync(path.join(REPO, l), path.join(dir, l));
  const ns = createNetns(t, 'mesh-demo-edit');
  const child = spawnIn(ns, process.execPath, [path.join(dir, 'scripts/demo.mjs'), 'gateway'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: dir },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(() => void (child.exitCode === null && child.kill('SIGKILL')));
  const deadline = Date.now() + 60_000;
  while (!out.includes('Ctrl-C stops everything.')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the demo did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const get = async (p: string, want: number) => {
    let s = 0;
    for (let i = 0; i < 50 && s !== want; i++) {
      s = httpGetIn(ns, `http://127.0.0.1:18080${p}`).status;
      if (s !== want) await new Promise((r) => setTimeout(r, 200));
    }
    return s;
  };
  t.equal(await get('/get', 200), 200, '/get is routed before the edit');
  // the printed suggestion: which line of which file to delete
  const m = /delete its line, `([^`]+)`, in[\s#]*(examples\/\S+\.yaml)/.exec(out);
  t.ok(m, `the demo suggests a live edit:\n${out}`);
  if (!m) return;
  const file = path.join(dir, m[2]!);
  const text = fs.readFileSync(file, 'utf8');
  t.ok(text.includes(m[1]!), `${m[2]} has the line to delete`);
  fs.writeFileSync(
    file,
    text
      .split('\n')
      .filter((l) => l.trim() !== m[1])
      .join('\n'),
  );
  t.equal(await get('/get', 404), 404, '/get: 404 from the gateway after the edit');
  t.equal(await get('/headers', 200), 200, '/headers still routed');
  t.equal(child.exitCode, null, 'no restart');
});
