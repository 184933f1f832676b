// Conformance §10: the CNI plugin's ADD for a sidecar pod, dry run, against Istio's goldens. The built
// binary runs as the plugin with the case's stdin and CNI_* variables; the pod comes from a real API
// server; the rules it would restore land in DRY_RUN_FILE_PATH.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import YAML from 'yaml';
import { built, exec } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { CNI_BIN } from './helpers';
import { kubeUnavailable, startKube, tokenKubeconfig } from '../helpers/kube';
import { cases, pluginGolden, rulesByTable } from './conformance';

const skip = !built() ? 'needs the built binary (node build.mjs)' : kubeUnavailable();

t.test('plugin dry run: every case of cases.yaml §10 gives its golden', { skip, timeout: 180_000 }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const runDir = mkdtempSync(path.join(tmpdir(), 'mesh-cni-run-'));
  writeFileSync(path.join(runDir, 'mesh-cni-kubeconfig'), tokenKubeconfig(kube), { mode: 0o600 });

  // The orchestrator only accepts lower-case names; Istio's fixture uses testNS/testPod with a fake client.
  const namespace = 'testns';
  await kube.api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace } });
  const base = cases.pluginBase;
  const conf = JSON.parse(base.cniConfig);
  conf.cni_agent_run_dir = runDir; // where the client configuration is (Istio's test injects a fake client instead)
  const podTemplate = YAML.parse(base.pod);

  // The same pods as Istio's injector writes them (istio-proxy, sidecar.istio.io/*, traffic.sidecar.istio.io/*),
  // which the README promises work: they must give the same goldens.
  const istioNamed = (annotations: Record<string, string>) =>
    Object.fromEntries(Object.entries(annotations).map(([k, v]) => [k.replace('sidecar.mesh.io/', 'sidecar.istio.io/'), v]));
  const variants = [
    ...(cases.plugin as any[]).map((c, i) => ({ c, i, istio: false })),
    ...(cases.plugin as any[]).map((c, i) => ({ c, i, istio: true })),
  ];
  for (const { c, i, istio } of variants) {
    await t.test(`${c.name}${istio ? " (Istio's names)" : ''}`, async (t) => {
      const name = `testpod-${i}${istio ? '-istio' : ''}`;
      const pod = structuredClone(podTemplate);
      pod.metadata = { name, namespace, annotations: istio ? istioNamed(c.annotations) : c.annotations };
      for (const ctr of pod.spec.containers) ctr.image = 'example.invalid/app';
      const proxy = pod.spec.containers[1];
      if (istio) proxy.name = 'istio-proxy';
      proxy.env = Object.entries(c.proxyEnv ?? {}).map(([k, v]) => ({ name: k, value: v }));
      if (c.runAsUser !== undefined) proxy.securityContext.runAsUser = c.runAsUser;
      if (c.runAsGroup !== undefined) proxy.securityContext.runAsGroup = c.runAsGroup;
      await kube.api.request('POST', `/api/v1/namespaces/${namespace}/pods`, pod);

      const out = path.join(runDir, `${c.name}.txt`);
      writeFileSync(out, '');
      const r = await exec(CNI_BIN.file, [...CNI_BIN.args], {
        input: JSON.stringify(conf),
        env: {
          PATH: process.env.PATH,
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: base.args.containerID,
          CNI_NETNS: base.args.netns,
          CNI_IFNAME: base.args.ifName,
          CNI_PATH: base.args.path,
          CNI_ARGS: `K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}`,
          DRY_RUN_FILE_PATH: out,
        },
      });
      t.equal(r.code, 0, `plugin exit code (stderr: ${r.stderr.slice(-2000)})`);
      // A chained plugin passes the previous result on, in the configuration's version (1.0.0: no ip version).
      t.same(JSON.parse(r.stdout), {
        cniVersion: '1.0.0',
        interfaces: [{ name: 'eth0', sandbox: '/tmp' }],
        ips: [{ interface: 0, address: '10.0.0.2/24', gateway: '10.0.0.1' }],
        dns: {},
      });
      const got = rulesByTable(readFileSync(out, 'utf8'));
      const want = rulesByTable(pluginGolden(c.golden));
      t.ok(Object.keys(got).length > 0, 'rules were generated');
      t.same(got, want, `rules equal ${c.golden}`);
    });
  }
});

t.test("the README's ADD runs as printed, and its rules are the mesh-iptables command it names", { skip, timeout: 120_000 }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const runDir = mkdtempSync(path.join(tmpdir(), 'mesh-cni-readme-'));
  writeFileSync(path.join(runDir, 'mesh-cni-kubeconfig'), tokenKubeconfig(kube), { mode: 0o600 });
  await kube.api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'demo' } });
  const pod = YAML.parse(cases.pluginBase.pod);
  pod.metadata = { name: 'httpbin-0', namespace: 'demo', annotations: { 'sidecar.mesh.io/status': '{}' } };
  for (const ctr of pod.spec.containers) ctr.image = 'example.invalid/app';
  await kube.api.request('POST', '/api/v1/namespaces/demo/pods', pod);

  const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const block = /An ADD\s+as the runtime runs it[^\n]*\n\n```sh\n([\s\S]*?)```/.exec(readme)?.[1];
  t.ok(block, 'the README shows an ADD');
  if (!block) return;
  const rules = path.join(runDir, 'rules.txt');
  // only the folders of this machine change: the run dir holding the client configuration, and the output
  const script = block.replaceAll('/var/run/mesh-cni', runDir).replaceAll('/tmp/rules.txt', rules).split('\n');
  const add = script.slice(0, script.findIndex((l) => l.includes('dist/mesh-cni')) + 1).join('\n');
  const r = await exec('bash', ['-eo', 'pipefail', '-c', add], { cwd: REPO, env: { PATH: process.env.PATH } });
  t.equal(r.code, 0, r.stderr);
  t.same(JSON.parse(r.stdout), { cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }], dns: {} }, 'the previous result handed on');
  const iptables = script.find((l) => l.startsWith('dist/pilot-agent mesh-iptables'))!;
  const same = await exec('bash', ['-c', iptables], { cwd: REPO, env: { PATH: process.env.PATH } });
  t.equal(same.code, 0, same.stderr);
  t.same(rulesByTable(readFileSync(rules, 'utf8')), rulesByTable(same.stdout), 'the plugin wrote the rules of the mesh-iptables command');
  t.same(rulesByTable(same.stdout), rulesByTable(pluginGolden('basic.txt.golden')), "and they are Istio's golden for such a pod");
  // with DNS capture (the proxy's MESH_META_DNS_CAPTURE=true), as the README says: the variable and --capture-all-dns
  const dns = await exec('bash', ['-c', `MESH_META_DNS_CAPTURE=true ${iptables} --capture-all-dns`], { cwd: REPO, env: { PATH: process.env.PATH } });
  t.same(rulesByTable(dns.stdout), rulesByTable(pluginGolden('dns.txt.golden')), "--capture-all-dns gives Istio's DNS golden");
});
