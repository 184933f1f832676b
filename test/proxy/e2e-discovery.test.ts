// End to end with the real daemon: the built `pilot-discovery discovery --configDir` serves a Gateway,
// VirtualService and ServiceEntries to the engine (in-process, bootstrapped like a router), which routes
// real traffic to two backends. A file edit changes routing without restarting the proxy; killing the
// daemon leaves routing working; restarting it reconnects.
import t from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { makeCa, sdsCluster, startSds } from './sds';
import { adminGet, adsBootstrap, backend, request, startProxy, statValue } from './helpers';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';
import { gatewayDoc, serviceEntryDoc, yamlDocs } from '../helpers/mesh-yaml';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function virtualService(defaultHost: string): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: mesh-system}
spec:
  hosts: [shop.example.com]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /b/}}]
    route: [{destination: {host: b.demo.svc.cluster.local, port: {number: 80}}}]
  - match: [{headers: {x-version: {exact: b}}}]
    route: [{destination: {host: b.demo.svc.cluster.local, port: {number: 80}}}]
  - match: [{uri: {prefix: /split}}]
    route:
    - {destination: {host: a.demo.svc.cluster.local, port: {number: 80}}, weight: 50}
    - {destination: {host: b.demo.svc.cluster.local, port: {number: 80}}, weight: 50}
  - route: [{destination: {host: ${defaultHost}.demo.svc.cluster.local, port: {number: 80}}}]
`;
}

t.test('a gateway served by pilot-discovery routes real traffic and follows config edits', async (t) => {
  const dir = tempDir(t, 'mesh-proxy-e2e-');
  const a = await backend('a');
  const b = await backend('b');
  t.teardown(() => Promise.all([a.close(), b.close()]).then(() => undefined));
  const gwPort = await freePort();
  const grpcPort = await freePort();
  writeFileSync(
    path.join(dir, 'services.yaml'),
    yamlDocs(serviceEntryDoc('a', { targetPort: a.port }), serviceEntryDoc('b', { targetPort: b.port })),
  );
  writeFileSync(path.join(dir, 'gateway.yaml'), gatewayDoc(gwPort));
  writeFileSync(path.join(dir, 'vs.yaml'), virtualService('a'));
  const args = ['--configDir', dir, '--grpcAddr', `127.0.0.1:${grpcPort}`];
  let daemon: RunningDaemon | undefined = await startDaemon(args);
  t.teardown(async () => {
    await daemon?.stop();
  });
  const bootstrap = adsBootstrap(daemon.grpc, {
    node: {
      id: 'router~127.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local',
      cluster: 'istio-ingressgateway.mesh-system',
      metadata: { NAMESPACE: 'mesh-system', LABELS: { mesh: 'ingressgateway' }, MESH_VERSION: '1.26.0', INSTANCE_IPS: '127.0.0.1' },
    },
  });
  // like every Istio proxy, the gateway reads its identity from the agent's SDS server (`sds-grpc`): the
  // clusters of MESH_INTERNAL services carry auto-mTLS transport sockets that name it
  const { rootPem, issue } = await makeCa();
  const sds = await startSds(
    path.join(dir, 'sds'),
    rootPem,
    await issue('spiffe://cluster.local/ns/mesh-system/sa/istio-ingressgateway-service-account'),
  );
  t.teardown(() => sds.stop());
  ((bootstrap['static_resources'] as JsonObject)['clusters'] as JsonObject[]).push(sdsCluster(sds.socketPath));
  const proxy = await startProxy(bootstrap);
  t.teardown(() => proxy.close());
  await proxy.engine.initialized;
  const get = (p: string, headers: Record<string, string> = {}) => request(gwPort, p, { host: 'shop.example.com', headers });
  await waitForValue('gateway serves the default route', async () => (await get('/')).body === 'a /', { timeoutMs: 10_000, intervalMs: 20 });
  t.equal((await get('/b/item')).body, 'b /b/item', 'path prefix');
  t.equal((await get('/x', { 'x-version': 'b' })).body, 'b /x', 'header match');
  const hit = new Set<string>();
  for (let i = 0; i < 40 && hit.size < 2; i++) hit.add((await get('/split')).body.split(' ')[0]!);
  t.same([...hit].sort(), ['a', 'b'], 'weighted split');
  const unknown = await request(gwPort, '/', { host: 'nobody.example.com' });
  t.equal(unknown.status, 404, 'unknown host gets 404 from the proxy');

  const dump = await adminGet(proxy, '/config_dump');
  t.equal(dump.status, 200, "config_dump renders the real generators' output (extensions without a schema included)");
  const configs = (JSON.parse(dump.body) as { configs: Array<Record<string, unknown>> }).configs;
  const listeners = configs.find((c) => c['@type'] === 'type.googleapis.com/envoy.admin.v3.ListenersConfigDump') as {
    dynamic_listeners: Array<{ name: string }>;
  };
  t.same(
    listeners.dynamic_listeners.map((l) => l.name),
    [`0.0.0.0_${gwPort}`],
  );
  const routes = configs.find((c) => c['@type'] === 'type.googleapis.com/envoy.admin.v3.RoutesConfigDump') as {
    dynamic_route_configs: Array<{ route_config: { name: string } }>;
  };
  t.same(
    routes.dynamic_route_configs.map((r) => r.route_config.name),
    [`http.${gwPort}`],
  );

  writeFileSync(path.join(dir, 'vs.yaml'), virtualService('b'));
  await waitForValue('config edit applied without restart', async () => (await get('/')).body === 'b /', { timeoutMs: 20_000, intervalMs: 20 });
  t.pass('edit on disk changed routing');

  const stats = (await adminGet(proxy, '/stats?usedonly&filter=^(cluster_manager\\.cds|listener_manager\\.lds)\\.(update_success|update_rejected)$'))
    .body;
  t.ok((statValue(stats, 'cluster_manager.cds.update_success') ?? 0) > 0, 'CDS accepted');
  t.ok((statValue(stats, 'listener_manager.lds.update_success') ?? 0) > 0, 'LDS accepted');
  t.equal(statValue(stats, 'listener_manager.lds.update_rejected'), undefined, 'no LDS rejection was recorded');

  await daemon.stop();
  daemon = undefined;
  await waitForValue('disconnect noticed', async () => statValue((await adminGet(proxy, '/stats')).body, 'control_plane.connected_state') === 0, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  for (let i = 0; i < 5; i++) t.equal((await get('/')).body, 'b /', 'routing keeps working without the daemon');

  writeFileSync(path.join(dir, 'vs.yaml'), virtualService('a'));
  daemon = await startDaemon(args);
  await waitForValue('reconnected to the restarted daemon', async () => (await get('/')).body === 'a /', { timeoutMs: 30_000, intervalMs: 20 });
  t.equal(statValue((await adminGet(proxy, '/stats')).body, 'control_plane.connected_state'), 1);
});
