// `meshctl x injector list` against a real API server holding a revision installed as `meshctl install --revision
// canary` would, namespaces labelled for it and pods injected by it (their sidecar.mesh.io/status annotation as the
// injector writes it); the tables of istioctl's istioctl/pkg/injector/injector-list.go. And `meshctl options`
// (istioctl/cmd/options.go's shape) and `meshctl bug-report version` (pkg/version's command), which need no cluster.
import t from 'tap';
import { built } from '../helpers/binary';
import { kubeUnavailable, namespace, pod, startKube } from '../helpers/kube';
import { installRevision, meshctl } from './cluster-fixtures';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

t.test('x injector list', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const env = { ORCHCONFIG: kube.kubeconfig };
  let r = await meshctl(['x', 'injector', 'list'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'No mesh injected namespaces present.\n\nNo mesh injection hooks present.\n');

  await installRevision(kube, 'canary');
  // Pods first: the revision's webhook (failurePolicy Fail, no daemon behind it) would refuse them in a labelled namespace.
  for (const ns of ['shop', 'plain', 'gone']) await kube.api.create('/api/v1/namespaces', namespace(ns));
  const injected = (name: string, revision: string, labels: Record<string, string> = {}) => {
    const p = pod('shop', name, { labels });
    p.metadata.annotations = { 'sidecar.mesh.io/status': JSON.stringify({ containers: ['mesh-proxy'], revision }) };
    return p;
  };
  await kube.api.create('/api/v1/namespaces/shop/pods', injected('a', 'canary'));
  await kube.api.create('/api/v1/namespaces/shop/pods', injected('b', 'old'));
  await kube.api.create('/api/v1/namespaces/shop/pods', pod('shop', 'c', { labels: { 'sidecar.mesh.io/inject': 'false' } }));
  await kube.api.create('/api/v1/namespaces/plain/pods', pod('plain', 'd'));
  await kube.api.merge('/api/v1/namespaces/shop', { metadata: { labels: { 'mesh.io/rev': 'canary' } } });
  await kube.api.merge('/api/v1/namespaces/gone', { metadata: { labels: { 'mesh.io/rev': 'removed' } } });

  r = await meshctl(['x', 'injector', 'list'], env);
  t.equal(r.code, 0, r.stderr);
  // Per istioctl's rules: the namespace's revision is its webhook's; pods count by the revision in their status
  // annotation; an uninjected pod with injection disabled is not "NEEDS RESTART"; a namespace labelled for a revision
  // no webhook serves is MISSING; the image is <hub>/<image>:<tag> of the revision's injector values.
  const [nsTable, hookTable] = r.stdout.split('\n\n');
  const rows = (text: string) =>
    text
      .trim()
      .split('\n')
      .map((l) => l.replace(/\s+$/, ''));
  const ns = rows(nsTable!);
  t.match(ns[0], /^NAMESPACE\s+MESH-REVISION\s+POD-REVISIONS$/);
  // An unlabelled namespace is reached by the revision's object webhook (its namespaceSelector only asks for no
  // label), so istioctl shows it under that revision too.
  t.match(ns.slice(1), [
    /^default\s+canary\s+<no pods>$/,
    /^gone\s+MISSING\/removed\s+<no pods>$/,
    /^plain\s+canary\s+<non-mesh>: 1 NEEDS RESTART: 1$/,
    /^shop\s+canary\s+<non-mesh>: 1 \(injection disabled: 1\)$/,
    /^shop\s+canary\s+canary: 1$/,
    /^shop\s+canary\s+old: 1 NEEDS RESTART: 1$/,
  ]);
  t.equal(ns.length, 7);
  const hooks = rows(hookTable!);
  t.match(hooks, [
    /^NAMESPACES\s+INJECTOR-HOOK\s+MESH-REVISION\s+SIDECAR-IMAGE$/,
    /^shop\s+mesh-sidecar-injector-canary\s+canary\s+docker\.io\/mesh\/proxyv2:1\.26\.0$/,
  ]);
  t.equal(hooks.length, 2);
  // Columns line up as Go's tabwriter aligns them: every row's third column starts where the header's does.
  const col = ns[0]!.indexOf('POD-REVISIONS');
  for (const l of ns.slice(1)) t.match(l.slice(col - 1, col + 1), /^ \S$/);

  r = await meshctl(['x', 'injector', 'list', '-n', 'shop'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(rows(r.stdout.split('\n\n')[0]!).length, 4, 'only the namespace asked for');
});

t.test('options', async (t) => {
  const r = await meshctl(['options']);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  t.equal(lines[0], 'The following options can be passed to any command:');
  // The specification's global flags (§4.1), by name, in istioctl's `  -x, --name: usage` shape.
  t.same(
    lines.slice(1, -1).map((l) => /^ {2}(-\w,| {3}) --([\w-]+): \S/.exec(l)?.[2]),
    ['as', 'as-group', 'as-uid', 'context', 'meshNamespace', 'namespace', 'orchclient-timeout', 'orchconfig', 'vklog'],
  );
  t.match(r.stdout, /\n {2}-i, --meshNamespace: /);
  t.match(r.stdout, /\n {6}--context: /);
  // cobra's answer to an argument where none is taken (meshctl's usage exit code).
  const bad = await meshctl(['options', 'extra']);
  t.equal(bad.code, 64);
  t.match(bad.stderr, /^Error: unknown command "extra" for "meshctl options"\n/);
});

t.test('bug-report version', async (t) => {
  let r = await meshctl(['bug-report', 'version', '--short']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^client version: \d+\.\d+\.\d+\S*\n$/);
  r = await meshctl(['bug-report', 'version', '-o', 'json']);
  t.equal(r.code, 0, r.stderr);
  t.match(JSON.parse(r.stdout), { clientVersion: { version: String, revision: String, status: String } });
  r = await meshctl(['bug-report', 'version']);
  t.match(r.stdout, /^client version: version\.BuildInfo\{Version:"[^"]+", GitRevision:"[0-9a-f]+"/);
});
