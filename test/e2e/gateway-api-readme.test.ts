// The README's "Gateway API" block, run line by line as printed: the built daemon serving a Gateway and an HTTPRoute
// from examples/gateway-api/config, a router started by hand with the label gateway.networking.k8s.io/gateway-name
// (through meshctl's workload group, as a VM gets its identity with no cluster), a request through the route, and
// the status page. The lines bind fixed ports (15010, 15012, 15021, 18080, 19090…), so they run in a network
// namespace of their own, in a scratch directory holding links to dist/ and examples/. Follows
// test/e2e/no-cluster-identity.test.ts, which runs the block this one is modelled on.
import t from 'tap';
import { built } from '../helpers/binary';
import { netnsUnavailable } from '../helpers/netns';
import { runReadmeBlock } from '../helpers/readme-block';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

t.test('README: Gateway API with no cluster', { skip }, async (t) => {
  const { out: line } = await runReadmeBlock(t, '## Gateway API', 'mesh-gwapi');
  const out = (re: RegExp) => line(re).stdout;
  const seen = JSON.parse(out(/curl -s http:\/\/127\.0\.0\.1:18080\/headers/)) as { headers: Record<string, string> };
  t.equal(seen.headers['X-Gateway-Api'], 'yes', "the HTTPRoute's RequestHeaderModifier reached the sample");
  const status = JSON.parse(out(/gateway-status/)) as Array<{
    kind: string;
    status: { conditions?: Array<{ type: string; status: string; reason: string }> };
  }>;
  const gw = status.find((o) => o.kind === 'Gateway');
  t.match(
    gw?.status.conditions?.find((c) => c.type === 'Accepted'),
    { status: 'True', reason: 'Accepted' },
    'the Gateway is Accepted',
  );
  t.match(
    gw?.status.conditions?.find((c) => c.type === 'Programmed'),
    { status: 'False', reason: 'AddressNotUsable' },
    'with no Service web-mesh, not Programmed, as Istio says',
  );
  t.ok(
    status.some((o) => o.kind === 'HTTPRoute'),
    'the HTTPRoute has a status',
  );
});
