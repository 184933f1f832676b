// The built discovery daemon's writers against a real Kubernetes API server (../shared/kube):
// - the namespace controller: `mesh-ca-root-cert` (key root-cert.pem, the CA's root) in every namespace
//   but Kubernetes' own, put back when deleted or edited, written into new namespaces; with two replicas
//   only the holder of the namespace-controller Lease writes, and the next leader takes over the writing;
// - the webhook controllers: the caBundle of the validating and mutating webhook configurations of the
//   daemon's revision patched with the CA's root, the validating one switched from Ignore to Fail once the
//   API server is seen refusing through it;
// - the API server calling the daemon's :15017 itself: an invalid VirtualService refused with Istio's
//   message, and a Pod mutated by the injection webhook exactly as `meshctl orch-inject` injects the same
//   pod, with the namespace/object selectors of Istio's chart and the injector's neverInjectSelector.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { builtinInjectConfig } from '../../src/inject/config';
import { built, exec, DIST } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { type Kube, KubeApiError, namespace, type Obj, startKube, requireKube } from '../helpers/kube';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const CM = 'mesh-ca-root-cert';
const ELECTION = 'mesh-namespace-controller-election';
const LEASE = `/apis/coordination.k8s.io/v1/namespaces/mesh-system/leases/${ELECTION}`;
const cmPath = (ns: string) => `/api/v1/namespaces/${ns}/configmaps/${CM}`;
const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

let kube: Kube;
const tmp = tempDir(t, 'orch-writers-');

t.before(async () => {
  kube = await startKube(t, { controllerManager: false });
  for (const ns of ['mesh-system', 'team-a', 'team-b']) await kube.api.create('/api/v1/namespaces', namespace(ns));
});
t.teardown(() => kube?.api.close());

/** The CA's root, from the Secret it keeps it in (Istio's istio-ca-secret, renamed). */
async function caRoot(): Promise<string> {
  return b64((await kube.api.get('/api/v1/namespaces/mesh-system/secrets/mesh-ca-secret')).data['ca-cert.pem']);
}

async function rootIn(ns: string): Promise<string | undefined> {
  return (await kube.api.find(cmPath(ns)))?.data?.['root-cert.pem'];
}

const creations = (d: RunningDaemon) => (d.log().match(/created ConfigMap \S+/g) ?? []).length;

t.test('namespace controller: every namespace holds mesh-ca-root-cert; only the leader writes', async (t) => {
  const a = await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: 'replica-a' });
  const b = await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: 'replica-b' });
  const replicas: Record<string, RunningDaemon> = { 'replica-a': a, 'replica-b': b };
  t.teardown(async () => Promise.all([a.stop(), b.stop()]));
  const holder = async () => ((await kube.api.find(LEASE))?.spec?.holderIdentity as string | undefined) ?? '';
  await waitFor(
    () => `no leader:\n${a.log()}\n${b.log()}`,
    async () => (await holder()) in replicas,
    { timeoutMs: 20_000 },
  );
  const leaderName = await holder();
  const leader = replicas[leaderName]!;
  const follower = leader === a ? b : a;

  const root = await caRoot();
  const everywhere = ['default', 'kube-system', 'mesh-system', 'team-a', 'team-b'];
  await waitFor(
    () => leader.log(),
    async () => (await Promise.all(everywhere.map(rootIn))).every((r) => r === root),
    { timeoutMs: 20_000 },
  );
  t.pass(`the CA's root in ${everywhere.join(', ')}`);
  const cm = await kube.api.get(cmPath('team-a'));
  t.same(cm.metadata.labels, { 'mesh.io/config': 'true' }, 'labelled as Istio labels it (istio.io/config → mesh.io/config)');
  for (const ns of ['kube-public', 'kube-node-lease']) t.equal(await kube.api.find(cmPath(ns)), undefined, `not in ${ns}`);
  t.match(leader.log(), /starting namespace controller/);
  t.notMatch(follower.log(), /starting namespace controller/, 'the follower does not run the controller');
  t.equal(creations(follower), 0, 'the follower wrote nothing');

  await kube.api.delete(cmPath('team-a'));
  await waitFor(
    () => leader.log(),
    async () => (await rootIn('team-a')) === root,
    { timeoutMs: 10_000 },
  );
  t.pass('a deleted ConfigMap comes back');

  await kube.api.merge(cmPath('team-b'), { data: { 'root-cert.pem': 'tampered', 'extra.pem': 'kept' } });
  await waitFor(
    () => leader.log(),
    async () => (await rootIn('team-b')) === root,
    { timeoutMs: 10_000 },
  );
  t.equal((await kube.api.get(cmPath('team-b'))).data['extra.pem'], 'kept', 'only our key is put back (Istio insertData)');

  await kube.api.create('/api/v1/namespaces', namespace('team-c'));
  await waitFor(
    () => leader.log(),
    async () => (await rootIn('team-c')) === root,
    { timeoutMs: 10_000 },
  );
  t.pass('a new namespace gets it');
  t.equal(creations(follower), 0, 'still nothing written by the follower');

  // The leader steps down (SIGTERM releases the Lease): the other replica now does the writing.
  t.equal(await leader.stop(), 0);
  await waitFor(
    () => follower.log(),
    async () => (await holder()) === (leaderName === 'replica-a' ? 'replica-b' : 'replica-a'),
    { timeoutMs: 15_000 },
  );
  await waitFor(
    () => follower.log(),
    () => /starting namespace controller/.test(follower.log()),
    { timeoutMs: 10_000 },
  );
  await kube.api.delete(cmPath('team-c'));
  await waitFor(
    () => follower.log(),
    async () => (await rootIn('team-c')) === root,
    { timeoutMs: 10_000 },
  );
  // Its log line follows the API server's answer, which the test may see first.
  await waitFor(
    () => follower.log(),
    () => /created ConfigMap team-c\/mesh-ca-root-cert/.test(follower.log()),
    { timeoutMs: 5_000 },
  );
  t.pass('the new leader recreated it');
});

/** Istio's chart (istio-discovery mutatingwebhook.yaml, default revision) renamed, pointing at `url`. */
function mutatingWebhookConfiguration(url: string): Obj {
  const core = (prefix: string, namespaceSelector: Obj, objectSelector: Obj) => ({
    name: `${prefix}sidecar-injector.mesh.io`,
    clientConfig: { url },
    sideEffects: 'None',
    rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
    failurePolicy: 'Fail',
    reinvocationPolicy: 'Never',
    admissionReviewVersions: ['v1'],
    namespaceSelector,
    objectSelector,
  });
  const notDisabled = { key: 'sidecar.mesh.io/inject', operator: 'NotIn', values: ['false'] };
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingWebhookConfiguration',
    metadata: { name: 'mesh-sidecar-injector', labels: { 'mesh.io/rev': 'default', app: 'sidecar-injector' } },
    webhooks: [
      core(
        'rev.namespace.',
        {
          matchExpressions: [
            { key: 'mesh.io/rev', operator: 'In', values: ['default'] },
            { key: 'mesh-injection', operator: 'DoesNotExist' },
          ],
        },
        { matchExpressions: [notDisabled] },
      ),
      core(
        'rev.object.',
        {
          matchExpressions: [
            { key: 'mesh.io/rev', operator: 'DoesNotExist' },
            { key: 'mesh-injection', operator: 'DoesNotExist' },
          ],
        },
        {
          matchExpressions: [notDisabled, { key: 'mesh.io/rev', operator: 'In', values: ['default'] }],
        },
      ),
      core('namespace.', { matchExpressions: [{ key: 'mesh-injection', operator: 'In', values: ['enabled'] }] }, { matchExpressions: [notDisabled] }),
      core(
        'object.',
        {
          matchExpressions: [
            { key: 'mesh-injection', operator: 'DoesNotExist' },
            { key: 'mesh.io/rev', operator: 'DoesNotExist' },
          ],
        },
        {
          matchExpressions: [
            { key: 'sidecar.mesh.io/inject', operator: 'In', values: ['true'] },
            { key: 'mesh.io/rev', operator: 'DoesNotExist' },
          ],
        },
      ),
    ],
  };
}

/** Istio's chart validatingwebhookconfiguration renamed (failurePolicy Ignore until the daemon flips it). */
function validatingWebhookConfiguration(url: string): Obj {
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: 'mesh-validator-mesh-system', labels: { 'mesh.io/rev': 'default', app: 'meshd' } },
    webhooks: [
      {
        name: 'rev.validation.mesh.io',
        clientConfig: { url },
        rules: [
          {
            operations: ['CREATE', 'UPDATE'],
            apiGroups: [
              'security.mesh.io',
              'networking.mesh.io',
              'telemetry.mesh.io',
              'extensions.mesh.io',
              'security.istio.io',
              'networking.istio.io',
            ],
            apiVersions: ['*'],
            resources: ['*'],
          },
        ],
        failurePolicy: 'Ignore',
        sideEffects: 'None',
        admissionReviewVersions: ['v1'],
      },
    ],
  };
}

const SERVER_FIELDS = ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'generation'];
function stripServerFields(p: Obj): Obj {
  const out = structuredClone(p);
  for (const f of SERVER_FIELDS) delete out.metadata[f];
  delete out.status;
  return out;
}

t.test('webhooks: caBundle patched, the API server calls :15017 to validate and to inject', async (t) => {
  const builtin = builtinInjectConfig();
  // The injector configuration as the chart's ConfigMap holds it, with a neverInjectSelector.
  const injectConfig = {
    policy: 'enabled',
    alwaysInjectSelector: [],
    neverInjectSelector: [{ matchLabels: { 'no-mesh': 'yes' } }],
    injectedAnnotations: {},
    defaultTemplates: ['sidecar'],
    templates: builtin.config.templates,
  };
  const configText = JSON.stringify(injectConfig);
  await kube.api.create('/api/v1/namespaces/mesh-system/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'mesh-sidecar-injector' },
    data: { config: configText, values: builtin.valuesText },
  });
  const meshFile = path.join(tmp, 'mesh.yaml');
  fs.writeFileSync(meshFile, builtin.meshText);
  const d = await startDaemon(['--orchconfig', kube.kubeconfig, '--meshConfig', meshFile], { POD_NAME: 'meshd-w', MESHD_CUSTOM_HOST: '127.0.0.1' });
  t.teardown(() => d.stop());
  t.match(d.log(), /initializing sidecar injector from ConfigMap mesh-system\/mesh-sidecar-injector/);
  const root = await caRoot();
  const bundle = Buffer.from(root).toString('base64');

  const vwc = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/mesh-validator-mesh-system';
  await kube.api.create(
    '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations',
    validatingWebhookConfiguration(`https://${d.https}/validate`),
  );
  await waitFor(
    () => d.log(),
    async () => {
      const w = (await kube.api.get(vwc)).webhooks[0];
      return w.clientConfig.caBundle === bundle && w.failurePolicy === 'Fail';
    },
    { timeoutMs: 30_000 },
  );
  t.pass("validating webhook: caBundle = the CA's root, failurePolicy Ignore → Fail after the dry-run refusal");
  t.match(d.log(), /Endpoint successfully rejected invalid config\. Switching to fail-close\./);

  await t.test('an invalid VirtualService is refused by the API server through the webhook', async (t) => {
    const vs = (http: Obj) => ({
      apiVersion: 'networking.mesh.io/v1',
      kind: 'VirtualService',
      metadata: { name: 'web', namespace: 'team-a' },
      spec: { hosts: ['web.team-a.svc.cluster.local'], http: [http] },
    });
    const err = await kube.api
      .create('/apis/networking.mesh.io/v1/namespaces/team-a/virtualservices', vs({ match: [{ uri: { prefix: '/' } }] }))
      .catch((e: unknown) => e);
    t.ok(err instanceof KubeApiError, 'refused');
    const status = JSON.parse((err as KubeApiError).body);
    // Istio's pkg/config/validation message for an HTTP route with nowhere to go.
    t.equal(
      status.message,
      'admission webhook "rev.validation.mesh.io" denied the request: configuration is invalid: HTTP route, redirect or direct_response is required',
    );
    t.equal(status.code, 400);
    const ok = await kube.api.create(
      '/apis/networking.mesh.io/v1/namespaces/team-a/virtualservices',
      vs({ route: [{ destination: { host: 'web.team-a.svc.cluster.local' } }] }),
    );
    t.equal(ok.metadata.name, 'web', 'a valid one is accepted');
  });

  const mwc = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/mesh-sidecar-injector';
  await kube.api.create(
    '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
    mutatingWebhookConfiguration(`https://${d.https}/inject`),
  );
  await waitFor(
    () => d.log(),
    async () => (await kube.api.get(mwc)).webhooks.every((w: Obj) => w.clientConfig.caBundle === bundle),
    { timeoutMs: 20_000 },
  );
  t.pass('mutating webhook: every sidecar-injector.mesh.io webhook carries the caBundle');

  await kube.api.create('/api/v1/namespaces', namespace('inj', { 'mesh-injection': 'enabled' }));
  await kube.api.create('/api/v1/namespaces', namespace('revd', { 'mesh.io/rev': 'default' }));
  await kube.api.create('/api/v1/namespaces', namespace('plain'));
  const appPod = (name: string, labels: Record<string, string> = {}): Obj => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: 'web', ...labels } },
    spec: {
      serviceAccountName: 'default',
      containers: [{ name: 'web', image: 'example.invalid/web:1', ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }] }],
    },
  });
  const names = (p: Obj) => (p.spec.containers as Obj[]).map((c) => c.name);

  await t.test('a Pod created through the API server equals what meshctl orch-inject makes of it', async (t) => {
    const real = await kube.api.create('/api/v1/namespaces/inj/pods', appPod('app'));
    t.same(names(real), ['web', 'mesh-proxy'], 'mutated by the webhook');
    // The pod as the webhook received it: the API server's defaults applied (a dry run where nothing injects).
    const input = stripServerFields(await kube.api.request('POST', '/api/v1/namespaces/plain/pods?dryRun=All', appPod('app')));
    input.metadata.namespace = 'inj';
    const inFile = path.join(tmp, 'pod.json');
    fs.writeFileSync(inFile, JSON.stringify(input));
    const cfgFile = path.join(tmp, 'inject-config.json');
    const valuesFile = path.join(tmp, 'values.json');
    fs.writeFileSync(cfgFile, configText);
    fs.writeFileSync(valuesFile, builtin.valuesText);
    const r = await exec(path.join(DIST, 'meshctl'), [
      'orch-inject',
      '-f',
      inFile,
      '--injectConfigFile',
      cfgFile,
      '--valuesFile',
      valuesFile,
      '--meshConfigFile',
      meshFile,
    ]);
    t.equal(r.code, 0, r.stderr);
    const injected = parseYaml(r.stdout.split(/^---$/m)[0]!) as Obj;
    // Defaults for what the injection added, as the API server applies them after the webhook.
    injected.metadata.namespace = 'plain';
    const expected = stripServerFields(await kube.api.request('POST', '/api/v1/namespaces/plain/pods?dryRun=All', injected));
    const got = stripServerFields(real);
    t.same(got.spec, expected.spec, 'spec');
    t.same(got.metadata.labels, expected.metadata.labels, 'labels');
    t.same(got.metadata.annotations, expected.metadata.annotations, 'annotations');
    t.match(got.metadata.annotations['sidecar.mesh.io/status'], /"revision":"default"/);
  });

  await t.test("Istio's selection: namespace labels, the pod's inject label, neverInjectSelector", async (t) => {
    t.same(names(await kube.api.create('/api/v1/namespaces/revd/pods', appPod('by-rev'))), ['web', 'mesh-proxy'], 'namespace mesh.io/rev=default');
    t.same(names(await kube.api.create('/api/v1/namespaces/plain/pods', appPod('plain'))), ['web'], 'unlabelled namespace');
    t.same(
      names(await kube.api.create('/api/v1/namespaces/plain/pods', appPod('opt-in', { 'sidecar.mesh.io/inject': 'true' }))),
      ['web', 'mesh-proxy'],
      'pod label sidecar.mesh.io/inject=true',
    );
    t.same(
      names(await kube.api.create('/api/v1/namespaces/inj/pods', appPod('opt-out', { 'sidecar.mesh.io/inject': 'false' }))),
      ['web'],
      'pod label sidecar.mesh.io/inject=false',
    );
    t.same(
      names(await kube.api.create('/api/v1/namespaces/inj/pods', appPod('never', { 'no-mesh': 'yes' }))),
      ['web'],
      "the injector's neverInjectSelector",
    );
    t.match(d.log(), /Skipping inj\/never due to policy check/);
    const metrics = await (await fetch(`http://${d.monitoring}/metrics`)).text();
    t.match(metrics, /sidecar_injection_success_total 3/);
    t.match(metrics, /sidecar_injection_skip_total 1/);
    t.match(metrics, /galley_validation_config_updates [1-9]/);
  });

  await t.test('a changed mesh config is used for the next pods', async (t) => {
    t.match(builtin.meshText, /trustDomain: cluster\.local/);
    fs.writeFileSync(meshFile, builtin.meshText.replace('trustDomain: cluster.local', 'trustDomain: example.org'));
    const trustDomain = (p: Obj) =>
      (p.spec.containers as Obj[]).find((c) => c.name === 'mesh-proxy')?.env?.find((e: Obj) => e.name === 'TRUST_DOMAIN')?.value;
    let n = 0;
    await waitFor(
      () => d.log(),
      async () => trustDomain(await kube.api.create('/api/v1/namespaces/inj/pods', appPod(`after-change-${n++}`))) === 'example.org',
      { timeoutMs: 10_000 },
    );
    t.pass('TRUST_DOMAIN from the new mesh config');
  });
});

t.test('a rotated root reaches every namespace and the webhook configurations', async (t) => {
  // A daemon of its own namespace has its own CA; its self-signed root is due for rotation 12 s after it
  // is made (60 % grace of a 30 s lifetime).
  await kube.api.create('/api/v1/namespaces', namespace('mesh-rot'));
  // An injector of its own too: the injection patcher runs where the injector does (Istio).
  const injector = await kube.api.get('/api/v1/namespaces/mesh-system/configmaps/mesh-sidecar-injector');
  await kube.api.create('/api/v1/namespaces/mesh-rot/configmaps', {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'mesh-sidecar-injector' },
    data: injector.data,
  });
  const d = await startDaemon(['--orchconfig', kube.kubeconfig, '--namespace', 'mesh-rot'], {
    POD_NAME: 'meshd-rot',
    CA_SELF_SIGNED_CA_CERT_TTL: '30s',
    CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL: '1s',
    CA_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE: '60',
    CA_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR: 'false',
  });
  t.teardown(() => d.stop());
  const secretRoot = async () => b64((await kube.api.get('/api/v1/namespaces/mesh-rot/secrets/mesh-ca-secret')).data['ca-cert.pem']);
  const oldRoot = await secretRoot();
  const configured = async (root: string) => {
    const bundle = Buffer.from(root).toString('base64');
    const roots = await Promise.all(['team-a', 'team-b', 'mesh-rot'].map(rootIn));
    const vwc = await kube.api.get('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/mesh-validator-mesh-system');
    const mwc = await kube.api.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/mesh-sidecar-injector');
    return roots.every((r) => r === root) && [...vwc.webhooks, ...mwc.webhooks].every((w: Obj) => w.clientConfig.caBundle === bundle);
  };
  await waitFor(
    () => d.log(),
    () => configured(oldRoot),
    { timeoutMs: 20_000 },
  );
  t.pass("this CA's root published and patched");
  await waitFor(
    () => `not rotated:\n${d.log()}`,
    async () => (await secretRoot()) !== oldRoot,
    { timeoutMs: 30_000 },
  );
  const newRoot = await secretRoot();
  await waitFor(
    () => d.log(),
    () => configured(newRoot),
    { timeoutMs: 10_000 },
  );
  t.pass('the rotated root replaced it everywhere');
});

t.test('meshConfig discoverySelectors narrow the namespaces given the root', async (t) => {
  await kube.api.create('/api/v1/namespaces', namespace('mesh-sel'));
  const meshFile = path.join(tmp, 'mesh-selectors.yaml');
  fs.writeFileSync(meshFile, 'discoverySelectors:\n- matchLabels:\n    mesh: "on"\n');
  const d = await startDaemon(['--orchconfig', kube.kubeconfig, '--namespace', 'mesh-sel', '--meshConfig', meshFile], { POD_NAME: 'meshd-sel' });
  t.teardown(() => d.stop());
  await waitFor(
    () => d.log(),
    () => /starting namespace controller:/.test(d.log()),
    { timeoutMs: 20_000 },
  );
  await kube.api.create('/api/v1/namespaces', namespace('sel-yes', { mesh: 'on' }));
  await kube.api.create('/api/v1/namespaces', namespace('sel-no'));
  await waitFor(
    () => d.log(),
    async () => (await rootIn('sel-yes')) !== undefined,
    { timeoutMs: 10_000 },
  );
  t.pass('a selected namespace gets it');
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(await rootIn('sel-no'), undefined, 'a namespace the selectors leave out does not');
  await kube.api.merge('/api/v1/namespaces/sel-no', { metadata: { labels: { mesh: 'on' } } });
  await waitFor(
    () => d.log(),
    async () => (await rootIn('sel-no')) !== undefined,
    { timeoutMs: 10_000 },
  );
  t.pass('once labelled to match, it does');
});

t.test('MESH_WATCH_NAMESPACE: only that namespace is given the root', async (t) => {
  await kube.api.create('/api/v1/namespaces', namespace('mesh-one'));
  await kube.api.create('/api/v1/namespaces', namespace('watched'));
  const d = await startDaemon(['--orchconfig', kube.kubeconfig, '--namespace', 'mesh-one'], {
    POD_NAME: 'meshd-one',
    MESH_WATCH_NAMESPACE: 'watched',
  });
  t.teardown(() => d.stop());
  await waitFor(
    () => d.log(),
    () => /starting namespace controller:/.test(d.log()),
    { timeoutMs: 20_000 },
  );
  await kube.api.create('/api/v1/namespaces', namespace('unwatched'));
  await waitFor(
    () => d.log(),
    async () => (await rootIn('watched')) !== undefined,
    { timeoutMs: 10_000 },
  );
  await new Promise((r) => setTimeout(r, 1000));
  t.equal(await rootIn('unwatched'), undefined, 'another namespace is left alone');
  t.notMatch(d.log(), /ConfigMap unwatched\//);
});
