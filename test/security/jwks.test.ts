// The daemon's JWKS resolver against real key servers on loopback: first fetch and push, refresh that
// picks up a rotated key, a server that is down or broken (reject-everything keys, never none), HTTPS
// with and without certificate verification, OpenID discovery, and the fetch metrics.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { jwksFromText } from '../../src/lib/jwt-verify/jwks';
import { Status } from '../../src/lib/jwt-verify/status';
import { createFakeJwks, keySetChanged } from '../../src/security/jwks/keyset';
import { parseJwksFetchMode } from '../../src/security/jwks/mode';
import { JwksResolver, networkFetchFail, networkFetchSuccess, type JwksResolverOptions } from '../../src/security/jwks/resolver';
import { makeCerts } from '../meshd/helpers';
import { tempDir } from '../helpers/temp';
import { deadPort, jwksDocument, rsaKey, startKeyServer } from './helpers';
import { envoyMissing, envoyPath } from '../helpers/envoy';
import { waitFor } from '../helpers/wait';

const counter = async (c: typeof networkFetchSuccess) => (await c.get()).values[0]?.value ?? 0;

function resolver(t: Test, o: Partial<JwksResolverOptions> = {}): { r: JwksResolver; changes: () => number } {
  let n = 0;
  const r = new JwksResolver({
    refreshIntervalMs: 3_600_000,
    retryIntervalMs: 10,
    retriesOnRefresh: 1,
    caBundlePaths: [],
    onChange: () => n++,
    ...o,
  });
  t.teardown(() => r.close());
  return { r, changes: () => n };
}

/** The inline key set a provider would get. */
function inlined(r: JwksResolver, uri: string, issuer = 'https://issuer.example'): string {
  const s = r.buildLocalJwks(uri, issuer, undefined);
  if (s.case !== 'localJwks' || s.value.specifier?.case !== 'inlineString') throw new Error(`not an inline local_jwks: ${JSON.stringify(s)}`);
  return s.value.specifier.value;
}

t.test("the fake JWKS: one well-formed P-256 key per URI, which the proxies accept (Istio's RSA one Envoy refuses)", async (t) => {
  const uri = 'http://site.not.exist';
  const doc = JSON.parse(createFakeJwks(uri)) as { keys: Array<Record<string, string>> };
  t.equal(doc.keys.length, 1);
  const k = doc.keys[0]!;
  t.match(k, { kty: 'EC', crv: 'P-256', kid: 'abc' });
  // node:crypto (OpenSSL) refuses a point that is not on the curve
  t.equal(createPublicKey({ key: k, format: 'jwk' }).asymmetricKeyDetails?.namedCurve, 'prime256v1', 'a point on P-256');
  t.equal(createFakeJwks(uri), createFakeJwks(uri), 'the same URI, the same key (no push for nothing)');
  t.not(createFakeJwks(uri), createFakeJwks('http://other.not.exist'), 'another URI, another key');
  t.equal(jwksFromText(createFakeJwks(uri)).status, Status.Ok, 'the engine loads it');
});

t.test('an inline or fetched key set with no usable key is replaced by the fake one', async (t) => {
  const { r } = resolver(t);
  const s = r.buildLocalJwks('', 'https://empty.example', '{"keys":[]}');
  t.same(s, { case: 'localJwks', value: { specifier: { case: 'inlineString', value: createFakeJwks('https://empty.example') } } });
  const good = JSON.stringify({ keys: [generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' })] });
  t.same(
    r.buildLocalJwks('', 'https://good.example', good).value,
    { specifier: { case: 'inlineString', value: good } },
    'a usable key set is inlined as written',
  );
});

t.test(
  'Envoy takes the fake JWKS (it refuses an RSA modulus under 512 bits or an even one, and the whole listener with it)',
  { skip: envoyMissing() },
  async (t) => {
    const dir = tempDir(t, 'mesh-fake-jwks-');
    for (const uri of [
      'http://site.not.exist',
      'http://127.0.0.1:33905/jwks.json',
      'https://issuer.example.com/a/much/longer/path/to/the/keys.json',
      'http://a/y',
    ]) {
      const file = path.join(dir, 'envoy.json');
      fs.writeFileSync(file, JSON.stringify(jwtAuthnBootstrap(createFakeJwks(uri))));
      const r = spawnSync(envoyPath()!, ['--mode', 'validate', '-c', file, '-l', 'error'], { encoding: 'utf8' });
      t.equal(r.status, 0, `${uri}: ${r.stdout}${r.stderr}`.trim());
    }
  },
);

/** A static Envoy bootstrap: one listener whose jwt_authn provider has these inline keys. */
function jwtAuthnBootstrap(jwks: string): unknown {
  const typed = (type: string, v: object) => ({ '@type': `type.googleapis.com/${type}`, ...v });
  return {
    static_resources: {
      listeners: [
        {
          name: 'l',
          address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: typed('envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', {
                    stat_prefix: 'l',
                    route_config: {},
                    http_filters: [
                      {
                        name: 'envoy.filters.http.jwt_authn',
                        typed_config: typed('envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication', {
                          providers: { p: { issuer: 'i', local_jwks: { inline_string: jwks } } },
                        }),
                      },
                      { name: 'envoy.filters.http.router', typed_config: typed('envoy.extensions.filters.http.router.v3.Router', {}) },
                    ],
                  }),
                },
              ],
            },
          ],
        },
      ],
    },
  };
}

t.test('PILOT_JWT_ENABLE_REMOTE_JWKS values', async (t) => {
  const table: Array<[string, string]> = [
    ['false', 'istiod'],
    ['istiod', 'istiod'],
    ['true', 'hybrid'],
    ['hybrid', 'hybrid'],
    ['envoy', 'envoy'],
    ['Envoy', 'envoy'],
  ];
  for (const [raw, want] of table) t.equal(parseJwksFetchMode(raw), want, raw);
  t.throws(() => parseJwksFetchMode('sometimes'), /PILOT_JWT_ENABLE_REMOTE_JWKS.*false, istiod, true, hybrid, envoy/);
});

t.test('key-set comparison (Istio compareJWKSResponse)', async (t) => {
  const a = '{"keys":[{"kid":"1","n":"x"},{"kid":"2","n":"y"}]}';
  t.notOk(keySetChanged(a, a), 'identical documents');
  t.notOk(keySetChanged(a, '{ "keys": [ {"n":"y","kid":"2"}, {"kid":"1","n":"x"} ] }'), 'reordered keys and fields');
  t.ok(keySetChanged(a, '{"keys":[{"kid":"1","n":"x"},{"kid":"3","n":"z"}]}'), 'a rotated key');
  t.ok(keySetChanged('', a), 'first keys');
  t.ok(keySetChanged('not json', a), 'unparsable previous document');
  t.notOk(keySetChanged(a, 'not json'), 'an unparsable new document is no news');
});

t.test('an unknown URI gets the reject-all key set at once, then the fetched keys and one push', async (t) => {
  const k1 = rsaKey('k1');
  const doc = jwksDocument(k1);
  const srv = await startKeyServer(doc);
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t);
  const ok0 = await counter(networkFetchSuccess);
  const v0 = r.version;
  t.equal(inlined(r, srv.url()), createFakeJwks(srv.url()), 'fake keys while the fetch runs');
  await waitFor('keys fetched', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(inlined(r, srv.url()), doc, 'the served document is inlined as is');
  t.equal(r.version, v0 + 1, 'version moved with the change');
  t.equal(await counter(networkFetchSuccess), ok0 + 1, 'pilot_jwks_resolver_network_fetch_success_total counted the GET');
  t.equal(srv.hits(), 1, 'one GET');
  inlined(r, srv.url());
  await r.idle();
  t.equal(srv.hits(), 1, 'known keys are served from the cache');
  t.equal(changes(), 1, 'no further push');
  const inlineDoc = jwksDocument(rsaKey('k2'));
  t.equal(r.buildLocalJwks(srv.url(), 'x', inlineDoc).case, 'localJwks');
  const inline = r.buildLocalJwks(srv.url(), 'x', inlineDoc);
  t.same(inline.value, { specifier: { case: 'inlineString', value: inlineDoc } }, "a rule's inline jwks wins and is not fetched");
});

t.test('the refresh timer picks up a rotated key and pushes; an unchanged document does not push', async (t) => {
  const k1 = rsaKey('k1');
  const k2 = rsaKey('k2');
  const srv = await startKeyServer(jwksDocument(k1));
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t, { refreshIntervalMs: 150 });
  inlined(r, srv.url());
  await waitFor('first keys', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  const hitsAfterFirst = srv.hits();
  await waitFor('a refresh ran', () => srv.hits() > hitsAfterFirst, { timeoutMs: 5_000, intervalMs: 20 });
  await r.idle();
  t.equal(changes(), 1, 'same keys: no push');
  srv.serve(jwksDocument(k2, k1));
  await waitFor('rotation seen', () => changes() === 2, { timeoutMs: 5_000, intervalMs: 20 });
  t.equal(inlined(r, srv.url()), jwksDocument(k2, k1), 'the rotated set is inlined');
  t.equal(r.keyChangedCount, 2);
});

t.test('a key server that is down: every token is rejected, nothing is pushed, failures are counted', async (t) => {
  const port = await deadPort();
  const uri = `http://127.0.0.1:${port}/jwks`;
  const { r, changes } = resolver(t);
  const fail0 = await counter(networkFetchFail);
  t.equal(inlined(r, uri), createFakeJwks(uri));
  await r.idle();
  t.equal(inlined(r, uri), createFakeJwks(uri), 'still the reject-all key set, never an empty one');
  t.equal(changes(), 0, 'no push without keys');
  // first attempt + background attempt with one retry
  t.ok((await counter(networkFetchFail)) >= fail0 + 3, 'pilot_jwks_resolver_network_fetch_fail_total counted every failed GET');

  // The server comes up: the next generation (after the retry interval) fetches again.
  const k1 = rsaKey('k1');
  const srv = await startKeyServer(jwksDocument(k1));
  t.teardown(() => srv.close());
  const uri2 = srv.url();
  t.equal(inlined(r, uri2), createFakeJwks(uri2));
  await waitFor('keys of the server that came up', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(inlined(r, uri2), jwksDocument(k1));
});

t.test('error answers and documents that are not key sets keep the reject-all keys', async (t) => {
  const srv = await startKeyServer('');
  srv.serve('oops', 500);
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t);
  const fail0 = await counter(networkFetchFail);
  t.equal(inlined(r, srv.url()), createFakeJwks(srv.url()));
  await r.idle();
  t.equal(inlined(r, srv.url()), createFakeJwks(srv.url()), '500: fake keys');
  t.ok((await counter(networkFetchFail)) > fail0, '500 counts as a failed fetch');
  srv.serve('<html>not keys</html>');
  const uri = srv.url('/other');
  t.equal(inlined(r, uri), createFakeJwks(uri));
  await r.idle();
  t.equal(inlined(r, uri), createFakeJwks(uri), 'a body that is not a JWKS is never inlined');
  t.equal(changes(), 0);
});

t.test('a refresh that fails keeps the last good keys', async (t) => {
  const k1 = rsaKey('k1');
  const doc = jwksDocument(k1);
  const srv = await startKeyServer(doc);
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t);
  inlined(r, srv.url());
  await waitFor('keys', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  srv.serve('down for maintenance', 503);
  const failed = r.refreshFailedCount;
  await r.refreshNow();
  t.equal(r.refreshFailedCount, failed + 1, 'the refresh failed');
  t.equal(inlined(r, srv.url()), doc, 'keys the issuer signed with are still used');
  t.equal(changes(), 1, 'no push');
});

t.test('refresh failures back off as Istio does: failure interval, doubling, reset on success', async (t) => {
  const srv = await startKeyServer(jwksDocument(rsaKey('k1')));
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t, { refreshIntervalMs: 3_600_000 * 5, refreshIntervalOnFailureMs: 60_000 });
  srv.serve('unavailable', 503);
  inlined(r, srv.url());
  await r.idle();
  t.equal(r.refreshIntervalNowMs, 60_000, 'the failed first fetch arms the failure interval');
  await r.refreshNow();
  t.equal(r.refreshIntervalNowMs, 120_000, 'a second failure doubles it');
  for (let i = 0; i < 8; i++) await r.refreshNow();
  t.equal(r.refreshIntervalNowMs, 3_600_000, 'capped at one hour');
  srv.serve(jwksDocument(rsaKey('k2')));
  await r.refreshNow();
  t.equal(r.refreshIntervalNowMs, 3_600_000 * 5, 'success restores PILOT_JWT_PUB_KEY_REFRESH_INTERVAL');
  t.equal(changes(), 1, 'and the first keys are pushed');
});

t.test('HTTPS key servers: verified against trusted roots, or not at all with JWKS_RESOLVER_INSECURE_SKIP_VERIFY', async (t) => {
  const certs = makeCerts(tempDir(t, 'mesh-jwks-tls-'));
  const k1 = rsaKey('k1');
  const doc = jwksDocument(k1);
  const srv = await startKeyServer(doc, { cert: certs.serverCert, key: certs.serverKey });
  t.teardown(() => srv.close());
  t.match(srv.url(), /^https:/);

  const strict = resolver(t);
  t.equal(inlined(strict.r, srv.url()), createFakeJwks(srv.url()));
  await strict.r.idle();
  t.equal(inlined(strict.r, srv.url()), createFakeJwks(srv.url()), 'an unknown CA is refused: fake keys');
  t.equal(strict.changes(), 0);

  const insecure = resolver(t, { insecureSkipVerify: true });
  inlined(insecure.r, srv.url());
  await waitFor('keys without verification', () => insecure.changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(inlined(insecure.r, srv.url()), doc);

  const trusted = resolver(t, { caBundlePaths: ['/nonexistent/extra.pem', certs.caCert] });
  inlined(trusted.r, srv.url());
  await waitFor('keys from a server the extra bundle vouches for', () => trusted.changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(inlined(trusted.r, srv.url()), doc);
});

t.test('a rule without jwksUri finds the key set through OpenID discovery of the issuer', async (t) => {
  const k1 = rsaKey('k1');
  const doc = jwksDocument(k1);
  const srv = await startKeyServer('');
  srv.serve('{}', 404);
  t.teardown(() => srv.close());
  const issuer = srv.url('');
  srv.serve(JSON.stringify({ issuer, jwks_uri: srv.url('/keys') }), 200, '/.well-known/openid-configuration');
  srv.serve(doc, 200, '/keys');
  const { r, changes } = resolver(t);
  t.equal(inlined(r, '', issuer), createFakeJwks(''));
  await waitFor('discovered keys', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.equal(inlined(r, '', issuer), doc);
});

t.test('close() stops refreshing', async (t) => {
  const srv = await startKeyServer(jwksDocument(rsaKey('k1')));
  t.teardown(() => srv.close());
  const { r, changes } = resolver(t, { refreshIntervalMs: 50 });
  inlined(r, srv.url());
  await waitFor('keys', () => changes() === 1, { timeoutMs: 10_000, intervalMs: 20 });
  t.ok(r.refreshScheduled, 'a refresh is scheduled while open');
  r.close();
  await r.idle();
  t.notOk(r.refreshScheduled, 'no refresh after close');
  const hits = srv.hits();
  t.equal(inlined(r, srv.url('/new')), createFakeJwks(srv.url('/new')), 'a closed resolver answers with the reject-all keys');
  await r.idle();
  t.equal(srv.hits(), hits, 'and fetches nothing');
  t.throws(() => new JwksResolver({ refreshIntervalMs: 0 }), /PILOT_JWT_PUB_KEY_REFRESH_INTERVAL must be positive/);
});
