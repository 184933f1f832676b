// What each profile installs, checked against facts of Istio 1.26's profiles and charts (manifests/profiles and
// the charts' files/profile-*.yaml): which components are on, the discovery Service's ports, the webhooks, the
// CRD set, Istio's object order, overlays of -f files and --set flags, and the errors for bad input.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parseInjectConfig } from '../../src/inject/config';
import { parseGoYaml } from '../../src/lib/goyaml-parse';
import { mergeInputs } from '../../src/manifest/operator';
import { kindOrder, renderAll, sortObjects, type Obj } from '../../src/manifest/render';
import { manifestSource } from '../../src/manifest/source';
import { tempDir } from '../helpers/temp';

function gen(sets: string[], files: string[] = []) {
  const m = mergeInputs({ files, sets, manifests: '', revision: '' }, manifestSource);
  const g = renderAll(m);
  return { objects: sortObjects(g.components.flatMap((c) => c.objects)), warnings: g.warnings, iop: m.iop };
}
const names = (objs: Obj[], kind: string) =>
  objs
    .filter((o) => o.kind === kind)
    .map((o) => o.metadata.name)
    .sort();
const find = (objs: Obj[], kind: string, name: string) => objs.find((o) => o.kind === kind && o.metadata.name === name);
const env = (d: Obj | undefined, name: string) => d?.spec.template.spec.containers[0].env.find((e: Obj) => e.name === name)?.value;

const dir = tempDir(t, 'mesh-manifest-');

t.test('default: base, discovery and the ingress gateway', async (t) => {
  const { objects } = gen([]);
  t.same(names(objects, 'Deployment'), ['mesh-ingressgateway', 'meshd']);
  t.same(names(objects, 'HorizontalPodAutoscaler'), ['mesh-ingressgateway', 'meshd']);
  t.same(names(objects, 'PodDisruptionBudget'), ['mesh-ingressgateway', 'meshd']);
  t.same(names(objects, 'DaemonSet'), []);
  t.same(names(objects, 'ConfigMap'), ['mesh', 'mesh-sidecar-injector']);
  // Istio's discovery Service: 15010 grpc-xds, 15012 https-dns, 443 → 15017 https-webhook, 15014 http-monitoring.
  const svc = find(objects, 'Service', 'meshd')!;
  t.same(
    svc.spec.ports.map((p: Obj) => [p.name, p.port, p.targetPort ?? p.port]),
    [
      ['grpc-xds', 15010, 15010],
      ['https-dns', 15012, 15012],
      ['https-webhook', 443, 15017],
      ['http-monitoring', 15014, 15014],
    ],
  );
  t.same(svc.spec.selector, { app: 'meshd', mesh: 'pilot' });
  const d = find(objects, 'Deployment', 'meshd')!;
  t.equal(d.metadata.namespace, 'mesh-system');
  t.same(d.spec.template.spec.containers[0].args.slice(0, 2), ['discovery', '--monitoringAddr=:15014']);
  t.equal(env(d, 'ENABLE_LEADER_ELECTION'), 'true');
  t.equal(env(d, 'CLUSTER_ID'), 'Orchestrator');
  t.equal(d.spec.replicas, undefined, 'the HPA owns the replica count');
  // Leader election needs Lease rights in the system namespace.
  const role = find(objects, 'Role', 'meshd')!;
  t.ok(role.rules.some((r: Obj) => r.apiGroups.includes('coordination.k8s.io') && r.resources.includes('leases') && r.verbs.includes('update')));
  // The ingress gateway Service is a LoadBalancer with Istio's three default ports.
  const gw = find(objects, 'Service', 'mesh-ingressgateway')!;
  t.equal(gw.spec.type, 'LoadBalancer');
  t.same(
    gw.spec.ports.map((p: Obj) => p.port),
    [15021, 80, 443],
  );
});

t.test('webhooks point at the discovery Service', async (t) => {
  const { objects } = gen([]);
  const mwc = find(objects, 'MutatingWebhookConfiguration', 'mesh-sidecar-injector')!;
  t.same(
    mwc.webhooks.map((w: Obj) => w.name),
    [
      'rev.namespace.sidecar-injector.mesh.io',
      'rev.object.sidecar-injector.mesh.io',
      'namespace.sidecar-injector.mesh.io',
      'object.sidecar-injector.mesh.io',
    ],
  );
  for (const w of mwc.webhooks) {
    t.same(w.clientConfig.service, { name: 'meshd', namespace: 'mesh-system', path: '/inject', port: 443 });
    t.equal(w.failurePolicy, 'Fail');
  }
  t.same(mwc.webhooks[2].namespaceSelector.matchExpressions[0], { key: 'mesh-injection', operator: 'In', values: ['enabled'] });
  const vwc = find(objects, 'ValidatingWebhookConfiguration', 'mesh-validator-mesh-system')!;
  t.same(vwc.webhooks[0].clientConfig.service, { name: 'meshd', namespace: 'mesh-system', path: '/validate' });
  t.equal(vwc.webhooks[0].failurePolicy, 'Ignore', 'fail-open until discovery patches its CA bundle');
  t.ok(vwc.webhooks[0].rules[0].apiGroups.includes('networking.mesh.io') && vwc.webhooks[0].rules[0].apiGroups.includes('networking.istio.io'));
  // The injector ConfigMap is what the injection webhook reads: a config with the built-in templates, and values.
  const cm = find(objects, 'ConfigMap', 'mesh-sidecar-injector')!;
  const cfg = parseInjectConfig(cm.data.config, 'mesh-sidecar-injector');
  t.equal(cfg.policy, 'enabled');
  t.same(cfg.defaultTemplates, ['sidecar']);
  t.ok(cfg.templates.sidecar?.includes('mesh-proxy') && cfg.templates.gateway);
  t.equal(JSON.parse(cm.data.values).global.meshNamespace, 'mesh-system');
  const mesh = parseGoYaml(find(objects, 'ConfigMap', 'mesh')!.data.mesh) as Obj;
  t.equal(mesh.defaultConfig.discoveryAddress, 'meshd.mesh-system.svc:15012');
  t.equal(mesh.rootNamespace, 'mesh-system');
});

t.test('CRDs: Istio 1.26 groups and their mesh.io copies', async (t) => {
  const { objects } = gen([]);
  const crds = names(objects, 'CustomResourceDefinition');
  t.equal(crds.length, 28);
  for (const n of [
    'virtualservices.networking.istio.io',
    'virtualservices.networking.mesh.io',
    'authorizationpolicies.security.mesh.io',
    'telemetries.telemetry.mesh.io',
    'wasmplugins.extensions.mesh.io',
  ]) {
    t.ok(crds.includes(n), n);
  }
  const vs = find(objects, 'CustomResourceDefinition', 'virtualservices.networking.mesh.io')!;
  t.equal(vs.spec.group, 'networking.mesh.io');
  t.equal(vs.spec.names.shortNames, undefined, 'short names stay with the istio.io kinds');
});

t.test("Istio's object order", async (t) => {
  const { objects } = gen(['profile=demo']);
  for (let i = 1; i < objects.length; i++)
    t.ok(kindOrder(objects[i - 1]!) <= kindOrder(objects[i]!), `${objects[i - 1]!.kind} before ${objects[i]!.kind}`);
  t.equal(objects[0]!.kind, 'CustomResourceDefinition');
  t.equal(objects[objects.length - 1]!.kind, 'Service');
  // Within a kind order: group, kind, then name.
  const sas = objects.filter((o) => o.kind === 'ServiceAccount').map((o) => o.metadata.name);
  t.same(sas, [...sas].sort());
});

t.test('minimal: no gateways', async (t) => {
  const { objects } = gen(['profile=minimal']);
  t.same(names(objects, 'Deployment'), ['meshd']);
  t.same(names(objects, 'Service'), ['meshd']);
});

t.test('demo: egress too, demo chart values', async (t) => {
  const { objects } = gen(['profile=demo']);
  t.same(names(objects, 'Deployment'), ['mesh-egressgateway', 'mesh-ingressgateway', 'meshd']);
  t.same(names(objects, 'HorizontalPodAutoscaler'), [], 'demo turns autoscaling off');
  t.equal(find(objects, 'Deployment', 'meshd')!.spec.replicas, 1);
  t.equal(env(find(objects, 'Deployment', 'meshd'), 'PILOT_TRACE_SAMPLING'), '100');
  t.same(
    find(objects, 'Service', 'mesh-ingressgateway')!.spec.ports.map((p: Obj) => p.port),
    [15021, 80, 443, 31400, 15443],
  );
  t.equal(find(objects, 'Service', 'mesh-egressgateway')!.spec.type, 'ClusterIP');
  t.equal((parseGoYaml(find(objects, 'ConfigMap', 'mesh')!.data.mesh) as Obj).accessLogFile, '/dev/stdout');
});

t.test('empty: nothing', async (t) => {
  t.same(gen(['profile=empty']).objects, []);
});

t.test('remote: injection only, discovery runs elsewhere', async (t) => {
  const { objects } = gen(['profile=remote']);
  t.same(names(objects, 'Deployment'), []);
  t.same(names(objects, 'Service'), []);
  t.same(names(objects, 'ConfigMap'), []);
  t.same(names(objects, 'MutatingWebhookConfiguration'), ['mesh-sidecar-injector']);
});

t.test('ambient: CNI node agent, ambient discovery, no node proxy chart', async (t) => {
  const { objects, warnings } = gen(['profile=ambient']);
  t.same(names(objects, 'DaemonSet'), ['mesh-cni-node']);
  t.same(names(objects, 'Deployment'), ['meshd']);
  t.equal(find(objects, 'ConfigMap', 'mesh-cni-config')!.data.AMBIENT_ENABLED, 'true');
  t.equal(env(find(objects, 'Deployment', 'meshd'), 'PILOT_ENABLE_AMBIENT'), 'true');
  t.match(warnings.join('\n'), /nodeproxy is enabled but this build of mesh has no nodeproxy chart/);
});

t.test('preview: DNS capture', async (t) => {
  const mesh = parseGoYaml(find(gen(['profile=preview']).objects, 'ConfigMap', 'mesh')!.data.mesh) as Obj;
  t.equal(mesh.defaultConfig.proxyMetadata.MESH_META_DNS_CAPTURE, 'true');
});

t.test('revision: per-revision names and selectors', async (t) => {
  const { objects } = gen(['revision=canary']);
  t.same(names(objects, 'Deployment'), ['mesh-ingressgateway', 'meshd-canary']);
  const mwc = find(objects, 'MutatingWebhookConfiguration', 'mesh-sidecar-injector-canary')!;
  t.equal(mwc.webhooks.length, 2, 'only the default revision answers mesh-injection=enabled');
  t.equal(mwc.webhooks[0].clientConfig.service.name, 'meshd-canary');
  t.same(find(objects, 'Service', 'meshd-canary')!.spec.selector, { app: 'meshd', 'mesh.io/rev': 'canary' });
  t.ok(find(objects, 'ValidatingWebhookConfiguration', 'mesh-validator-canary-mesh-system'));
});

t.test('-f overlays left to right, --set last; IstioOperator accepted', async (t) => {
  const a = path.join(dir, 'a.yaml');
  const b = path.join(dir, 'b.yaml');
  writeFileSync(
    a,
    'apiVersion: install.mesh.io/v1alpha1\nkind: MeshOperator\nspec:\n  profile: demo\n  hub: example.com/a\n  values:\n    pilot:\n      traceSampling: 5\n',
  );
  writeFileSync(
    b,
    'apiVersion: install.istio.io/v1alpha1\nkind: IstioOperator\nspec:\n  hub: example.com/b\n  components:\n    pilot:\n      k8s:\n        replicaCount: 3\n        env:\n        - name: EXTRA\n          value: "x"\n',
  );
  const { objects } = gen(['values.pilot.traceSampling=7', 'values.gateways.mesh-egressgateway.type=NodePort'], [a, b]);
  const d = find(objects, 'Deployment', 'meshd')!;
  t.equal(d.spec.template.spec.containers[0].image.split('/').slice(0, 2).join('/'), 'example.com/b', 'the later file wins');
  t.equal(env(d, 'PILOT_TRACE_SAMPLING'), '7', '--set beats the files');
  t.equal(env(d, 'EXTRA'), 'x', 'k8s.env is merged into the container');
  t.equal(d.spec.replicas, 3, 'k8s.replicaCount');
  t.ok(find(objects, 'Deployment', 'mesh-egressgateway'), 'the profile of the first file applies');
  t.equal(find(objects, 'Service', 'mesh-egressgateway')!.spec.type, 'NodePort');
});

t.test('bad input names the file, flag and field', async (t) => {
  const bad = path.join(dir, 'bad.yaml');
  writeFileSync(
    bad,
    'apiVersion: install.mesh.io/v1alpha1\nkind: MeshOperator\nspec:\n  components:\n    pilot:\n      k8s:\n        replicaCount: 2\n      replicas: 2\n',
  );
  t.throws(() => gen([], [bad]), {
    message: new RegExp(`${bad.replace(/[.]/g, '\\.')}: invalid MeshOperator: spec\\.components\\.pilot\\.replicas: unknown field "replicas"`),
  });
  t.throws(() => gen(['values.global.proxy.bogus=1']), {
    message: /--set values\.global\.proxy\.bogus=1: spec\.values\.global\.proxy\.bogus: unknown field "bogus"/,
  });
  t.throws(() => gen(['profile=nonesuch']), { message: /profile "nonesuch" not found/ });
  t.throws(() => gen([], [path.join(dir, 'missing.yaml')]), { message: /missing\.yaml: no such file or directory/ });
  const two = path.join(dir, 'two.yaml');
  writeFileSync(two, 'kind: MeshOperator\napiVersion: install.mesh.io/v1alpha1\n---\nkind: MeshOperator\napiVersion: install.mesh.io/v1alpha1\n');
  t.throws(() => gen([], [two]), { message: /contains multiple MeshOperator CRs/ });
  const wrong = path.join(dir, 'wrong.yaml');
  writeFileSync(wrong, 'apiVersion: v1\nkind: ConfigMap\n');
  t.throws(() => gen([], [wrong]), { message: /expected kind MeshOperator/ });
  t.throws(() => gen(['revision=Bad_Rev']), { message: /invalid revision specified: Bad_Rev/ });
  // unvalidatedValues: passed to the charts unchecked (Istio's escape hatch).
  t.doesNotThrow(() => gen(['unvalidatedValues.global.somethingNew=1']));
});

t.test('the built-in copy of manifests/ is up to date', async (t) => {
  const { execFileSync } = await import('node:child_process');
  t.doesNotThrow(
    () => execFileSync(process.execPath, [path.join(import.meta.dirname, '../../scripts/gen-manifests.mjs'), '--check'], { stdio: 'pipe' }),
    'run node scripts/gen-manifests.mjs',
  );
});

t.test('--set on components: list elements and enablement', async (t) => {
  // The user's list replaces the profile's (MergeFrom does not merge lists): one disabled ingress gateway, so none.
  t.same(names(gen(['components.ingressGateways[0].enabled=false']).objects, 'Deployment'), ['meshd']);
  t.same(names(gen(['components.cni.enabled=true']).objects, 'DaemonSet'), ['mesh-cni-node']);
  // A values switch turns a gateway component on as Istio's AltEnablementPath does.
  t.ok(find(gen(['values.gateways.mesh-egressgateway.enabled=true']).objects, 'Deployment', 'mesh-egressgateway'));
  const named = gen(['components.ingressGateways[0].name=edge', 'components.ingressGateways[0].label.app=edge']).objects;
  t.same(find(named, 'Service', 'edge')!.spec.selector, { app: 'edge', mesh: 'ingressgateway' });
});

t.test('--force: validation problems become warnings', async (t) => {
  const m = mergeInputs({ files: [], sets: ['values.global.bogus=1'], manifests: '', revision: '', force: true }, manifestSource);
  t.match(
    m.warnings.join('\n'),
    /spec invalid; continuing because of --force: --set values\.global\.bogus=1: spec\.values\.global\.bogus: unknown field/,
  );
});
