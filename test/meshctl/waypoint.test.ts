// `meshctl waypoint apply|list|status|delete` with the built binary against a real API server with the Gateway
// API v1.3.0 CRDs (standard channel, Istio 1.26's): the Gateway objects it writes and reads (istioctl's
// istioctl/pkg/waypoint/waypoint.go: class, HBONE listener on 15008, labels, namespace enrolment, the list and
// status tables), and the honest answer where nothing programs a waypoint (mesh has no waypoint data plane).
import t from 'tap';
import { built } from '../helpers/binary';
import { applyGatewayApiCrds, namespace, requireKube, startKube, type Obj } from '../helpers/kube';
import { meshctl, noStack } from './cluster-fixtures';

requireKube();
if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const GW = '/apis/gateway.networking.k8s.io/v1';

t.test('waypoint apply, list, status, delete', async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const env = { ORCHCONFIG: kube.kubeconfig };
  await kube.api.create('/api/v1/namespaces', namespace('shop'));
  await kube.api.create('/api/v1/namespaces', namespace('pay'));

  // Without the Gateway API there is nothing to write to.
  let r = await meshctl(['waypoint', 'apply', '-n', 'shop'], env);
  t.equal(r.code, 1);
  t.match(r.stderr, /^Error: missing Gateway API CRDs need to be installed before applying a waypoint: .*404/);
  t.equal(r.stderr.split('\n').length, 2, 'one line');

  await applyGatewayApiCrds(kube, 'standard');
  r = await meshctl(['waypoint', 'list', '-n', 'shop'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'No waypoints found.\n');

  r = await meshctl(['waypoint', 'apply', '-n', 'shop'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '✅ waypoint shop/waypoint applied\n');
  const gw = await kube.api.get(`${GW}/namespaces/shop/gateways/waypoint`);
  t.same(gw.spec.gatewayClassName, 'mesh-waypoint');
  t.same(gw.spec.listeners, [{ name: 'mesh', port: 15008, protocol: 'HBONE', allowedRoutes: { namespaces: { from: 'Same' } } }]);
  // The API server's defaults: nothing has accepted or programmed it.
  t.match(gw.status.conditions, [
    { type: 'Accepted', status: 'Unknown', reason: 'Pending' },
    { type: 'Programmed', status: 'Unknown', reason: 'Pending' },
  ]);

  r = await meshctl(['waypoint', 'apply', '-n', 'shop', '--name', 'wp-b', '--for', 'service', '-r', 'canary', '--enroll-namespace'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    '⚠️ Warning: mesh has no ambient mode: the namespace\'s "mesh.io/use-waypoint" label is recorded, but no traffic goes through the waypoint\n' +
      '✅ waypoint shop/wp-b applied\n' +
      '✅ namespace shop labeled with "mesh.io/use-waypoint: wp-b"\n',
  );
  const wpb = await kube.api.get(`${GW}/namespaces/shop/gateways/wp-b`);
  t.same(wpb.metadata.labels, { 'mesh.io/rev': 'canary', 'mesh.io/waypoint-for': 'service' });
  t.equal((await kube.api.get('/api/v1/namespaces/shop')).metadata.labels['mesh.io/use-waypoint'], 'wp-b');
  // Enrolled already: a warning, nothing changed, unless --overwrite.
  r = await meshctl(['waypoint', 'apply', '-n', 'shop', '--name', 'wp-c', '--enroll-namespace'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, '⚠️ Warning: namespace (shop) already has an enrolled Waypoint. Consider adding the `--overwrite` flag to your apply command.\n');
  t.notOk(await kube.api.find(`${GW}/namespaces/shop/gateways/wp-c`));

  // Istio's class is a waypoint too; another class is not.
  await kube.api.create(`${GW}/namespaces/pay/gateways`, {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name: 'istio-wp' },
    spec: { gatewayClassName: 'istio-waypoint', listeners: [{ name: 'mesh', port: 15008, protocol: 'HBONE' }] },
  });
  await kube.api.create(`${GW}/namespaces/pay/gateways`, {
    apiVersion: 'gateway.networking.k8s.io/v1',
    kind: 'Gateway',
    metadata: { name: 'ingress' },
    spec: { gatewayClassName: 'other', listeners: [{ name: 'http', port: 80, protocol: 'HTTP' }] },
  });
  // A waypoint some controller did program (status written as one would).
  await kube.api.merge(
    `${GW}/namespaces/pay/gateways/istio-wp`,
    {
      status: {
        conditions: [
          { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ok', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 1 },
          {
            type: 'Programmed',
            status: 'True',
            reason: 'Programmed',
            message: 'Resource programmed',
            lastTransitionTime: '2026-01-01T00:00:00Z',
            observedGeneration: 1,
          },
        ],
      },
    },
    'status',
  );

  r = await meshctl(['waypoint', 'list', '-n', 'shop'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'NAME         REVISION     PROGRAMMED\nwaypoint     default      Unknown\nwp-b         canary       Unknown\n');
  r = await meshctl(['waypoint', 'list', '-A'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    'NAMESPACE     NAME         REVISION     PROGRAMMED\n' +
      'pay           istio-wp     default      True\n' +
      'shop          waypoint     default      Unknown\n' +
      'shop          wp-b         canary       Unknown\n',
  );

  r = await meshctl(['waypoint', 'status', '-n', 'pay'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(
    r.stdout,
    'NAME         STATUS     TYPE           REASON         MESSAGE\nistio-wp     True       Programmed     Programmed     Resource programmed\n',
  );
  // Nothing programs mesh's waypoints: status waits --waypoint-timeout, shows the real condition and says why.
  const started = Date.now();
  r = await meshctl(['waypoint', 'status', '-n', 'shop', '--waypoint-timeout', '2s'], env);
  t.equal(r.code, 1);
  t.ok(Date.now() - started >= 2000, 'waited the timeout');
  t.equal(
    r.stdout,
    'NAME         STATUS      TYPE           REASON      MESSAGE\nwaypoint     Unknown     Programmed     Pending     Waiting for controller\n',
  );
  t.match(
    r.stderr,
    /^Error: timed out while retrieving status for waypoint\tshop\/waypoint \(not Programmed after 2s; mesh has no waypoint data plane/,
  );
  t.equal(r.stderr.split('\n').length, 2, 'one line');
  r = await meshctl(['waypoint', 'apply', '-n', 'shop', '--wait', '--waypoint-timeout', '1s'], env);
  t.equal(r.code, 1);
  t.equal(r.stdout, '✅ waypoint shop/waypoint applied\n');
  t.match(r.stderr, /^Error: timed out while waiting for waypoint\tshop\/waypoint \(not Programmed after 1s; mesh has no waypoint data plane/);

  r = await meshctl(['waypoint', 'delete', '-n', 'shop'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: must specify a waypoint name or delete all using --all or delete specific revision using --revision\n');
  r = await meshctl(['waypoint', 'delete', '-n', 'shop', '--all', 'x'], env);
  t.equal(r.code, 1);
  t.equal(r.stderr, 'Error: cannot specify waypoint names when deleting all waypoints\n');
  r = await meshctl(['waypoint', 'delete', '-n', 'pay', 'ingress', 'istio-wp'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'waypoint pay/ingress not found\nwaypoint pay/istio-wp deleted\n');
  t.ok(await kube.api.find(`${GW}/namespaces/pay/gateways/ingress`), 'not a waypoint: kept');
  r = await meshctl(['waypoint', 'delete', '-n', 'shop', '-r', 'canary'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'waypoint shop/wp-b deleted\n');
  r = await meshctl(['waypoint', 'delete', '-n', 'shop', '--all'], env);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'waypoint shop/waypoint deleted\n');
  const left = (await kube.api.get(`${GW}/namespaces/shop/gateways`)).items as Obj[];
  t.same(left, []);
  t.ok(noStack(r.stderr));
});
