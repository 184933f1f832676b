// A misspelt match condition must not open a route: `{exac: group1}` used to be accepted with a warning
// and read as "header present", so any value was routed. Now the built daemon rejects the edit, counts
// it in pilot_total_rejected_configs, and the gateway keeps serving the last good routing.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { built } from '../helpers/binary';
import { metricValue } from '../helpers/prometheus';
import { startGateway } from '../helpers/gateway';
import { gatewayYaml, routeTo, virtualServiceDoc } from '../helpers/mesh-yaml';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function config(gwPort: number, backendPort: number, match: string): string {
  const http = `  - match: [{uri: {prefix: /team}, headers: {x-group: ${match}}}]\n    ${routeTo()}\n`;
  return gatewayYaml({ gw: gwPort, backend: backendPort }, virtualServiceDoc('groups', { http }));
}

t.test('a misspelt header match is rejected and the last good routing keeps serving', async (t) => {
  let ports = { gw: 0, backend: 0 };
  const gw = await startGateway(t, {
    config: (p) => {
      ports = p;
      return config(p.gw, p.backend, '{exact: group1}');
    },
  });
  await waitFor(
    () => gw.agentOut(),
    async () => (await gw.get('/team', { 'x-group': 'group1' })).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal((await gw.get('/team', { 'x-group': 'group2' })).status, 404, 'another group is not routed');
  const rejected = async () =>
    metricValue(
      await fetch(`http://${gw.daemon.monitoring}/metrics`).then((r) => r.text()),
      'pilot_total_rejected_configs',
      'type="virtualservice",name="mesh-system/groups"',
    );
  t.equal(await rejected(), undefined, 'nothing rejected yet');

  fs.writeFileSync(path.join(gw.configDir, 'mesh.yaml'), config(ports.gw, ports.backend, '{exac: group1}'));
  await waitFor(
    () => `the typo was not rejected:\n${gw.daemon.log()}`,
    async () => ((await rejected()) ?? 0) >= 1,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.pass('pilot_total_rejected_configs counts the misspelt VirtualService');
  t.match(gw.daemon.log(), /spec\.http\[0\]\.match\[0\]\.headers\[x-group\]\.exac: unknown field "exac" in StringMatch/, 'the log names the field');
  // Give a (wrong) push time to arrive, then check routing did not widen.
  await new Promise((r) => setTimeout(r, 1000));
  t.equal((await gw.get('/team', { 'x-group': 'group2' })).status, 404, 'still not routed: the condition did not become "header present"');
  t.equal((await gw.get('/team', { 'x-group': 'group1' })).status, 200, 'the last good routing keeps serving');
});
