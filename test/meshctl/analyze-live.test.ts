// `meshctl analyze` against a real API server (issue 28 item 1), the built binary as a user runs it:
// the context's namespace or -n, -A, --revision, -f files merged over the cluster's objects, live-only
// inputs (pods without their proxy in an injected namespace, the mesh ConfigMap), Istio's API group beside
// ours. Expected texts are Istio 1.26's message templates (pkg/config/analysis/msg/messages.yaml).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml, stringify } from 'yaml';
import { built, DIST, exec } from '../helpers/binary';
import { kubeUnavailable, namespace, pod, service, startKube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };

function vs(ns: string, name: string, host: string, labels: Record<string, string> = {}, group = 'networking.mesh.io') {
  return {
    apiVersion: `${group}/v1`,
    kind: 'VirtualService',
    metadata: { name, namespace: ns, labels },
    spec: { hosts: [name], http: [{ route: [{ destination: { host } }] }] },
  };
}

t.test('analyze the live cluster', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { crds: 'all', controllerManager: false });
  const dir = tempDir(t);
  const api = kube.api;
  for (const ns of [
    namespace('mesh-system'),
    namespace('shop', { 'mesh-injection': 'enabled' }),
    namespace('other', { 'mesh-injection': 'enabled' }),
  ])
    await api.create('/api/v1/namespaces', ns);
  for (const ns of ['shop', 'other']) await api.create(`/api/v1/namespaces/${ns}/services`, service(ns, 'reviews'));
  // A broken route in each namespace, one in Istio's group, one for another revision.
  await api.create('/apis/networking.mesh.io/v1/namespaces/shop/virtualservices', vs('shop', 'reviews', 'ratings'));
  await api.create('/apis/networking.istio.io/v1/namespaces/other/virtualservices', vs('other', 'reviews', 'details', {}, 'networking.istio.io'));
  await api.create('/apis/networking.mesh.io/v1/namespaces/shop/virtualservices', vs('shop', 'canary', 'nowhere', { 'mesh.io/rev': 'canary' }));
  // A running pod without the proxy in an injected namespace: only the cluster knows it.
  await api.create('/api/v1/namespaces/shop/pods', pod('shop', 'app-0', { labels: { app: 'reviews' } }));

  const kc = parseYaml(readFileSync(kube.kubeconfig, 'utf8'));
  kc.contexts[0].context.namespace = 'shop';
  const shopKc = path.join(dir, 'shop.yaml');
  writeFileSync(shopKc, stringify(kc));
  const meshctl = (args: string[], orchconfig = shopKc) =>
    exec(MESHCTL, ['analyze', '--color=false', ...args], { env: { ...ENV, ORCHCONFIG: orchconfig } });

  let r = await meshctl([]);
  t.equal(r.code, 79, r.stderr);
  t.equal(
    r.stdout,
    'Error [IST0101] (VirtualService shop/reviews) Referenced host not found: "ratings"\n' +
      'Warning [IST0103] (Pod shop/app-0) The pod shop/app-0 is missing the Mesh proxy. This can often be resolved by restarting or redeploying the workload.\n',
    "the context's namespace; the other revision's object is left out",
  );
  t.match(r.stderr, /Analyzers found issues when analyzing namespace: shop\./);

  r = await meshctl(['-A']);
  t.equal(r.code, 79);
  t.match(r.stdout, 'Error [IST0101] (VirtualService other/reviews) Referenced host not found: "details"\n', "Istio's group is read too");
  t.match(r.stdout, '(VirtualService shop/reviews)');
  t.notMatch(r.stdout, 'nowhere');

  r = await meshctl(['-n', 'other']);
  t.equal(r.stdout, 'Error [IST0101] (VirtualService other/reviews) Referenced host not found: "details"\n');

  r = await meshctl(['--revision', 'canary']);
  t.match(r.stdout, 'Error [IST0101] (VirtualService shop/canary) Referenced host not found: "nowhere"\n', 'the revision asked for');

  r = await meshctl(['-n', 'absent']);
  t.equal(r.code, 0);
  t.equal(r.stderr, 'namespace "absent" not found\n');

  // Files are merged over the cluster: a fixed copy of shop/reviews replaces the cluster's, a new broken one is added.
  const fix = path.join(dir, 'fix.yaml');
  writeFileSync(fix, stringify(vs('shop', 'reviews', 'reviews')) + '---\n' + stringify(vs('shop', 'extra', 'gone')));
  r = await meshctl([fix]);
  t.equal(r.code, 79);
  t.notMatch(r.stdout, '"ratings"', "the file's object replaced the cluster's");
  t.match(
    r.stdout,
    new RegExp(`Error \\[IST0101\\] \\(VirtualService shop/extra ${fix.replace(/[./]/g, '\\$&')}:\\d+\\) Referenced host not found: "gone"`),
  );
  t.match(r.stdout, '[IST0103] (Pod shop/app-0)', 'the cluster still counts');

  // The mesh ConfigMap: a Telemetry with empty providers is ignored unless the mesh names default providers.
  await api.create('/apis/telemetry.istio.io/v1/namespaces/shop/telemetries', {
    apiVersion: 'telemetry.istio.io/v1',
    kind: 'Telemetry',
    metadata: { name: 'logs', namespace: 'shop' },
    spec: { accessLogging: [{}] },
  });
  r = await meshctl([]);
  t.match(r.stdout, 'Warning [IST0157] (Telemetry shop/logs) The Telemetry logs in namespace "shop" with empty providers will be ignored.');
  await api.create('/api/v1/namespaces/mesh-system/configmaps', {
    metadata: { name: 'mesh', namespace: 'mesh-system' },
    data: { mesh: 'defaultProviders:\n  accessLogging: [envoy]\n' },
  });
  r = await meshctl([]);
  t.notMatch(r.stdout, 'IST0157', "the cluster's mesh config is used");

  r = await meshctl(['-o', 'json', '-n', 'other']);
  t.equal(r.code, 0);
  t.same(
    JSON.parse(r.stdout).map((m: { code: string; origin: string }) => [m.code, m.origin]),
    [['IST0101', 'VirtualService other/reviews']],
  );
});
