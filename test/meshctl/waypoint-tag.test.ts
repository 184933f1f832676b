// `meshctl waypoint generate` (no cluster) and `meshctl tag generate` (against a real API server holding a
// revision's injection webhook) with the built binary; what they print must be accepted by the API server.
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { built, DIST, exec } from '../helpers/binary';
import { startKube, KubeApiError, kubeUnavailable } from '../helpers/kube';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const meshctl = (args: string[], env: Record<string, string> = {}) => exec(MESHCTL, args, { env: { ...ENV, ...env } });

t.test('waypoint generate', async (t) => {
  // istioctl's makeGateway: Gateway API v1 Gateway of class istio-waypoint (renamed), one HBONE listener on 15008.
  let r = await meshctl(['waypoint', 'generate']);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
spec:
  gatewayClassName: mesh-waypoint
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
`,
  );
  r = await meshctl(['waypoint', 'generate', '-n', 'default', '--name', 'wp', '--for', 'service', '-r', 'canary']);
  t.equal(r.code, 0, r.stderr);
  t.same(parseYaml(r.stdout).metadata, { labels: { 'mesh.io/rev': 'canary', 'mesh.io/waypoint-for': 'service' }, name: 'wp', namespace: 'default' });
  t.match(r.stdout, /^metadata:\n  labels:\n    mesh\.io\/rev: canary\n    mesh\.io\/waypoint-for: service\n  name: wp\n  namespace: default\n/m);
  r = await meshctl(['waypoint', 'generate', '--name', 'none']);
  t.not(r.code, 0);
  t.equal(r.stderr, "Error: failed to create gateway: invalid name provided for waypoint, 'none' is a reserved value\n");
  r = await meshctl(['waypoint', 'generate', '--for', 'bogus']);
  t.not(r.code, 0);
  t.match(r.stderr, /bogus/);
});

t.test('tag generate', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const env = { ORCHCONFIG: kube.kubeconfig };
  await kube.api.create('/api/v1/namespaces', { metadata: { name: 'mesh-system' } });
  const caBundle = Buffer.from('-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n').toString('base64');
  const canonical = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: 'mesh-sidecar-injector-canary', labels: { app: 'sidecar-injector', 'mesh.io/rev': 'canary', team: 'platform' } },
    webhooks: [
      {
        name: 'rev.namespace.sidecar-injector.mesh.io',
        admissionReviewVersions: ['v1'],
        sideEffects: 'None',
        reinvocationPolicy: 'IfNeeded',
        clientConfig: { caBundle, service: { name: 'meshd-canary', namespace: 'mesh-system', path: '/inject/cluster/c1/net/n1', port: 443 } },
        rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
      },
    ],
  };
  await kube.api.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', canonical);

  let r = await meshctl(['tag', 'generate', 'prod'], env);
  t.not(r.code, 0);
  t.equal(r.stderr, 'Error: required flag(s) "revision" not set\n');
  r = await meshctl(['tag', 'generate', 'prod', '--revision', 'nope'], env);
  t.not(r.code, 0);
  t.equal(r.stderr, 'Error: cannot modify tag: cannot find MutatingWebhookConfiguration or Service with revision "nope"\n');

  r = await meshctl(['tag', 'generate', 'prod', '--revision', 'canary'], env);
  t.equal(r.code, 0, r.stderr);
  const docs = parseAllDocuments(r.stdout).map((d) => d.toJS());
  t.same(
    docs.map((d) => `${d.kind}/${d.metadata.name}`),
    ['MutatingWebhookConfiguration/mesh-revision-tag-prod', 'Service/meshd-revision-tag-prod'],
  );
  const mwc = docs[0];
  t.match(mwc.metadata.labels, { 'mesh.io/tag': 'prod', 'mesh.io/rev': 'canary', app: 'sidecar-injector', team: 'platform' });
  t.same(
    mwc.webhooks.map((w: any) => w.name),
    [
      'rev.namespace.sidecar-injector.mesh.io',
      'rev.object.sidecar-injector.mesh.io',
      'istio-rev.namespace.sidecar-injector.mesh.io',
      'istio-rev.object.sidecar-injector.mesh.io',
    ],
  );
  // Istio's istio.io/rev=<tag> reaches the tag too, unless mesh.io/rev decides.
  t.same(mwc.webhooks[2].namespaceSelector.matchExpressions, [
    { key: 'istio.io/rev', operator: 'In', values: ['prod'] },
    { key: 'mesh.io/rev', operator: 'DoesNotExist' },
    { key: 'mesh-injection', operator: 'DoesNotExist' },
    { key: 'istio-injection', operator: 'DoesNotExist' },
  ]);
  for (const w of mwc.webhooks) {
    t.same(w.clientConfig, { caBundle, service: { name: 'meshd-canary', namespace: 'mesh-system', path: '/inject/cluster/c1/net/n1', port: 443 } });
    t.equal(w.reinvocationPolicy, 'IfNeeded');
    t.equal(w.failurePolicy, 'Fail');
  }
  t.same(mwc.webhooks[0].namespaceSelector.matchExpressions, [
    { key: 'mesh.io/rev', operator: 'In', values: ['prod'] },
    { key: 'mesh-injection', operator: 'DoesNotExist' },
  ]);
  t.same(mwc.webhooks[1].objectSelector.matchExpressions, [
    { key: 'sidecar.mesh.io/inject', operator: 'NotIn', values: ['false'] },
    { key: 'mesh.io/rev', operator: 'In', values: ['prod'] },
  ]);
  t.same(docs[1].spec.selector, { app: 'meshd', 'mesh.io/rev': 'canary' });

  // What it prints is what `orchctl apply -f` sends: the real API server accepts both objects.
  const { creationTimestamp: _c, ...mwcMeta } = mwc.metadata;
  await kube.api.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', { ...mwc, metadata: mwcMeta });
  const { status: _s, ...svc } = docs[1];
  const { creationTimestamp: _c2, ...svcMeta } = svc.metadata;
  await kube.api.create('/api/v1/namespaces/mesh-system/services', { ...svc, metadata: svcMeta });

  r = await meshctl(['tag', 'generate', 'prod', '--revision', 'canary'], env);
  t.not(r.code, 0);
  t.equal(r.stderr, 'Error: revision tag "prod" already exists, and --overwrite is false\n');
  r = await meshctl(['tag', 'generate', 'prod', '--revision', 'canary', '--overwrite', '--webhook-name', 'custom'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(parseAllDocuments(r.stdout)[0]!.toJS().metadata.name, 'custom');

  // The default tag also takes over mesh-injection=enabled namespaces and sidecar.mesh.io/inject=true pods.
  r = await meshctl(['tag', 'generate', 'default', '--revision', 'canary', '--auto-inject-namespaces'], env);
  t.equal(r.code, 0, r.stderr);
  const defDocs = parseAllDocuments(r.stdout).map((d) => d.toJS());
  t.same(
    defDocs.map((d) => `${d.kind}/${d.metadata.name}`),
    [
      'MutatingWebhookConfiguration/mesh-revision-tag-default',
      'ValidatingWebhookConfiguration/meshd-default-validator',
      'Service/meshd-revision-tag-default',
    ],
  );
  const vwc = defDocs[1];
  t.same(vwc.webhooks[0].clientConfig, { caBundle, service: { name: 'meshd-canary', namespace: 'mesh-system', path: '/validate', port: 443 } });
  t.equal(vwc.webhooks[0].failurePolicy, 'Ignore', 'fails open until the daemon patches it');
  t.match(vwc.metadata.labels, { 'mesh.io/tag': 'default', 'mesh.io/rev': 'canary' });
  t.ok(vwc.webhooks[0].rules[0].apiGroups.includes('networking.mesh.io') && vwc.webhooks[0].rules[0].apiGroups.includes('networking.istio.io'));
  const { creationTimestamp: _c4, ...vwcMeta } = vwc.metadata;
  await kube.api.create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', { ...vwc, metadata: vwcMeta });
  // once the daemon has switched the validator to Fail, a new default tag keeps it (the policy is left out)
  await kube.api.request(
    'PATCH',
    '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/meshd-default-validator',
    [{ op: 'replace', path: '/webhooks/0/failurePolicy', value: 'Fail' }],
    'application/json-patch+json',
  );
  r = await meshctl(['tag', 'generate', 'default', '--revision', 'canary', '--overwrite'], env);
  t.equal(r.code, 0, r.stderr);
  t.notOk('failurePolicy' in parseAllDocuments(r.stdout)[1]!.toJS().webhooks[0]);
  const def = defDocs[0];
  t.same(
    def.webhooks.map((w: any) => w.name),
    [
      'rev.namespace.sidecar-injector.mesh.io',
      'rev.object.sidecar-injector.mesh.io',
      'istio-rev.namespace.sidecar-injector.mesh.io',
      'istio-rev.object.sidecar-injector.mesh.io',
      'namespace.sidecar-injector.mesh.io',
      'object.sidecar-injector.mesh.io',
      'auto.sidecar-injector.mesh.io',
    ],
  );
  const { creationTimestamp: _c3, ...defMeta } = def.metadata;
  try {
    await kube.api.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', { ...def, metadata: defMeta });
  } catch (e) {
    t.fail(`API server refused the default tag webhook: ${(e as KubeApiError).body}`);
  }
});
