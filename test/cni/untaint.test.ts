// The node untaint controller of the built discovery daemon against a real API server: a node keeps
// cni.mesh.io/not-ready until the mesh-cni node agent pod on it is Ready; then only that taint goes.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { kubeUnavailable, startKube } from '../helpers/kube';
import { hasNotReadyTaint, untaintPatch } from '../../src/meshd/untaint';
import { waitFor } from '../helpers/wait';

const skip = !built() ? 'needs the built binary (node build.mjs)' : kubeUnavailable();

t.test('the removal patch only removes our taint, and only from the taints it read', async (t) => {
  const node = {
    metadata: { name: 'n' },
    spec: {
      taints: [
        { key: 'a', effect: 'NoSchedule' },
        { key: 'cni.mesh.io/not-ready', effect: 'NoSchedule' },
      ],
    },
  };
  t.ok(hasNotReadyTaint(node));
  t.same(untaintPatch(node), [
    { op: 'test', path: '/spec/taints', value: node.spec.taints },
    { op: 'replace', path: '/spec/taints', value: [{ key: 'a', effect: 'NoSchedule' }] },
  ]);
  t.equal(untaintPatch({ metadata: { name: 'n' }, spec: { taints: [{ key: 'a' }] } }), undefined, 'nothing to do without our taint');
});

t.test('PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS: taint removed once the CNI pod on the node is Ready', { skip, timeout: 180_000 }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const taint = { key: 'cni.mesh.io/not-ready', value: 'true', effect: 'NoSchedule' };
  const other = { key: 'example.com/dedicated', value: 'db', effect: 'NoSchedule' };
  for (const name of ['node-a', 'node-b']) {
    await kube.api.request('POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name }, spec: { taints: [other, taint] } });
  }
  await kube.api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } });
  const cniPod = (name: string, node: string, labels: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: 'mesh-system', labels },
    spec: { nodeName: node, containers: [{ name: 'install-cni', image: 'example.invalid/mesh' }] },
  });
  await kube.api.request('POST', '/api/v1/namespaces/mesh-system/pods', cniPod('mesh-cni-node-a', 'node-a', { 'k8s-app': 'mesh-cni-node' }));
  // A Ready pod on node-b that is not the CNI agent does not count.
  await kube.api.request('POST', '/api/v1/namespaces/mesh-system/pods', cniPod('other-b', 'node-b', { app: 'other' }));
  const ready = { status: { conditions: [{ type: 'Ready', status: 'True' }] } };
  await kube.api.request('PATCH', '/api/v1/namespaces/mesh-system/pods/other-b/status', ready, 'application/merge-patch+json');

  const d = await startDaemon(['--orchconfig', kube.kubeconfig, '--configDir', mkdtempSync(path.join(tmpdir(), 'mesh-cfg-')), '--registries', ''], {
    PILOT_ENABLE_NODE_UNTAINT_CONTROLLERS: 'true',
  });
  t.teardown(() => d.stop());
  const taintsOf = async (n: string) => ((await kube.api.request('GET', `/api/v1/nodes/${n}`)).spec.taints ?? []).map((x: { key: string }) => x.key);
  await waitFor(d.log, () => /starting node untainter/.test(d.log()), { timeoutMs: 10_000 });
  await new Promise((r) => setTimeout(r, 1500));
  // (The API server adds node.kubernetes.io/not-ready itself to a node that never reported.)
  const before = await taintsOf('node-a');
  t.ok(before.includes(taint.key) && before.includes(other.key), 'kept while the CNI pod is not Ready');
  const beforeB = await taintsOf('node-b');

  await kube.api.request('PATCH', '/api/v1/namespaces/mesh-system/pods/mesh-cni-node-a/status', ready, 'application/merge-patch+json');
  await waitFor(
    () => `node-a untainted: ${d.log().slice(-2000)}`,
    async () => !(await taintsOf('node-a')).includes(taint.key),
    { timeoutMs: 10_000 },
  );
  t.same(
    await taintsOf('node-a'),
    before.filter((k: string) => k !== taint.key),
    'only the CNI readiness taint is removed',
  );
  t.same(await taintsOf('node-b'), beforeB, 'a node without a ready CNI pod keeps it');
  t.ok(beforeB.includes(taint.key));
  // The line follows the PATCH's answer, which the API server may show to the test first.
  await waitFor(d.log, () => /removed readiness taint cni\.mesh\.io\/not-ready from node node-a/.test(d.log()), { timeoutMs: 5_000 });
  t.match(d.log(), /leader election lock obtained: mesh-node-untaint/, "run under Istio's node-untaint election");
});
