// `meshctl bug-report` with a cluster, the built binary against a real API server: orchestrator objects and events
// under cluster/, the daemon pod's folder named after the pod (never MISSING), each proxy pod's folder, secrets
// redacted, and — this API server has no kubelet and the pods no address — bug-report.log naming every page and
// log that could not be fetched, with the server's reason. Istio's layout: tools/bug-report/pkg/archive.
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, exec } from '../helpers/binary';
import { namespace, pod, requireKube, startKube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';
import { MESHCTL, noStack } from './cluster-fixtures';

requireKube();
if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

t.test('bug-report with a cluster', async (t) => {
  const kube = await startKube(t, { crds: 'all', controllerManager: false });
  await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
  await kube.api.create('/api/v1/namespaces', namespace('shop'));
  const daemon = pod('mesh-system', 'meshd-7d9f8-abcde', { labels: { app: 'meshd' } });
  daemon.spec.containers = [{ name: 'discovery', image: 'docker.io/mesh/pilot:1.26.0' }];
  await kube.api.create('/api/v1/namespaces/mesh-system/pods', daemon);
  const app = pod('shop', 'web-0', { labels: { app: 'web' } });
  app.spec.containers.push({ name: 'mesh-proxy', image: 'docker.io/mesh/proxyv2:1.26.0' });
  await kube.api.create('/api/v1/namespaces/shop/pods', app);
  await kube.api.create('/api/v1/namespaces/shop/pods', pod('shop', 'plain-0'));
  await kube.api.create('/api/v1/namespaces/shop/secrets', { metadata: { name: 'db' }, stringData: { password: 'hunter2' } });
  await kube.api.create('/api/v1/namespaces/shop/events', {
    metadata: { name: 'web-0.1' },
    involvedObject: { kind: 'Pod', namespace: 'shop', name: 'web-0' },
    reason: 'BackOff',
    message: 'Back-off restarting failed container',
    type: 'Warning',
  });
  await kube.api.create('/apis/networking.mesh.io/v1/namespaces/shop/virtualservices', {
    apiVersion: 'networking.mesh.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'web' },
    spec: { hosts: ['web'], http: [{ route: [{ destination: { host: 'web' } }] }] },
  });

  const dir = tempDir(t);
  const r = await exec(MESHCTL, ['bug-report', '--output-dir', dir, '--timeout', '60s'], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', ORCHCONFIG: kube.kubeconfig },
  });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, `Collecting from the cluster at ${kube.api.url}.`);
  t.ok(noStack(r.stderr));
  execFileSync('tar', ['-xzf', path.join(dir, 'bug-report.tar.gz'), '-C', dir]);
  const root = path.join(dir, 'bug-report');
  const text = (f: string) => readFileSync(path.join(root, f), 'utf8');

  t.same(readdirSync(path.join(root, 'mesh', 'mesh-system')), ['meshd-7d9f8-abcde'], 'the daemon folder is the pod');
  t.same(readdirSync(path.join(root, 'proxies', 'shop')), ['web-0'], 'only pods with a proxy container');
  const pods = JSON.parse(text('cluster/pods')).map((p: any) => `${p.metadata.namespace}/${p.metadata.name}`);
  t.same(pods.sort(), ['mesh-system/meshd-7d9f8-abcde', 'shop/plain-0', 'shop/web-0']);
  const events = JSON.parse(text('cluster/events'));
  t.match(
    events.find((e: any) => e.involvedObject?.name === 'web-0'),
    { reason: 'BackOff', message: 'Back-off restarting failed container' },
  );
  const secret = JSON.parse(text('cluster/secrets')).find((s: any) => s.metadata.name === 'db');
  t.same(secret.data, { password: '[redacted]' });
  t.match(JSON.parse(text('cluster/crs')), [{ kind: 'VirtualService', metadata: { name: 'web', namespace: 'shop' } }]);
  t.match(text('cluster/cluster-context'), `server: ${kube.api.url}`);
  t.match(text('versions'), /control plane pods: meshd-7d9f8-abcde: docker\.io\/mesh\/pilot:1\.26\.0/);

  // No kubelet, no pod address: each page and log is named in the log with the API server's answer.
  const log = text('bug-report.log');
  t.match(
    log,
    /could not fetch mesh\/mesh-system\/meshd-7d9f8-abcde debug\/syncz: GET \S+\/pods\/meshd-7d9f8-abcde:15014\/proxy\/debug\/syncz: \d{3}/,
  );
  // A pod never scheduled: the API server answers its log with 204 and no body.
  t.match(
    log,
    /mesh-system\/meshd-7d9f8-abcde log of container discovery: the API server answered with no log \(the pod has not run on a node: it has none assigned\)/,
  );
  t.equal(text('mesh/mesh-system/meshd-7d9f8-abcde/discovery.log'), '');
  t.match(log, /could not fetch proxies\/shop\/web-0 config_dump\?include_eds: /);
  t.match(log, /shop\/web-0 log of container mesh-proxy: the API server answered with no log/);
  t.notMatch(log, /MISSING/);
});
