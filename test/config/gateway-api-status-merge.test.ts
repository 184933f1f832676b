// The merge of computed Gateway API status into the live one, as tables of Istio 1.26's rules:
// kstatus.UpdateConditionIfChanged (pilot/pkg/model/kstatus/helper.go), createRouteStatus's handling of existing
// parents (pilot/pkg/config/kube/gateway/conditions.go), reportGatewayStatus's addresses (conversion.go).
import t from 'tap';
import type { Condition, GatewayStatus } from '../../src/config/gateway-api/status';
import {
  mergeConditions,
  NACK_CONDITION,
  nackConditions,
  routeStatusToWrite,
  withNacks,
  withServiceAddresses,
} from '../../src/config/gateway-api/status-merge';

const T0 = '2026-01-01T00:00:00Z';
const NOW = '2026-02-02T00:00:00Z';
const c = (status: 'True' | 'False', message: string, gen = 1, reason = 'Accepted'): Condition => ({
  type: 'Accepted',
  status,
  reason,
  message,
  observedGeneration: gen,
});

t.test('UpdateConditionIfChanged', async (t) => {
  const live = [{ ...c('True', 'ok'), lastTransitionTime: T0 }];
  const cases: Array<[string, Condition, unknown]> = [
    ['same status, message and generation: untouched', c('True', 'ok'), live],
    ['same status, new generation: replaced, time kept', c('True', 'ok', 2), [{ ...c('True', 'ok', 2), lastTransitionTime: T0 }]],
    ['same status, new message: replaced, time kept', c('True', 'new'), [{ ...c('True', 'new'), lastTransitionTime: T0 }]],
    ['same status and message, other reason: untouched (Istio compares status, message, generation)', c('True', 'ok', 1, 'Other'), live],
    ['status flips: replaced, new time', c('False', 'ok'), [{ ...c('False', 'ok'), lastTransitionTime: NOW }]],
  ];
  for (const [name, computed, want] of cases) t.same(mergeConditions(live, [computed], NOW), want, name);
  t.same(
    mergeConditions([{ type: 'Other', status: 'True', reason: 'X', message: 'theirs', lastTransitionTime: T0 }], [c('True', 'ok')], NOW),
    [
      { type: 'Other', status: 'True', reason: 'X', message: 'theirs', lastTransitionTime: T0 },
      { ...c('True', 'ok'), lastTransitionTime: NOW },
    ],
    "another writer's condition stays, a new one is appended",
  );
});

t.test('route parents: others kept in place, ours replaced in place, new appended, stale removed', async (t) => {
  const ref = (name: string) => ({ group: 'gateway.networking.k8s.io', kind: 'Gateway', name });
  const mine = 'mesh.io/gateway-controller';
  const live = {
    parents: [
      { parentRef: ref('stale'), controllerName: mine, conditions: [] },
      { parentRef: ref('a'), controllerName: 'example.com/other', conditions: [] },
      { parentRef: ref('b'), controllerName: mine, conditions: [{ ...c('True', 'Route was valid'), lastTransitionTime: T0 }] },
    ],
  };
  const computed = {
    parents: [
      { parentRef: ref('c'), controllerName: mine, conditions: [c('True', 'Route was valid')] },
      { parentRef: ref('b'), controllerName: mine, conditions: [c('True', 'Route was valid')] },
    ],
  };
  t.same(routeStatusToWrite(live, computed, 'default', mine, NOW), {
    parents: [
      { parentRef: ref('a'), controllerName: 'example.com/other', conditions: [] },
      { parentRef: ref('b'), controllerName: mine, conditions: [{ ...c('True', 'Route was valid'), lastTransitionTime: T0 }] },
      { parentRef: ref('c'), controllerName: mine, conditions: [{ ...c('True', 'Route was valid'), lastTransitionTime: NOW }] },
    ],
  });
});

t.test('gateway addresses from the Service', async (t) => {
  const host = 'gw-mesh.default.svc.cluster.local';
  const programmed: Condition = {
    type: 'Programmed',
    status: 'True',
    reason: 'Programmed',
    message: `Resource programmed, assigned to service(s) ${host}:80`,
  };
  const st: GatewayStatus = {
    conditions: [programmed],
    listeners: [],
    addresses: [
      { type: 'IPAddress', value: '10.0.0.5' },
      { type: 'Hostname', value: host },
    ],
  };
  t.same(
    withServiceAddresses(st, {}, { type: 'ClusterIP', ingress: [] }).addresses,
    [{ type: 'Hostname', value: host }],
    'class address type Hostname',
  );
  t.same(
    withServiceAddresses(st, { 'networking.istio.io/address-type': 'IPAddress' }, { type: 'ClusterIP', ingress: [] }).addresses,
    [{ type: 'IPAddress', value: '10.0.0.5' }],
    'address-type annotation',
  );
  t.same(
    withServiceAddresses(st, {}, { type: 'LoadBalancer', ingress: [{ ip: '203.0.113.7' }, { hostname: 'lb.example.com' }] }).addresses,
    [
      { type: 'IPAddress', value: '203.0.113.7' },
      { type: 'Hostname', value: 'lb.example.com' },
    ],
    'the load balancer addresses when there are some',
  );
  const pending = withServiceAddresses(st, {}, { type: 'LoadBalancer', ingress: [] });
  t.notOk(pending.addresses, 'a pending load balancer reports no address');
  t.same(pending.conditions[0], {
    type: 'Programmed',
    status: 'False',
    reason: 'AddressNotAssigned',
    message: `Assigned to service(s) ${host}:80, but failed to assign to all requested addresses: address pending for hostname "${host}"`,
  });
});

t.test("NACKs mapped to the routes of the rejecting proxy's Gateway (beyond Istio)", async (t) => {
  const suffix = 'mesh-autogenerated-k8s-gateway';
  const derived = [
    { gateways: [`default/gw-${suffix}-http`], parents: 'HTTPRoute/web.v1.default,GRPCRoute/rpc.default' },
    { gateways: [`default/other-${suffix}-http`], parents: 'HTTPRoute/elsewhere.default' },
  ];
  const nack = {
    proxy: 'gw-mesh-1.default',
    namespace: 'default',
    gateway: 'gw',
    typeUrl: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
    message: 'bad route',
  };
  const m = nackConditions([nack], derived, suffix, () => 3);
  t.same(
    [...m.keys()].sort(),
    ['GRPCRoute/default/rpc', 'HTTPRoute/default/web.v1'],
    'the routes in VirtualServices bound to that Gateway, dotted names kept',
  );
  const cond = m.get('HTTPRoute/default/web.v1')!.get('default/gw')!;
  t.same(cond, {
    type: NACK_CONDITION,
    status: 'True',
    reason: 'Rejected',
    message: 'proxy gw-mesh-1.default rejected the RouteConfiguration configuration generated for this route: bad route',
    observedGeneration: 3,
  });
  t.equal(nackConditions([], derived, suffix, () => 1).size, 0, 'no NACK, no condition');
  const ref = (name: string) => ({ group: 'gateway.networking.k8s.io', kind: 'Gateway', name });
  const st = {
    parents: [
      { parentRef: ref('gw'), controllerName: 'c', conditions: [] },
      { parentRef: ref('other'), controllerName: 'c', conditions: [] },
    ],
  };
  const out = withNacks(st, 'default', m.get('HTTPRoute/default/web.v1'));
  t.same(
    out.parents.map((p) => p.conditions.length),
    [1, 0],
    'only the parent whose proxy rejected gets it',
  );
  const live = { parents: [{ parentRef: ref('gw'), controllerName: 'c', conditions: [{ ...cond, lastTransitionTime: T0 }] }] };
  t.same(
    routeStatusToWrite(live, { parents: [{ parentRef: ref('gw'), controllerName: 'c', conditions: [] }] }, 'default', 'c', NOW).parents,
    [{ parentRef: ref('gw'), controllerName: 'c', conditions: [] }],
    'the condition goes when the NACK does',
  );
});
