// Pure pieces of the writing controllers and the injection webhook, as tables from Istio's own tests
// (pkg/kube/inject TestParseInjectEnvs; pkg/webhooks patcher and validation controller decisions), and the
// JSON patch an admission answer carries checked by applying it.
import t from 'tap';
import { parseInjectEnvs } from '../../src/meshd/inject-webhook';
import { createJsonPatch, type JsonPatchOp } from '../../src/orch/jsonpatch';
import { caBundleField, configRevision, patchInjectionWebhooks, patchValidationWebhooks, verifyCaBundle } from '../../src/meshd/webhook-patch';
import { SKIPPED_NAMESPACES } from '../../src/meshd/namespace-controller';

t.test('injection path parameters (Istio TestParseInjectEnvs, renamed)', async (t) => {
  const cases: Array<[string, string, Record<string, string>]> = [
    ['empty', '/', {}],
    ['no-kv', '/inject', {}],
    ['no-kv-with-tail', '/inject/', {}],
    ['one-kv', '/inject/cluster/cluster1', { MESH_META_CLUSTER_ID: 'cluster1' }],
    ['two-kv', '/inject/cluster/cluster1/net/network1/', { MESH_META_CLUSTER_ID: 'cluster1', MESH_META_NETWORK: 'network1' }],
    [
      'kv-with-slashes',
      '/inject/cluster/cluster--slash--1/net/network--slash--1',
      { MESH_META_CLUSTER_ID: 'cluster/1', MESH_META_NETWORK: 'network/1' },
    ],
    ['not-predefined-kv', '/inject/cluster/cluster1/custom_env/foo', { MESH_META_CLUSTER_ID: 'cluster1', CUSTOM_ENV: 'foo' }],
    ['one-key-without-value', '/inject/cluster', {}],
    ['key-without-value', '/inject/cluster/cluster1/network', { MESH_META_CLUSTER_ID: 'cluster1' }],
    [
      'key-with-values-contain-slashes',
      '/inject/:ENV:cluster=cluster2:ENV:rootpage=/foo/bar',
      { MESH_META_CLUSTER_ID: 'cluster2', ROOTPAGE: '/foo/bar' },
    ],
    [
      'no-predefined-kv-with-values-contain-ENV-separator',
      '/inject/rootpage1/value1/rootpage2/:ENV:abcd=efgh',
      { ROOTPAGE1: 'value1', ROOTPAGE2: ':ENV:abcd=efgh' },
    ],
    ['no-predefined-kv-with-values-contain-ENV-separator-invalid-format', '/inject/:ENV:rootpage1=efgh:ENV:=abb:ENV:=', { ROOTPAGE1: 'efgh' }],
    [
      'no-predefined-kv-with-mixed-values',
      decodeURIComponent('%2Finject%2Frootpage1%2Ffoo%2Frootpage2%2Fbar'),
      { ROOTPAGE1: 'foo', ROOTPAGE2: 'bar' },
    ],
    [
      'no-predefined-kv-with-slashes',
      decodeURIComponent('%2Finject%2F%3AENV%3Arootpage1%3D%2Ffoo%2Fbar%3AENV%3Arootpage2%3D%2Fbar%2Ftoe'),
      { ROOTPAGE1: '/foo/bar', ROOTPAGE2: '/bar/toe' },
    ],
  ];
  for (const [name, path, want] of cases) t.same(parseInjectEnvs(path), want, name);
});

/** RFC 6902 applied (add/remove/replace on objects), to check a patch by its effect. */
function applyPatch(doc: unknown, ops: readonly JsonPatchOp[]): unknown {
  let root = structuredClone(doc);
  for (const op of ops) {
    const tokens = op.path
      .split('/')
      .slice(1)
      .map((x) => x.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (tokens.length === 0) {
      if (op.op === 'remove') throw new Error('remove root');
      root = structuredClone(op.value);
      continue;
    }
    let parent = root as Record<string, unknown>;
    for (const k of tokens.slice(0, -1)) parent = parent[k] as Record<string, unknown>;
    const last = tokens.at(-1)!;
    if (op.op === 'remove') {
      if (!(last in parent)) throw new Error(`remove of missing ${op.path}`);
      delete parent[last];
    } else if (op.op === 'replace') {
      if (!(last in parent)) throw new Error(`replace of missing ${op.path}`);
      parent[last] = structuredClone(op.value);
    } else {
      parent[last] = structuredClone(op.value);
    }
  }
  return root;
}

t.test('JSON patch: applying it gives the target, keys with / and ~ escaped', async (t) => {
  const from = {
    metadata: { name: 'p', labels: { app: 'a', 'gone/label': 'x' }, annotations: { 'a~b': '1' } },
    spec: { containers: [{ name: 'app' }], dnsPolicy: 'ClusterFirst' },
  };
  const to = {
    metadata: { name: 'p', labels: { app: 'a', 'security.mesh.io/tlsMode': 'mesh' }, annotations: { 'a~b': '2', 'sidecar.mesh.io/status': '{}' } },
    spec: { containers: [{ name: 'app' }, { name: 'mesh-proxy' }], initContainers: [{ name: 'mesh-init' }], dnsPolicy: 'ClusterFirst' },
  };
  const ops = createJsonPatch(from, to);
  t.same(applyPatch(from, ops), to);
  t.ok(
    ops.some((o) => o.path === '/metadata/labels/gone~1label' && o.op === 'remove'),
    '/ escaped as ~1',
  );
  t.ok(
    ops.some((o) => o.path === '/metadata/annotations/a~0b' && o.op === 'replace'),
    '~ escaped as ~0',
  );
  t.same(createJsonPatch(to, to), [], 'nothing for equal documents');
});

const PEM = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

t.test('CA bundle checks (Istio util.LoadCABundle)', async (t) => {
  t.equal(verifyCaBundle(PEM), undefined);
  t.equal(verifyCaBundle(undefined), 'could not read caBundle');
  t.equal(verifyCaBundle('junk'), 'could not verify caBundle: could not decode pem');
  t.equal(
    verifyCaBundle('-----BEGIN PRIVATE KEY-----\nAA\n-----END PRIVATE KEY-----\n'),
    'could not verify caBundle: cert contains wrong pem type: "PRIVATE KEY"',
  );
  t.equal(caBundleField(PEM), Buffer.from(PEM).toString('base64'), 'base64 of the PEM, as the API carries []byte');
});

t.test('injection patcher: only webhooks named *sidecar-injector.mesh.io (or .istio.io), only when stale', async (t) => {
  const bundle = caBundleField(PEM);
  const config = {
    metadata: { name: 'mesh-sidecar-injector', labels: { 'mesh.io/rev': 'default' } },
    webhooks: [
      { name: 'rev.namespace.sidecar-injector.mesh.io', clientConfig: { url: 'https://x/inject' } },
      { name: 'object.sidecar-injector.istio.io', clientConfig: { url: 'https://x/inject', caBundle: bundle } },
      { name: 'unrelated.example.com', clientConfig: { url: 'https://y' } },
    ],
  };
  t.equal(configRevision(config), 'default');
  t.equal(configRevision({ metadata: { name: 'x', labels: { 'istio.io/rev': 'canary' } } }), 'canary', "Istio's label is read too");
  t.equal(configRevision({ metadata: { name: 'x' } }), undefined);
  const p = patchInjectionWebhooks(config, bundle)!;
  t.ok(p.changed);
  t.same(
    p.config.webhooks!.map((w) => w.clientConfig?.caBundle),
    [bundle, bundle, undefined],
    'the unrelated webhook is left alone',
  );
  t.equal(patchInjectionWebhooks(p.config, bundle)!.changed, false, 'no write when up to date');
  t.equal(
    patchInjectionWebhooks({ metadata: { name: 'x' }, webhooks: [{ name: 'other' }] }, bundle),
    undefined,
    'no injector webhook: nothing to patch',
  );
});

t.test('validation controller: caBundle everywhere; Ignore becomes Fail only once the webhook is seen refusing', async (t) => {
  const bundle = caBundleField(PEM);
  const config = {
    metadata: { name: 'mesh-validator-mesh-system' },
    webhooks: [{ name: 'rev.validation.mesh.io', failurePolicy: 'Ignore', clientConfig: {} }],
  };
  const notReady = await patchValidationWebhooks(config, bundle, async () => false);
  t.same(
    notReady!.config.webhooks![0],
    { name: 'rev.validation.mesh.io', failurePolicy: 'Ignore', clientConfig: { caBundle: bundle } },
    'bundle written, still Ignore',
  );
  t.equal(notReady!.failClose, false);
  const ready = await patchValidationWebhooks(notReady!.config, bundle, async () => true);
  t.equal(ready!.config.webhooks![0]!.failurePolicy, 'Fail');
  let asked = false;
  t.equal(await patchValidationWebhooks(ready!.config, bundle, async () => ((asked = true), true)), undefined, 'up to date: nothing to write');
  t.notOk(asked, 'the dry-run probe is not repeated when nothing is Ignore');
  const stale = await patchValidationWebhooks(ready!.config, caBundleField(PEM + PEM), async () => false);
  t.equal(stale!.failClose, true, 'a new bundle on a Fail webhook needs no probe');
});

t.test("namespace controller skips Kubernetes' own namespaces but kube-system", async (t) => {
  t.same([...SKIPPED_NAMESPACES].sort(), ['kube-node-lease', 'kube-public', 'local-path-storage']);
});
