// `@request.auth.claims` header keys → route dynamic-metadata matchers. Expected shapes follow Istio's
// route TestTranslateMetadataMatch (pkg/jwt.ToRoutingClaim + authz MetadataMatcherForJWTClaims with the
// extended-JWT value: a list holding a matching element, or a matching string).
import t from 'tap';
import { create, type JsonValue } from '@bufbuild/protobuf';
import type { StringMatch } from '../../src/config/types';
import { MetadataMatcherSchema } from '../../src/gen/envoy/type/matcher/v3/metadata_pb';
import { compileMetadataMatcher } from '../../src/proxy/matchers/string';
import { claimMetadataMatcherHook, claimPath } from '../../src/security/claims';
import { translateRouteMatch } from '../../src/xds/gen/route';
import { json } from './helpers';

const FILTER = 'envoy.filters.http.jwt_authn';

/** Istio's expected matcher for claims and an Envoy string matcher (JSON form). */
function expected(claims: string[], stringMatch: JsonValue): JsonValue {
  return {
    filter: FILTER,
    path: [{ key: 'payload' }, ...claims.map((key) => ({ key }))],
    value: { orMatch: { valueMatchers: [{ listMatch: { oneOf: { stringMatch } } }, { stringMatch }] } },
  };
}

const exact: StringMatch = { exact: 'exact' };

t.test('header names that are not claim references stay headers (Istio TestTranslateMetadataMatch)', async (t) => {
  for (const name of [
    '@request.auth.claims',
    '@request.auth.claims-',
    'request.auth.claims.',
    '@request.auth.claims.',
    '@request.auth.claims-abc',
    '@request.auth.claims-x',
    'x-some-other-header',
    '@request.auth.claims[key1',
    '@request.auth.claims]key1',
    '@request.auth.claimskey1',
    '@request.auth.claims[]',
  ]) {
    t.equal(claimMetadataMatcherHook(name, exact), undefined, name);
    t.equal(claimPath(name), undefined, `${name} has no claim path`);
  }
});

t.test('claim references become jwt_authn payload matchers (Istio TestTranslateMetadataMatch)', async (t) => {
  const cases: Array<[string, StringMatch, string[], JsonValue]> = [
    ['@request.auth.claims.key1', exact, ['key1'], { exact: 'exact' }],
    ['@request.auth.claims.key1.KEY2', exact, ['key1', 'KEY2'], { exact: 'exact' }],
    ['@request.auth.claims.key1-key2', exact, ['key1-key2'], { exact: 'exact' }],
    ['@request.auth.claims.prefix', { prefix: 'prefix' }, ['prefix'], { prefix: 'prefix' }],
    ['@request.auth.claims.regex', { regex: '.+?\\..+?\\..+?' }, ['regex'], { safeRegex: { regex: '.+?\\..+?\\..+?' } }],
    // with a `.` right after the prefix, `.` is the separator even if brackets follow
    ['@request.auth.claims.[key1]', exact, ['[key1]'], { exact: 'exact' }],
    ['@request.auth.claims[key1]', exact, ['key1'], { exact: 'exact' }],
    ['@request.auth.claims[key1][key2]', exact, ['key1', 'key2'], { exact: 'exact' }],
    ['@request.auth.claims[test-issuer-2@istio.io]', exact, ['test-issuer-2@istio.io'], { exact: 'exact' }],
    ['@request.auth.claims[test-issuer-2@istio.io][key1]', exact, ['test-issuer-2@istio.io', 'key1'], { exact: 'exact' }],
    // a claim name holding dots needs the bracket form
    ['@request.auth.claims[a.b]', exact, ['a.b'], { exact: 'exact' }],
    // the prefix is matched case-insensitively; claim names keep their case
    ['@Request.Auth.Claims.Groups', exact, ['Groups'], { exact: 'exact' }],
  ];
  for (const [name, m, claims, sm] of cases) {
    const got = claimMetadataMatcherHook(name, m);
    t.ok(got, `${name} is a claim`);
    t.same(json(MetadataMatcherSchema, got!), expected(claims, sm), name);
  }
});

t.test('an empty matcher requires the claim to be present', async (t) => {
  const got = claimMetadataMatcherHook('@request.auth.claims.sub', {});
  t.same(json(MetadataMatcherSchema, got!), { filter: FILTER, path: [{ key: 'payload' }, { key: 'sub' }], value: { presentMatch: true } });
});

t.test('the generated matchers select string, list and nested claims as Envoy evaluates them', async (t) => {
  const payload = {
    iss: 'issuer',
    sub: 'user',
    groups: ['group1', 'group2'],
    scope: ['read', 'write'],
    nested: { key: 'v1', deep: { id: 'x' } },
    'a.b': 'dotted',
  };
  const md = new Map([[FILTER, { payload }]]);
  const noToken = new Map<string, never>();
  const matches = (name: string, m: StringMatch, data: Map<string, unknown> = md) =>
    compileMetadataMatcher(create(MetadataMatcherSchema, claimMetadataMatcherHook(name, m)!), 'test')(data as never);
  t.ok(matches('@request.auth.claims.groups', { exact: 'group1' }), 'list claim: first element');
  t.ok(matches('@request.auth.claims.groups', { exact: 'group2' }), 'list claim: other element');
  t.notOk(matches('@request.auth.claims.groups', { exact: 'group3' }), 'list claim without the value');
  t.ok(matches('@request.auth.claims.sub', { exact: 'user' }), 'string claim');
  t.notOk(matches('@request.auth.claims.sub', { exact: 'other' }), 'string claim, other value');
  t.ok(matches('@request.auth.claims.nested.key', { exact: 'v1' }), 'nested via dots');
  t.ok(matches('@request.auth.claims[nested][key]', { exact: 'v1' }), 'nested via brackets');
  t.ok(matches('@request.auth.claims[nested][deep][id]', { prefix: 'x' }), 'three levels, prefix');
  t.ok(matches('@request.auth.claims[a.b]', { exact: 'dotted' }), 'dotted claim name via brackets');
  t.notOk(matches('@request.auth.claims.a.b', { exact: 'dotted' }), 'dotted claim name via dots is a nested path');
  t.notOk(matches('@request.auth.claims.groups', { exact: 'group1' }, noToken), 'no token: no payload, no match');
  t.ok(matches('@request.auth.claims.scope', { regex: 'wr.*' }), 'regex on a list element');
});

t.test('route matches: claims go to dynamic_metadata, withoutHeaders inverts them, other headers stay', async (t) => {
  const m = translateRouteMatch(
    {
      uri: { prefix: '/headers' },
      headers: { '@request.auth.claims.groups': { exact: 'group1' }, 'x-user': { exact: 'a' }, '@request.auth.claims-x': { exact: 'b' } },
      withoutHeaders: { '@request.auth.claims[role]': { exact: 'guest' } },
    },
    claimMetadataMatcherHook,
  );
  t.same(
    (m.headers ?? []).map((h) => h.name),
    ['@request.auth.claims-x', 'x-user'],
    'look-alike and ordinary headers remain header matchers',
  );
  t.equal(m.dynamicMetadata?.length, 2);
  const [inc, exc] = m.dynamicMetadata!.map((d) => json(MetadataMatcherSchema, d!)) as Array<Record<string, JsonValue>>;
  t.same(inc, expected(['groups'], { exact: 'group1' }));
  t.same(exc, { ...(expected(['role'], { exact: 'guest' }) as Record<string, JsonValue>), invert: true }, 'withoutHeaders sets invert');
});
