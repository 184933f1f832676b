// Istio's "validation status" switch (pkg/webhooks/validation/controller readyForFailClose) against a real
// Kubernetes API server: the daemon patches its CA into the ValidatingWebhookConfiguration of its revision
// but leaves `failurePolicy: Ignore` while the API server does not refuse a known-bad Gateway through the
// webhook (here the webhook points at a port nothing listens on, so the dry-run passes); once the
// configuration points at the daemon and the dry-run is refused, it switches to `Fail`.
import t from 'tap';
import { freePort } from '../helpers/ports';
import { built } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { type Kube, namespace, type Obj, startKube, requireKube } from '../helpers/kube';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const VWC = '/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/mesh-validator-mesh-system';

let kube: Kube;
t.before(async () => {
  kube = await startKube(t, { crds: 'mesh', controllerManager: false });
  await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
});
t.teardown(() => kube?.api.close());

function webhook(url: string, caBundle?: string): Obj {
  return {
    name: 'rev.validation.mesh.io',
    clientConfig: { url, ...(caBundle ? { caBundle } : {}) },
    rules: [{ operations: ['CREATE', 'UPDATE'], apiGroups: ['networking.mesh.io', 'security.mesh.io'], apiVersions: ['*'], resources: ['*'] }],
    failurePolicy: 'Ignore',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
  };
}

t.test('failurePolicy stays Ignore until the webhook is seen refusing, then becomes Fail', async (t) => {
  const d = await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: 'meshd-v', MESHD_CUSTOM_HOST: '127.0.0.1' });
  t.teardown(() => d.stop());
  const closed = await freePort();
  await kube.api.create('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: 'mesh-validator-mesh-system', labels: { 'mesh.io/rev': 'default' } },
    webhooks: [webhook(`https://127.0.0.1:${closed}/validate`)],
  });
  await waitFor(
    () => d.log(),
    async () => Boolean((await kube.api.get(VWC)).webhooks[0].clientConfig.caBundle),
    { timeoutMs: 30_000 },
  );
  await waitFor(
    () => d.log(),
    () => /Not ready to switch validation to fail-closed: /.test(d.log()),
    { timeoutMs: 30_000 },
  );
  t.match(d.log(), /Not ready to switch validation to fail-closed: dummy invalid config not rejected/, 'the dry-run of the invalid Gateway passed');
  const patched = await kube.api.get(VWC);
  t.equal(patched.webhooks[0].failurePolicy, 'Ignore', 'the CA is patched in, the policy left alone');
  t.notMatch(d.log(), /Switching to fail-close/);

  // Pointed at the daemon, the next attempt is refused by the webhook: fail-closed.
  const caBundle = patched.webhooks[0].clientConfig.caBundle as string;
  await kube.api.merge(VWC, { webhooks: [webhook(`https://${d.https}/validate`, caBundle)] });
  await waitFor(
    () => d.log(),
    async () => (await kube.api.get(VWC)).webhooks[0].failurePolicy === 'Fail',
    { timeoutMs: 90_000 },
  );
  t.match(d.log(), /Endpoint successfully rejected invalid config\. Switching to fail-close\./);
  t.equal((await kube.api.get(VWC)).webhooks[0].clientConfig.caBundle, caBundle, 'the CA bundle stays');
});
