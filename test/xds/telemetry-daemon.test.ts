// The built daemon pushes telemetry changes without a restart: a Telemetry written into --configDir and an
// edit of the --meshConfig file each reach a connected sidecar's listeners (Istio: a Telemetry change is a full
// push of listeners and routes; a mesh config change a global full push). Checked on virtualOutbound's
// catch-all TCP chain: its istio.stats filter (stats.PluginConfig) and its tcp_proxy access log.
import t from 'tap';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { TcpProxySchema } from '../../src/gen/envoy/extensions/filters/network/tcp_proxy/v3/tcp_proxy_pb';
import { PluginConfigSchema } from '../../src/gen/istio/envoy/extensions/stats/config_pb';
import { built } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { LDS, sidecarNode, XdsWatch } from '../helpers/xds';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** What the catch-all TCP chain of virtualOutbound carries: the stats configs (protojson) and access log names. */
function catchall(l: Listener | undefined): { stats: string[]; accessLogs: string[] } | undefined {
  const chain = l?.filterChains.find((c) => c.name === 'virtualOutbound-catchall-tcp');
  if (!chain) return undefined;
  const stats = chain.filters
    .filter((f) => f.name === 'istio.stats')
    .map((f) => JSON.stringify(toJson(PluginConfigSchema, anyUnpack(f.configType.value as never, PluginConfigSchema)!, { useProtoFieldName: true })));
  const tcp = chain.filters.find((f) => f.name === 'envoy.filters.network.tcp_proxy');
  const accessLogs = anyUnpack(tcp!.configType.value as never, TcpProxySchema)!.accessLog.map((a) => a.name);
  return { stats, accessLogs };
}

t.test('Telemetry and mesh config changes reach a connected sidecar without a restart', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-telemetry-daemon-'));
  const configDir = path.join(dir, 'config');
  const meshFile = path.join(dir, 'mesh', 'mesh.yaml');
  for (const d of [configDir, path.dirname(meshFile)]) mkdirSync(d);
  writeFileSync(meshFile, 'defaultProviders:\n  metrics: [prometheus]\n');
  const daemon = await startDaemon(['--configDir', configDir, '--meshConfig', meshFile], { XDS_AUTH: 'false' });
  const lds = new XdsWatch(daemon.grpc, sidecarNode('shop'), LDS);
  t.teardown(async () => {
    lds.close();
    await daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const now = () => catchall(lds.resources.get('virtualOutbound'));

  const first = await lds.until(() => now(), 'virtualOutbound');
  t.same(first, { stats: ['{}'], accessLogs: [] }, 'defaultProviders.metrics: the prometheus stats filter, no access log');

  writeFileSync(
    path.join(configDir, 'telemetry.yaml'),
    `apiVersion: telemetry.istio.io/v1
kind: Telemetry
metadata: {name: mesh-default, namespace: mesh-system}
spec:
  metrics:
  - providers: [{name: prometheus}]
    overrides:
    - match: {metric: REQUEST_COUNT, mode: CLIENT}
      disabled: true
`,
  );
  await lds.until(() => now()?.stats[0] === '{"metrics":[{"name":"requests_total","drop":true}]}', 'the Telemetry override pushed');
  t.pass('a Telemetry in the root namespace: requests_total dropped on the client side');

  writeFileSync(meshFile, 'defaultProviders:\n  metrics: [prometheus]\naccessLogFile: /dev/stdout\n');
  await lds.until(() => now()?.accessLogs.join() === 'envoy.access_loggers.file', 'the mesh accessLogFile pushed');
  t.pass('accessLogFile in the mesh config: the tcp_proxy logs to a file');
  t.match(now()!.stats, ['{"metrics":[{"name":"requests_total","drop":true}]}'], 'the Telemetry still applies');

  writeFileSync(meshFile, 'defaultProviders: [not, a, map\n');
  await new Promise((r) => setTimeout(r, 500));
  t.equal(now()?.accessLogs.join(), 'envoy.access_loggers.file', 'a mesh config that cannot be read: the last good one keeps serving');
  t.match(daemon.log(), /keeping the previous mesh config/);
});
