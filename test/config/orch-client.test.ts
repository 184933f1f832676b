// The orchestrator client: --orchconfig loading with errors that name the file, and in-cluster configuration.
// The bearer token, MESH_ORCH_CLIENT_CONTENT_TYPE and the --orchApiQPS/--orchApiBurst throttle are shown against
// the real API server in orch-client-kube.test.ts.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { createOrchClient, OrchApiError } from '../../src/config/orch/client';
import { configure, MemorySink, parseLogOptions } from '../../src/lib/log/index';
import { FakeApiServer } from '../helpers/apiserver';
import { tempDir } from '../helpers/temp';

const logSink = new MemorySink();
configure(parseLogOptions({}), { sinks: [logSink] });

function logSince(mark: number): string[] {
  const text = logSink.text.slice(mark);
  return text === '' ? [] : text.replace(/\n$/, '').split('\n');
}

t.test('a missing --orchconfig file is an error naming it', async (t) => {
  const dir = tempDir(t, 'orch-client-');
  const file = join(dir, 'nope', 'orchconfig');
  await t.rejects(createOrchClient({ orchconfig: file }), {
    name: 'OrchConfigError',
    message: new RegExp(`orchestrator client configuration ${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}.*(ENOENT|no such file)`),
  });
});

t.test('an unparseable or incomplete --orchconfig is an error naming the file and the problem', async (t) => {
  const dir = tempDir(t, 'orch-client-');
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
  const dir = tempDir(t, 'orch-client-');
  await t.rejects(createOrchClient({ env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, serviceAccountPrefix: dir }), {
    name: 'OrchConfigError',
    message: new RegExp(`cannot read the service account token ${dir}/var/run/secrets/kubernetes.io/serviceaccount/token`),
  });
});

t.test('in-cluster: ORCH_SERVICE_HOST/PORT name the API server, with the mounted token', async (t) => {
  const dir = tempDir(t, 'orch-client-');
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
