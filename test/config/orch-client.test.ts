// The orchestrator client: --orchconfig loading with errors that name the file, in-cluster
// configuration, the bearer token reaching the server, MESH_ORCH_CLIENT_CONTENT_TYPE, and the
// --orchApiQPS/--orchApiBurst throttle as seen from the server.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { createOrchClient, OrchApiError } from '../../src/config/orch/client';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { FakeApiServer } from '../helpers/apiserver';

const logSink = new MemorySink();
configure(parseLogOptions({}), { sinks: [logSink] });

function logSince(mark: number): string[] {
  const text = logSink.text.slice(mark);
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'orch-client-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

t.test('a missing --orchconfig file is an error naming it', async (t) => {
  const dir = await tempDir(t);
  const file = join(dir, 'nope', 'orchconfig');
  await t.rejects(createOrchClient({ orchconfig: file }), {
    name: 'OrchConfigError',
    message: new RegExp(`orchestrator client configuration ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}.*(ENOENT|no such file)`),
  });
});

t.test('an unparseable or incomplete --orchconfig is an error naming the file and the problem', async (t) => {
  const dir = await tempDir(t);
  const cases: Array<[string, string, RegExp]> = [
    ['garbage.yaml', 'clusters: [\n  - name: a\n   bad', /cannot load orchestrator client configuration .*garbage\.yaml/],
    ['nocontext.yaml', 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n', /nocontext\.yaml: current-context is not set/],
    [
      'dangling.yaml',
      'apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts:\n- name: c\n  context:\n    cluster: gone\n    user: u\ncurrent-context: c\n',
      /dangling\.yaml: context "c" names cluster "gone", which is not among its clusters/,
    ],
    [
      'wrongctx.yaml',
      'apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\ncurrent-context: prod\n',
      /wrongctx\.yaml: current-context "prod" is not among its contexts/,
    ],
    [
      'noserver.yaml',
      'apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: "ftp://x"\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: c\n  context:\n    cluster: k\n    user: u\ncurrent-context: c\n',
      /noserver\.yaml: cluster "k" server "ftp:\/\/x" must be http:\/\/ or https:\/\//,
    ],
  ];
  for (const [name, text, want] of cases) {
    const file = join(dir, name);
    await writeFile(file, text);
    await t.rejects(createOrchClient({ orchconfig: file }), { name: 'OrchConfigError', message: want }, name);
  }
});

t.test('in-cluster: a clear error outside a cluster, and naming an unreadable token file', async (t) => {
  await t.rejects(createOrchClient({ env: {} }), {
    name: 'OrchConfigError',
    message: /no --orchconfig given and not running in a cluster: ORCH_SERVICE_HOST/,
  });
  const dir = await tempDir(t);
  await t.rejects(createOrchClient({ env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, serviceAccountPrefix: dir }), {
    name: 'OrchConfigError',
    message: new RegExp(`cannot read the service account token ${dir}/var/run/secrets/kubernetes.io/serviceaccount/token`),
  });
});

t.test('in-cluster: ORCH_SERVICE_HOST/PORT name the API server, with the mounted token', async (t) => {
  const dir = await tempDir(t);
  const sa = join(dir, 'var/run/secrets/kubernetes.io/serviceaccount');
  await mkdir(sa, { recursive: true });
  await writeFile(join(sa, 'token'), 'sa-token');
  await writeFile(join(sa, 'ca.crt'), '');
  await writeFile(join(sa, 'namespace'), 'mesh-system');
  const c = await createOrchClient({
    env: { ORCH_SERVICE_HOST: 'fd00::1', ORCH_SERVICE_PORT: '6443', KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' },
    serviceAccountPrefix: dir,
  });
  t.teardown(() => c.close());
  t.equal(c.server, 'https://[fd00::1]:6443');
  t.equal(c.origin, 'in-cluster');
});

t.test('the kubeconfig token reaches the server; errors carry the HTTP status and Status reason', async (t) => {
  const api = await FakeApiServer.start({ token: 'good' });
  t.teardown(() => api.close());
  const dir = await tempDir(t);
  const good = await createOrchClient({ orchconfig: await api.writeKubeconfig(dir, { fileName: 'good' }) });
  t.teardown(() => good.close());
  const list = (await good.getJson('/api/v1/services')) as { kind: string };
  t.equal(list.kind, 'ServiceList');
  const bad = await createOrchClient({ orchconfig: await api.writeKubeconfig(dir, { token: 'bad', fileName: 'bad' }) });
  t.teardown(() => bad.close());
  const err = await bad.getJson('/api/v1/services').catch((e: unknown) => e);
  t.ok(err instanceof OrchApiError);
  t.equal((err as OrchApiError).statusCode, 401);
  t.equal((err as OrchApiError).reason, 'Unauthorized');
  const missing = await good.getJson('/apis/nope.io/v1/things').catch((e: unknown) => e);
  t.equal((missing as OrchApiError).statusCode, 404);
  t.match((missing as OrchApiError).message, /GET \/apis\/nope\.io\/v1\/things: 404 NotFound/);
});

t.test('MESH_ORCH_CLIENT_CONTENT_TYPE=protobuf is logged at info as served in JSON; json is silent', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const file = await api.writeKubeconfig(await tempDir(t));
  let mark = logSink.text.length;
  const a = await createOrchClient({ orchconfig: file, contentType: 'protobuf' });
  a.close();
  const lines = logSince(mark).filter((l) => l.includes('MESH_ORCH_CLIENT_CONTENT_TYPE'));
  t.equal(lines.length, 1);
  t.match(lines[0]!, /\tinfo\torch\t.*protobuf.*JSON/);
  mark = logSink.text.length;
  const b = await createOrchClient({ orchconfig: file, contentType: 'json' });
  b.close();
  t.same(logSince(mark).filter((l) => l.includes('MESH_ORCH_CLIENT_CONTENT_TYPE')), []);
});

t.test('--orchApiQPS/--orchApiBurst: requests reach the server no faster than the bucket allows', async (t) => {
  const api = await FakeApiServer.start();
  t.teardown(() => api.close());
  const file = await api.writeKubeconfig(await tempDir(t));
  const fire = async (qps: number, burst: number, n: number): Promise<number[]> => {
    const c = await createOrchClient({ orchconfig: file, qps, burst });
    const from = api.requests.length;
    await Promise.all(Array.from({ length: n }, () => c.getJson('/api/v1/pods')));
    c.close();
    return api.requests.slice(from).map((r) => r.at).sort((x, y) => x - y);
  };
  const qps = 10;
  const burst = 2;
  const times = await fire(qps, burst, 8);
  t.equal(times.length, 8);
  // The i-th request (0-based) can leave no earlier than (i + 1 - burst) / qps after the first.
  for (let i = burst; i < times.length; i++) {
    const earliest = ((i + 1 - burst) / qps) * 1000;
    t.ok(times[i]! - times[0]! >= earliest - 30, `request ${i} at +${(times[i]! - times[0]!).toFixed(0)}ms, not before +${earliest}ms`);
  }
  t.ok(times.slice(0, burst).every((x) => x - times[0]! < 100), 'the burst goes at once');
  // Control: unthrottled, the same requests are not spread out, so the checks above can fail.
  const free = await fire(-1, 0, 8);
  t.ok(free[7]! - free[0]! < 400, `unthrottled spread ${(free[7]! - free[0]!).toFixed(0)}ms`);
});
