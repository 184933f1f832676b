// Conformance §11/§12 end to end: the built install-cni with race repair on, against a real API server,
// over the pods of cases.yaml. Broken pods (validation init container exited 126, or with the expected
// termination message) are labelled or deleted as the flags say, each with an Event and a count in
// mesh_cni_repair_pods_repaired_total; the others are left alone.
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST } from '../helpers/binary';
import { kubePort, kubeUnavailable, startKube, tokenKubeconfig, type Kube } from '../helpers/kube';
import { createNetns, forwardIntoNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { cases, repairPodCase } from './conformance';
import { waitFor } from '../helpers/wait';

const skip = !built() ? 'needs the built binary (node build.mjs)' : netnsUnavailable() || kubeUnavailable();

/** The pod of a cases.yaml name or detect(name, message, code) form, as a Pod and its status. */
function podSpec(spec: string): { pod: any; status: any } {
  const p = repairPodCase(spec);
  const init = p.initContainerStatus;
  // The API server requires these fields of a status it stores; they do not take part in the predicate.
  const complete = (s: any) => ({ ready: false, restartCount: 0, image: 'example.invalid/proxy', imageID: '', ...s });
  // A terminated state needs a reason or exit code the server accepts; keep the case's values.
  const fixTerminated = (st: any) => (st?.terminated ? { terminated: { exitCode: 0, ...st.terminated } } : st);
  const initStatuses = init.name
    ? [
        complete({
          ...init,
          ...(init.state ? { state: fixTerminated(init.state) } : {}),
          ...(init.lastState ? { lastState: fixTerminated(init.lastState) } : {}),
        }),
      ]
    : [];
  return {
    pod: {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { annotations: p.annotations ?? {}, labels: p.labels ?? {} },
      spec: {
        ...(p.nodeName ? { nodeName: p.nodeName } : {}),
        initContainers: [{ name: init.name || 'mesh-validation', image: 'example.invalid/proxy' }],
        containers: [{ name: 'payload-container', image: 'example.invalid/app' }],
      },
    },
    status: {
      initContainerStatuses: initStatuses,
      containerStatuses: [complete({ name: 'payload-container', state: { waiting: { reason: 'PodInitializing' } } })],
    },
  };
}

let nsCounter = 0;

/** A fresh namespace holding the given pods (k8s names: case-<i>); returns the namespace and name map. */
async function makePods(kube: Kube, specs: string[]): Promise<{ ns: string; names: Map<string, string> }> {
  const ns = `repair-${process.pid}-${++nsCounter}`;
  await kube.api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const names = new Map<string, string>();
  for (const [i, spec] of specs.entries()) {
    const name = `case-${i}`;
    names.set(spec, name);
    const { pod, status } = podSpec(spec);
    pod.metadata.name = name;
    pod.metadata.namespace = ns;
    await kube.api.request('POST', `/api/v1/namespaces/${ns}/pods`, pod);
    await kube.api.request('PATCH', `/api/v1/namespaces/${ns}/pods/${name}/status`, { status }, 'application/merge-patch+json');
  }
  return { ns, names };
}

/** install-cni with repair flags, in a namespace of its own (for :8000) that reaches the API server. */
async function runRepair(t: Test, kube: Kube, namespace: string, flags: string[], kubeconfig = kube.kubeconfig) {
  const ns = createNetns(t, 'mesh-rep');
  await forwardIntoNetns(t, ns, kubePort(kube));
  const root = mkdtempSync(path.join(tmpdir(), 'mesh-host-'));
  const dirs = ['net', 'bin', 'run', 'sa'].map((d) => path.join(root, d));
  for (const d of dirs) mkdirSync(d);
  writeFileSync(path.join(root, 'sa', 'token'), 'token');
  const child = spawnIn(
    ns,
    path.join(DIST, 'install-cni'),
    [
      '--mounted-cni-net-dir',
      dirs[0]!,
      '--cni-agent-run-dir',
      dirs[2]!,
      '--skip-tls-verify',
      '--ctrlz_port',
      '0',
      '--repair-enabled',
      '--repair-field-selectors',
      `metadata.namespace=${namespace}`,
      ...flags,
    ],
    {
      env: {
        PATH: process.env.PATH,
        KUBECONFIG: kubeconfig,
        KUBERNETES_SERVICE_HOST: '10.96.0.1',
        KUBERNETES_SERVICE_PORT: '443',
        ORCH_SERVICE_ACCOUNT_PATH: dirs[3],
        HOST_CNI_BIN_DIR: dirs[1],
      },
    },
  );
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
  });
  const repaired = () => {
    const body = httpGetIn(ns, 'http://127.0.0.1:15014/metrics').body;
    const out: Record<string, number> = {};
    // Keyed `<type>/<result>` whatever order the exposition puts the labels in.
    for (const m of body.matchAll(/^mesh_cni_repair_pods_repaired_total\{([^}]*)\} (\d+)/gm)) {
      const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
      out[`${labels.type}/${labels.result}`] = Number(m[2]);
    }
    return out;
  };
  return { output: () => out, repaired, exited };
}

/**
 * Pods repaired in one pass, as Istio's table counts them. (Live, the label a success adds comes back as
 * an update of the pod, which Istio's controller, and ours, then counts once more as a skip.)
 */
const firstPass = (m: Record<string, number>) =>
  (m['label/success'] ?? 0) + (m['delete/success'] ?? 0) + (m['label/fail'] ?? 0) + (m['delete/fail'] ?? 0);

t.test('race repair against a real API server', { skip, timeout: 600_000 }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });

  await t.test('§11 which pods are broken (label mode shows the verdict)', async (t) => {
    // One installer per distinct configuration; each case's pod in that configuration's namespace.
    const groups = new Map<string, any[]>();
    for (const c of cases.repairFilter) {
      const key = JSON.stringify(c.config);
      groups.set(key, [...(groups.get(key) ?? []), c]);
    }
    for (const [key, list] of groups) {
      const config = JSON.parse(key);
      const { ns, names } = await makePods(
        kube,
        list.map((c) => c.pod),
      );
      const inst = await runRepair(t, kube, ns, [
        '--repair-label-pods',
        '--repair-sidecar-annotation',
        config.sidecarAnnotation ?? '',
        '--repair-init-container-name',
        config.initContainerName ?? '',
        '--repair-init-container-exit-code',
        String(config.initExitCode ?? 0),
        '--repair-init-container-termination-message',
        config.initTerminationMsg ?? '',
      ]);
      const want = list.filter((c) => c.want).length;
      await waitFor(
        () => `labels for ${key}: ${inst.output().slice(-3000)}`,
        () => (inst.repaired()['label/success'] ?? 0) >= want,
        { timeoutMs: 60_000, intervalMs: 500 },
      );
      await new Promise((r) => setTimeout(r, 1000)); // give the others time to be (wrongly) labelled
      for (const c of list) {
        const pod = await kube.api.request('GET', `/api/v1/namespaces/${ns}/pods/${names.get(c.pod)}`);
        t.equal(pod.metadata.labels?.['cni.mesh.io/uninitialized'] === 'true', c.want, c.name);
      }
      t.equal(inst.repaired()['label/success'] ?? 0, want, `${key}: one repair per broken pod`);
    }
  });

  const actionConfig = [
    '--repair-sidecar-annotation',
    '',
    '--repair-init-container-name',
    'mesh-validation',
    '--repair-init-container-exit-code',
    '126',
    '--repair-init-container-termination-message',
    'Died for some reason',
  ];

  await t.test('§12 label broken pods', async (t) => {
    for (const c of cases.repairLabel) {
      await t.test(c.name, async (t) => {
        const { ns, names } = await makePods(kube, c.pods);
        const inst = await runRepair(t, kube, ns, [
          ...actionConfig,
          '--repair-label-pods',
          '--repair-broken-pod-label-key',
          c.labelKey,
          '--repair-broken-pod-label-value',
          c.labelValue,
        ]);
        const tag = c.wantTags ? `${c.wantTags.type}/${c.wantTags.result}` : '';
        await waitFor(
          () => inst.output().slice(-3000),
          () => /initial installation complete/.test(inst.output()) && (!tag || (inst.repaired()[tag] ?? 0) >= c.wantRepaired),
          { timeoutMs: 60_000, intervalMs: 500 },
        );
        await new Promise((r) => setTimeout(r, 1500));
        for (const [spec, label] of Object.entries(c.wantLabels as Record<string, string>)) {
          const pod = await kube.api.request('GET', `/api/v1/namespaces/${ns}/pods/${names.get(spec)}`);
          const value = pod.metadata.labels?.[c.labelKey];
          t.equal(value === undefined ? '' : `${c.labelKey}=${value}`, label, `${spec} label`);
        }
        const repaired = inst.repaired();
        if (tag) t.equal(repaired[tag], c.wantRepaired, `repaired ${c.wantRepaired} with ${tag}`);
        if (c.wantTags?.result !== 'skip') t.equal(firstPass(repaired), c.wantRepaired, 'repair count');
        t.notOk(repaired['label/fail'], 'no failures');
        if (c.wantTags?.result === 'success') {
          const events = await kube.api.request('GET', `/api/v1/namespaces/${ns}/events`);
          t.ok(
            events.items.some(
              (e: any) =>
                e.reason === 'LabelBrokenPod' &&
                e.type === 'Warning' &&
                e.source?.component === 'cni-repair' &&
                e.message === 'pod detected as broken, labeled',
            ),
            'a LabelBrokenPod Event was written',
          );
        }
      });
    }
  });

  await t.test('§12 delete broken pods', async (t) => {
    for (const c of cases.repairDelete) {
      await t.test(c.name, async (t) => {
        const { ns, names } = await makePods(kube, c.pods);
        const inst = await runRepair(t, kube, ns, [...actionConfig, '--repair-delete-pods']);
        await waitFor(
          () => inst.output().slice(-3000),
          () => /initial installation complete/.test(inst.output()) && firstPass(inst.repaired()) >= c.wantRepaired,
          { timeoutMs: 60_000, intervalMs: 500 },
        );
        await new Promise((r) => setTimeout(r, 1500));
        const list = await kube.api.request('GET', `/api/v1/namespaces/${ns}/pods`);
        // A pod on a node waits for its kubelet to finish the deletion (there is none here): it counts as deleted once marked.
        const remaining = list.items
          .filter((p: any) => !p.metadata.deletionTimestamp)
          .map((p: any) => p.metadata.name)
          .sort();
        t.same(remaining, c.wantPods.map((s: string) => names.get(s)).sort(), 'the broken pods are deleted, the others stay');
        t.equal(firstPass(inst.repaired()), c.wantRepaired, 'repair count');
        if (c.wantTags) t.equal(inst.repaired()[`${c.wantTags.type}/${c.wantTags.result}`], c.wantRepaired, `tags ${JSON.stringify(c.wantTags)}`);
        if (c.wantRepaired > 0) {
          const events = await kube.api.request('GET', `/api/v1/namespaces/${ns}/events`);
          t.ok(
            events.items.some((e: any) => e.reason === 'DeleteBrokenPod' && e.message === 'pod detected as broken, deleted'),
            'a DeleteBrokenPod Event was written',
          );
        }
      });
    }
  });

  await t.test('without the right to label: counted as failures, retried, then given up', async (t) => {
    // A service account that may watch pods but not patch them or write Events (RBAC forbids: a real 403).
    const { ns, names } = await makePods(kube, ['broken-pod-waiting']);
    await kube.api.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts`, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'watcher' },
    });
    await kube.api.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: `${ns}-watcher` },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
    });
    await kube.api.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `${ns}-watcher` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${ns}-watcher` },
      subjects: [{ kind: 'ServiceAccount', name: 'watcher', namespace: ns }],
    });
    const tr = await kube.api.request('POST', `/api/v1/namespaces/${ns}/serviceaccounts/watcher/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    });
    const kubeconfig = path.join(mkdtempSync(path.join(tmpdir(), 'mesh-kc-')), 'kubeconfig');
    writeFileSync(kubeconfig, tokenKubeconfig(kube, kube.api.url, tr.status.token));

    const inst = await runRepair(t, kube, ns, [...actionConfig, '--repair-label-pods'], kubeconfig);
    await waitFor(
      () => inst.output().slice(-3000),
      () => (inst.repaired()['label/fail'] ?? 0) >= 5,
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    await new Promise((r) => setTimeout(r, 1500));
    t.equal(inst.repaired()['label/fail'], 5, 'five attempts, then the pod is dropped until it changes');
    t.notOk(inst.repaired()['label/success'], 'nothing labelled');
    t.match(inst.output(), /Failed to update pod: PATCH \/api\/v1\/namespaces\/[^/]+\/pods\/case-0\/status: 403 Forbidden/);
    t.match(inst.output(), /repair of pod [^ ]+\/case-0 failed 5 times, giving up/);
    const pod = await kube.api.request('GET', `/api/v1/namespaces/${ns}/pods/${names.get('broken-pod-waiting')}`);
    t.notOk(pod.metadata.labels?.['cni.mesh.io/uninitialized'], 'the pod is unchanged');
  });
});
