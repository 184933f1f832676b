// The README's "HTTPRoute on a Service: sidecar routing (GAMMA)" block, run line by line as printed
// (test/helpers/readme-block.ts): the built daemon serving examples/gateway-api/mesh (two Services, a producer and a
// consumer HTTPRoute on Service shop/echo), the routes' status and the mesh VirtualServices they became. Expected
// values are Istio 1.26's (route_collections.go names a mesh VirtualService after its key, `<route namespace>[/<port>]/
// <host>` with `/` as `~`; conditions.go writes Accepted/ResolvedRefs "Route was valid"/"All references resolved").
import t from 'tap';
import { built } from '../helpers/binary';
import { netnsUnavailable } from '../helpers/netns';
import { runReadmeBlock } from '../helpers/readme-block';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

t.test('README: HTTPRoute on a Service with no cluster', { skip }, async (t) => {
  const { out: line } = await runReadmeBlock(t, '### HTTPRoute on a Service: sidecar routing (GAMMA)', 'mesh-gamma', 3);
  const status = JSON.parse(line(/gateway-status/).stdout) as Array<{
    kind: string;
    metadata: { name: string; namespace: string };
    status: {
      parents: Array<{
        parentRef: Record<string, unknown>;
        controllerName: string;
        conditions: Array<{ type: string; status: string; message: string }>;
      }>;
    };
  }>;
  const parents = (ns: string) => status.find((o) => o.kind === 'HTTPRoute' && o.metadata.namespace === ns)?.status.parents;
  const ok = [
    { type: 'Accepted', status: 'True', message: 'Route was valid' },
    { type: 'ResolvedRefs', status: 'True', message: 'All references resolved' },
  ];
  t.match(parents('shop'), [
    { parentRef: { group: '', kind: 'Service', name: 'echo', port: 8080 }, controllerName: 'mesh.io/gateway-controller', conditions: ok },
  ]);
  t.match(parents('client'), [{ parentRef: { group: '', kind: 'Service', name: 'echo', namespace: 'shop' }, conditions: ok }]);
  t.same(
    line(/configz/)
      .stdout.trim()
      .split('\n')
      .sort(),
    ['"name":"client~echo.shop.svc.cluster.local"', '"name":"shop~8080~echo.shop.svc.cluster.local"'],
    'one mesh VirtualService per route namespace, port and host',
  );
});
