// `meshctl tag set|list|remove` with the built binary against a real API server holding a revision installed as
// `meshctl install --revision canary` would: the tag's MutatingWebhookConfiguration and its namespaceSelectors on
// the server (what a namespace labelled mesh.io/rev=<tag> or Istio's istio.io/rev=<tag> reaches), the list in
// istioctl's three formats (istioctl/pkg/tag/tag.go: TAG REVISION NAMESPACES, tab-indented JSON, YAML), and the
// removal with its confirmation prompt.
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { labelSelectorMatches } from '../../src/config/meshconfig';
import { built } from '../helpers/binary';
import { namespace, requireKube, startKube, type Obj } from '../helpers/kube';
import { installRevision, meshctl, noStack } from './cluster-fixtures';

requireKube();
if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MWC = '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations';

/** The webhook configurations (by name) at least one of whose webhooks a namespace with `labels` reaches. */
function reachedBy(configs: Obj[], labels: Record<string, string>): string[] {
  return configs
    .filter((c) =>
      c.webhooks.some((w: Obj) => labelSelectorMatches(w.namespaceSelector ?? {}, labels) && labelSelectorMatches(w.objectSelector ?? {}, {})),
    )
    .map((c) => c.metadata.name)
    .sort();
}

t.test('tag set, list, remove on the API server', async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const env = { ORCHCONFIG: kube.kubeconfig };
  await installRevision(kube, 'canary');

  let r = await meshctl(['tag', 'list'], env);
  t.equal(r.code, 0, r.stderr);
  // The revision's own webhook is listed with an empty tag while no tag points at it.
  t.equal(r.stdout, 'TAG REVISION NAMESPACES\n    canary   \n');

  r = await meshctl(['tag', 'set', 'prod'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: required flag(s) "revision" not set\n');
  r = await meshctl(['tag', 'set', 'prod', '--revision', 'stable'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: cannot modify tag: cannot find MutatingWebhookConfiguration or Service with revision "stable"\n');
  r = await meshctl(['tag', 'set', 'canary', '--revision', 'canary'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: cannot create revision tag "canary": found existing control plane revision with same name\n');

  r = await meshctl(['tag', 'set', 'prod', '--revision', 'canary'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    'Revision tag "prod" created, referencing control plane revision "canary". To enable injection using this\n' +
      "revision tag, use 'orchctl label namespace <NAMESPACE> mesh.io/rev=prod'\n",
  );
  const tagWh = await kube.api.get(`${MWC}/mesh-revision-tag-prod`);
  t.match(tagWh.metadata.labels, { 'mesh.io/tag': 'prod', 'mesh.io/rev': 'canary' });
  for (const w of tagWh.webhooks) t.same(w.clientConfig.service, { name: 'meshd-canary', namespace: 'mesh-system', path: '/inject', port: 443 });
  t.ok(await kube.api.get('/api/v1/namespaces/mesh-system/services/meshd-revision-tag-prod'));

  // Which webhook a namespace label reaches, by the selectors now on the server.
  const configs = (await kube.api.get(MWC)).items as Obj[];
  t.same(reachedBy(configs, { 'mesh.io/rev': 'prod' }), ['mesh-revision-tag-prod']);
  t.same(reachedBy(configs, { 'istio.io/rev': 'prod' }), ['mesh-revision-tag-prod']);
  t.same(reachedBy(configs, { 'mesh.io/rev': 'canary' }), ['mesh-sidecar-injector-canary']);
  t.same(reachedBy(configs, { 'mesh.io/rev': 'other' }), []);
  t.same(reachedBy(configs, {}), [], 'an unlabelled namespace reaches neither');

  r = await meshctl(['tag', 'set', 'prod', '--revision', 'canary'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: revision tag "prod" already exists, and --overwrite is false\n');
  r = await meshctl(['tag', 'set', 'prod', '--revision', 'canary', '--overwrite'], env);
  t.equal(r.code, 0, r.stderr);

  await kube.api.create('/api/v1/namespaces', namespace('shop', { 'mesh.io/rev': 'prod' }));
  await kube.api.create('/api/v1/namespaces', namespace('legacy', { 'istio.io/rev': 'prod' }));
  r = await meshctl(['tag', 'list'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'TAG  REVISION NAMESPACES\nprod canary   legacy,shop\n');
  r = await meshctl(['tag', 'show', '-o', 'json'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '[\n\t{\n\t\t"tag": "prod",\n\t\t"revision": "canary",\n\t\t"namespaces": [\n\t\t\t"legacy",\n\t\t\t"shop"\n\t\t]\n\t}\n]\n');
  r = await meshctl(['tag', 'list', '-o', 'yaml'], env);
  t.equal(r.code, 0, r.stderr);
  t.same(parseYaml(r.stdout), [{ namespaces: ['legacy', 'shop'], revision: 'canary', tag: 'prod' }]);
  t.equal(r.stdout, '- namespaces:\n  - legacy\n  - shop\n  revision: canary\n  tag: prod\n\n');

  // Namespaces still use the tag: remove asks, and anything but y/yes keeps it.
  r = await meshctl(['tag', 'remove', 'prod'], env, 'n\n');
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'Caution, found 2 namespace(s) still injected by tag "prod": legacy shop\nProceed with operation? [y/N] Aborting operation.\n');
  t.ok(await kube.api.find(`${MWC}/mesh-revision-tag-prod`), 'kept after "n"');
  r = await meshctl(['tag', 'delete', 'prod'], env, 'y\n');
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /Proceed with operation\? \[y\/N\] Revision tag prod removed\n$/);
  t.notOk(await kube.api.find(`${MWC}/mesh-revision-tag-prod`));
  t.notOk(await kube.api.find('/api/v1/namespaces/mesh-system/services/meshd-revision-tag-prod'));
  r = await meshctl(['tag', 'remove', 'prod', '-y'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: cannot remove tag "prod": cannot find MutatingWebhookConfiguration for tag\n');

  // -y skips the question; the default tag also brings (and takes away) the cluster-wide validator.
  r = await meshctl(['tag', 'set', 'default', '--revision', 'canary'], env);
  t.equal(r.code, 0, r.stderr);
  t.ok(await kube.api.find('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/meshd-default-validator'));
  const after = (await kube.api.get(MWC)).items as Obj[];
  t.same(reachedBy(after, { 'mesh-injection': 'enabled' }), ['mesh-revision-tag-default']);
  r = await meshctl(['tag', 'remove', 'default', '-y'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'Revision tag default removed\n');
  t.notOk(await kube.api.find('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/meshd-default-validator'));
  t.ok(noStack(r.stderr));
});
