// `meshctl x precheck` (issue 28 item 5) with the built binary against a real API server: a clean cluster, a
// user who may read but not create (SelfSubjectAccessReview answers, IST0141), a Gateway API CRD serving only
// v1alpha2 (IST0156, IST0172), --from-version with a zipkin Service (IST0169), -o json, bad versions. Codes and
// templates: Istio 1.26.8 pkg/config/analysis/msg/messages.yaml; checks: istioctl/pkg/precheck/precheck.go.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { kubeUnavailable, namespace, service, startKube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const strip = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, '');

t.test('precheck', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const api = kube.api;
  const precheck = (args: string[], orchconfig = kube.kubeconfig) =>
    exec(MESHCTL, ['x', 'precheck', ...args], { env: { ...ENV, ORCHCONFIG: orchconfig } });
  await api.create('/api/v1/namespaces', namespace('mesh-system'));

  let r = await precheck([]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '');
  t.equal(
    strip(r.stderr),
    '\u2714 No issues found when checking the cluster. Mesh is safe to install or upgrade!\n  To get started, check out https://mesh.io/latest/docs/setup/getting-started/.\n',
  );

  // A user who may read everything and create nothing.
  await api.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    metadata: { name: 'reader' },
    rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['get', 'list'] }],
  });
  await api.create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'reader' } });
  await api.create('/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    metadata: { name: 'reader' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: 'default' }],
  });
  const tr = await api.create('/api/v1/namespaces/default/serviceaccounts/reader/token', { spec: { expirationSeconds: 3600 } });
  const readerKc = path.join(tempDir(t), 'reader.yaml');
  writeFileSync(
    readerKc,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "${kube.env.API_URL}", certificate-authority: "${kube.env.KUBE_CA}"}}]\n` +
      `users: [{name: u, user: {token: "${tr.status.token}"}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n`,
  );
  r = await precheck([], readerKc);
  t.equal(r.code, 1);
  const lines = strip(r.stdout).trimEnd().split('\n');
  t.equal(lines.length, 11, 'one message per resource an install creates');
  t.match(lines[0], /^Error \[IST0141\] \(Cluster\) Missing required permission to create resource \w+ \(/);
  t.ok(lines.some((l) => l.startsWith('Error [IST0141] (Cluster) Missing required permission to create resource customresourcedefinitions (')));
  t.match(
    r.stderr,
    /^Error: Issues found when checking the cluster\. Mesh may not be safe to install or upgrade\.\nSee \S+ for more information about causes and resolutions\.\n$/,
  );

  r = await precheck(['-o', 'json'], readerKc);
  const json = JSON.parse(r.stdout) as Array<Record<string, string>>;
  t.match(json[0], { code: 'IST0141', level: 'Error', origin: 'Cluster' });

  // A Gateway API CRD that serves only v1alpha2.
  await api.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', {
    metadata: {
      name: 'httproutes.gateway.networking.k8s.io',
      annotations: { 'api-approved.kubernetes.io': 'https://github.com/kubernetes-sigs/gateway-api/pull/2466' },
    },
    spec: {
      group: 'gateway.networking.k8s.io',
      names: { kind: 'HTTPRoute', plural: 'httproutes', listKind: 'HTTPRouteList', singular: 'httproute' },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1alpha2',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  });
  r = await precheck([]);
  t.equal(r.code, 1);
  t.equal(
    strip(r.stdout),
    'Error [IST0156] (CustomResourceDefinition httproutes.gateway.networking.k8s.io) The Gateway API CRD version v1alpha2 is lower than the minimum version: v1beta1\n' +
      'Warning [IST0172] (CustomResourceDefinition httproutes.gateway.networking.k8s.io) The Gateway API CRD version v1alpha2 is lower than the minimum version: v1\n',
  );
  r = await precheck(['--output-threshold', 'Error']);
  t.equal(r.code, 1, 'the exit code counts warnings whatever is shown');
  t.notMatch(r.stdout, 'IST0172');
  await api.delete('/apis/apiextensions.k8s.io/v1/customresourcedefinitions/httproutes.gateway.networking.k8s.io');

  // --from-version: 1.21 stopped the default zipkin tracer.
  await api.create('/api/v1/namespaces/mesh-system/services', service('mesh-system', 'zipkin', { ports: [{ name: 'http', port: 9411 }] }));
  r = await precheck(['--skip-controlplane', '--from-version', '1.20']);
  t.equal(r.code, 1);
  t.equal(
    strip(r.stdout),
    'Warning [IST0169] (Service mesh-system/zipkin) The configuration "meshConfig.defaultConfig.tracer" changed in release 1.21: ' +
      "tracing is no longer by default enabled to send to 'zipkin.mesh-system.svc'; follow https://mesh.io/latest/docs/tasks/observability/distributed-tracing/telemetry-api/. " +
      'Or, install with `--set compatibilityVersion=1.21` to retain the old default.\n',
  );
  r = await precheck(['--skip-controlplane', '--from-version', '1.22']);
  t.equal(r.code, 0, 'nothing changed since 1.22 that precheck knows of');
  r = await precheck(['--skip-controlplane', '--from-version', '2.0']);
  t.equal(r.stderr, 'Error: expected major version 1, got 2.0\n');
  r = await precheck(['--skip-controlplane', '--from-version', '1']);
  t.equal(r.stderr, "Error: invalid version 1, expected format like '1.0'\n");
  r = await precheck(['--skip-controlplane', '--from-version', '1.x']);
  t.equal(r.stderr, 'Error: minor version is not a number: x\n');
});
