// AuthorizationPolicy → envoy.filters.network.rbac for TCP filter chains. Expected shapes are Istio's
// authz builder testdata (testdata/tcp/*-out.yaml, in Envoy JSON form; the shadow stat prefix is the
// current `istio_dry_run_allow_` for filters without dry-run rules), and the listener placement follows
// Istio buildInboundNetworkFilters / buildGatewayListeners: before tcp_proxy on inbound and gateway TCP
// chains, never on sidecar outbound.
import t, { type Test } from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { toJson, type JsonValue } from '@bufbuild/protobuf';
import type { AuthorizationPolicySpec, Config } from '../../src/config/types';
import { initPushContext } from '../../src/discovery/push-context';
import { buildRegistries } from '../../src/discovery/registry';
import type { Filter } from '../../src/gen/envoy/config/listener/v3/listener_components_pb';
import type { Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { HttpConnectionManagerSchema } from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { RBACSchema } from '../../src/gen/envoy/extensions/filters/network/rbac/v3/rbac_pb';
import { buildAuthzNetworkFilters } from '../../src/security/authz/builder';
import { securityFilterBuilders } from '../../src/security/builders';
import { JwksResolver } from '../../src/security/jwks/resolver';
import { buildGatewayListeners, buildSidecarOutboundListeners, buildVirtualInboundListener } from '../../src/xds/gen/lds';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { cfg, ListStore, proxy, internalService } from '../discovery/fixtures';
import './helpers';

const ap = (name: string, spec: AuthorizationPolicySpec, annotations: Record<string, string> = {}, ns = 'foo') =>
  cfg('AuthorizationPolicy', ns, name, spec, { annotations });

function filterJson(f: Filter): JsonValue {
  if (f.configType.case !== 'typedConfig') throw new Error('no typed config');
  if (f.configType.value.typeUrl !== 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC')
    throw new Error(`unexpected ${f.configType.value.typeUrl}`);
  return { name: f.name, typedConfig: toJson(RBACSchema, anyUnpack(f.configType.value, RBACSchema)!, { registry: envoyTypeRegistry() }) };
}
const build = (...policies: Config<'AuthorizationPolicy'>[]) => buildAuthzNetworkFilters(policies).map(filterJson);

const NAME = 'envoy.filters.network.rbac';
const PREFIX = 'istio_dry_run_allow_';
const ANY_PERMISSION = [{ andRules: { rules: [{ any: true }] } }];
const ANY_PRINCIPAL = [{ andIds: { ids: [{ any: true }] } }];
const regex = (r: string) => ({ safeRegex: { regex: r } });
const authn = (principalName: JsonValue) => ({ authenticated: { principalName } });
const nsPrincipal = (ns: string) => [{ andIds: { ids: [{ orIds: { ids: [authn(regex(`.*/ns/${ns}/.*`))] } }] } }];
const port = (p: number) => ({ orRules: { rules: [{ destinationPort: p }] } });
const rule = (policy: string, i: number) => `ns[foo]-policy[${policy}]-rule[${i}]`;

t.test('ALLOW with HTTP-only fields: those rules vanish, TCP-only rules stay (Istio tcp/allow-both-http-tcp)', async (t) => {
  const got = build(
    ap('httpbin-deny', {
      action: 'ALLOW',
      rules: [
        { from: [{ source: { requestPrincipals: ['id-1'] } }], to: [{ operation: { methods: ['GET'] } }] },
        { from: [{ source: { namespaces: ['ns-1'] } }], to: [{ operation: { ports: ['8080'], methods: ['GET'] } }] },
        { from: [{ source: { namespaces: ['ns-2'], requestPrincipals: ['id-2'] } }], to: [{ operation: { ports: ['9090'] } }] },
        { from: [{ source: { namespaces: ['ns-1'] } }], to: [{ operation: { ports: ['80'] } }] },
      ],
    }),
  );
  // The surviving rule keeps its index in the policy.
  t.same(got, [
    {
      name: NAME,
      typedConfig: {
        rules: { policies: { [rule('httpbin-deny', 3)]: { permissions: [{ andRules: { rules: [port(80)] } }], principals: nsPrincipal('ns-1') } } },
        shadowRulesStatPrefix: PREFIX,
        statPrefix: 'tcp.',
      },
    },
  ]);
});

t.test('ALLOW with only HTTP fields: an empty rule set, which denies every connection (Istio tcp/allow-only-http)', async (t) => {
  const got = build(
    ap('httpbin', { rules: [{ to: [{ operation: { paths: ['/x'] } }] }, { when: [{ key: 'request.auth.claims[iss]', values: ['a'] }] }] }),
  );
  t.same(got, [{ name: NAME, typedConfig: { rules: {}, shadowRulesStatPrefix: PREFIX, statPrefix: 'tcp.' } }]);
});

t.test('DENY with HTTP-only fields: those values are ignored, widening the deny (Istio tcp/deny-both-http-tcp)', async (t) => {
  const got = build(
    ap('httpbin-deny', {
      action: 'DENY',
      rules: [
        { from: [{ source: { requestPrincipals: ['id-1'] } }], to: [{ operation: { methods: ['GET'] } }] },
        { to: [{ operation: { methods: ['GET'] } }] },
        { from: [{ source: { requestPrincipals: ['id-1'] } }] },
        { from: [{ source: { namespaces: ['ns-1'] } }], to: [{ operation: { methods: ['GET'] } }] },
        { from: [{ source: { requestPrincipals: ['id-1'] } }], to: [{ operation: { ports: ['80'] } }] },
        { from: [{ source: { namespaces: ['ns-1'] } }], to: [{ operation: { ports: ['80'] } }] },
        { when: [{ key: 'request.headers[:method]', values: ['GET'] }] },
        { when: [{ key: 'destination.port', values: ['80'] }] },
        {
          from: [{ source: { principals: ['principal', '*'], requestPrincipals: ['rp'], ipBlocks: ['1.2.3.4'], notIpBlocks: ['9.0.0.1'] } }],
          to: [{ operation: { methods: ['method'], hosts: ['exact.com'], ports: ['80'], paths: ['/exact'], notPorts: ['8000'] } }],
          when: [
            { key: 'request.headers[X-header]', values: ['header'], notValues: ['not-header'] },
            { key: 'request.auth.audiences', values: ['aud'] },
            { key: 'connection.sni', values: ['exact.com'], notValues: ['not-exact.com'] },
            { key: 'destination.ip', values: ['10.10.10.10'] },
          ],
        },
      ],
    }),
  );
  const anyAny = { permissions: ANY_PERMISSION, principals: ANY_PRINCIPAL };
  const port80 = [{ andRules: { rules: [port(80)] } }];
  t.same(got, [
    {
      name: NAME,
      typedConfig: {
        rules: {
          action: 'DENY',
          policies: {
            [rule('httpbin-deny', 0)]: anyAny,
            [rule('httpbin-deny', 1)]: anyAny,
            [rule('httpbin-deny', 2)]: anyAny,
            [rule('httpbin-deny', 3)]: { permissions: ANY_PERMISSION, principals: nsPrincipal('ns-1') },
            [rule('httpbin-deny', 4)]: { permissions: port80, principals: ANY_PRINCIPAL },
            [rule('httpbin-deny', 5)]: { permissions: port80, principals: nsPrincipal('ns-1') },
            [rule('httpbin-deny', 6)]: anyAny,
            [rule('httpbin-deny', 7)]: { permissions: port80, principals: ANY_PRINCIPAL },
            [rule('httpbin-deny', 8)]: {
              permissions: [
                {
                  andRules: {
                    rules: [
                      port(80),
                      { notRule: port(8000) },
                      { orRules: { rules: [{ requestedServerName: { exact: 'exact.com' } }] } },
                      { notRule: { orRules: { rules: [{ requestedServerName: { exact: 'not-exact.com' } }] } } },
                      { orRules: { rules: [{ destinationIp: { addressPrefix: '10.10.10.10', prefixLen: 32 } }] } },
                    ],
                  },
                },
              ],
              principals: [
                {
                  andIds: {
                    ids: [
                      { orIds: { ids: [authn({ exact: 'spiffe://principal' }), authn(regex('.+'))] } },
                      { orIds: { ids: [{ directRemoteIp: { addressPrefix: '1.2.3.4', prefixLen: 32 } }] } },
                      { notId: { orIds: { ids: [{ directRemoteIp: { addressPrefix: '9.0.0.1', prefixLen: 32 } }] } } },
                    ],
                  },
                },
              ],
            },
          },
        },
        shadowRulesStatPrefix: PREFIX,
        statPrefix: 'tcp.',
      },
    },
  ]);
});

t.test('dry-run policies go to shadow rules (Istio tcp/dry-run-mix); AUDIT, DENY, ALLOW order', async (t) => {
  const mix = build(
    ap('httpbin-1', { rules: [{ to: [{ operation: { ports: ['80'] } }] }] }, { 'istio.io/dry-run': 'true' }),
    ap('httpbin-2', { rules: [{ to: [{ operation: { ports: ['9000'] } }] }] }),
  );
  const onPort = (p: number) => ({ permissions: [{ andRules: { rules: [port(p)] } }], principals: ANY_PRINCIPAL });
  t.same(mix, [
    {
      name: NAME,
      typedConfig: {
        rules: { policies: { [rule('httpbin-2', 0)]: onPort(9000) } },
        shadowRules: { policies: { [rule('httpbin-1', 0)]: onPort(80) } },
        shadowRulesStatPrefix: PREFIX,
        statPrefix: 'tcp.',
      },
    },
  ]);
  const ordered = build(
    ap('a', { action: 'ALLOW', rules: [{}] }),
    ap('d', { action: 'DENY', rules: [{}] }),
    ap('l', { action: 'AUDIT', rules: [{}] }),
  ) as Array<{ typedConfig: { rules: { action?: string } } }>;
  t.same(
    ordered.map((f) => f.typedConfig.rules.action ?? 'ALLOW'),
    ['LOG', 'DENY', 'ALLOW'],
  );
  t.same(build(), [], 'no policies, no filter');
});

t.test('CUSTOM without a usable provider denies every connection, first', async (t) => {
  const got = build(ap('ext', { action: 'CUSTOM', provider: { name: 'nope' }, rules: [{}] }), ap('a', { rules: [{}] })) as Array<{
    typedConfig: JsonValue;
  }>;
  t.equal(got.length, 2);
  t.same(got[0]!.typedConfig, {
    rules: {
      action: 'DENY',
      policies: { 'default-deny-all-due-to-bad-CUSTOM-action': { permissions: [{ any: true }], principals: [{ any: true }] } },
    },
    statPrefix: 'tcp.',
  });
});

// ---- placement in the listeners ------------------------------------------------------------------

const configs = [
  internalService('apps', 'db', {
    addresses: ['10.96.0.7'],
    ports: [
      { number: 5432, name: 'tcp', protocol: 'TCP', targetPort: 15432 },
      { number: 8080, name: 'http', protocol: 'HTTP' },
    ],
    workloadSelector: { matchLabels: { app: 'db' } },
  }),
  cfg('WorkloadEntry', 'apps', 'db1', { address: '10.1.0.5', labels: { app: 'db' } }),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [
      { port: { number: 31400, name: 'tcp', protocol: 'TCP' }, hosts: ['*'] },
      { port: { number: 443, name: 'tls', protocol: 'TLS' }, hosts: ['db.example.com'], tls: { mode: 'PASSTHROUGH' } },
    ],
  }),
  cfg('VirtualService', 'apps', 'db', {
    hosts: ['*', 'db.example.com'],
    gateways: ['mesh-system/gw'],
    tcp: [{ match: [{ port: 31400 }], route: [{ destination: { host: 'db.apps.svc.cluster.local', port: { number: 5432 } } }] }],
    tls: [
      {
        match: [{ port: 443, sniHosts: ['db.example.com'] }],
        route: [{ destination: { host: 'db.apps.svc.cluster.local', port: { number: 5432 } } }],
      },
    ],
  }),
  cfg('AuthorizationPolicy', 'apps', 'deny-ip', {
    action: 'DENY',
    selector: { matchLabels: { app: 'db' } },
    rules: [{ from: [{ source: { ipBlocks: ['10.9.9.9'] } }] }],
  }),
  cfg('AuthorizationPolicy', 'mesh-system', 'gw-allow', {
    selector: { matchLabels: { istio: 'ingressgateway' } },
    rules: [{ to: [{ operation: { ports: ['31400', '443'] } }] }],
  }),
];
const sc = proxy('sidecar~10.1.0.5~db1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'db' } });
const gw = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' });

function security(t: Test) {
  const resolver = new JwksResolver({ refreshIntervalMs: 3_600_000, retryIntervalMs: 10, retriesOnRefresh: 0, caBundlePaths: [] });
  t.teardown(() => resolver.close());
  return { security: securityFilterBuilders({ mode: 'istiod', resolver }) };
}
const names = (fs: readonly Filter[]) => fs.map((f) => f.name);
const rbacPolicies = (f: Filter) => Object.keys(anyUnpack(f.configType.value as never, RBACSchema)!.rules!.policies);

t.test('sidecar inbound: network RBAC before tcp_proxy on TCP and passthrough chains, in the HCM on HTTP ones', async (t) => {
  const store = new ListStore(configs);
  const push = initPushContext(store, buildRegistries(store, []));
  const l: Listener = buildVirtualInboundListener(sc, push, security(t));
  const chain = (n: string) => l.filterChains.find((c) => c.name === n)!;
  // Istio buildCompleteNetworkFilters: the TCP metadata exchange goes first, then authorization
  const MX = 'istio.metadata_exchange';
  t.same(names(chain('0.0.0.0_15432').filters), [MX, NAME, 'envoy.filters.network.tcp_proxy']);
  t.same(rbacPolicies(chain('0.0.0.0_15432').filters[1]!), ['ns[apps]-policy[deny-ip]-rule[0]']);
  t.same(names(chain('virtualInbound').filters), [MX, NAME, 'envoy.filters.network.tcp_proxy'], 'inbound passthrough TCP');
  t.same(names(chain('virtualInbound-blackhole').filters), [MX, 'envoy.filters.network.tcp_proxy'], 'not on the blackhole chain');
  const http = chain('0.0.0.0_8080').filters;
  t.same(names(http), [MX, 'envoy.filters.network.http_connection_manager'], 'HTTP chains keep the HTTP filter');
  const hcm = anyUnpack(http[1]!.configType.value as never, HttpConnectionManagerSchema)!;
  t.ok(hcm.httpFilters.some((f) => f.name === 'envoy.filters.http.rbac'));

  const outbound = buildSidecarOutboundListeners(sc, push, security(t));
  for (const ol of outbound) for (const c of ol.filterChains) t.notOk(names(c.filters).includes(NAME), `no network RBAC on outbound ${ol.name}`);
});

t.test('gateway: network RBAC before tcp_proxy on TCP and TLS passthrough servers', async (t) => {
  const store = new ListStore(configs);
  const push = initPushContext(store, buildRegistries(store, []));
  const ls = buildGatewayListeners(gw, push, security(t));
  const tcp = ls.find((l) => l.name === '0.0.0.0_31400');
  const tls = ls.find((l) => l.name === '0.0.0.0_443');
  t.ok(tcp && tls, 'both listeners');
  for (const l of [tcp!, tls!]) {
    t.equal(l.filterChains.length, 1, l.name);
    t.same(names(l.filterChains[0]!.filters), [NAME, 'envoy.filters.network.tcp_proxy'], l.name);
    t.same(rbacPolicies(l.filterChains[0]!.filters[0]!), ['ns[mesh-system]-policy[gw-allow]-rule[0]'], l.name);
  }
  t.same(
    names(buildGatewayListeners(gw, push, {})[0]!.filterChains[0]!.filters),
    ['envoy.filters.network.tcp_proxy'],
    'without security builders: tcp_proxy only',
  );
});
