// The built `pilot-discovery discovery --configDir` serving a router proxy over ADS: a Gateway, a
// RequestAuthentication whose jwksUri is a live key server on loopback, an AuthorizationPolicy and a
// VirtualService routing on a claim. The LDS answer must inline the server's keys (after the reject-all
// placeholder, if the proxy asked first), carry the RBAC filter, follow a key rotation after the refresh
// interval, and the RDS answer must route on the claim through jwt_authn metadata.
import t from 'tap';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { ListenerSchema, type Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { RouteConfigurationSchema, type RouteConfiguration } from '../../src/gen/envoy/config/route/v3/route_pb';
import { JwtAuthenticationSchema, type JwtAuthentication } from '../../src/gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import { RBACSchema } from '../../src/gen/envoy/extensions/filters/http/rbac/v3/rbac_pb';
import { MetadataMatcherSchema } from '../../src/gen/envoy/type/matcher/v3/metadata_pb';
import {
  HttpConnectionManagerSchema,
  type HttpConnectionManager,
} from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import type { DiscoveryResponse } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { createFakeJwks } from '../../src/security/jwks/keyset';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { SotwStream } from '../xds/server/helpers';
import { deadPort, jwksDocument, rsaKey, startKeyServer } from './helpers';
import { gatewayDoc, serviceEntryDoc, virtualServiceDoc, yamlDocs } from '../helpers/mesh-yaml';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const RDS = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const ISSUER = 'https://issuer.mesh.test';

function configFiles(dir: string, gwPort: number, jwksUri: string): void {
  writeFileSync(
    path.join(dir, 'gateway.yaml'),
    yamlDocs(
      gatewayDoc(gwPort),
      serviceEntryDoc('httpbin', { targetPort: 18080 }),
      virtualServiceDoc('claims', {
        http: `  - match:
    - uri: {prefix: /headers}
      headers:
        "@request.auth.claims.groups": {exact: group1}
    route:
    - destination: {host: httpbin.demo.svc.cluster.local, port: {number: 80}}
`,
      }),
    ),
  );
  writeFileSync(
    path.join(dir, 'security.yaml'),
    `apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: jwt, namespace: mesh-system}
spec:
  selector:
    matchLabels: {mesh: ingressgateway}
  jwtRules:
  - issuer: ${ISSUER}
    jwksUri: ${jwksUri}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: require-jwt, namespace: mesh-system}
spec:
  selector:
    matchLabels: {mesh: ingressgateway}
  action: ALLOW
  rules:
  - from:
    - source:
        requestPrincipals: ["*"]
`,
  );
}

function gatewayNode() {
  return create(NodeSchema, {
    id: 'router~127.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local',
    cluster: 'istio-ingressgateway.mesh-system',
    metadata: { NAMESPACE: 'mesh-system', LABELS: { mesh: 'ingressgateway' }, MESH_VERSION: '1.26.0', INSTANCE_IPS: '127.0.0.1' },
  });
}

function hcmOf(l: Listener): HttpConnectionManager {
  const f = l.filterChains.flatMap((fc) => fc.filters).find((x) => x.name === 'envoy.filters.network.http_connection_manager');
  if (!f || f.configType.case !== 'typedConfig') throw new Error(`listener ${l.name} has no HTTP connection manager`);
  return anyUnpack(f.configType.value, HttpConnectionManagerSchema)!;
}

function jwtConfig(h: HttpConnectionManager): JwtAuthentication | undefined {
  const f = h.httpFilters.find((x) => x.name === 'envoy.filters.http.jwt_authn');
  return f && f.configType.case === 'typedConfig' ? anyUnpack(f.configType.value, JwtAuthenticationSchema) : undefined;
}

function inlineKeys(h: HttpConnectionManager): string | undefined {
  const p = jwtConfig(h)?.providers['origins-0'];
  const src = p?.jwksSourceSpecifier;
  return src?.case === 'localJwks' && src.value.specifier.case === 'inlineString' ? src.value.specifier.value : undefined;
}

/** Reads LDS answers (ACKing each) until one satisfies `ok`. */
async function listenerUntil(ads: SotwStream, ok: (l: Listener) => boolean, what: string, timeoutMs = 20_000): Promise<Listener> {
  const deadline = Date.now() + timeoutMs;
  let last: string = 'nothing';
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) throw new Error(`timed out waiting for ${what}; last LDS: ${last}`);
    const r: DiscoveryResponse = await ads.next(what, left);
    ads.ack(r, r.typeUrl === RDS ? [...routeNames] : []);
    if (r.typeUrl !== LDS) continue;
    const ls = r.resources.map((a) => anyUnpack(a, ListenerSchema)!);
    last = ls.map((l) => l.name).join(',');
    const hit = ls.find(ok);
    if (hit) return hit;
  }
}
const routeNames = new Set<string>();

t.test('a router proxy gets jwt_authn with the live key set, the RBAC filter, rotations and the claim route', async (t) => {
  const dir = tempDir(t, 'mesh-security-daemon-');
  const k1 = rsaKey('k1');
  const doc1 = jwksDocument(k1);
  const keys = await startKeyServer(doc1);
  t.teardown(() => keys.close());
  const gwPort = await deadPort();
  configFiles(dir, gwPort, keys.url('/.well-known/jwks.json'));

  let daemon: RunningDaemon | undefined = await startDaemon(['--configDir', dir], { PILOT_JWT_PUB_KEY_REFRESH_INTERVAL: '300ms' });
  t.teardown(async () => {
    await daemon?.stop();
  });
  const ads = new SotwStream(daemon.grpc);
  t.teardown(() => ads.close());
  ads.send({ node: gatewayNode(), typeUrl: LDS });

  const listenerName = `0.0.0.0_${gwPort}`;
  const withKeys = await listenerUntil(
    ads,
    (l) => l.name === listenerName && inlineKeys(hcmOf(l)) === doc1,
    "LDS with the key server's keys inlined",
  );
  const hcm = hcmOf(withKeys);
  t.same(
    hcm.httpFilters.map((f) => f.name),
    [
      // metadata exchange goes first (Istio appendMxFilter)
      'istio.metadata_exchange',
      'envoy.filters.http.jwt_authn',
      'envoy.filters.http.rbac',
      'envoy.filters.http.grpc_stats',
      'istio.alpn',
      'envoy.filters.http.fault',
      'envoy.filters.http.cors',
      'envoy.filters.http.router',
    ],
    'Istio filter order: authn, authz, then the rest',
  );
  const jwt = toJson(JwtAuthenticationSchema, jwtConfig(hcm)!, { registry: envoyTypeRegistry() }) as Record<string, JsonValue>;
  t.same(jwt, {
    providers: {
      'origins-0': {
        issuer: ISSUER,
        localJwks: { inlineString: doc1 },
        payloadInMetadata: 'payload',
        normalizePayloadInMetadata: { spaceDelimitedClaims: ['scope', 'permission'] },
        clearRouteCache: true,
      },
    },
    rules: [{ match: { prefix: '/' }, requires: { requiresAny: { requirements: [{ providerName: 'origins-0' }, { allowMissing: {} }] } } }],
    bypassCorsPreflight: true,
  });
  const rbacFilter = hcm.httpFilters.find((f) => f.name === 'envoy.filters.http.rbac')!;
  const rbac = toJson(RBACSchema, anyUnpack(rbacFilter.configType.value as never, RBACSchema)!, { registry: envoyTypeRegistry() }) as {
    rules: { policies: Record<string, unknown> };
  };
  t.same(Object.keys(rbac.rules.policies), ['ns[mesh-system]-policy[require-jwt]-rule[0]'], 'the AuthorizationPolicy');

  // The claim route over RDS.
  const rdsName = hcm.routeSpecifier.case === 'rds' ? hcm.routeSpecifier.value.routeConfigName : '';
  t.equal(rdsName, `http.${gwPort}`);
  routeNames.add(rdsName);
  ads.send({ typeUrl: RDS, resourceNames: [rdsName] });
  let rc: RouteConfiguration | undefined;
  await waitFor(
    () => 'no RDS answer',
    async () => {
      const r = await ads.next('RDS answer', 10_000);
      ads.ack(r, r.typeUrl === RDS ? [rdsName] : []);
      if (r.typeUrl === RDS) rc = anyUnpack(r.resources[0]!, RouteConfigurationSchema);
      return rc !== undefined;
    },
    { timeoutMs: 15_000 },
  );
  const route = rc!.virtualHosts
    .flatMap((v) => v.routes)
    .find((r) => r.match?.pathSpecifier.case === 'prefix' && r.match.pathSpecifier.value === '/headers');
  t.ok(route, 'the /headers route');
  t.same(route!.match!.headers, [], 'the claim is not an HTTP header match');
  t.same(
    route!.match!.dynamicMetadata.map((m) => toJson(MetadataMatcherSchema, m)),
    [
      {
        filter: 'envoy.filters.http.jwt_authn',
        path: [{ key: 'payload' }, { key: 'groups' }],
        value: { orMatch: { valueMatchers: [{ listMatch: { oneOf: { stringMatch: { exact: 'group1' } } } }, { stringMatch: { exact: 'group1' } }] } },
      },
    ],
  );

  // Rotation at the key server: picked up by the refresh and pushed.
  const k2 = rsaKey('k2');
  const doc2 = jwksDocument(k2);
  keys.serve(doc2);
  await listenerUntil(ads, (l) => l.name === listenerName && inlineKeys(hcmOf(l)) === doc2, 'LDS with the rotated key set');
  t.pass('rotated keys pushed');

  const metrics = await (await fetch(`http://${daemon.monitoring}/metrics`)).text();
  const ok = /^pilot_jwks_resolver_network_fetch_success_total (\d+)/m.exec(metrics);
  t.ok(ok && Number(ok[1]) >= 2, `fetch successes counted (${ok?.[1]})`);
  t.match(metrics, /^pilot_jwks_resolver_network_fetch_fail_total \d+/m, 'failure counter exported');
  await daemon.stop();
  daemon = undefined;
});

t.test('a key server that is down: the proxy gets the reject-all key set, never no keys', async (t) => {
  const dir = tempDir(t, 'mesh-security-daemon-down-');
  const gwPort = await deadPort();
  const uri = `http://127.0.0.1:${await deadPort()}/jwks`;
  configFiles(dir, gwPort, uri);
  const daemon = await startDaemon(['--configDir', dir]);
  t.teardown(() => daemon.stop());
  const ads = new SotwStream(daemon.grpc);
  t.teardown(() => ads.close());
  ads.send({ node: gatewayNode(), typeUrl: LDS });
  const l = await listenerUntil(ads, (x) => x.name === `0.0.0.0_${gwPort}`, 'the gateway listener');
  // the reject-everything key set for this URI (a P-256 key, since Envoy refuses Istio's RSA one: see keyset.ts)
  t.equal(inlineKeys(hcmOf(l)), createFakeJwks(uri), 'the fake JWKS');
  await waitFor(
    () => 'no failed fetch counted',
    async () => /^pilot_jwks_resolver_network_fetch_fail_total [1-9]/m.test(await (await fetch(`http://${daemon.monitoring}/metrics`)).text()),
    { timeoutMs: 15_000 },
  );
  t.pass('failed fetches counted');
});
