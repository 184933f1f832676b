// Request mirroring's pure parts against Envoy's source (router/config_impl.cc ShadowPolicyImpl,
// http/utility.cc shadowAppendedHost; source/common/router/router.cc): the host a copy carries and which
// policies a route compiles to.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { RouteActionSchema } from '../../src/gen/envoy/config/route/v3/route_components_pb';
import { FractionalPercent_DenominatorType } from '../../src/gen/envoy/type/v3/percent_pb';
import { compileForward } from '../../src/proxy/route/action';
import { shadowHost } from '../../src/proxy/http/router';

t.test('shadowAppendedHost: -shadow after the name, before the port', async (t) => {
  const rows: Array<[string, string]> = [
    ['gw.example', 'gw.example-shadow'],
    ['gw.example:8080', 'gw.example-shadow:8080'],
    ['10.0.0.1:80', '10.0.0.1-shadow:80'],
    ['[::1]:80', '[::1]-shadow:80'],
  ];
  for (const [host, want] of rows) t.equal(shadowHost(host), want, host);
});

t.test('request_mirror_policies compile to clusters, fractions and the suffix choice', async (t) => {
  const a = create(RouteActionSchema, {
    clusterSpecifier: { case: 'cluster', value: 'main' },
    requestMirrorPolicies: [
      { cluster: 'all' },
      { cluster: 'half', runtimeFraction: { defaultValue: { numerator: 50, denominator: FractionalPercent_DenominatorType.HUNDRED } } },
      { cluster: 'none', runtimeFraction: { defaultValue: { numerator: 0 } } },
      { cluster: 'plain', disableShadowHostSuffixAppend: true },
    ],
  });
  const f = compileForward(a, 'route', () => undefined as never);
  t.same(f.mirrors, [
    { cluster: 'all', fraction: 1, hostSuffix: true },
    { cluster: 'half', fraction: 0.5, hostSuffix: true },
    { cluster: 'none', fraction: 0, hostSuffix: true },
    { cluster: 'plain', fraction: 1, hostSuffix: false },
  ]);
  t.throws(
    () =>
      compileForward(
        create(RouteActionSchema, { clusterSpecifier: { case: 'cluster', value: 'main' }, requestMirrorPolicies: [{ clusterHeader: 'x-c' }] }),
        'r',
        () => undefined as never,
      ),
    /cluster_header/,
  );
});
