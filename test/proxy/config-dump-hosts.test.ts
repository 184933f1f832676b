// The endpoints of /config_dump?include_eds as Envoy dumps them (ClusterManagerImpl::addLbEndpoint): from its
// hosts, each with its coarse health and its weight, whatever the config left unset.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { asHosts, coarseHealth } from '../../src/proxy/admin/config-dump';
import { HealthStatus } from '../../src/gen/envoy/config/core/v3/health_check_pb';
import { ClusterLoadAssignmentSchema } from '../../src/gen/envoy/config/endpoint/v3/endpoint_pb';

t.test('coarse health: Envoy Host::coarseHealth of each EDS status', async (t) => {
  const table: Array<[HealthStatus, HealthStatus]> = [
    [HealthStatus.UNKNOWN, HealthStatus.HEALTHY],
    [HealthStatus.HEALTHY, HealthStatus.HEALTHY],
    [HealthStatus.UNHEALTHY, HealthStatus.UNHEALTHY],
    [HealthStatus.DRAINING, HealthStatus.UNHEALTHY],
    [HealthStatus.TIMEOUT, HealthStatus.UNHEALTHY],
    [HealthStatus.DEGRADED, HealthStatus.DEGRADED],
  ];
  for (const [given, dumped] of table) t.equal(coarseHealth(given), dumped, HealthStatus[given]);
});

t.test('asHosts: health and weight filled in, the config itself untouched', async (t) => {
  const cla = create(ClusterLoadAssignmentSchema, {
    clusterName: 'agent',
    endpoints: [{ lbEndpoints: [{ healthStatus: HealthStatus.UNKNOWN }, { healthStatus: HealthStatus.DRAINING, loadBalancingWeight: 3 }] }],
  });
  const out = asHosts(cla);
  t.same(
    out.endpoints[0]!.lbEndpoints.map((e) => [e.healthStatus, e.loadBalancingWeight]),
    [
      [HealthStatus.HEALTHY, 1],
      [HealthStatus.UNHEALTHY, 3],
    ],
  );
  t.equal(cla.endpoints[0]!.lbEndpoints[0]!.healthStatus, HealthStatus.UNKNOWN, 'a copy');
});
