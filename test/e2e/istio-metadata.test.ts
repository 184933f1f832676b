// Istio users pass a gateway's labels as ISTIO_METAJSON_LABELS; the built agent reads them (saying so in
// one line), and a gateway whose labels match no Gateway is no longer silent: the daemon and the engine
// both warn, naming the labels and the selectors that did not match (issue 16, item 3).
import t from 'tap';
import { built } from '../helpers/binary';
import { startGateway } from '../helpers/gateway';
import { gatewayYaml, virtualServiceDoc } from '../helpers/mesh-yaml';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function config(gwPort: number, backendPort: number): string {
  return gatewayYaml({ gw: gwPort, backend: backendPort }, virtualServiceDoc('all'), { selector: 'istio: ingressgateway' });
}

t.test("labels given only as Istio's ISTIO_METAJSON_LABELS select the Gateway", async (t) => {
  const gw = await startGateway(t, {
    config: (p) => config(p.gw, p.backend),
    agentEnv: { MESH_METAJSON_LABELS: undefined, ISTIO_METAJSON_LABELS: '{"istio":"ingressgateway"}' },
  });
  await waitFor(
    () => gw.agentOut(),
    async () => (await gw.get('/hello')).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.pass('routed through the Gateway selected by the Istio-spelt labels');
  t.match(gw.agentOut(), /info\s.*node metadata read from Istio's variable names ISTIO_METAJSON_LABELS \(mesh's own: MESH_METAJSON_LABELS\)/);
  t.notMatch(gw.daemon.log(), /gets no listeners/);
});

t.test('a gateway whose labels match no Gateway says so, in the daemon and in the engine', async (t) => {
  const gw = await startGateway(t, {
    config: (p) => config(p.gw, p.backend),
    agentEnv: { MESH_METAJSON_LABELS: '{"istio":"ingress-gateway"}' },
  });
  await waitFor(
    () => gw.daemon.log(),
    async () => /gets no listeners/.test(gw.daemon.log()),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.match(
    gw.daemon.log(),
    /warn\s+ads\s+gateway proxy gateway-0\.mesh-system with labels \{istio: ingress-gateway\} gets no listeners: no Gateway selects it; selectors not matched: mesh-system\/gw \{istio: ingressgateway\}/,
  );
  await waitFor(
    () => gw.agentOut(),
    async () => /sent no listeners/.test(gw.agentOut()),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.match(
    gw.agentOut(),
    /warn.*lds: the discovery daemon sent no listeners for node router~127\.0\.0\.1~gateway-0\.mesh-system~\S+ with labels \{istio: ingress-gateway\}/,
  );
  t.equal((gw.daemon.log().match(/gets no listeners/g) ?? []).length, 1, 'said once, not on every push');
});
