// envoy.filters.http.jwt_authn: real keys (node:crypto / jose), real tokens signed by jose, the filter
// driven directly through its HttpStream contract and through the engine with real sockets (local and
// remote JWKS, claim-based routing with clear_route_cache). Expected statuses, bodies and headers are
// Envoy's (jwt_verify_lib status strings, www-authenticate format, stat names).
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import * as jose from 'jose';
import { JwtAuthenticationSchema, PerRouteConfigSchema } from '../../src/gen/envoy/extensions/filters/http/jwt_authn/v3/config_pb';
import type { FilterResult, HttpFilter, HttpStream, LocalReply } from '../../src/proxy/http/filter-api';
import type { UpstreamCall, UpstreamCallResult } from '../../src/proxy/common/cluster-call';
import { defaultFilterRegistry } from '../../src/proxy/http/filters/index';
import { jwtAuthnFilterFactory } from '../../src/proxy/http/filters/jwt-authn/index';
import { RequestHeaders } from '../../src/proxy/codec/headers';
import { LoggerRegistry } from '../../src/proxy/log';
import { compileMetadataMatcher, type DynamicMetadata } from '../../src/proxy/matchers/string';
import { ConfigError } from '../../src/proxy/common/config-error';
import { MetadataMatcherSchema } from '../../src/gen/envoy/type/matcher/v3/metadata_pb';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { StatsScope, StatsStore } from '../../src/proxy/stats/store';
import {
  adminGet,
  adsBootstrap,
  backend,
  cla,
  edsCluster,
  hcm,
  httpListener,
  pb,
  request,
  routeConfig,
  sock,
  startAds,
  startProxy,
  statValue,
  type RunningEngine,
  staticClusterJson,
  listenerJson,
  anyHost,
  staticBootstrap,
} from './helpers';
import { freePort } from '../helpers/ports';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

const JWT_AUTHN = 'envoy.filters.http.jwt_authn';
const JWT_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication';
const PER_ROUTE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig';
const ISS = 'https://issuer.example.com';
const now = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------------------------------------
// keys and tokens (jose signs; the filter verifies with its own code)

interface TestKey {
  alg: string;
  kid: string;
  privateKey: jose.CryptoKey | Uint8Array;
  jwk: JsonObject;
}

async function makeKey(alg: string, kid: string, opts: { crv?: string } = {}): Promise<TestKey> {
  if (alg.startsWith('HS')) {
    const secret = new Uint8Array(32).map((_, i) => (i * 37 + kid.length) & 0xff);
    return { alg, kid, privateKey: secret, jwk: { kty: 'oct', k: Buffer.from(secret).toString('base64url'), kid, alg } };
  }
  const { publicKey, privateKey } = await jose.generateKeyPair(alg, { extractable: true, ...(opts.crv ? { crv: opts.crv } : {}) });
  const jwk = (await jose.exportJWK(publicKey)) as JsonObject;
  return { alg, kid, privateKey, jwk: { ...jwk, kid, alg } };
}

async function sign(key: TestKey, claims: Record<string, unknown>, header: Record<string, unknown> = {}): Promise<string> {
  return new jose.SignJWT(claims as jose.JWTPayload).setProtectedHeader({ alg: key.alg, kid: key.kid, ...header }).sign(key.privateKey);
}

const jwks = (...keys: TestKey[]) => JSON.stringify({ keys: keys.map((k) => k.jwk) });

function payloadOf(token: string): JsonObject {
  return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as JsonObject;
}

// ---------------------------------------------------------------------------------------------
// driving the filter directly

interface Driven {
  filter: HttpFilter;
  store: StatsStore;
  stat(name: string): number;
}

function makeFilter(config: JsonObject, opts: { upstream?: (cluster: string, call: UpstreamCall) => Promise<UpstreamCallResult> } = {}): Driven {
  const store = new StatsStore();
  const msg = pb(JwtAuthenticationSchema, config);
  const filter = jwtAuthnFilterFactory.create(anyPack(JwtAuthenticationSchema, msg), {
    statPrefix: 'ingress',
    stats: new StatsScope(store, 'http.ingress.'),
    log: new LoggerRegistry('off', () => undefined),
    typeRegistry: proxyTypeRegistry(),
    upstream: opts.upstream ?? (() => Promise.reject(new Error('no upstream in this test'))),
    where: 'test.jwt_authn',
    filterName: JWT_AUTHN,
  });
  return { filter, store, stat: (n) => store.value(`http.ingress.jwt_authn.${n}`) ?? 0 };
}

class FakeStream {
  readonly dynamicMetadata: DynamicMetadata = new Map();
  readonly filterState = new Map<string, unknown>();
  routeClears = 0;
  perRoute: unknown;
  readonly request: RequestHeaders;
  constructor(p: string, headers: Record<string, string> = {}, method = 'GET') {
    this.request = new RequestHeaders(method, p, 'api.example.com', 'http', { ...headers });
  }
  get connection() {
    return { peerCertificatePresented: false, peerCertificateValidated: false } as HttpStream['connection'];
  }
  get info() {
    return {} as HttpStream['info'];
  }
  setDynamicMetadata(ns: string, values: JsonObject): void {
    this.dynamicMetadata.set(ns, { ...(this.dynamicMetadata.get(ns) ?? {}), ...values });
  }
  route() {
    return undefined;
  }
  clearRouteCache(): void {
    this.routeClears++;
  }
  perFilterConfig<T>(name: string): T | undefined {
    return name === JWT_AUTHN ? (this.perRoute as T) : undefined;
  }
  get payload(): JsonValue | undefined {
    return this.dynamicMetadata.get(JWT_AUTHN)?.['payload'];
  }
}

async function run(d: Driven, s: FakeStream): Promise<LocalReply | undefined> {
  const r: FilterResult | Promise<FilterResult> = d.filter.decodeHeaders(s as unknown as HttpStream);
  return r instanceof Promise ? await r : r;
}

const bearer = (tok: string) => ({ authorization: `Bearer ${tok}` });

function provider(keys: string, extra: JsonObject = {}): JsonObject {
  return { issuer: ISS, local_jwks: { inline_string: keys }, payload_in_metadata: 'payload', ...extra };
}

function oneProvider(keys: string, extra: JsonObject = {}, requires: JsonObject = { provider_name: 'p' }): JsonObject {
  return { providers: { p: provider(keys, extra) }, rules: [{ match: { prefix: '/' }, requires }] };
}

// ---------------------------------------------------------------------------------------------

t.test('every algorithm family verifies; a signature by another key is rejected', async (t) => {
  const families: Array<[string, { crv?: string }]> = [
    ['RS256', {}],
    ['RS384', {}],
    ['RS512', {}],
    ['PS256', {}],
    ['PS384', {}],
    ['PS512', {}],
    ['ES256', {}],
    ['ES384', {}],
    ['EdDSA', { crv: 'Ed25519' }],
    ['HS256', {}],
  ];
  for (const [alg, o] of families) {
    const key = await makeKey(alg, `k-${alg}`, o);
    const d = makeFilter(oneProvider(jwks(key)));
    const tok = await sign(key, { iss: ISS, sub: 'alice', exp: now() + 600 });
    const s = new FakeStream('/x', bearer(tok));
    t.equal(await run(d, s), undefined, `${alg}: valid token passes`);
    t.same(s.payload, payloadOf(tok), `${alg}: payload in metadata`);
    // same kid, different key: the only candidate key fails the signature
    const other = await makeKey(alg, `k-${alg}`, o);
    if (alg.startsWith('HS')) other.privateKey = new Uint8Array(32).fill(7);
    const forged = await sign(other, { iss: ISS, sub: 'alice', exp: now() + 600 });
    const bad = await run(d, new FakeStream('/x?q=1', bearer(forged)));
    t.equal(bad?.status, 401, `${alg}: forged token → 401`);
    t.equal(bad?.body, 'Jwt verification fails');
    t.equal(bad?.headers?.['www-authenticate'], 'Bearer realm="http://api.example.com/x?q=1", error="invalid_token"');
    t.equal(bad?.details, 'jwt_authn_access_denied{Jwt_verification_fails}');
    t.equal(d.stat('allowed'), 1);
    t.equal(d.stat('denied'), 1);
  }
});

t.test('kid and alg select keys', async (t) => {
  const a = await makeKey('RS256', 'a');
  const b = await makeKey('RS256', 'b');
  const d = makeFilter(oneProvider(jwks(a, b)));
  t.equal(await run(d, new FakeStream('/', bearer(await sign(b, { iss: ISS })))), undefined, 'the key with the token kid is used');
  const unknownKid = await run(d, new FakeStream('/', bearer(await sign(a, { iss: ISS }, { kid: 'zzz' }))));
  t.equal(unknownKid?.body, "Jwks doesn't have key to match kid or alg from Jwt");
  // a key set with only ES256 keys cannot check an RS256 token
  const ec = await makeKey('ES256', 'a');
  const d2 = makeFilter(oneProvider(jwks(ec)));
  t.equal((await run(d2, new FakeStream('/', bearer(await sign(a, { iss: ISS })))))?.body, "Jwks doesn't have key to match kid or alg from Jwt");
  // no kid in the token: every key is tried
  const noKid = await new jose.SignJWT({ iss: ISS }).setProtectedHeader({ alg: 'RS256' }).sign(b.privateKey);
  t.equal(await run(d, new FakeStream('/', bearer(noKid))), undefined);
});

t.test('exp and nbf with the 60 s default clock skew and a configured one', async (t) => {
  const k = await makeKey('RS256', 'k');
  const d = makeFilter(oneProvider(jwks(k)));
  const check = async (claims: Record<string, unknown>) => (await run(d, new FakeStream('/', bearer(await sign(k, { iss: ISS, ...claims })))))?.body;
  t.equal(await check({ exp: now() - 30 }), undefined, 'expired 30 s ago is inside the skew');
  t.equal(await check({ exp: now() - 120 }), 'Jwt is expired');
  t.equal(await check({ nbf: now() + 30 }), undefined, 'valid in 30 s is inside the skew');
  t.equal(await check({ nbf: now() + 120 }), 'Jwt not yet valid');
  t.equal(await check({}), undefined, 'no exp: no expiry');
  t.equal(await check({ exp: 'tomorrow' }), 'Jwt payload [exp] field is not an integer');
  const strict = makeFilter(oneProvider(jwks(k), { clock_skew_seconds: 5 }));
  const r = await run(strict, new FakeStream('/', bearer(await sign(k, { iss: ISS, exp: now() - 30 }))));
  t.equal(r?.status, 401);
  t.equal(r?.body, 'Jwt is expired');
  const req = makeFilter(oneProvider(jwks(k), { require_expiration: true }));
  t.equal(
    (await run(req, new FakeStream('/', bearer(await sign(k, { iss: ISS })))))?.body,
    'Jwt is expired',
    'require_expiration rejects a token without exp',
  );
  const maxLife = makeFilter(oneProvider(jwks(k), { max_lifetime: '3600s' }));
  t.equal(
    (await run(maxLife, new FakeStream('/', bearer(await sign(k, { iss: ISS, exp: now() + 7200 })))))?.body,
    'Jwt is expired',
    'lifetime above max_lifetime',
  );
  t.equal(await run(maxLife, new FakeStream('/', bearer(await sign(k, { iss: ISS, exp: now() + 600 })))), undefined);
});

t.test('issuer, audiences and subjects', async (t) => {
  const k = await makeKey('ES256', 'k');
  const d = makeFilter(oneProvider(jwks(k), { audiences: ['https://api.example.com/', 'mobile'] }));
  const wrongIss = await run(d, new FakeStream('/', bearer(await sign(k, { iss: 'https://evil.example.com', aud: 'mobile' }))));
  t.equal(wrongIss?.status, 401);
  t.equal(wrongIss?.body, 'Jwt issuer is not configured');
  t.equal(
    await run(d, new FakeStream('/', bearer(await sign(k, { iss: ISS, aud: 'api.example.com' })))),
    undefined,
    'scheme and trailing slash are ignored',
  );
  t.equal(await run(d, new FakeStream('/', bearer(await sign(k, { iss: ISS, aud: ['x', 'mobile'] })))), undefined, 'any listed audience');
  const wrongAud = await run(d, new FakeStream('/', bearer(await sign(k, { iss: ISS, aud: 'web' }))));
  t.equal(wrongAud?.status, 403, 'a disallowed audience is 403 in Envoy');
  t.equal(wrongAud?.body, 'Audiences in Jwt are not allowed');
  t.equal((await run(d, new FakeStream('/', bearer(await sign(k, { iss: ISS })))))?.status, 403, 'no aud when audiences are configured');
  // provider_and_audiences overrides the provider's list
  const pa = makeFilter(oneProvider(jwks(k), { audiences: ['mobile'] }, { provider_and_audiences: { provider_name: 'p', audiences: ['web'] } }));
  t.equal(await run(pa, new FakeStream('/', bearer(await sign(k, { iss: ISS, aud: 'web' })))), undefined);
  t.equal((await run(pa, new FakeStream('/', bearer(await sign(k, { iss: ISS, aud: 'mobile' })))))?.status, 403);
  const sub = makeFilter(oneProvider(jwks(k), { subjects: { prefix: 'spiffe://example.com/' } }));
  t.equal(await run(sub, new FakeStream('/', bearer(await sign(k, { iss: ISS, sub: 'spiffe://example.com/a' })))), undefined);
  t.equal((await run(sub, new FakeStream('/', bearer(await sign(k, { iss: ISS, sub: 'spiffe://other/a' })))))?.body, 'Jwt verification fails');
});

t.test('malformed tokens get the library status strings', async (t) => {
  const k = await makeKey('RS256', 'k');
  const d = makeFilter(oneProvider(jwks(k)));
  const body = async (tok: string) => (await run(d, new FakeStream('/', bearer(tok))))?.body;
  t.equal(await body('abc.def'), 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections');
  t.equal(await body('a.b.c.d'), 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections');
  t.equal(await body('a..c'), 'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections');
  t.equal(await body('a.e30.c2ln'), 'Jwt header is an invalid Base64url encoded');
  t.equal(
    await body('@@@.e30.c2ln'),
    'Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections',
    'extraction starts at the first base64url character',
  );
  const h = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  t.equal(await body(`${Buffer.from('{nope').toString('base64url')}.e30.c2ln`), 'Jwt header is an invalid JSON');
  t.equal(await body(`${h({ typ: 'JWT' })}.e30.c2ln`), 'Jwt header [alg] field is required and must be a string');
  t.equal(await body(`${h({ alg: 'none' })}.e30.c2ln`), 'Jwt header [alg] is not supported');
  t.equal(await body(`${h({ alg: 'RS256' })}.${h({ iss: 7 })}.c2ln`), 'Jwt payload [iss] field is not a string');
  t.equal(await body(`${h({ alg: 'RS256' })}.${h({ iss: ISS, aud: 5 })}.c2ln`), 'Jwt payload [aud] field is not a string or string list');
});

t.test('missing tokens: provider_name vs allow_missing vs allow_missing_or_failed', async (t) => {
  const k = await makeKey('RS256', 'k');
  const required = makeFilter(oneProvider(jwks(k)));
  const missing = await run(required, new FakeStream('/p?a=b'));
  t.equal(missing?.status, 401);
  t.equal(missing?.body, 'Jwt is missing');
  t.equal(missing?.headers?.['www-authenticate'], 'Bearer realm="http://api.example.com/p?a=b"', 'no error= for a missing token');

  // Istio's requirement: requires_any [provider, allow_missing]
  const optional = makeFilter(oneProvider(jwks(k), {}, { requires_any: { requirements: [{ provider_name: 'p' }, { allow_missing: {} }] } }));
  const s = new FakeStream('/');
  t.equal(await run(optional, s), undefined, 'no token passes');
  t.equal(s.dynamicMetadata.get(JWT_AUTHN), undefined, 'and leaves no metadata');
  t.equal((await run(optional, new FakeStream('/', bearer('not.a.jwt'))))?.status, 401, 'a bad token still fails');
  const other = await makeKey('RS256', 'k');
  t.equal((await run(optional, new FakeStream('/', bearer(await sign(other, { iss: ISS })))))?.body, 'Jwt verification fails');
  t.equal((await run(optional, new FakeStream('/', bearer(await sign(k, { iss: 'https://nobody' })))))?.body, 'Jwt issuer is not configured');

  const topMissing = makeFilter(oneProvider(jwks(k), {}, { allow_missing: {} }));
  t.equal(await run(topMissing, new FakeStream('/')), undefined);
  const good = new FakeStream('/', bearer(await sign(k, { iss: ISS, sub: 'a' })));
  t.equal(await run(topMissing, good), undefined);
  t.equal((good.payload as JsonObject)['sub'], 'a', 'allow_missing still verifies and publishes a present token');
  t.equal((await run(topMissing, new FakeStream('/', bearer(await sign(other, { iss: ISS })))))?.status, 401);

  const orFailed = makeFilter(oneProvider(jwks(k), {}, { allow_missing_or_failed: {} }));
  const failed = new FakeStream('/', bearer(await sign(other, { iss: ISS })));
  t.equal(await run(orFailed, failed), undefined, 'allow_missing_or_failed lets a bad token through');
  t.equal(failed.payload, undefined, 'without publishing its payload');
});

t.test('requires_any and requires_all over two providers', async (t) => {
  const a = await makeKey('RS256', 'a');
  const b = await makeKey('ES256', 'b');
  const providers = {
    pa: { issuer: 'https://a', local_jwks: { inline_string: jwks(a) }, from_headers: [{ name: 'x-token-a' }], payload_in_metadata: 'a' },
    pb: { issuer: 'https://b', local_jwks: { inline_string: jwks(b) }, from_headers: [{ name: 'x-token-b' }], payload_in_metadata: 'b' },
  };
  const ta = await sign(a, { iss: 'https://a', who: 'a' });
  const tb = await sign(b, { iss: 'https://b', who: 'b' });
  const any = makeFilter({
    providers,
    rules: [{ match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'pa' }, { provider_name: 'pb' }] } } }],
  });
  const sb = new FakeStream('/', { 'x-token-b': tb });
  t.equal(await run(any, sb), undefined, 'any: second provider suffices');
  t.same(Object.keys(sb.dynamicMetadata.get(JWT_AUTHN) ?? {}), ['b']);
  const none = await run(any, new FakeStream('/'));
  t.equal(none?.body, 'Jwt is missing');
  const badA = await run(any, new FakeStream('/', { 'x-token-a': tb }));
  t.equal(badA?.body, 'Jwt issuer is not configured', 'a token in the wrong location is an unknown issuer');

  const all = makeFilter({
    providers,
    rules: [{ match: { prefix: '/' }, requires: { requires_all: { requirements: [{ provider_name: 'pa' }, { provider_name: 'pb' }] } } }],
  });
  const both = new FakeStream('/', { 'x-token-a': ta, 'x-token-b': tb });
  t.equal(await run(all, both), undefined, 'all: both present');
  t.same(both.dynamicMetadata.get(JWT_AUTHN), { a: payloadOf(ta), b: payloadOf(tb) });
  const onlyA = await run(all, new FakeStream('/', { 'x-token-a': ta }));
  t.equal(onlyA?.status, 401);
  t.equal(onlyA?.body, 'Jwt is missing');
});

t.test("Istio's requirement for two providers sharing the Authorization header", async (t) => {
  const a = await makeKey('RS256', 'a');
  const b = await makeKey('PS256', 'b');
  const providers = { 'origins-0': provider(jwks(a), { issuer: 'https://a' }), 'origins-1': provider(jwks(b), { issuer: 'https://b' }) };
  const optional = (name: string) => ({ requires_any: { requirements: [{ provider_name: name }, { allow_missing: {} }] } });
  const requires = {
    requires_any: {
      requirements: [
        { provider_name: 'origins-0' },
        { provider_name: 'origins-1' },
        { requires_all: { requirements: [optional('origins-0'), optional('origins-1')] } },
      ],
    },
  };
  const d = makeFilter({ providers, rules: [{ match: { prefix: '/' }, requires }] as unknown as JsonValue });
  t.equal(await run(d, new FakeStream('/')), undefined, 'no token');
  const sb = new FakeStream('/', bearer(await sign(b, { iss: 'https://b', sub: 'from-b' })));
  t.equal(await run(d, sb), undefined, 'token of the second provider');
  t.equal((sb.payload as JsonObject)['sub'], 'from-b');
  const forged = await makeKey('PS256', 'b');
  const bad = await run(d, new FakeStream('/', bearer(await sign(forged, { iss: 'https://b' }))));
  t.equal(bad?.status, 401);
  t.equal(bad?.body, 'Jwt verification fails', "the real failure wins over the other provider's unknown issuer");
  t.equal((await run(d, new FakeStream('/', bearer(await sign(a, { iss: 'https://c' })))))?.body, 'Jwt issuer is not configured');
});

t.test('metadata: payload with lists and objects, header, space-delimited claims', async (t) => {
  const k = await makeKey('RS256', 'k');
  const d = makeFilter(
    oneProvider(jwks(k), { header_in_metadata: 'header', normalize_payload_in_metadata: { space_delimited_claims: ['scope', 'permission'] } }),
  );
  const claims = { iss: ISS, sub: 'bob', groups: ['group1', 'group2'], org: { name: 'acme', tier: 2 }, scope: 'read  write', permission: 'x', n: 3 };
  const tok = await sign(k, claims);
  const s = new FakeStream('/', bearer(tok));
  t.equal(await run(d, s), undefined);
  const md = s.dynamicMetadata.get(JWT_AUTHN)!;
  t.same(md['payload'], { ...claims, scope: ['read', 'write'], permission: ['x'] });
  t.same(md['header'], { alg: 'RS256', kid: 'k' });
  t.strictSame((md['payload'] as JsonObject)['groups'], ['group1', 'group2'], 'lists stay lists');
});

t.test('claim_to_headers, forward_payload_header and client-sent copies', async (t) => {
  const k = await makeKey('RS256', 'k');
  const d = makeFilter(
    oneProvider(jwks(k), {
      forward: true,
      forward_payload_header: 'x-jwt-payload',
      claim_to_headers: [
        { header_name: 'x-sub', claim_name: 'sub' },
        { header_name: 'x-org', claim_name: 'org.name' },
        { header_name: 'x-count', claim_name: 'count' },
        { header_name: 'x-ratio', claim_name: 'ratio' },
        { header_name: 'x-admin', claim_name: 'admin' },
        { header_name: 'x-groups', claim_name: 'groups' },
        { header_name: 'x-absent', claim_name: 'nope.deeper' },
      ],
    }),
  );
  const tok = await sign(k, { iss: ISS, sub: 'carol', org: { name: 'acme' }, count: 42, ratio: 1.5, admin: true, groups: ['a', 'b'] });
  const s = new FakeStream('/', { ...bearer(tok), 'x-sub': 'spoofed', 'x-jwt-payload': 'spoofed' });
  t.equal(await run(d, s), undefined);
  const h = s.request;
  t.equal(h.get('x-sub'), 'carol', 'client copy replaced');
  t.equal(h.get('x-org'), 'acme', 'nested claim via "."');
  t.equal(h.get('x-count'), '42');
  t.equal(h.get('x-ratio'), '1.500000');
  t.equal(h.get('x-admin'), 'true');
  t.equal(Buffer.from(h.get('x-groups')!, 'base64').toString(), '["a","b"]', 'lists as base64 JSON');
  t.equal(h.get('x-absent'), undefined);
  t.equal(h.get('x-jwt-payload'), tok.split('.')[1], 'payload forwarded base64url, unpadded');
  t.equal(h.get('authorization'), `Bearer ${tok}`, 'forward: true keeps the token');

  const padded = makeFilter(oneProvider(jwks(k), { forward_payload_header: 'x-jwt-payload', pad_forward_payload_header: true }));
  const tok2 = await sign(k, { iss: ISS, a: 'x' });
  const s2 = new FakeStream('/', bearer(tok2));
  await run(padded, s2);
  const v = s2.request.get('x-jwt-payload')!;
  t.equal(v.length % 4, 0, 'padded');
  t.same(JSON.parse(Buffer.from(v, 'base64url').toString()), payloadOf(tok2));
});

t.test('token locations: default header and access_token, custom header prefix, params, cookies; forward=false strips', async (t) => {
  const k = await makeKey('RS256', 'k');
  const tok = await sign(k, { iss: ISS });
  const def = makeFilter(oneProvider(jwks(k)));
  const s = new FakeStream('/', bearer(tok));
  t.equal(await run(def, s), undefined);
  t.equal(s.request.get('authorization'), undefined, 'forward defaults to false: Authorization removed');
  const q = new FakeStream(`/a?x=1&access_token=${tok}&y=2`);
  t.equal(await run(def, q), undefined, 'access_token query parameter by default');
  t.equal(q.request.path, '/a?x=1&y=2', 'and taken out of the path');
  t.equal((await run(def, new FakeStream('/', { authorization: `bearer ${tok}` })))?.body, 'Jwt is missing', 'the prefix is case-sensitive');

  const custom = makeFilter(
    oneProvider(jwks(k), {
      from_headers: [{ name: 'x-goog-iap-jwt-assertion' }, { name: 'x-auth', value_prefix: 'Token ' }],
      from_params: ['jwt'],
      from_cookies: ['session'],
    }),
  );
  t.equal(await run(custom, new FakeStream('/', { 'x-goog-iap-jwt-assertion': tok })), undefined);
  t.equal(await run(custom, new FakeStream('/', { 'x-auth': `Token ${tok}` })), undefined);
  t.equal(await run(custom, new FakeStream(`/?jwt=${tok}`)), undefined);
  const c = new FakeStream('/', { cookie: `a=1; session=${tok}; b=2` });
  t.equal(await run(custom, c), undefined, 'cookie');
  t.equal(c.request.get('cookie'), `a=1; session=${tok}; b=2`, 'cookies are left in place');
  t.equal((await run(custom, new FakeStream('/', bearer(tok))))?.body, 'Jwt is missing', 'configured locations replace the defaults');
  // two tokens: both must verify
  const other = await makeKey('RS256', 'k');
  const two = await run(custom, new FakeStream(`/?jwt=${await sign(other, { iss: ISS })}`, { 'x-goog-iap-jwt-assertion': tok }));
  t.equal(two?.body, 'Jwt verification fails', 'a bad second token fails the request');
});

t.test('rules, per-route config, filter state rules and CORS preflight bypass', async (t) => {
  const k = await makeKey('RS256', 'k');
  const tok = await sign(k, { iss: ISS });
  const d = makeFilter({
    providers: { p: provider(jwks(k)) },
    rules: [
      { match: { prefix: '/public' } },
      { match: { prefix: '/api', headers: [{ name: 'x-v', string_match: { exact: '2' } }] }, requirement_name: 'strict' },
    ],
    requirement_map: { strict: { provider_name: 'p' }, loose: { requires_any: { requirements: [{ provider_name: 'p' }, { allow_missing: {} }] } } },
    filter_state_rules: { name: 'jwt-selector', requires: { needs: { provider_name: 'p' } } },
    bypass_cors_preflight: true,
  });
  t.equal(await run(d, new FakeStream('/public/x')), undefined, 'a rule without requires needs nothing');
  t.equal((await run(d, new FakeStream('/api', { 'x-v': '2' })))?.body, 'Jwt is missing', 'rule with requirement_name');
  t.equal(await run(d, new FakeStream('/api', { 'x-v': '1' })), undefined, 'headers of the rule must match');
  const fs = new FakeStream('/other');
  fs.filterState.set('jwt-selector', 'needs');
  t.equal((await run(d, fs))?.body, 'Jwt is missing', 'filter_state_rules');
  const pr = new FakeStream('/public', bearer(tok));
  pr.perRoute = jwtAuthnFilterFactory.parsePerRoute!(
    anyPack(PerRouteConfigSchema, pb(PerRouteConfigSchema, { requirement_name: 'strict' })),
    'r',
    proxyTypeRegistry(),
  );
  t.equal(await run(d, pr), undefined, 'per-route requirement wins over rules');
  const prMissing = new FakeStream('/public');
  prMissing.perRoute = pr.perRoute;
  t.equal((await run(d, prMissing))?.status, 401);
  const off = new FakeStream('/api', { 'x-v': '2' });
  off.perRoute = jwtAuthnFilterFactory.parsePerRoute!(
    anyPack(PerRouteConfigSchema, pb(PerRouteConfigSchema, { disabled: true })),
    'r',
    proxyTypeRegistry(),
  );
  t.equal(await run(d, off), undefined, 'disabled per route');
  const wrong = new FakeStream('/');
  wrong.perRoute = jwtAuthnFilterFactory.parsePerRoute!(
    anyPack(PerRouteConfigSchema, pb(PerRouteConfigSchema, { requirement_name: 'nope' })),
    'r',
    proxyTypeRegistry(),
  );
  const w = await run(d, wrong);
  t.equal(w?.status, 403);
  t.equal(w?.body, 'Failed JWT authentication: Wrong requirement_name: nope. It should be one of [loose,strict]');
  const pre = await run(d, new FakeStream('/api', { 'x-v': '2', origin: 'https://app', 'access-control-request-method': 'POST' }, 'OPTIONS'));
  t.equal(pre, undefined, 'CORS preflight bypassed');
  t.equal(d.stat('cors_preflight_bypassed'), 1);
  t.throws(
    () => jwtAuthnFilterFactory.parsePerRoute!(anyPack(PerRouteConfigSchema, pb(PerRouteConfigSchema, {})), 'route r', proxyTypeRegistry()),
    /requirement_specifier is required/,
  );
});

t.test('groups with a provider waiting for its remote key set', async (t) => {
  const r = await makeKey('RS256', 'r');
  const l = await makeKey('ES256', 'l');
  const calls: Array<{ cluster: string; call: UpstreamCall; resolve: (v: UpstreamCallResult) => void; reject: (e: Error) => void }> = [];
  const upstream = (cluster: string, call: UpstreamCall) =>
    new Promise<UpstreamCallResult>((resolve, reject) => calls.push({ cluster, call, resolve, reject }));
  const providers = {
    r: {
      issuer: 'https://r',
      remote_jwks: { http_uri: { uri: 'https://keys.example.com:8443/r/jwks?v=1', cluster: 'outbound|8443||keys.example.com', timeout: '2s' } },
      from_headers: [{ name: 'x-r' }],
      payload_in_metadata: 'r',
    },
    l: { issuer: 'https://l', local_jwks: { inline_string: jwks(l) }, from_headers: [{ name: 'x-l' }], payload_in_metadata: 'l' },
  };
  const tr = await sign(r, { iss: 'https://r' });
  const tl = await sign(l, { iss: 'https://l' });
  const reply = (i: number) => calls[i]!.resolve({ status: 200, headers: {}, body: Buffer.from(jwks(r)) });

  const all = makeFilter(
    {
      providers,
      rules: [{ match: { prefix: '/' }, requires: { requires_all: { requirements: [{ provider_name: 'r' }, { provider_name: 'l' }] } } }],
    },
    { upstream },
  );
  const s = new FakeStream('/', { 'x-r': tr, 'x-l': tl });
  const pending = all.filter.decodeHeaders(s as unknown as HttpStream);
  t.ok(pending instanceof Promise, 'the request waits for the key fetch');
  t.equal(calls.length, 1);
  t.equal(calls[0]!.cluster, 'outbound|8443||keys.example.com');
  t.same(
    { method: calls[0]!.call.method, path: calls[0]!.call.path, authority: calls[0]!.call.authority, timeoutMs: calls[0]!.call.timeoutMs },
    { method: 'GET', path: '/r/jwks?v=1', authority: 'keys.example.com:8443', timeoutMs: 2000 },
  );
  reply(0);
  t.equal(await pending, undefined, 'all: both verified once the keys arrived');
  t.same(Object.keys(s.dynamicMetadata.get(JWT_AUTHN) ?? {}).sort(), ['l', 'r']);
  t.equal(all.stat('jwks_fetch_success'), 1);

  const any = makeFilter(
    {
      providers,
      rules: [{ match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'r' }, { provider_name: 'l' }] } } }],
    },
    { upstream },
  );
  const s2 = new FakeStream('/', { 'x-r': tr, 'x-l': tl });
  const p2 = any.filter.decodeHeaders(s2 as unknown as HttpStream);
  t.equal(await p2, undefined, 'any: the local provider decides without waiting for the fetch');
  t.same(Object.keys(s2.dynamicMetadata.get(JWT_AUTHN) ?? {}), ['l']);
  reply(1);
  await new Promise((res) => setImmediate(res));
  t.same(Object.keys(s2.dynamicMetadata.get(JWT_AUTHN) ?? {}), ['l'], 'the late provider leaves the finished request alone');
  t.equal(s2.request.get('x-r'), tr);

  const failing = makeFilter({ providers, rules: [{ match: { prefix: '/' }, requires: { provider_name: 'r' } }] }, { upstream });
  const p3 = failing.filter.decodeHeaders(new FakeStream('/', { 'x-r': tr }) as unknown as HttpStream);
  calls[2]!.reject(new Error('connection refused'));
  const r3 = (await p3) as LocalReply;
  t.equal(r3.status, 401);
  t.equal(r3.body, 'Jwks remote fetch is failed');
  t.equal(failing.stat('jwks_fetch_failed'), 1);
});

t.test('strip_failure_response and failed_status_in_metadata', async (t) => {
  const k = await makeKey('RS256', 'k');
  const d = makeFilter({ ...oneProvider(jwks(k), { failed_status_in_metadata: 'failure' }), strip_failure_response: true });
  const s = new FakeStream('/', bearer(await sign(k, { iss: ISS, exp: now() - 3600 })));
  const r = await run(d, s);
  t.equal(r?.status, 401);
  t.equal(r?.body, undefined, 'no body');
  t.equal(r?.headers, undefined, 'no www-authenticate');
  t.same(s.dynamicMetadata.get(JWT_AUTHN)?.['failure'], { code: 3, message: 'Jwt is expired' });
});

t.test('jwt_cache_config caches verified tokens only when configured', async (t) => {
  const k = await makeKey('RS256', 'k');
  const tok = await sign(k, { iss: ISS, exp: now() + 600 });
  const cached = makeFilter(oneProvider(jwks(k), { jwt_cache_config: { jwt_cache_size: 10 } }));
  for (let i = 0; i < 3; i++) t.equal(await run(cached, new FakeStream('/', bearer(tok))), undefined);
  t.equal(cached.stat('jwt_cache_miss'), 1);
  t.equal(cached.stat('jwt_cache_hit'), 2);
  const plain = makeFilter(oneProvider(jwks(k)));
  for (let i = 0; i < 2; i++) await run(plain, new FakeStream('/', bearer(tok)));
  t.equal(plain.stat('jwt_cache_hit'), 0);
  const s = new FakeStream('/', bearer(tok));
  await run(cached, s);
  t.same(s.payload, payloadOf(tok), 'a cache hit publishes the payload too');
});

t.test('invalid configs are rejected naming the provider', async (t) => {
  let err: unknown;
  try {
    makeFilter(oneProvider('{not json'));
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof ConfigError, 'a ConfigError (the listener is NACKed)');
  // Envoy's filter_factory.cc message, after the field path
  t.match(
    (err as Error).message,
    /^test\.jwt_authn\.providers\["p"\]\.local_jwks: Provider 'p' in jwt_authn config has invalid local jwks: Jwks is an invalid JSON$/,
  );
  t.throws(() => makeFilter(oneProvider('{"keys": 3}')), /\[keys\] in Jwks is not an array/);
  t.throws(() => makeFilter(oneProvider('{"keys": [{"kty": "RSA", "n": "AQAB"}]}')), /\[e\] field is missing for a RSA key/);
  t.throws(() => makeFilter(oneProvider('{"keys": []}')), /Jwks doesn't have any valid public key/);
  const k = await makeKey('RS256', 'k');
  t.throws(() => makeFilter(oneProvider(jwks(k), {}, { provider_name: 'missing' })), /Required provider \['missing'\] is not configured\./);
  t.throws(
    () => makeFilter({ providers: { p: provider(jwks(k)) }, rules: [{ match: { prefix: '/' }, requirement_name: 'x' }] }),
    /Wrong requirement_name: x\. It should be one of \[\]/,
  );
  t.throws(() => makeFilter({ providers: { p: { issuer: ISS } } }), /provider 'p' needs a key source/);
  t.throws(
    () => makeFilter({ providers: { p: { issuer: ISS, remote_jwks: { http_uri: { uri: 'not a uri', cluster: 'c', timeout: '1s' } } } } }),
    /Provider 'p' has an invalid URI: 'not a uri'/,
  );
  // a key set with one unusable key and one good key is accepted, like Envoy
  const mixed = JSON.stringify({ keys: [{ kty: 'XYZ' }, k.jwk] });
  t.equal(await run(makeFilter(oneProvider(mixed)), new FakeStream('/', bearer(await sign(k, { iss: ISS })))), undefined);
  // keys from a file
  const dir = tempDir(t, 'jwt-authn-');
  const f = path.join(dir, 'jwks.json');
  writeFileSync(f, jwks(k));
  t.equal(
    await run(
      makeFilter({
        providers: { p: { issuer: ISS, local_jwks: { filename: f } } },
        rules: [{ match: { prefix: '/' }, requires: { provider_name: 'p' } }],
      }),
      new FakeStream('/', bearer(await sign(k, { iss: ISS }))),
    ),
    undefined,
    'local_jwks.filename',
  );
  t.throws(
    () => makeFilter({ providers: { p: { issuer: ISS, local_jwks: { filename: path.join(dir, 'nope') } } } }),
    /local_jwks\.filename: cannot read/,
  );
  t.ok(defaultFilterRegistry().forName(JWT_AUTHN), 'registered in the default registry');
});

t.test('route metadata matchers read payload.<a>.<b> and match any element of a list claim', async (t) => {
  const md: DynamicMetadata = new Map([[JWT_AUTHN, { payload: { groups: ['group2', 'group1'], org: { team: 'blue' }, name: 'x' } }]]);
  const istio = (keys: string[], exact: string) =>
    compileMetadataMatcher(
      pb(MetadataMatcherSchema, {
        filter: JWT_AUTHN,
        path: keys.map((key) => ({ key })),
        value: { or_match: { value_matchers: [{ list_match: { one_of: { string_match: { exact } } } }, { string_match: { exact } }] } },
      }),
      'm',
    );
  t.ok(istio(['payload', 'groups'], 'group1')(md), 'list claim: any element');
  t.notOk(istio(['payload', 'groups'], 'group3')(md));
  t.ok(istio(['payload', 'org', 'team'], 'blue')(md), 'nested claim');
  t.ok(istio(['payload', 'name'], 'x')(md), 'string claim');
  t.notOk(istio(['payload', 'missing'], 'x')(md));
});

// ---------------------------------------------------------------------------------------------
// through the engine

async function engineWith(
  t: { teardown(f: () => unknown): void },
  jwtConfig: JsonObject,
  routes: JsonObject[],
  clusters: JsonObject[],
): Promise<{ p: RunningEngine; port: number }> {
  const port = await freePort();
  const p = await startProxy(
    staticBootstrap(
      { id: 'router~127.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', cluster: 'gw' },
      [
        listenerJson(
          'l',
          port,
          hcm({ httpFilters: [{ name: JWT_AUTHN, typed_config: { '@type': JWT_TYPE, ...jwtConfig } }], routeConfig: anyHost(routes) }),
        ),
      ],
      clusters,
    ),
  );
  t.teardown(() => p.close());
  await p.engine.initialized;
  return { p, port };
}

const groupRoute = (group: string, cluster: string): JsonObject => ({
  match: {
    prefix: '/headers',
    dynamic_metadata: [
      {
        filter: JWT_AUTHN,
        path: [{ key: 'payload' }, { key: 'groups' }],
        value: { or_match: { value_matchers: [{ list_match: { one_of: { string_match: { exact: group } } } }, { string_match: { exact: group } }] } },
      },
    ],
  },
  route: { cluster },
});

t.test('engine: claim routing with clear_route_cache, 401s, header stripping and stats', async (t) => {
  const k = await makeKey('RS256', 'k');
  const b = await backend('claims');
  t.teardown(() => b.close());
  const jwtFor = (clearRouteCache: boolean): JsonObject => ({
    providers: {
      'origins-0': {
        issuer: ISS,
        local_jwks: { inline_string: jwks(k) },
        payload_in_metadata: 'payload',
        clear_route_cache: clearRouteCache,
        claim_to_headers: [{ header_name: 'x-jwt-sub', claim_name: 'sub' }],
      },
    },
    rules: [{ match: { prefix: '/' }, requires: { requires_any: { requirements: [{ provider_name: 'origins-0' }, { allow_missing: {} }] } } }],
  });
  const jwtConfig = jwtFor(true);
  const { p, port } = await engineWith(t, jwtConfig, [groupRoute('group1', 'claims')], [staticClusterJson('claims', [b.port])]);

  t.equal((await request(port, '/headers')).status, 404, 'no token: the claim route does not match');
  const member = await sign(k, { iss: ISS, sub: 'u1', groups: ['group1'], exp: now() + 600 });
  const ok = await request(port, '/headers', { headers: bearer(member) });
  t.equal(ok.status, 200, 'list claim with group1: routed after the route cache was cleared');
  t.equal(ok.body, 'claims /headers');
  t.equal(b.seen.at(-1)!.headers['authorization'], undefined, 'token not forwarded');
  t.equal(b.seen.at(-1)!.headers['x-jwt-sub'], 'u1');
  const stringClaim = await sign(k, { iss: ISS, groups: 'group1' });
  t.equal((await request(port, '/headers', { headers: bearer(stringClaim) })).status, 200, 'string claim');
  t.equal(
    (await request(port, '/headers', { headers: bearer(await sign(k, { iss: ISS, groups: ['group2'] })) })).status,
    404,
    'valid token without the claim value',
  );
  const other = await makeKey('RS256', 'k');
  const bad = await request(port, '/headers', { headers: bearer(await sign(other, { iss: ISS, groups: ['group1'] })) });
  t.equal(bad.status, 401, 'bad signature');
  t.equal(bad.body, 'Jwt verification fails');
  t.match(bad.headers['www-authenticate'], /^Bearer realm="http:\/\/127\.0\.0\.1:\d+\/headers", error="invalid_token"$/);
  t.equal(
    (await request(port, '/headers', { headers: bearer(await sign(k, { iss: ISS, groups: ['group1'], exp: now() - 3600 })) })).body,
    'Jwt is expired',
  );
  t.equal(
    (await request(port, '/headers', { headers: bearer(await sign(k, { iss: 'https://other', groups: ['group1'] })) })).body,
    'Jwt issuer is not configured',
  );
  const stats = (await adminGet(p, '/stats')).body;
  t.equal(statValue(stats, 'http.ingress.jwt_authn.allowed'), 4);
  t.equal(statValue(stats, 'http.ingress.jwt_authn.denied'), 3);

  // the same config without clear_route_cache keeps the route chosen before verification
  const e2 = await engineWith(t, jwtFor(false), [groupRoute('group1', 'claims')], [staticClusterJson('claims', [b.port])]);
  t.equal((await request(e2.port, '/headers', { headers: bearer(member) })).status, 404, 'route was selected before the payload existed');
});

t.test('engine: typed_per_filter_config PerRouteConfig disables or selects a requirement per route', async (t) => {
  const k = await makeKey('EdDSA', 'k', { crv: 'Ed25519' });
  const b = await backend('b');
  t.teardown(() => b.close());
  const jwtConfig: JsonObject = {
    providers: { p: { issuer: ISS, local_jwks: { inline_string: jwks(k) } } },
    rules: [{ match: { prefix: '/' }, requires: { provider_name: 'p' } }],
    requirement_map: { optional: { requires_any: { requirements: [{ provider_name: 'p' }, { allow_missing: {} }] } } },
  };
  const perRoute = (cfg: JsonObject) => ({ typed_per_filter_config: { [JWT_AUTHN]: { '@type': PER_ROUTE_TYPE, ...cfg } } });
  const { port } = await engineWith(
    t,
    jwtConfig,
    [
      { match: { prefix: '/open' }, route: { cluster: 'b' }, ...perRoute({ disabled: true }) },
      { match: { prefix: '/optional' }, route: { cluster: 'b' }, ...perRoute({ requirement_name: 'optional' }) },
      { match: { prefix: '/' }, route: { cluster: 'b' } },
    ],
    [staticClusterJson('b', [b.port])],
  );
  t.equal((await request(port, '/open')).status, 200, 'disabled on this route');
  t.equal((await request(port, '/optional')).status, 200, 'named requirement with allow_missing');
  t.equal((await request(port, '/optional', { headers: bearer('x.y.z') })).status, 401);
  const closed = await request(port, '/closed');
  t.equal(closed.status, 401);
  t.equal(closed.body, 'Jwt is missing');
  t.equal((await request(port, '/closed', { headers: bearer(await sign(k, { iss: ISS })) })).status, 200);
});

interface JwksServer {
  port: number;
  hits: number;
  body: string;
  status: number;
  close(): Promise<void>;
}

async function jwksServer(body: string): Promise<JwksServer> {
  const st: JwksServer = { port: 0, hits: 0, body, status: 200, close: async () => undefined };
  const server = http.createServer((_req, res) => {
    st.hits++;
    res.writeHead(st.status, { 'content-type': 'application/json' });
    res.end(st.body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  st.port = (server.address() as net.AddressInfo).port;
  st.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return st;
}

t.test('engine: remote_jwks fetched through a cluster, cached, refetched, and fetch failures', async (t) => {
  const k1 = await makeKey('ES256', 'k1');
  const k2 = await makeKey('ES256', 'k2');
  const srv = await jwksServer(jwks(k1));
  t.teardown(() => srv.close());
  const b = await backend('b');
  t.teardown(() => b.close());
  const jwtConfig = {
    providers: {
      r: {
        issuer: ISS,
        remote_jwks: { http_uri: { uri: `http://jwks.example.com:${srv.port}/keys.json`, cluster: 'jwks', timeout: '1s' }, cache_duration: '0.5s' },
        payload_in_metadata: 'payload',
      },
    },
    rules: [{ match: { prefix: '/' }, requires: { provider_name: 'r' } }],
  };
  const { p, port } = await engineWith(
    t,
    jwtConfig,
    [{ match: { prefix: '/' }, route: { cluster: 'b' } }],
    [staticClusterJson('b', [b.port]), staticClusterJson('jwks', [srv.port])],
  );
  t.equal(srv.hits, 0, 'no fetch before the first request without async_fetch');
  const t1 = await sign(k1, { iss: ISS });
  const [r1, r2] = await Promise.all([request(port, '/', { headers: bearer(t1) }), request(port, '/', { headers: bearer(t1) })]);
  t.equal(r1.status, 200);
  t.equal(r2.status, 200);
  t.equal(srv.hits, 1, 'concurrent first requests share one fetch');
  t.equal((await request(port, '/', { headers: bearer(t1) })).status, 200);
  t.equal(srv.hits, 1, 'served from the cache');

  // key rotation: after cache_duration the new set is fetched
  srv.body = jwks(k2);
  const t2 = await sign(k2, { iss: ISS });
  await waitForValue('rotated key accepted after the cache expired', async () => (await request(port, '/', { headers: bearer(t2) })).status === 200, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.ok(srv.hits >= 2);
  t.equal((await request(port, '/', { headers: bearer(t1) })).body, "Jwks doesn't have key to match kid or alg from Jwt", 'the old key is gone');

  // a new key under the same kid: a token verified (and remembered) under the old set must be checked again
  const k2b = await makeKey('ES256', 'k2');
  srv.body = jwks(k2b);
  await waitForValue(
    'the replaced key no longer verifies the earlier token',
    async () => (await request(port, '/', { headers: bearer(t2) })).status === 401,
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal((await request(port, '/', { headers: bearer(t2) })).body, 'Jwt verification fails');
  t.equal((await request(port, '/', { headers: bearer(await sign(k2b, { iss: ISS })) })).status, 200, 'the replacement key verifies its own tokens');
  srv.body = jwks(k2);
  await waitForValue('the original key is back', async () => (await request(port, '/', { headers: bearer(t2) })).status === 200, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });

  // the key server fails: once the cache expires every token is rejected
  srv.status = 500;
  const failed = await waitForValue(
    'fetch failure after expiry',
    async () => {
      const r = await request(port, '/', { headers: bearer(t2) });
      return r.status === 401 ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(failed.body, 'Jwks remote fetch is failed');
  srv.status = 200;
  srv.body = '{"keys": "nope"}';
  const invalid = await waitForValue(
    'invalid JWKS',
    async () => {
      const r = await request(port, '/', { headers: bearer(t2) });
      return r.status === 401 ? r : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(invalid.body, 'Jwks remote fetch is failed', 'an invalid key set is a failed fetch');
  const stats = (await adminGet(p, '/stats')).body;
  t.ok((statValue(stats, 'http.ingress.jwt_authn.jwks_fetch_success') ?? 0) >= 2);
  t.ok((statValue(stats, 'http.ingress.jwt_authn.jwks_fetch_failed') ?? 0) >= 2);
});

t.test('engine: remote_jwks with async_fetch fetches before any request and an unknown cluster fails tokens', async (t) => {
  const k = await makeKey('RS256', 'k');
  const srv = await jwksServer(jwks(k));
  t.teardown(() => srv.close());
  const b = await backend('b');
  t.teardown(() => b.close());
  const jwtConfig = {
    providers: {
      a: { issuer: ISS, remote_jwks: { http_uri: { uri: `http://127.0.0.1:${srv.port}/`, cluster: 'jwks', timeout: '1s' }, async_fetch: {} } },
      gone: { issuer: 'https://gone', remote_jwks: { http_uri: { uri: 'http://gone.example.com/jwks', cluster: 'no-such-cluster', timeout: '1s' } } },
    },
    rules: [
      { match: { prefix: '/gone' }, requires: { provider_name: 'gone' } },
      { match: { prefix: '/' }, requires: { provider_name: 'a' } },
    ],
  };
  const { port } = await engineWith(
    t,
    jwtConfig,
    [{ match: { prefix: '/' }, route: { cluster: 'b' } }],
    [staticClusterJson('b', [b.port]), staticClusterJson('jwks', [srv.port])],
  );
  await waitForValue('background fetch', () => srv.hits >= 1, { timeoutMs: 10_000, intervalMs: 20 });
  const hits = srv.hits;
  t.equal((await request(port, '/', { headers: bearer(await sign(k, { iss: ISS })) })).status, 200);
  t.equal(srv.hits, hits, 'the request used the prefetched keys');
  const r = await request(port, '/gone', { headers: bearer(await sign(k, { iss: 'https://gone' })) });
  t.equal(r.status, 401);
  t.equal(r.body, 'Jwks remote fetch is failed');
});

t.test('engine over ADS: an invalid jwt_authn config NACKs the listener and keeps the last good one', async (t) => {
  const k = await makeKey('RS256', 'k');
  const b = await backend('b');
  const port = await freePort();
  const jwtFilter = (keys: string, requires: JsonObject = { provider_name: 'origins-0' }) => ({
    name: JWT_AUTHN,
    typed_config: {
      '@type': JWT_TYPE,
      providers: { 'origins-0': { issuer: ISS, local_jwks: { inline_string: keys } } },
      rules: [{ match: { prefix: '/' }, requires }],
    },
  });
  const listener = (f: JsonObject) => httpListener('0.0.0.0_8080', port, hcm({ statPrefix: 'gw', rds: 'r', httpFilters: [f] }));
  const ads = await startAds({
    clusters: [edsCluster('b')],
    endpoints: [cla('b', [{ port: b.port }])],
    listeners: [listener(jwtFilter(jwks(k)))],
    routes: [routeConfig('r', [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'b' } }] }])],
  });
  const proxy = await startProxy(adsBootstrap(ads.address));
  t.teardown(async () => {
    await proxy.close();
    await ads.close();
    await b.close();
  });
  await proxy.engine.initialized;
  const tok = await sign(k, { iss: ISS });
  await waitForValue('listener with jwt_authn serving', async () => (await request(port, '/', { headers: bearer(tok) })).status === 200, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.equal((await request(port, '/')).status, 401);

  ads.update({ listeners: [listener(jwtFilter('{"keys": [{"kty": "RSA"}]}'))] });
  const nack = await waitForValue('LDS NACK for the bad JWKS', () => ads.lastNack(TYPE_URL.listener), { timeoutMs: 10_000, intervalMs: 20 });
  t.match(nack, /0\.0\.0\.0_8080/);
  t.match(nack, /Provider 'origins-0' in jwt_authn config has invalid local jwks: \[n\] field is missing for a RSA key/);
  t.equal((await request(port, '/', { headers: bearer(tok) })).status, 200, 'last good config still serves');

  ads.update({ listeners: [listener(jwtFilter(jwks(k), { provider_name: 'origins-9' }))] });
  await waitForValue(
    'LDS NACK for an unknown provider',
    () => /Required provider \['origins-9'\] is not configured\./.test(ads.lastNack(TYPE_URL.listener) ?? ''),
    { timeoutMs: 10_000, intervalMs: 20 },
  );
});
