// The engine takes its virtual hosts over VHDS from the built daemon (through the agent's xDS proxy): its
// route configuration names the vhds source, a VirtualService edit reaches it as one VirtualHost resource,
// and requests route by the edited rule right after.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { built } from '../helpers/binary';
import { startGateway, type GatewayPorts } from '../helpers/gateway';
import { gatewayYaml, routeTo, virtualServiceDoc, yamlDocs } from '../helpers/mesh-yaml';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function config(p: GatewayPorts, aPrefix: string): string {
  const vs = (name: string, host: string, prefix: string) =>
    virtualServiceDoc(name, { hosts: host, http: `  - match: [{uri: {prefix: ${prefix}}}]\n    ${routeTo()}\n` });
  return gatewayYaml(p, yamlDocs(vs('a', 'a.example.com', aPrefix), vs('b', 'b.example.com', '/b')));
}

t.test('a VirtualService edit reaches the engine through VHDS and routes right after', async (t) => {
  let ports: GatewayPorts | undefined;
  const gw = await startGateway(t, {
    config: (p) => {
      ports = p;
      return config(p, '/one');
    },
  });
  const status = async (host: string, p: string) => (await gw.get(p, { host })).status;
  await waitFor(
    () => gw.agentOut(),
    async () => (await status('a.example.com', '/one')) === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal(await status('a.example.com', '/two'), 404);
  t.equal(await status('b.example.com', '/b'), 200, 'the other virtual host routes');

  const dump = (await fetch(`http://127.0.0.1:${ports!.admin}/config_dump`).then((r) => r.json())) as { configs: Array<Record<string, unknown>> };
  const routes = dump.configs.find((c) => String(c['@type']).endsWith('RoutesConfigDump')) as {
    dynamic_route_configs?: Array<{ route_config: Record<string, unknown> }>;
  };
  const rc = routes.dynamic_route_configs?.[0]?.route_config;
  t.ok(rc?.['vhds'], 'the route configuration names a vhds source');
  t.same(((rc?.['virtual_hosts'] ?? []) as Array<{ name: string }>).map((v) => v.name).sort(), [
    `http.${ports!.gw}/a.example.com:${ports!.gw}`,
    `http.${ports!.gw}/b.example.com:${ports!.gw}`,
  ]);

  const pushesBefore = (gw.daemon.log().match(/VHDS: PUSH for node/g) ?? []).length;
  fs.writeFileSync(path.join(gw.configDir, 'mesh.yaml'), config(ports!, '/two'));
  await waitFor(
    () => `the edit did not arrive:\n${gw.agentOut()}`,
    async () => (await status('a.example.com', '/two')) === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal(await status('a.example.com', '/one'), 404, 'the old rule is gone');
  t.equal(await status('b.example.com', '/b'), 200, 'the untouched virtual host still routes');
  const pushes = gw.daemon
    .log()
    .split('\n')
    .filter((l) => /VHDS: PUSH for node/.test(l))
    .slice(pushesBefore);
  t.ok(pushes.length >= 1, 'the edit went out over VHDS');
  t.match(pushes.join('\n'), /resources:1 /, 'one virtual host sent');
  t.notMatch(gw.daemon.log().split('\n').slice(-50).join('\n'), /RDS: PUSH for node/, 'no route configuration resent');
});
