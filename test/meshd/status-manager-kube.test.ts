// The status manager (Istio's pilot/pkg/status WorkerPool) against a real Kubernetes API server: a
// status pushed again while its first write is in flight is written once more, with the latest value,
// by the same worker (no busy loop); a status computed for an older generation is not written; a status
// equal to the live one costs no write (the resourceVersion stays); an object that is gone is skipped.
import t from 'tap';
import { createOrchClient } from '../../src/config/orch';
import { StatusManager } from '../../src/meshd/status-manager';
import { type Kube, namespace, startKube, requireKube } from '../helpers/kube';

requireKube();

const NS = 'team-a';
const VS = `/apis/networking.mesh.io/v1/namespaces/${NS}/virtualservices`;

let kube: Kube;
t.before(async () => {
  kube = await startKube(t, { crds: 'mesh', controllerManager: false });
  await kube.api.create('/api/v1/namespaces', namespace(NS));
  await kube.api.create(VS, {
    apiVersion: 'networking.mesh.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'web', namespace: NS },
    spec: { hosts: ['web.example.com'], http: [{ route: [{ destination: { host: 'web' } }] }] },
  });
});
t.teardown(() => kube?.api.close());

const messages = (code: string) => ({
  observedGeneration: '1',
  validationMessages: [
    { documentationUrl: `https://mesh.io/v1.26/docs/reference/config/analysis/${code.toLowerCase()}/`, level: 'ERROR', type: { code } },
  ],
});

/** `idle()`, or a failure after `ms` (a worker that spins would never let it resolve). */
async function settled(sm: StatusManager, ms = 15_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([sm.idle(), new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('status manager did not settle')), ms)))]);
  clearTimeout(timer);
}

t.test('status writes: latest value wins, stale generations and unchanged status are skipped', async (t) => {
  const client = await createOrchClient({ orchconfig: kube.kubeconfig, qps: -1 });
  t.teardown(() => client.close());
  const sm = new StatusManager(client, 100);
  const path = `${VS}/web`;

  // Two pushes in one turn: the first is being written when the second arrives.
  sm.push({ path, generation: 1 }, () => messages('IST0101'));
  sm.push({ path, generation: 1 }, () => messages('IST0132'));
  await settled(sm);
  t.same((await kube.api.get(path)).status, messages('IST0132'), 'the latest status is what stays');
  t.equal(sm.writes, 2, 'each value written once');

  const rv = (await kube.api.get(path)).metadata.resourceVersion;
  sm.push({ path, generation: 1 }, () => messages('IST0132'));
  await settled(sm);
  t.equal(sm.writes, 2, 'an unchanged status is not written');
  const fresh = new StatusManager(client, 100);
  fresh.push({ path, generation: 1 }, (live) => ({ ...(live as object) }));
  await settled(fresh);
  t.equal(fresh.writes, 0, 'nor by a manager that has to read the live status to know');
  t.equal((await kube.api.get(path)).metadata.resourceVersion, rv, 'the resourceVersion stays');

  sm.push({ path, generation: 7 }, () => messages('IST0101'));
  await settled(sm);
  t.equal(sm.writes, 2, 'a status computed for another generation is not written');
  t.same((await kube.api.get(path)).status, messages('IST0132'));

  sm.push({ path: `${VS}/gone`, generation: 1 }, () => messages('IST0101'));
  await settled(sm);
  t.equal(sm.writes, 2, 'an object that is gone is skipped');

  await sm.stop();
  await fresh.stop();
});
