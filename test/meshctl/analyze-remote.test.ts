// `meshctl analyze` over two real API servers (issue 28 item 1, `--remote-contexts`), the built binary as a user
// runs it: a VirtualService in cluster A routes to a Service that only cluster B has. Analyzing A alone reports
// Istio 1.26's IST0101 (pkg/config/analysis/msg/messages.yaml: `Referenced host not found: %q`); with B read as a
// remote cluster — named by `--remote-contexts` (a second context of the same client configuration), or, without
// the flag, found through A's remote secret as istioctl does — B's Service is part of the analysis and the message
// goes. Our analysis merges B's objects where A has none of the same name (src/meshctl/analyze/live.ts says why).
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml, stringify } from 'yaml';
import { built, DIST, exec } from '../helpers/binary';
import { type Kube, namespace, requireKube, service, startKube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';

requireKube();
if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const NOT_FOUND = 'Error [IST0101] (VirtualService shop/reviews) Referenced host not found: "ratings"\n';
const CLEAN = '✔ No validation issues found when analyzing namespace: shop.\n';

/** One client configuration with a context per cluster (`a`, `b`), `a` current, both in namespace shop. */
function twoContexts(a: Kube, b: Kube): string {
  const one = (k: Kube, name: string) => {
    const kc = parseYaml(readFileSync(k.kubeconfig, 'utf8'));
    return {
      cluster: { name, cluster: kc.clusters[0].cluster },
      user: { name, user: kc.users[0].user },
      context: { name, context: { cluster: name, user: name, namespace: 'shop' } },
    };
  };
  const [ca, cb] = [one(a, 'a'), one(b, 'b')];
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [ca.cluster, cb.cluster],
    users: [ca.user, cb.user],
    contexts: [ca.context, cb.context],
    'current-context': 'a',
  });
}

/** B's client configuration as a remote secret carries it: CA and token inline. */
function inlineKubeconfig(k: Kube): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'b', cluster: { server: k.env.API_URL, 'certificate-authority-data': readFileSync(k.env.KUBE_CA!).toString('base64') } }],
    users: [{ name: 'b', user: { token: k.env.KUBE_TOKEN } }],
    contexts: [{ name: 'b', context: { cluster: 'b', user: 'b' } }],
    'current-context': 'b',
  });
}

t.test('analyze --remote-contexts: the objects of both clusters', async (t) => {
  const [a, b] = await Promise.all([
    startKube(t, { crds: 'all', controllerManager: false }),
    startKube(t, { crds: 'all', controllerManager: false }),
  ]);
  t.teardown(() => (a.api.close(), b.api.close()));
  // Injection on: Istio's IST0102 (namespace not injected) stays out of the way.
  for (const k of [a, b]) await k.api.create('/api/v1/namespaces', namespace('shop', { 'mesh-injection': 'enabled' }));
  await a.api.create('/api/v1/namespaces', namespace('mesh-system'));
  await a.api.create('/api/v1/namespaces/shop/services', service('shop', 'reviews'));
  await a.api.create('/apis/networking.mesh.io/v1/namespaces/shop/virtualservices', {
    apiVersion: 'networking.mesh.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'reviews', namespace: 'shop' },
    spec: { hosts: ['reviews'], http: [{ route: [{ destination: { host: 'ratings' } }] }] },
  });
  await b.api.create('/api/v1/namespaces/shop/services', service('shop', 'ratings'));

  const file = path.join(tempDir(t), 'clusters.yaml');
  writeFileSync(file, twoContexts(a, b));
  const analyze = (args: string[]) => exec(MESHCTL, ['analyze', '--color=false', ...args], { env: { ...ENV, ORCHCONFIG: file } });

  let r = await analyze([]);
  t.equal(r.code, 79, r.stderr);
  t.equal(r.stdout, NOT_FOUND, 'cluster A alone has no ratings Service');

  r = await analyze(['--remote-contexts', 'b']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, CLEAN, "B's ratings Service is part of the analysis");
  t.equal(r.stdout, '\n', 'no message (istioctl prints an empty line)');

  r = await analyze(['--context', 'b', '--remote-contexts', 'a']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, CLEAN, "from B's side: A's VirtualService is read as a remote cluster's, B's Service as the local one");

  r = await analyze(['--remote-contexts', 'nosuch']);
  t.equal(r.code, 1);
  t.match(r.stderr, /^Error: .*nosuch/);
  t.notMatch(r.stderr, /\n\s+at /, 'one line, no stack');

  // Without --remote-contexts, istioctl reads the remote clusters of the system namespace's remote secrets.
  await a.api.create('/api/v1/namespaces/mesh-system/secrets', {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'mesh-remote-secret-b', namespace: 'mesh-system', labels: { 'mesh/multiCluster': 'true' } },
    stringData: { b: inlineKubeconfig(b) },
  });
  r = await analyze([]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stderr, CLEAN, 'B found through the remote secret');
});
