// RequestAuthentication → jwt_authn. Expected values are Istio's policy_applier_test TestJwtFilter /
// TestConvertToEnvoyJwtConfig goldens (Envoy JSON form): providers `origins-<i>` over the merged rules
// sorted by issuer, payload_in_metadata "payload", scope/permission normalisation, requires_any with
// allow_missing, bypass_cors_preflight; remote_jwks with a 5s timeout and a 5-minute cache.
import t, { type Test } from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { toJson, type JsonValue } from '@bufbuild/protobuf';
import type { Config, JWTRule } from '../../src/config/types';
import { initPushContext, type PushContext } from '../../src/discovery/push-context';
import { buildRegistries } from '../../src/discovery/registry';
import { ListenerSchema, type Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { JwtAuthenticationSchema } from '../../src/gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import {
  HttpConnectionManagerSchema,
  type HttpConnectionManager,
} from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { convertToEnvoyJwtConfig, jwtFilter, mergedJwtRules } from '../../src/security/authn/jwt-filter';
import { lookupCluster, parseJwksUri } from '../../src/security/authn/jwks-source';
import { securityGeneratorOptions } from '../../src/security/builders';
import { createFakeJwks } from '../../src/security/jwks/keyset';
import type { JwksFetchMode } from '../../src/security/jwks/mode';
import { JwksResolver } from '../../src/security/jwks/resolver';
import { generatorsFor } from '../../src/xds/gen';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import type { PushRequest } from '../../src/xds/types';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import { cfg, ListStore, proxy, internalService } from '../discovery/fixtures';
import { json, jwksDocument, rsaKey, startKeyServer } from './helpers';
import { waitFor } from '../helpers/wait';

const NORMALIZE = { spaceDelimitedClaims: ['scope', 'permission'] };
// Istio's TestJwtFilter inlines placeholder text; the daemon now sends only key sets the proxy can load
const INLINE_JWKS = jwksDocument(rsaKey('inline-1'));
const INLINE_JWKS_2 = jwksDocument(rsaKey('inline-2'));
const ONE_PROVIDER_RULES = [
  { match: { prefix: '/' }, requires: { requiresAny: { requirements: [{ providerName: 'origins-0' }, { allowMissing: {} }] } } },
];

function pushWith(configs: Config[]): PushContext {
  const store = new ListStore(configs);
  return initPushContext(store, buildRegistries(store, []));
}

function newResolver(t: Test): JwksResolver {
  const r = new JwksResolver({ refreshIntervalMs: 3_600_000, retryIntervalMs: 10, retriesOnRefresh: 0, caBundlePaths: [] });
  t.teardown(() => r.close());
  return r;
}

function convert(rules: JWTRule[], o: { resolver: JwksResolver; mode?: JwksFetchMode; push?: PushContext; gateway?: boolean }): JsonValue {
  const c = convertToEnvoyJwtConfig(rules, o.gateway ?? false, { mode: o.mode ?? 'istiod', resolver: o.resolver, push: o.push ?? pushWith([]) });
  return c === undefined ? null : json(JwtAuthenticationSchema, c);
}

const meshIssuerService = cfg('ServiceEntry', 'mesh', 'issuer', {
  hosts: ['jwt-token-issuer.mesh'],
  location: 'MESH_INTERNAL',
  resolution: 'DNS',
  ports: [{ number: 7443, name: 'http', protocol: 'HTTP' }],
});

t.test('no rules, no filter (Istio "No policy" / "Empty policy")', async (t) => {
  const r = newResolver(t);
  t.equal(convert([], { resolver: r }), null);
  t.equal(jwtFilter([cfg('RequestAuthentication', 'foo', 'empty', {})], false, { mode: 'istiod', resolver: r, push: pushWith([]) }), undefined);
});

t.test('single JWT rule with jwksUri: the daemon inlines the fetched keys (Istio "Single JWT policy")', async (t) => {
  const doc = jwksDocument(rsaKey('k1'));
  const srv = await startKeyServer(doc);
  t.teardown(() => srv.close());
  const r = newResolver(t);
  const rules: JWTRule[] = [{ issuer: 'https://secret.foo.com', jwksUri: srv.url('/oauth2/v3/certs') }];
  const golden = (keys: string) => ({
    rules: ONE_PROVIDER_RULES,
    providers: {
      'origins-0': {
        issuer: 'https://secret.foo.com',
        localJwks: { inlineString: keys },
        payloadInMetadata: 'payload',
        normalizePayloadInMetadata: NORMALIZE,
      },
    },
    bypassCorsPreflight: true,
  });
  t.same(
    convert(rules, { resolver: r }),
    golden(createFakeJwks(srv.url('/oauth2/v3/certs'))),
    'before the first fetch completes: the reject-all keys',
  );
  await waitFor('keys fetched', () => r.getPublicKey('https://secret.foo.com', srv.url('/oauth2/v3/certs')) !== undefined, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.same(convert(rules, { resolver: r }), golden(doc), "then the key server's document");
});

t.test('a bad jwksUri gets the fake key set (Istio "JWT policy with bad Jwks URI")', async (t) => {
  const r = newResolver(t);
  const got = convert([{ issuer: 'https://secret.foo.com', jwksUri: 'http://site.not.exist' }], { resolver: r }) as {
    providers: Record<string, { localJwks: unknown }>;
  };
  t.same(got.providers['origins-0']!.localJwks, { inlineString: createFakeJwks('http://site.not.exist') });
});

t.test('inline jwks, forwarding and payload/claim headers (Istio TestJwtFilter cases)', async (t) => {
  const r = newResolver(t);
  const base = { issuer: 'https://secret.foo.com', jwks: INLINE_JWKS };
  const provider = (rule: JWTRule) => (convert([rule], { resolver: r }) as { providers: Record<string, JsonValue> }).providers['origins-0'];
  const common = {
    issuer: 'https://secret.foo.com',
    localJwks: { inlineString: INLINE_JWKS },
    payloadInMetadata: 'payload',
    normalizePayloadInMetadata: NORMALIZE,
  };
  t.same(provider(base), common, 'JWT policy with inline Jwks');
  t.same(provider({ ...base, forwardOriginalToken: true }), { ...common, forward: true }, 'Forward original token');
  t.same(
    provider({ ...base, forwardOriginalToken: true, outputPayloadToHeader: 'x-foo' }),
    { ...common, forward: true, forwardPayloadHeader: 'x-foo' },
    'Output payload',
  );
  t.same(
    provider({
      ...base,
      forwardOriginalToken: true,
      outputClaimToHeaders: [
        { header: 'x-jwt-key1', claim: 'value1' },
        { header: 'x-jwt-key2', claim: 'value2' },
      ],
    }),
    {
      ...common,
      forward: true,
      claimToHeaders: [
        { headerName: 'x-jwt-key1', claimName: 'value1' },
        { headerName: 'x-jwt-key2', claimName: 'value2' },
      ],
    },
    'Output claim to header',
  );
  t.same(
    provider({
      ...base,
      audiences: ['a1', 'a2'],
      fromHeaders: [{ name: 'x-jwt', prefix: 'Token ' }, { name: 'x-raw' }],
      fromParams: ['token'],
      fromCookies: ['session'],
    }),
    {
      ...common,
      audiences: ['a1', 'a2'],
      fromHeaders: [{ name: 'x-jwt', valuePrefix: 'Token ' }, { name: 'x-raw' }],
      fromParams: ['token'],
      fromCookies: ['session'],
    },
    "audiences and token locations as written; none written means Envoy's default (Authorization: Bearer, access_token)",
  );
  t.same(
    (convert([base], { resolver: r, gateway: true }) as { providers: Record<string, JsonValue> }).providers['origins-0'],
    { ...common, clearRouteCache: true },
    'on gateways the route is re-selected after validation',
  );
});

t.test('several rules: sorted by issuer, any single provider or all present tokens valid (Istio "Multi JWTs policy")', async (t) => {
  const doc = jwksDocument(rsaKey('k1'));
  const srv = await startKeyServer(doc);
  t.teardown(() => srv.close());
  const r = newResolver(t);
  const policies = [
    cfg('RequestAuthentication', 'foo', 'p1', { jwtRules: [{ issuer: 'https://secret.foo.com', jwksUri: srv.url() }] }),
    cfg('RequestAuthentication', 'foo', 'p2', {}),
    cfg('RequestAuthentication', 'foo', 'p3', { jwtRules: [{ issuer: 'https://secret.bar.com', jwks: INLINE_JWKS_2 }] }),
  ];
  t.same(
    mergedJwtRules(policies).map((x) => x.issuer),
    ['https://secret.bar.com', 'https://secret.foo.com'],
  );
  r.getPublicKey('https://secret.foo.com', srv.url());
  await waitFor('keys', () => r.getPublicKey('https://secret.foo.com', srv.url()) !== undefined, { timeoutMs: 10_000, intervalMs: 20 });
  const f = jwtFilter(policies, false, { mode: 'istiod', resolver: r, push: pushWith([]) })!;
  t.equal(f.name, 'envoy.filters.http.jwt_authn');
  t.equal(f.configType.case, 'typedConfig');
  const got = toJson(JwtAuthenticationSchema, anyUnpack(f.configType.value as never, JwtAuthenticationSchema)!, { registry: envoyTypeRegistry() });
  const anyOrMissing = (name: string) => ({ requiresAny: { requirements: [{ providerName: name }, { allowMissing: {} }] } });
  t.same(got, {
    providers: {
      'origins-0': {
        issuer: 'https://secret.bar.com',
        localJwks: { inlineString: INLINE_JWKS_2 },
        payloadInMetadata: 'payload',
        normalizePayloadInMetadata: NORMALIZE,
      },
      'origins-1': {
        issuer: 'https://secret.foo.com',
        localJwks: { inlineString: doc },
        payloadInMetadata: 'payload',
        normalizePayloadInMetadata: NORMALIZE,
      },
    },
    rules: [
      {
        match: { prefix: '/' },
        requires: {
          requiresAny: {
            requirements: [
              { providerName: 'origins-0' },
              { providerName: 'origins-1' },
              { requiresAll: { requirements: [anyOrMissing('origins-0'), anyOrMissing('origins-1')] } },
            ],
          },
        },
      },
    ],
    bypassCorsPreflight: true,
  });
});

t.test('PILOT_JWT_ENABLE_REMOTE_JWKS: who fetches (Istio remote jwks mode cases)', async (t) => {
  const r = newResolver(t);
  const push = pushWith([meshIssuerService]);
  const providerOf = (rule: JWTRule, mode: JwksFetchMode) =>
    (convert([rule], { resolver: r, mode, push }) as { providers: Record<string, Record<string, JsonValue>> }).providers['origins-0']!;
  const remote = (uri: string, cluster: string, timeout = '5s') => ({ httpUri: { uri, cluster, timeout }, cacheDuration: '300s' });

  const meshRule = { issuer: 'mesh cluster', jwksUri: 'http://jwt-token-issuer.mesh:7443/jwks' };
  t.same(
    providerOf(meshRule, 'hybrid').remoteJwks,
    remote(meshRule.jwksUri, 'outbound|7443||jwt-token-issuer.mesh'),
    'hybrid, key server in the registry: the proxy fetches',
  );
  t.same(
    providerOf(meshRule, 'envoy').remoteJwks,
    remote(meshRule.jwksUri, 'outbound|7443||jwt-token-issuer.mesh'),
    'envoy, key server in the registry',
  );
  t.same(
    providerOf({ ...meshRule, timeout: '2s' }, 'envoy').remoteJwks,
    remote(meshRule.jwksUri, 'outbound|7443||jwt-token-issuer.mesh', '2s'),
    'the rule timeout is the fetch timeout',
  );
  t.ok(providerOf(meshRule, 'istiod').localJwks, 'istiod: the daemon fetches even in-mesh key servers');

  const outside = { issuer: 'invalid|7443|', jwksUri: 'http://invalid-issuer.com:7443/jwks' };
  t.same(
    providerOf(outside, 'envoy').remoteJwks,
    remote(outside.jwksUri, 'outbound|7443||invalid-issuer.com'),
    'envoy, key server outside the registry: a cluster named after the URI',
  );
  t.same(
    providerOf(outside, 'hybrid').localJwks,
    { inlineString: createFakeJwks(outside.jwksUri) },
    'hybrid, outside the registry: the daemon fetches (fake keys until it has them)',
  );
  t.same(
    providerOf({ issuer: 'x', jwksUri: 'https://keys.example.com/jwks' }, 'envoy').remoteJwks,
    remote('https://keys.example.com/jwks', 'outbound|443||keys.example.com'),
    'https defaults to port 443',
  );
});

t.test('jwksUri parsing and registry lookup (Istio ParseJwksURI / LookupCluster)', async (t) => {
  t.same(parseJwksUri('http://a.example/jwks'), { hostname: 'a.example', port: 80, scheme: 'http' });
  t.same(parseJwksUri('https://a.example/jwks'), { hostname: 'a.example', port: 443, scheme: 'https' });
  t.same(parseJwksUri('https://[::1]:8443/k'), { hostname: '::1', port: 8443, scheme: 'https' });
  t.throws(() => parseJwksUri('ftp://a.example/x'), /URI scheme "ftp" is not supported/);
  const twice = cfg('ServiceEntry', 'other', 'issuer', {
    hosts: ['jwt-token-issuer.mesh'],
    location: 'MESH_INTERNAL',
    resolution: 'DNS',
    ports: [{ number: 7443, name: 'http', protocol: 'HTTP' }],
  });
  t.same(lookupCluster(pushWith([meshIssuerService]), 'jwt-token-issuer.mesh', 7443), { cluster: 'outbound|7443||jwt-token-issuer.mesh' });
  t.match(lookupCluster(pushWith([meshIssuerService, twice]), 'jwt-token-issuer.mesh', 7443), { error: /multiple namespaces \[mesh other\]/ });
  t.match(lookupCluster(pushWith([]), 'nowhere.example', 80), { error: /could not find service nowhere.example/ });
});

t.test('generated listeners: jwt_authn first on gateways and sidecar inbound, never on sidecar outbound', async (t) => {
  const r = newResolver(t);
  const configs: Config[] = [
    cfg('Gateway', 'mesh-system', 'gw', {
      selector: { mesh: 'ingressgateway' },
      servers: [{ port: { number: 8080, name: 'http', protocol: 'HTTP' }, hosts: ['*'] }],
    }),
    cfg('RequestAuthentication', 'mesh-system', 'gw-jwt', {
      selector: { matchLabels: { mesh: 'ingressgateway' } },
      jwtRules: [{ issuer: 'iss-gw', jwks: '{"keys":[]}' }],
    }),
    cfg('RequestAuthentication', 'apps', 'app-jwt', {
      selector: { matchLabels: { app: 'web' } },
      jwtRules: [{ issuer: 'iss-app', jwks: '{"keys":[]}' }],
    }),
    cfg('RequestAuthentication', 'other', 'elsewhere', { jwtRules: [{ issuer: 'iss-other', jwks: '{"keys":[]}' }] }),
    internalService('apps', 'web', {
      ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
      workloadSelector: { matchLabels: { app: 'web' } },
    }),
    cfg('WorkloadEntry', 'apps', 'web-1', { address: '10.1.0.1', labels: { app: 'web' } }),
  ];
  const push = pushWith(configs);
  const opts = securityGeneratorOptions({ mode: 'istiod', resolver: r });
  const req: PushRequest<PushContext> = { full: true, configsUpdated: new Set(), edsUpdates: new Set(), reasons: new Map(), push, start: Date.now() };
  const listeners = (p: ReturnType<typeof proxy>) =>
    generatorsFor(p, opts)
      [TYPE_URL.listener]!.generate(p, { typeUrl: TYPE_URL.listener, resourceNames: new Set(), wildcard: true }, req)
      .resources.map((x) => anyUnpack(x.resource, ListenerSchema) as Listener);
  const hcms = (l: Listener): HttpConnectionManager[] =>
    l.filterChains
      .flatMap((fc) => fc.filters)
      .filter((f) => f.configType.case === 'typedConfig' && f.configType.value.typeUrl.endsWith('HttpConnectionManager'))
      .map((f) => anyUnpack(f.configType.value as never, HttpConnectionManagerSchema)!);
  const issuers = (h: HttpConnectionManager) => {
    const jf = h.httpFilters.find((f) => f.name === 'envoy.filters.http.jwt_authn');
    if (!jf || jf.configType.case !== 'typedConfig') return undefined;
    const c = anyUnpack(jf.configType.value, JwtAuthenticationSchema)!;
    return { issuers: Object.values(c.providers).map((p) => p.issuer), clear: Object.values(c.providers).every((p) => p.clearRouteCache) };
  };

  const gw = proxy('router~10.0.0.9~gw-1.mesh-system~mesh-system.svc.cluster.local', {
    NAMESPACE: 'mesh-system',
    LABELS: { mesh: 'ingressgateway' },
  });
  const gwl = listeners(gw);
  t.same(
    gwl.map((l) => l.name),
    ['0.0.0.0_8080'],
  );
  const gwh = hcms(gwl[0]!)[0]!;
  t.same(
    gwh.httpFilters.map((f) => f.name),
    [
      // Istio's order: metadata exchange before authentication (appendMxFilter)
      'istio.metadata_exchange',
      'envoy.filters.http.jwt_authn',
      'envoy.filters.http.grpc_stats',
      'istio.alpn',
      'envoy.filters.http.fault',
      'envoy.filters.http.cors',
      'envoy.filters.http.router',
    ],
  );
  t.same(issuers(gwh), { issuers: ['iss-gw'], clear: true }, 'the root-namespace policy selecting the gateway, clear_route_cache on');

  const sc = proxy('sidecar~10.1.0.1~web-1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'web' } });
  const inbound = listeners(sc).find((l) => l.name === 'virtualInbound')!;
  const servicePort = inbound.filterChains.find((fc) => fc.name === '0.0.0.0_80')!;
  t.ok(servicePort, 'the inbound chain of the service port');
  const inboundHttp = hcms({ ...inbound, filterChains: [servicePort] } as Listener);
  t.equal(inboundHttp.length, 1);
  t.same(issuers(inboundHttp[0]!), { issuers: ['iss-app'], clear: false }, 'own namespace policy, route cache kept');
  const outbound = listeners(sc)
    .filter((l) => l.name !== 'virtualInbound')
    .flatMap(hcms);
  t.ok(outbound.length > 0, 'outbound HTTP listeners exist');
  for (const h of outbound) t.equal(issuers(h), undefined, 'no jwt_authn on outbound');
});
