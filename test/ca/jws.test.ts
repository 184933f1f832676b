// The CA's token verifier against tokens jose signs (an independent implementation): algorithms, key
// selection, tampering, the claim checks go-oidc makes, and a key set that follows an issuer's key rotation.
import * as jose from 'jose';
import t from 'tap';
import { checkTimeAndIssuer, importJwks, JwtError, KeyNotFound, RemoteKeySet, verifyJws } from '../../src/ca/authn/jws';
import { startKeyServer } from '../security/helpers';

async function key(alg: string, kid: string) {
  const { publicKey, privateKey } = await jose.generateKeyPair(alg, { extractable: true });
  return { alg, kid, privateKey, jwk: { ...(await jose.exportJWK(publicKey)), kid, alg, use: 'sig' } };
}
type K = Awaited<ReturnType<typeof key>>;
const mint = (k: K, claims: jose.JWTPayload = {}, header: Partial<jose.JWTHeaderParameters> = {}) =>
  new jose.SignJWT({ iss: 'https://issuer.example', sub: 'system:serviceaccount:a:b', exp: Math.floor(Date.now() / 1000) + 600, ...claims })
    .setProtectedHeader({ alg: k.alg, kid: k.kid, ...header })
    .sign(k.privateKey);

t.test('signatures', async (t) => {
  const keys = await Promise.all(['RS256', 'RS384', 'PS256', 'ES256', 'ES384'].map((a) => key(a, `k-${a}`)));
  const set = importJwks(JSON.stringify({ keys: keys.map((k) => k.jwk) }));
  t.equal(set.length, 5);
  for (const k of keys) t.same(verifyJws(await mint(k), set).claims.sub, 'system:serviceaccount:a:b', k.alg);

  const rs = keys[0]!;
  const good = await mint(rs);
  const [h, p, s] = good.split('.') as [string, string, string];
  const other = await key('RS256', rs.kid);
  const cases: Array<[string, string, RegExp]> = [
    ['a signature by another key under the same kid', await mint(other), /failed to verify signature/],
    [
      'claims changed after signing',
      `${h}.${Buffer.from(JSON.stringify({ sub: 'system:serviceaccount:kube-system:admin' })).toString('base64url')}.${s}`,
      /failed to verify signature/,
    ],
    ['alg none', `${Buffer.from('{"alg":"none"}').toString('base64url')}.${p}.`, /unsupported signing algorithm "none"/],
    [
      'HS256 (a shared secret is never accepted)',
      `${Buffer.from('{"alg":"HS256","kid":"k-RS256"}').toString('base64url')}.${p}.${s}`,
      /unsupported signing algorithm "HS256"/,
    ],
    ['an unknown kid', await mint(rs, {}, { kid: 'nope' }), /no key with kid "nope"/],
    ['two parts', `${h}.${p}`, /three dot-separated parts/],
    ['a header that is not JSON', `eyJ.${p}.${s}`, /malformed JWT header/],
  ];
  for (const [name, token, msg] of cases) t.throws(() => verifyJws(token, set), { message: msg }, name);
  const unknownKid = await mint(rs, {}, { kid: 'nope' });
  let notFound: unknown;
  try {
    verifyJws(unknownKid, set);
  } catch (e) {
    notFound = e;
  }
  t.ok(notFound instanceof KeyNotFound, 'an unknown kid is KeyNotFound (the key set may refetch)');
  const noKid = await new jose.SignJWT({}).setProtectedHeader({ alg: 'ES256' }).sign(keys[3]!.privateKey);
  t.ok(verifyJws(noKid, set), 'no kid: every key of the type is tried');
});

t.test('claims (go-oidc checks)', async (t) => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  const s = now / 1000;
  t.doesNotThrow(() => checkTimeAndIssuer({ iss: 'i', exp: s + 1 }, 'i', now));
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ['another issuer', { iss: 'j', exp: s + 60 }, /issued by a different provider/],
    ['no exp', { iss: 'i' }, /no expiry/],
    ['expired', { iss: 'i', exp: s }, /token is expired/],
    ['not yet valid', { iss: 'i', exp: s + 60, nbf: s + 30 }, /before the nbf/],
  ];
  for (const [name, claims, msg] of cases) t.throws(() => checkTimeAndIssuer(claims, 'i', now), { message: msg }, name);
  t.type(JwtError, 'function');
});

t.test("a remote key set follows the issuer's rotation, at most once per cooldown", async (t) => {
  const a = await key('RS256', 'a');
  const server = await startKeyServer(JSON.stringify({ keys: [a.jwk] }));
  t.teardown(() => server.close());
  let now = 1_000_000;
  const set = new RemoteKeySet(server.url('/jwks'), { cooldownMs: 30_000, now: () => now });
  t.ok(await set.verify(await mint(a)));
  t.ok(await set.verify(await mint(a)));
  t.equal(server.hits(), 1, 'fetched once');
  const b = await key('RS256', 'b');
  server.serve(JSON.stringify({ keys: [a.jwk, b.jwk] }));
  await t.rejects(set.verify(await mint(b)), /no key with kid "b"/, 'within the cooldown the set is not refetched');
  now += 31_000;
  t.ok(await set.verify(await mint(b)), 'after it, an unknown kid triggers a refetch');
  t.equal(server.hits(), 2);
  server.serve('oops', 500);
  now += 11 * 60_000;
  t.ok(await set.verify(await mint(a)), 'a failing issuer does not invalidate the keys already known');
});
