// `meshctl x workload group create` and `x workload entry configure` with the built binary over every case of
// ../shared/conformance/workload (Istio's workload_test.go and its goldens), entry configure against a real
// API server holding each case's cluster objects; the small helpers as tables.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse as parseYaml } from 'yaml';
import { convertToMap, podPortsMeta, splitEqual } from '../../src/meshctl/workload';
import { built, DIST, exec } from '../helpers/binary';
import { startKube, type Kube, kubeUnavailable } from '../helpers/kube';
import { SHARED } from '../helpers/spec';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const MESHCTL = path.join(DIST, 'meshctl');
const DIR = path.join(SHARED, 'conformance', 'workload');
const cases = parseYaml(readFileSync(path.join(DIR, 'cases.yaml'), 'utf8'));

// The counts ../shared/conformance/README.md gives (6 + 4 + 3, plus 10 helper rows): a lost case fails here.
t.test('cases.yaml holds every case', async (t) => {
  t.equal(cases.groupCreate.length, 6, 'workload group create');
  t.equal(cases.entryConfigureErrors.length, 4, 'entry configure errors');
  t.equal(cases.entryConfigure.length, 3, 'entry configure');
  t.equal(cases.podPortsMeta.length + cases.convertToMap.length + cases.splitEqual.length, 10, 'helper rows');
});
const tmp = tempDir(t, 'meshctl-workload-');

const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: tmp };

function meshctl(args: readonly string[], env: Record<string, string> = {}) {
  return exec(MESHCTL, ['x', 'workload', ...args], { env: { ...ENV, ...env }, cwd: DIR });
}

t.test('group create', async (t) => {
  for (const c of cases.groupCreate) {
    const r = await meshctl(c.args);
    if (c.error) {
      t.not(r.code, 0, `${c.name}: exit code`);
      t.equal(r.stdout + r.stderr, c.output, `${c.name}: output`);
    } else {
      t.equal(r.code, 0, `${c.name}: exit code (${r.stderr})`);
      t.equal(r.stdout.trim(), readFileSync(path.join(DIR, c.output_file), 'utf8').trim(), `${c.name}: YAML`);
    }
  }
  // Beyond the cases: the remaining template fields, and a port that is no number (logged, kept as 0).
  const r = await meshctl(['group', 'create', '--name', 'vm', '-n', 'ns', '--network', 'n1', '--locality', 'r/z', '-w', '7', '-p', 'http=x']);
  t.equal(r.code, 0);
  t.match(r.stderr, /\terror\tfailed to convert to uint32: strconv\.ParseUint: parsing "x": invalid syntax/);
  t.same(parseYaml(r.stdout).spec.template, { locality: 'r/z', network: 'n1', ports: { http: 0 }, serviceAccount: 'default', weight: 7 });
});

t.test('entry configure: argument errors', async (t) => {
  for (const c of cases.entryConfigureErrors) {
    const r = await meshctl(c.args);
    t.not(r.code, 0, c.args.join(' '));
    t.equal(r.stdout + r.stderr, c.output, c.args.join(' '));
  }
  const r = await meshctl(['entry', 'configure', '-f', 'x.yaml', '-o', tmp, '--internalIP', '1.1.1.1', '--externalIP', '2.2.2.2']);
  t.not(r.code, 0);
  t.equal(r.stderr, 'Error: the flags --internalIP and --externalIP are mutually exclusive\n');
});

t.test('entry configure with no cluster says what it needs', async (t) => {
  const r = await meshctl(['entry', 'configure', '-f', 'entry-configure/vmconfig/ipv4/workloadgroup.yaml', '-o', path.join(tmp, 'none')]);
  t.not(r.code, 0);
  t.match(r.stderr, /^Error: workload entry configure needs the orchestrator API: no client configuration/);
});

t.test('helpers', async (t) => {
  for (const c of cases.podPortsMeta) t.equal(podPortsMeta(c.ports), c.want);
  for (const c of cases.convertToMap) t.same(convertToMap(c.arg), c.want, c.name);
  for (const c of cases.splitEqual) t.same(splitEqual(c.arg), [c.key, c.value], c.arg);
});

function decodeJwt(token: string): Record<string, any> {
  const [, payload] = token.split('.');
  return JSON.parse(Buffer.from(payload!, 'base64url').toString());
}

t.test('entry configure against a real API server', { skip: kubeUnavailable() }, async (t) => {
  const kube: Kube = await startKube(t, { crds: 'mesh', controllerManager: false });
  const env = { ORCHCONFIG: kube.kubeconfig };
  for (const ns of ['bar', 'mesh-system']) await kube.api.create('/api/v1/namespaces', { metadata: { name: ns } });

  async function setCluster(objects: any[], caseDir: string) {
    for (const o of objects) {
      const obj = structuredClone(o);
      if (obj.kind === 'ConfigMap' && obj.data?.mesh === "<contents of the case's meshconfig.yaml>") {
        obj.data.mesh = readFileSync(path.join(DIR, caseDir, 'meshconfig.yaml'), 'utf8');
      }
      await kube.api.apply(obj);
    }
  }

  for (const c of cases.entryConfigure) {
    await t.test(c.name, async (t) => {
      await setCluster(c.cluster, c.dir);
      const out = path.join(tmp, c.name.replaceAll(' ', '-'));
      const args = c.args.map((a: string) => (a === '<dir>' ? out : a));
      const r = await meshctl(args, env);
      t.equal(r.code, 0, r.stderr);
      t.match(r.stdout, `Configuration generation into directory ${out} was successful\n`);
      t.match(
        r.stderr,
        `Warning: a security token for namespace "bar" and service account "vm-serviceaccount" has been generated and stored at "${out}/mesh-token"\n`,
      );
      for (const f of c.golden) {
        const got = readFileSync(path.join(out, f), 'utf8');
        if (f === 'mesh-token') {
          // Istio's fake API answers an empty token; the real server issues one for the service account.
          const claims = decodeJwt(got);
          t.same(claims.aud, ['mesh-ca'], 'token audience');
          t.equal(claims.sub, 'system:serviceaccount:bar:vm-serviceaccount', 'token subject');
          t.equal(claims.exp - claims.iat, 3600, 'token duration');
          continue;
        }
        t.equal(got.trim(), readFileSync(path.join(DIR, c.dir, `${f}.golden`), 'utf8').trim(), `${c.name}: ${f}`);
      }
      if (!c.args.includes('--ingressIP')) t.match(r.stderr, /\twarn\tCould not auto-detect IP for meshd\.mesh-system\.svc\/mesh-system/);
      // Without --clusterID the injector's ConfigMap decides; this cluster has none.
      const again = await meshctl(
        args.filter((a: string, i: number) => a !== '--clusterID' && args[i - 1] !== '--clusterID'),
        env,
      );
      if (again.code !== 0) t.match(again.stderr, 'failed to automatically determine the --clusterID');
      for (const o of c.cluster)
        if (o.kind === 'ConfigMap' && o.metadata.namespace === 'mesh-system')
          await kube.api.remove(`/api/v1/namespaces/mesh-system/configmaps/${o.metadata.name}`);
    });
  }

  await t.test('the cluster decides --clusterID, the ingress Service gives the address, the group comes from the API', async (t) => {
    await setCluster(cases.entryConfigure[0].cluster, cases.entryConfigure[0].dir);
    await kube.api.apply({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { namespace: 'mesh-system', name: 'mesh-sidecar-injector-rev-1' },
      data: { values: JSON.stringify({ global: { multiCluster: { clusterName: 'east' } } }) },
    });
    await kube.api.apply({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { namespace: 'mesh-system', name: 'mesh-eastwestgateway' },
      spec: { ports: [{ port: 15012 }], externalIPs: ['10.10.10.12'] },
    });
    const wg = parseYaml(readFileSync(path.join(DIR, 'entry-configure/vmconfig/ipv4/workloadgroup.yaml'), 'utf8'));
    await kube.api.apply({ apiVersion: 'networking.mesh.io/v1', ...wg });
    const out = path.join(tmp, 'from-api');
    const r = await meshctl(
      ['entry', 'configure', '--name', 'foo', '-n', 'bar', '--revision', 'rev-1', '--internalIP', '10.10.10.10', '-o', out],
      env,
    );
    t.equal(r.code, 0, r.stderr);
    t.equal(readFileSync(path.join(out, 'hosts'), 'utf8'), '10.10.10.12 meshd-rev-1.mesh-system.svc\n');
    const golden = readFileSync(path.join(DIR, 'entry-configure/vmconfig/ipv4/cluster.env.golden'), 'utf8');
    t.equal(
      readFileSync(path.join(out, 'cluster.env'), 'utf8').trim(),
      golden.trim().replace("MESH_META_CLUSTER_ID='Orchestrator'", "MESH_META_CLUSTER_ID='east'"),
    );

    const missing = await meshctl(['entry', 'configure', '--name', 'nope', '-n', 'bar', '--clusterID', 'c', '-o', path.join(tmp, 'x')], env);
    t.not(missing.code, 0);
    t.match(missing.stderr, /^Error: workloadgroup nope not found in namespace bar: /);
  });
});
