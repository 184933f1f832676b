// ControlZ's JSON API and pages, with the paths and payloads of Istio's pkg/ctrlz topics.
import * as os from 'node:os';
import t from 'tap';
import { buildInfo } from '../../src/lib/buildinfo';
import { getScopes, registerScope } from '../../src/lib/log';
import { defineCounter, defineHistogram } from '../../src/lib/metrics';
import { watchAppSignals } from '../../src/serve/appsignals';
import { startControlZ } from '../../src/serve/ctrlz/server';
import { request } from './helpers';

const scope = registerScope('ctrlztest', 'a scope for the ControlZ test');
let exits = 0;

async function start(t: { teardown(fn: () => unknown): void }) {
  const listener = await startControlZ({ address: '127.0.0.1', port: 0, onExit: () => exits++ });
  t.teardown(() => listener.drain(Date.now() + 1000));
  return (p: string) => `http://${listener.bound.address}${p}`;
}

const json = async (url: string) => {
  const r = await request(url);
  t.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  t.ok(r.body.endsWith('\n'), "Go's json.Encoder ends with a newline");
  return JSON.parse(r.body) as unknown;
};

t.test('scopes: list, get, put', async (t) => {
  const u = await start(t);
  const list = (await json(u('/scopej/'))) as Array<Record<string, unknown>>;
  t.same(
    list.find((s) => s.name === 'ctrlztest'),
    { name: 'ctrlztest', description: 'a scope for the ControlZ test', output_level: 'info', stack_trace_level: 'none', log_callers: false },
  );
  t.same(
    list.map((s) => s.name),
    getScopes().map((s) => s.name),
    'every registered scope',
  );
  t.same(
    await json(u('/scopej/ctrlztest')),
    list.find((s) => s.name === 'ctrlztest'),
  );
  const unknown = await request(u('/scopej/nope'));
  t.equal(unknown.status, 400);
  t.equal(unknown.body, 'unknown scope name: nope');

  const put = (body: string, name = 'ctrlztest') =>
    request(u(`/scopej/${name}`), { method: 'PUT', body, headers: { 'content-type': 'application/json' } });
  const accepted = await put(JSON.stringify({ name: 'ctrlztest', output_level: 'debug', stack_trace_level: 'error', log_callers: true }));
  t.equal(accepted.status, 202);
  t.same(
    getScopes().find((s) => s.name === 'ctrlztest'),
    { name: 'ctrlztest', description: 'a scope for the ControlZ test', outputLevel: 'debug', stackTraceLevel: 'error', logCallers: true },
    'changed in the logging library',
  );
  t.ok(scope.debugEnabled(), 'the scope now logs debug messages');

  // Istio: unknown level names are ignored, log_callers is always applied (absent = false).
  t.equal((await put(JSON.stringify({ output_level: 'loud' }))).status, 202);
  t.same(await json(u('/scopej/ctrlztest')), {
    name: 'ctrlztest',
    description: 'a scope for the ControlZ test',
    output_level: 'debug',
    stack_trace_level: 'error',
    log_callers: false,
  });
  const bad = await put('{not json');
  t.equal(bad.status, 400);
  t.match(bad.body, /^unable to decode request: /);
  t.equal((await put('{}', 'nope')).status, 400);
  t.equal((await put(JSON.stringify({ output_level: 'info', stack_trace_level: 'none' }))).status, 202);
  t.notOk(scope.debugEnabled());

  const redirect = await request(u('/scopej'));
  t.equal(redirect.status, 301);
  t.equal(redirect.headers.location, '/scopej/');
  t.equal((await request(u('/scopej/'), { method: 'DELETE' })).status, 405);
});

t.test('process, memory, args, env, version, home', async (t) => {
  const u = await start(t);
  const proc = (await json(u('/procj/'))) as Record<string, unknown>;
  t.equal(proc.pid, process.pid);
  t.equal(proc.ppid, process.ppid);
  t.equal(proc.hostname, os.hostname());
  t.equal(proc.wd, process.cwd());
  t.equal(proc.tempdir, os.tmpdir());
  t.equal(proc.uid, process.getuid!());
  t.ok((proc.threads as number) > 0, 'threads from /proc');
  t.equal((proc.versions as Record<string, string>).node, process.versions.node);
  t.ok((proc.uptime as number) > 0);

  const mem = (await json(u('/memj/'))) as { memoryUsage: Record<string, number>; heapStatistics: Record<string, number>; heapSpaces: unknown[] };
  t.ok(mem.memoryUsage.rss! > 0);
  t.ok(mem.heapStatistics.total_heap_size! > 0);
  t.ok(mem.heapSpaces.length > 0);
  t.equal((await request(u('/memj/forcecollection'), { method: 'PUT' })).status, 202);
  t.equal((await request(u('/memj/forcecollection'))).status, 405);

  t.same(await json(u('/argj/')), process.argv);
  process.env.MESHD_CTRLZ_TEST = 'x=<b>';
  const env = (await json(u('/envj/'))) as Array<{ name: string; value: string }>;
  t.same(
    env.find((e) => e.name === 'MESHD_CTRLZ_TEST'),
    { name: 'MESHD_CTRLZ_TEST', value: 'x=<b>' },
  );
  const keys = env.map((e) => `${e.name}=${e.value}`);
  t.same(keys, [...keys].sort(), 'sorted as NAME=value strings');
  t.same(await json(u('/versionj/')), buildInfo());
  const home = (await json(u('/homej'))) as Record<string, unknown>;
  t.same(Object.keys(home), ['ProcessName', 'HeapSize', 'NumGC', 'CurrentTime', 'Hostname', 'IP']);
  t.equal(home.Hostname, os.hostname());
});

t.test('metrics in prom2json form', async (t) => {
  const u = await start(t);
  defineCounter<'k'>({ name: 'ctrlz_test_total', help: 'A counter for the test.', labelNames: ['k'] }).inc({ k: 'v' }, 3);
  const h = defineHistogram({ name: 'ctrlz_test_seconds', help: 'A histogram for the test.', buckets: [0.1, 1] });
  h.observe(0.05);
  h.observe(0.5);
  const families = (await json(u('/metricj/'))) as Array<Record<string, unknown>>;
  t.same(
    families.find((f) => f.name === 'ctrlz_test_total'),
    {
      name: 'ctrlz_test_total',
      help: 'A counter for the test.',
      type: 'COUNTER',
      metrics: [{ labels: { k: 'v' }, value: '3' }],
    },
  );
  t.same(
    families.find((f) => f.name === 'ctrlz_test_seconds'),
    {
      name: 'ctrlz_test_seconds',
      help: 'A histogram for the test.',
      type: 'HISTOGRAM',
      metrics: [{ buckets: { '0.1': '1', '1': '2' }, sum: '0.55', count: '2' }],
    },
  );
});

t.test('signals and exit', async (t) => {
  const u = await start(t);
  const got: string[] = [];
  const stop = watchAppSignals((sig, source) => got.push(`${sig} ${source}`));
  t.teardown(stop);
  t.equal((await request(u('/signalj/SIGUSR1'), { method: 'PUT' })).status, 202);
  t.equal((await request(u('/signalj/SIGUSR1'), { method: 'POST' })).status, 202);
  t.equal(got.length, 2);
  t.match(got[0], /^SIGUSR1 Remote: 127\.0\.0\.1:\d+$/);
  t.equal((await request(u('/signalj/SIGUSR1'))).status, 405);
  t.equal((await request(u('/homej/exit'), { method: 'PUT' })).status, 202);
  await new Promise((r) => setImmediate(r));
  t.equal(exits, 1, 'the exit request reached the daemon');
});

t.test('pages', async (t) => {
  const u = await start(t);
  const titles: Record<string, string> = {
    '/': 'Home',
    '/scopez/': 'Logging Scopes',
    '/memz/': 'Memory Usage',
    '/envz/': 'Environment Variables',
    '/procz/': 'Process Info',
    '/argz/': 'Command-Line Arguments',
    '/versionz/': 'Version Info',
    '/metricz/': 'Metrics',
    '/signalz/': 'Signals',
  };
  for (const [path, title] of Object.entries(titles)) {
    const r = await request(u(path));
    t.equal(r.status, 200, path);
    t.equal(r.headers['content-type'], 'text/html; charset=utf-8');
    t.match(r.body, `<title>ControlZ: ${title}</title>`);
    for (const p of Object.keys(titles).filter((x) => x !== '/')) t.match(r.body, `href="${p}"`, `${path} links to ${p}`);
  }
  process.env.MESHD_CTRLZ_TEST = '<script>alert(1)</script>';
  const env = await request(u('/envz/'));
  t.match(env.body, '&lt;script&gt;alert(1)&lt;/script&gt;', 'values are escaped');
  t.notMatch(env.body, '<script>alert(1)</script>');
  const scopes = await request(u('/scopez/'));
  t.match(scopes.body, /<tr id="scope-ctrlztest" data-scope="ctrlztest">/);
  const missing = await request(u('/nothing-here'));
  t.equal(missing.status, 404);
  t.match(missing.body, /There is no page at <code>\/nothing-here<\/code>/);
});
