// The real Envoy as the gateway's data plane, beside our engine: the built `pilot-agent proxy router` runs Envoy (PROXY_CONFIG
// binaryPath) with the bootstrap it writes, Envoy takes its config from the built daemon through the agent's xDS
// proxy, and a plain route reaches the backend with no config rejected on the way. The daemon sees from Envoy's
// Node.extensions that it lacks Istio's own filters and says once what it left out.
import t from 'tap';
import { built } from '../helpers/binary';
import { DATA_PLANES, dataPlaneMissing, nacks } from '../helpers/envoy';
import { prefixRouteConfig } from '../helpers/mesh-yaml';
import { startGateway, type GatewayPorts } from '../helpers/gateway';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const config = (p: GatewayPorts): string => prefixRouteConfig(p, '/app');

for (const plane of DATA_PLANES) {
  t.test(`a gateway on ${plane} routes a plain request to the backend, no config rejected`, { skip: dataPlaneMissing(plane) }, async (t) => {
    const gw = await startGateway(t, { config, dataPlane: plane });
    await waitFor(
      () => gw.agentOut(),
      async () => (await gw.get('/app/x')).status === 200,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const res = await gw.get('/app/x');
    t.equal(JSON.parse(res.body).workload, 'demo');
    t.equal(JSON.parse(res.body).path, '/app/x');
    t.equal((await gw.get('/other')).status, 404, 'no route');
    t.same(await nacks(gw.daemon, gw.agentOut()), [], 'no config rejected');
    // our engine lists istio.alpn among its extensions; upstream Envoy does not
    const info = (await fetch(`http://127.0.0.1:${gw.ports.admin}/server_info`).then((r) => r.json())) as {
      node: { extensions?: Array<{ name: string }> };
    };
    const names = (info.node.extensions ?? []).map((e) => e.name);
    t.ok(names.includes('envoy.filters.http.jwt_authn'), 'the node lists its extensions');
    t.equal(names.includes('istio.alpn'), plane === 'engine', 'istio.alpn only in our engine');
    const leftOut = gw.daemon
      .log()
      .split('\n')
      .filter((l) => /is not Istio's Envoy build, left out: istio\.alpn/.test(l));
    t.equal(leftOut.length, plane === 'envoy' ? 1 : 0, 'the daemon says once what it left out for a proxy without it');
  });
}
