// The built binary's `meshctl manifest generate` / `translate` / `install --dry-run`: byte-identical output across
// runs, Istio's document framing, and failures that print one error line, exit non-zero and write nothing.
import { existsSync, readdirSync, readFileSync, writeFileSync, cpSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { built, DIST, exec } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const meshctl = (args: string[]) => exec(MESHCTL, args, { env: ENV });
const dir = tempDir(t, 'mesh-manifest-bin-');

t.test('generate is deterministic and framed as Istio frames it', async (t) => {
  const [a, b] = await Promise.all([
    meshctl(['manifest', 'generate', '--set', 'profile=demo']),
    meshctl(['manifest', 'generate', '--set', 'profile=demo']),
  ]);
  t.equal(a.code, 0, a.stderr);
  t.equal(a.stdout, b.stdout, 'two runs print the same bytes');
  t.ok(a.stdout.endsWith('\n---\n'));
  const docs = a.stdout.split('\n---\n').filter((d) => d.trim());
  const kinds = docs.map((d) => (parseYaml(d) as { kind: string }).kind);
  t.equal(kinds[0], 'CustomResourceDefinition');
  t.equal(kinds.filter((k) => k === 'Deployment').length, 3, 'discovery, ingress and egress gateways');
});

t.test('values.base.gatewayApiCRDs: the Gateway API v1.3.0 CRDs of the channel asked for, none by default', async (t) => {
  const crds = async (set: string[]) => {
    const r = await meshctl(['manifest', 'generate', '--set', 'profile=minimal', ...set]);
    t.equal(r.code, 0, r.stderr);
    return r.stdout
      .split('\n---\n')
      .map((d) => parseYaml(d) as { kind?: string; metadata: { name: string; annotations?: Record<string, string> } } | null)
      .filter((d) => d?.kind === 'CustomResourceDefinition' && /\.x?-?k8s\.io$/.test(d.metadata.name))
      .map((d) => d!);
  };
  t.same(await crds([]), [], 'none by default');
  // the release's channels (gateway-api v1.3.0 release notes): standard has the GA and beta kinds
  const standard = await crds(['--set', 'values.base.gatewayApiCRDs=standard']);
  t.same(standard.map((c) => c.metadata.name).sort(), [
    'gatewayclasses.gateway.networking.k8s.io',
    'gateways.gateway.networking.k8s.io',
    'grpcroutes.gateway.networking.k8s.io',
    'httproutes.gateway.networking.k8s.io',
    'referencegrants.gateway.networking.k8s.io',
  ]);
  t.ok(standard.every((c) => c.metadata.annotations?.['gateway.networking.k8s.io/bundle-version'] === 'v1.3.0'));
  const experimental = (await crds(['--set', 'values.base.gatewayApiCRDs=experimental'])).map((c) => c.metadata.name);
  for (const n of ['tcproutes.gateway.networking.k8s.io', 'tlsroutes.gateway.networking.k8s.io', 'backendtlspolicies.gateway.networking.k8s.io'])
    t.ok(experimental.includes(n), `experimental has ${n}`);
  const bad = await meshctl(['manifest', 'generate', '--set', 'values.base.gatewayApiCRDs=beta']);
  t.equal(bad.code, 1);
  t.equal(bad.stdout, '');
  t.match(bad.stderr, /values\.base\.gatewayApiCRDs: "beta" is not a Gateway API release channel \(standard, experimental, or "" for none\)/);
});

t.test('--manifests reads a charts directory', async (t) => {
  const copy = path.join(dir, 'manifests');
  cpSync(path.join(REPO, 'manifests'), copy, { recursive: true });
  // A change in the directory's chart shows in the output: the directory, not the built-in copy, was rendered.
  const svc = path.join(copy, 'charts/mesh-control/mesh-discovery/templates/service.yaml');
  writeFileSync(svc, readFileSync(svc, 'utf8').replace('name: http-monitoring', 'name: http-monitoring-changed'));
  const r = await meshctl(['manifest', 'generate', '-d', copy, '--set', 'profile=minimal']);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /name: http-monitoring-changed/);
  const missing = await meshctl(['manifest', 'generate', '-d', path.join(dir, 'nope')]);
  t.equal(missing.code, 1);
  t.equal(missing.stdout, '');
  t.match(missing.stderr, /^Error: generate config: manifests directory ".*nope" does not exist or is not a directory\n$/);
});

t.test('bad input: one error line, nothing on stdout', async (t) => {
  const r = await meshctl(['manifest', 'generate', '--set', 'components.pilot.k8s.replicas=2']);
  t.equal(r.code, 1);
  t.equal(r.stdout, '');
  t.match(
    r.stderr,
    /^Error: generate config: --set components\.pilot\.k8s\.replicas=2: spec\.components\.pilot\.k8s\.replicas: unknown field "replicas"/,
  );
  const bad = path.join(dir, 'bad.yaml');
  writeFileSync(bad, 'kind: MeshOperator\napiVersion: install.mesh.io/v1alpha1\nspec: [\n');
  const y = await meshctl(['manifest', 'generate', '-f', bad]);
  t.equal(y.code, 1);
  t.equal(y.stdout, '');
  t.match(y.stderr, new RegExp(`Error: generate config: ${bad.replace(/[.]/g, '\\.')}: unable to parse file`));
});

t.test('translate writes the values per component, or nothing', async (t) => {
  const out = path.join(dir, 'translated');
  const r = await meshctl(['manifest', 'translate', '--set', 'profile=demo', '-o', out]);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, `Output written to ${out}! See the README.md for next steps\n`);
  // Gateways installed by the operator have no Helm release of their own (as in Istio): README says so, no files.
  t.same(readdirSync(out).sort(), ['README.md', 'base-values.yaml', 'install-base.sh', 'install-pilot.sh', 'pilot-values.yaml']);
  t.match(readFileSync(path.join(out, 'README.md'), 'utf8'), /Component `mesh-egressgateway`\*\*: migration is \*\*NOT\*\* directly supported/);
  const pilot = parseYaml(readFileSync(path.join(out, 'pilot-values.yaml'), 'utf8'));
  t.equal(pilot.profile, 'demo');
  t.equal(pilot.global.meshNamespace, 'mesh-system');
  t.equal(pilot.pilot.enabled, true);
  t.match(
    readFileSync(path.join(out, 'install-pilot.sh'), 'utf8'),
    /kubectl annotate Deployment\.apps --namespace=mesh-system meshd meta\.helm\.sh\/release-name=pilot/,
  );
  const failed = path.join(dir, 'translated-bad');
  const f = await meshctl(['manifest', 'translate', '--set', 'values.nope=1', '-o', failed]);
  t.equal(f.code, 1);
  t.notOk(existsSync(failed), 'no directory on failure');
});

t.test('install --dry-run prints the plan without a cluster', async (t) => {
  const r = await meshctl(['install', '--dry-run', '--set', 'profile=minimal']);
  t.equal(r.code, 0, r.stderr);
  const lines = r.stdout.split('\n');
  t.match(lines[0], /^Dry run: nothing is applied\. This would install the mesh \S+ "minimal" profile \(revision default\) into the cluster:$/);
  t.ok(lines.includes('  apply Deployment mesh-system/meshd'));
  t.ok(lines.includes('  apply MutatingWebhookConfiguration mesh-sidecar-injector'));
  t.notOk(
    lines.some((l) => /apply \w+ mesh-system\/mesh-ingressgateway/.test(l)),
    'minimal has no gateway',
  );
  // The objects carry the installer's owner labels uninstall later selects on.
  t.match(r.stdout, /operator\.mesh\.io\/component: Pilot/);
  const up = await meshctl(['upgrade', '--dry-run', '--set', 'profile=minimal']);
  t.equal(up.stdout, r.stdout, 'upgrade is install');
  const mi = await meshctl(['manifest', 'install', '--dry-run', '--set', 'profile=minimal']);
  t.equal(mi.stdout, r.stdout, 'manifest install is install');
});

t.test("the CNI repair ClusterRole grants what Istio 1.26's chart grants for each repair mode", async (t) => {
  // Istio's manifests/charts/istio-cni/templates/clusterrole.yaml: events create/patch always; then repairPods:
  // nothing more, else deletePods: delete on pods, else labelPods: patch/update on pods/status.
  const base = [
    { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['watch', 'get', 'list'] },
  ];
  const modes: Array<[string[], unknown[]]> = [
    [[], base],
    [
      ['values.cni.repair.repairPods=false', 'values.cni.repair.deletePods=true'],
      [...base, { apiGroups: [''], resources: ['pods'], verbs: ['delete'] }],
    ],
    [
      ['values.cni.repair.repairPods=false', 'values.cni.repair.labelPods=true'],
      [...base, { apiGroups: [''], resources: ['pods/status'], verbs: ['patch', 'update'] }],
    ],
    [
      ['values.cni.repair.repairPods=false', 'values.cni.repair.labelPods=true', 'values.cni.repair.deletePods=true'],
      [...base, { apiGroups: [''], resources: ['pods'], verbs: ['delete'] }],
    ],
  ];
  for (const [sets, want] of modes) {
    const r = await meshctl(['manifest', 'generate', '--set', 'components.cni.enabled=true', ...sets.flatMap((s) => ['--set', s])]);
    t.equal(r.code, 0, r.stderr);
    const role = r.stdout
      .split('\n---\n')
      .map((d) => parseYaml(d) as { kind?: string; metadata?: { name?: string }; rules?: unknown[] })
      .find((d) => d?.kind === 'ClusterRole' && d.metadata?.name === 'mesh-cni-repair-role');
    t.same(role?.rules, want, sets.join(' ') || 'defaults (repairPods)');
  }
});
