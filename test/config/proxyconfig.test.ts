// The ProxyConfig model (Istio's mesh.ApplyProxyConfig and protojson): an overlay keeps the fields the agent
// does not interpret and passes them through, with errors naming the field; durations as protojson text.
// The agent's assembly of its own ProxyConfig is tested in test/agent/config.test.ts.
import t from 'tap';
import { applyProxyConfigOverlay, defaultProxyConfig, ProxyConfigError, protoDuration, proxyConfigToJson } from '../../src/config/proxyconfig';

t.test('overlay keeps fields it does not interpret', async (t) => {
  const pc = applyProxyConfigOverlay(
    defaultProxyConfig(),
    { tracing: { zipkin: { address: 'zipkin:9411' } }, holdApplicationUntilProxyStarts: true },
    'x',
  );
  t.same(pc.other, { tracing: { zipkin: { address: 'zipkin:9411' } } });
  const json = proxyConfigToJson(pc);
  t.same(json['tracing'], { zipkin: { address: 'zipkin:9411' } });
  t.equal(json['holdApplicationUntilProxyStarts'], true);
  t.equal(json['drainDuration'], '45s', 'durations as protojson strings');
  const err = t.throws(() => applyProxyConfigOverlay(defaultProxyConfig(), { tracing: 'zipkin' }, 'x'));
  t.ok(err instanceof ProxyConfigError);
  t.equal((err as Error).message, 'x.tracing: expected an object, got string "zipkin"');
});

t.test('protojson durations', async (t) => {
  t.equal(protoDuration(45_000), '45s');
  t.equal(protoDuration(250), '0.25s');
  t.equal(protoDuration(1500), '1.5s');
});
