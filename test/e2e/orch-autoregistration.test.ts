// WorkloadEntry auto-registration and health against a real Kubernetes API server (../shared/kube): the built
// `pilot-discovery discovery --orchconfig` and a real `pilot-agent proxy sidecar` of a workload outside the
// cluster (its own network namespace, address 10.88.0.5, MESH_META_AUTO_REGISTER_GROUP, the WorkloadGroup's
// probe as its readinessProbe, as `meshctl x workload entry configure` sets it up). Expected values follow
// Istio 1.26's pilot/pkg/autoregistration: the entry's name `<group>-<ip>`, labels, annotations,
// controlling owner and address; the Healthy condition from the agent's probe and unhealthy entries left out
// of EDS; reconnects update the entry; a disconnect marks it and deletes it after
// PILOT_WORKLOAD_ENTRY_GRACE_PERIOD; the periodic sweep deletes an entry left by a daemon that died; entries
// that are not auto-registered are never touched; the auto_registration_* counters move.
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { kubeUnavailable, type Kube, namespace, type Obj, service, startKube } from '../helpers/kube';
import { createNetns, forwardIntoNetns, must } from '../helpers/netns';
import { endpointsOf, EDS, sidecarNode, XdsWatch } from '../helpers/xds';
import { meshPodsUnavailable, opensslIdentities, startIn, startSidecar } from '../../scripts/lib/mesh-pods.mjs';
import { metricValue } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

const skip = meshPodsUnavailable({ openssl: true }) || kubeUnavailable();
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

{
  const NS = 'vm';
  const GROUP = 'vm-app';
  const IP = '10.88.0.5';
  const ENTRY = `${GROUP}-${IP}`; // Istio: <group>-<first IP> (no network)
  const ENTRIES = `/apis/networking.istio.io/v1/namespaces/${NS}/workloadentries`;
  const GRACE_MS = 3000;
  const CLUSTER = `outbound|80||${GROUP}.${NS}.svc.cluster.local`;
  const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

  let kube: Kube;
  let daemon: RunningDaemon;

  const entry = (name = ENTRY) => kube.api.find(`${ENTRIES}/${name}`);
  const metric = async (name: string) => metricValue(await (await fetch(`http://${daemon.monitoring}/metrics`)).text(), name) ?? 0;

  t.test('a workload outside the cluster registers, is health-checked, reconnects and is cleaned up', { skip, timeout: 300_000 }, async (t) => {
    kube = await startKube(t, { controllerManager: false });
    await kube.api.create('/api/v1/namespaces', namespace('mesh-system'));
    await kube.api.create('/api/v1/namespaces', namespace(NS));
    await kube.api.create(`/api/v1/namespaces/${NS}/services`, service(NS, GROUP, { selector: { app: GROUP } }));
    daemon = await startDaemon(['--orchconfig', kube.kubeconfig], {
      POD_NAME: 'meshd-a',
      PILOT_WORKLOAD_ENTRY_GRACE_PERIOD: `${GRACE_MS}ms`,
      // the agent connects on the plaintext port, which carries no identity to validate
      MESH_WORKLOAD_ENTRY_VALIDATE_IDENTITY: 'false',
      UNSAFE_ENABLE_ADMIN_ENDPOINTS: 'true',
    });
    t.teardown(async () => {
      await daemon?.stop();
      kube?.api.close();
    });
    const group = await kube.api.create(`/apis/networking.istio.io/v1/namespaces/${NS}/workloadgroups`, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'WorkloadGroup',
      metadata: { name: GROUP, namespace: NS },
      spec: {
        metadata: { labels: { app: GROUP, tier: 'vm' }, annotations: { team: 'payments' } },
        template: { serviceAccount: 'vm-sa', labels: { version: 'v1' } },
        probe: { periodSeconds: 1, httpGet: { path: '/ready', port: 8080 } },
      },
    });
    // Entries the controller must leave alone, and one a dead daemon left behind (disconnected an hour ago).
    const hourAgo = new Date(Date.now() - 3600_000).toISOString();
    const manual = await kube.api.create(ENTRIES, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'WorkloadEntry',
      metadata: { name: 'manual', namespace: NS, annotations: { 'mesh.io/disconnectedAt': hourAgo } },
      spec: { address: '10.88.0.99', labels: { app: 'other' } },
    });
    await kube.api.create(ENTRIES, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'WorkloadEntry',
      metadata: {
        name: 'stale',
        namespace: NS,
        annotations: { 'mesh.io/autoRegistrationGroup': GROUP, 'mesh.io/workloadController': 'meshd-dead', 'mesh.io/disconnectedAt': hourAgo },
      },
      spec: { address: '10.88.0.98', labels: { app: 'other' } },
    });

    // The VM: its address, the application (healthy until the flag file exists), and the agent.
    const dir = tempDir(t, 'mesh-wle-');
    fs.chmodSync(dir, 0o755); // the agent runs as the proxy user
    const vm = createNetns(t, 'mesh-wle');
    must(['ip', '-n', vm, 'addr', 'add', `${IP}/32`, 'dev', 'lo']);
    const sick = path.join(dir, 'sick');
    const app = `require('http').createServer((q,s)=>{s.statusCode=require('fs').existsSync(${JSON.stringify(sick)})?503:200;s.end()}).listen(8080,'0.0.0.0',()=>console.log('listening'))`;
    await startIn(t, vm, [process.execPath, '-e', app], { ready: /listening/, what: 'the application' });
    const grpcPort = Number(daemon.grpc.slice(daemon.grpc.lastIndexOf(':') + 1));
    await forwardIntoNetns(t, vm, grpcPort);
    // the workload's certificate (a VM gets one from the mesh CA at bootstrap; here it is mounted)
    // (issued by openssl, not our CA, so that a CA bug the engine also accepts cannot cancel out)
    const id = `spiffe://cluster.local/ns/${NS}/sa/vm-sa`;
    const issued = opensslIdentities(path.join(dir, 'identity'), [id]);
    const certs = { ...issued.certs[id]!, root: issued.root };
    const proxyConfig = { binaryPath: '/nonexistent/envoy', terminationDrainDuration: '1s', readinessProbe: group.spec.probe };
    const startAgent = () =>
      startSidecar(t, {
        ns: vm,
        dist: DIST,
        home: path.join(dir, 'proxy'),
        discoveryAddress: `127.0.0.1:${grpcPort}`,
        pod: { name: 'vm-1', namespace: NS, ip: IP, serviceAccount: 'vm-sa' },
        certs,
        env: { MESH_META_AUTO_REGISTER_GROUP: GROUP, PROXY_CONFIG: JSON.stringify(proxyConfig) },
      });
    let agent = await startAgent();
    const interesting = (out: string) =>
      out
        .split('\n')
        .filter((l) => /health|wle|xdsproxy|error/i.test(l))
        .slice(-40)
        .join('\n');
    const logs = () => `--- agent:\n${interesting(agent.out())}\n--- discovery:\n${interesting(daemon.log())}`;

    // 1. The entry, as Istio's workloadEntryFromGroup + setConnectMeta make it.
    let we: Obj | undefined;
    await waitFor(
      () => `no WorkloadEntry ${ENTRY}\n${logs()}`,
      async () => !!(we = await entry()),
      { timeoutMs: 30_000 },
    );
    const labels = { version: 'v1', app: GROUP, tier: 'vm' };
    t.same(we!.metadata.labels, labels, 'labels: template, then the group metadata');
    t.match(we!.metadata.annotations, {
      'mesh.io/autoRegistrationGroup': GROUP,
      team: 'payments',
      'proxy.mesh.io/health-checks-enabled': 'true',
      'mesh.io/workloadController': 'meshd-a',
      'mesh.io/connectedAt': RFC3339,
    });
    t.notOk('mesh.io/disconnectedAt' in we!.metadata.annotations);
    t.same(we!.metadata.ownerReferences, [
      { apiVersion: 'networking.istio.io/v1', kind: 'WorkloadGroup', name: GROUP, uid: group.metadata.uid, controller: true },
    ]);
    t.same(we!.spec, { address: IP, labels, serviceAccount: 'vm-sa' }, 'the address is the proxy IP; the template otherwise');

    // 2. Health: the probe passes → Healthy True → the Service serves the VM's address.
    const eds = new XdsWatch(daemon.grpc, sidecarNode(NS), EDS, [CLUSTER]);
    t.teardown(() => eds.close());
    await waitFor(
      () => `never Healthy\n${logs()}`,
      async () => (await entry())?.status?.conditions?.some((c: Obj) => c.type === 'Healthy' && c.status === 'True'),
      { timeoutMs: 30_000 },
    );
    await eds.until(
      (w) => endpointsOf(w.resources.get(CLUSTER)).some((e) => e.address === IP && e.port === 8080 && e.health === 1),
      `${IP}:8080 HEALTHY in EDS`,
    );
    t.same(
      endpointsOf(eds.resources.get(CLUSTER)).map((e) => e.address),
      [IP],
      'only the VM (manual and stale entries are not app=vm-app)',
    );

    // The application fails its probe: Healthy False with the probe's reason, and the endpoint leaves EDS.
    fs.writeFileSync(sick, '');
    let cond: Obj | undefined;
    await waitFor(
      () => `never unhealthy: ${JSON.stringify(cond)}\n${logs()}`,
      async () => (cond = (await entry())?.status?.conditions?.find((c: Obj) => c.type === 'Healthy'))?.status === 'False',
      { timeoutMs: 30_000 },
    );
    t.equal(cond!.message, 'status code was not from [200,400), bad code 503', "the agent's probe message as Istio's agent words it");
    t.match(cond!.lastProbeTime, RFC3339);
    await eds.until((w) => !endpointsOf(w.resources.get(CLUSTER)).some((e) => e.address === IP), 'the unhealthy endpoint gone from EDS');
    fs.rmSync(sick);
    await eds.until((w) => endpointsOf(w.resources.get(CLUSTER)).some((e) => e.address === IP), 'back in EDS once healthy again');

    // 3. A reconnect (the daemon drops the stream; the agent reconnects at once) updates the entry, which stays.
    const before = (await entry())!.metadata.annotations['mesh.io/connectedAt'];
    const r = await fetch(`http://${daemon.http}/debug/force_disconnect?proxyID=vm-1.${NS}`);
    t.equal(r.status, 200, await r.text());
    await waitFor(
      () => `connectedAt not updated\n${logs()}`,
      async () => {
        const a = (await entry())?.metadata.annotations ?? {};
        return Date.parse(a['mesh.io/connectedAt'] ?? '') > Date.parse(before) && !('mesh.io/disconnectedAt' in a);
      },
      { timeoutMs: 20_000 },
    );
    await new Promise((res) => setTimeout(res, GRACE_MS + 1000));
    t.ok(await entry(), 'a workload that reconnected within the grace period keeps its entry');
    t.ok((await metric('auto_registration_updates_total')) >= 1, 'auto_registration_updates_total counted the reconnect');

    // 4. The workload goes away: the entry is marked disconnected, then deleted after the grace period.
    agent.child.kill('SIGKILL');
    let disconnectedAt: string | undefined;
    await waitFor(
      () => `never marked disconnected\n${logs()}`,
      async () => !!(disconnectedAt = (await entry())?.metadata.annotations['mesh.io/disconnectedAt']),
      { timeoutMs: 20_000 },
    );
    t.match(disconnectedAt, RFC3339);
    t.notOk('mesh.io/connectedAt' in (await entry())!.metadata.annotations, 'connectedAt removed');
    await waitFor(
      () => `never deleted\n${logs()}`,
      async () => !(await entry()),
      { timeoutMs: 20_000 },
    );
    const goneAfter = Date.now() - Date.parse(disconnectedAt!);
    t.ok(goneAfter >= GRACE_MS - 50, `deleted ${goneAfter}ms after the disconnect (grace period ${GRACE_MS}ms)`);
    t.ok((await metric('auto_registration_unregister_total')) >= 1, 'auto_registration_unregister_total');
    await eds.until((w) => !endpointsOf(w.resources.get(CLUSTER)).some((e) => e.address === IP), 'the deleted entry gone from EDS');

    // 5. The periodic sweep (every 10 × the grace period) deletes what a dead daemon left behind.
    await waitFor(
      () => `the stale entry was never cleaned up\n${logs()}`,
      async () => !(await entry('stale')),
      { timeoutMs: 10 * GRACE_MS + 20_000 },
    );
    // logged once the API server answered the delete (the test may see the object gone first)
    await waitFor(logs, () => /cleaned up auto-registered WorkloadEntry vm\/stale periodic:true/.test(daemon.log()), { timeoutMs: 10_000 });
    t.pass('the sweep (periodic:true) deleted it');
    t.equal(await metric('auto_registration_deletes_total'), 2, 'auto_registration_deletes_total: the grace-period deletion and the sweep');
    t.equal(await metric('auto_registration_success_total'), 1, 'auto_registration_success_total: one entry created');

    // 6. The entry that is not auto-registered was never written.
    t.equal((await entry('manual'))?.metadata.resourceVersion, manual.metadata.resourceVersion, 'the manual entry is untouched');

    // 7. A new connection creates the entry again.
    agent = await startAgent();
    await waitFor(
      () => `not registered again\n${logs()}`,
      async () => !!(await entry()),
      { timeoutMs: 30_000 },
    );
    t.equal(await metric('auto_registration_success_total'), 2);

    // 8. A health-checked entry that is not auto-registered (WORKLOAD_ENTRY metadata): the daemon becomes its
    // controller on connect and marks it on disconnect, but never deletes it.
    await kube.api.create(ENTRIES, {
      apiVersion: 'networking.istio.io/v1',
      kind: 'WorkloadEntry',
      metadata: { name: 'db-1', namespace: NS, annotations: { 'proxy.mesh.io/health-checks-enabled': 'true' } },
      spec: { address: '10.88.0.20', labels: { app: 'db' } },
    });
    const dbNode = sidecarNode(NS, '10.88.0.20', 'db-1');
    await waitFor(
      () => 'db-1 not seen by the daemon',
      () =>
        fetch(`http://${daemon.http}/debug/configz`)
          .then((r) => r.text())
          .then((b) => b.includes('db-1')),
      { timeoutMs: 10_000 },
    );
    const db = new XdsWatch(daemon.grpc, { ...dbNode, metadata: { ...dbNode.metadata, WORKLOAD_ENTRY: 'db-1' } }, EDS, [CLUSTER]);
    t.teardown(() => db.close());
    await waitFor(logs, async () => (await entry('db-1'))?.metadata.annotations['mesh.io/workloadController'] === 'meshd-a', { timeoutMs: 20_000 });
    const dbAnn = (await entry('db-1'))!.metadata.annotations;
    t.match(dbAnn['mesh.io/connectedAt'], RFC3339);
    t.notOk('mesh.io/autoRegistrationGroup' in dbAnn, 'not made auto-registered');
    db.close();
    await waitFor(logs, async () => 'mesh.io/disconnectedAt' in ((await entry('db-1'))?.metadata.annotations ?? {}), { timeoutMs: 20_000 });
    await new Promise((res) => setTimeout(res, GRACE_MS + 1000));
    t.ok(await entry('db-1'), 'a health-checked entry without a health condition is never deleted');
    t.equal(await metric('auto_registration_success_total'), 2, 'not counted as an auto-registration');

    // 9. By default (MESH_WORKLOAD_ENTRY_VALIDATE_IDENTITY=true) registration needs a verified identity, which
    // the plaintext port does not carry: the stream is refused with Istio's message and no entry is made.
    const strict = await startDaemon(['--orchconfig', kube.kubeconfig], { POD_NAME: 'meshd-b' });
    t.teardown(() => strict.stop());
    const vmNode = sidecarNode(NS, '10.88.0.30', 'vm-2');
    const refused = new XdsWatch(strict.grpc, { ...vmNode, metadata: { ...vmNode.metadata, AUTO_REGISTER_GROUP: GROUP } }, EDS, [CLUSTER]);
    t.teardown(() => refused.close());
    await waitFor(
      () => `not refused\n${strict.log().slice(-3000)}`,
      () => refused.ended !== undefined,
      { timeoutMs: 30_000 },
    );
    t.match(refused.ended, { details: 'registration of WorkloadEntry requires a verified identity' });
    t.notOk(await entry(`${GROUP}-10.88.0.30`), 'no entry for the unverified proxy');
  });
}
