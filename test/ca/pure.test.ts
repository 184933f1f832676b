// The CA's pure pieces as tables: certificate contents checked by openssl, Istio's signing rules (TTL
// defaults and limits, dual-use CN, clamping to the signer), rotation timing, and the parsers of the
// authenticators' inputs (JWT_RULE, TokenReview results, XFCC headers, CA_TRUSTED_NODE_ACCOUNTS).
import crypto from 'node:crypto';
import * as fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { status } from '@grpc/grpc-js';
import { CaError, CertificateAuthority, CLOCK_SKEW_GRACE_MS } from '../../src/ca/authority';
import { audienceAccepted, parseJwtRule, serviceAccountFromSubject } from '../../src/ca/authn/jwt';
import { parseTrustedNodeAccounts } from '../../src/ca/authn/node-authorizer';
import { tokenReviewResult } from '../../src/ca/authn/orch-token';
import { authenticate, AuthnError, type Authenticator, type AuthRequest } from '../../src/ca/authn/types';
import { commonName, hostOf, parseXfcc, XfccAuthenticator } from '../../src/ca/authn/xfcc';
import { BundleError, verifiedBundle } from '../../src/ca/bundle';
import { completeness, rootChangeAllowed, signingFiles } from '../../src/ca/plugin';
import { classifyIdentity, parseCertificate, readSubjectAltNames, subjectAltNameValue } from '../../src/ca/pkix/cert';
import { generateRoot, rootRotationWaitMs, rotatedRoot, selfSignedBundle } from '../../src/ca/selfsigned';
import { daemonDnsNames } from '../../src/ca/settings';
import { enforceCompliance } from '../../src/serve/tls';
import { openssl, opensslCsr, opensslPluginCa } from './helpers';
import { tempDir } from '../helpers/temp';

const H = 3_600_000;

/** The error `fn` throws (undefined when it does not). */
function thrown(fn: () => unknown): (Error & { type?: string }) | undefined {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  return undefined;
}

t.test('identities: Istio classification and SAN encoding round trip', async (t) => {
  const cases: Array<[string, 'dns' | 'ip' | 'uri']> = [
    ['spiffe://cluster.local/ns/a/sa/b', 'uri'],
    ['meshd.mesh-system.svc', 'dns'],
    ['10.1.2.3', 'ip'],
    ['2001:db8::1', 'ip'],
    ['https://example.com', 'dns'], // only spiffe:// becomes a URI SAN, as in Istio
  ];
  for (const [host, type] of cases) t.equal(classifyIdentity(host).type, type, host);
  const ids = cases.map(([h]) => classifyIdentity(h));
  t.same(readSubjectAltNames(subjectAltNameValue(ids)), ids, 'encoded and read back in order');
  t.same(
    readSubjectAltNames(subjectAltNameValue([{ type: 'ip', value: '::ffff:10.0.0.1' }])),
    [{ type: 'ip', value: '10.0.0.1' }],
    'a v4-mapped address is written in 4 bytes',
  );
  const long = `spiffe://cluster.local/ns/${'n'.repeat(150)}/sa/x`;
  t.same(readSubjectAltNames(subjectAltNameValue([classifyIdentity(long)])), [{ type: 'uri', value: long }], 'a URI longer than 127 bytes');
});

t.test('certificates issued by the CA, as openssl reads them', async (t) => {
  const dir = tempDir(t);
  const root = await generateRoot({ ttlMs: 10 * 24 * H, org: 'example.org', rsaKeySize: 2048 });
  fs.writeFileSync(path.join(dir, 'root.pem'), root.certPem);
  const rootText = openssl(['x509', '-in', 'root.pem', '-noout', '-text'], { cwd: dir });
  t.match(rootText, /Issuer: O ?= ?example\.org/);
  t.match(rootText, /Subject: O ?= ?example\.org/);
  t.match(rootText, /X509v3 Key Usage: critical\s+Certificate Sign\n/);
  t.match(rootText, /X509v3 Basic Constraints: critical\s+CA:TRUE\n/);
  t.match(rootText, /X509v3 Subject Key Identifier/);
  t.notMatch(rootText, /Authority Key Identifier/, 'a self-signed root has no AKI (Go omits it)');
  const rootSki = /Subject Key Identifier:\s*\n\s*([0-9A-F:]+)/.exec(rootText)![1];

  const ca = new CertificateAuthority(selfSignedBundle(root, 'test'), { defaultCertTtlMs: 24 * H, maxCertTtlMs: 90 * 24 * H });
  const { csr } = opensslCsr(dir, 'ec', { san: 'DNS:ignored.example' });
  const leaf = ca.sign(csr, { subjectIds: ['spiffe://example.org/ns/ns1/sa/sa1', '10.0.0.7'], ttlSeconds: 0 });
  fs.writeFileSync(path.join(dir, 'leaf.pem'), leaf);
  const text = openssl(['x509', '-in', 'leaf.pem', '-noout', '-text'], { cwd: dir });
  t.match(text, /Subject: ?\n/, 'empty subject (no CN asked for)');
  t.match(text, /X509v3 Key Usage: critical\s+Digital Signature, Key Encipherment\n/);
  t.match(text, /X509v3 Extended Key Usage:\s+TLS Web Server Authentication, TLS Web Client Authentication\n/);
  t.match(text, /X509v3 Basic Constraints: critical\s+CA:FALSE\n/);
  t.match(text, /X509v3 Subject Alternative Name: critical\s+URI:spiffe:\/\/example\.org\/ns\/ns1\/sa\/sa1, IP Address:10\.0\.0\.7\n/);
  t.match(text, new RegExp(`X509v3 Authority Key Identifier:\\s*\\n\\s*(keyid:)?${rootSki}`), 'AKI is the root SKI');
  t.match(text, /Signature Algorithm: sha256WithRSAEncryption/, 'an RSA CA signs with SHA-256');
  t.match(openssl(['verify', '-CAfile', 'root.pem', 'leaf.pem'], { cwd: dir }), /leaf\.pem: OK/);
  const serial = parseCertificate(crypto.X509Certificate ? new crypto.X509Certificate(leaf).raw : Buffer.alloc(0)).serialHex;
  t.ok(serial.length <= 32 && !(parseInt(serial.slice(0, 2), 16) & 0x80), 'a positive serial of at most 128 bits');
});

t.test('signing rules (Istio IstioCA.sign)', async (t) => {
  const dir = tempDir(t);
  const now = Date.now();
  const root = await generateRoot({ ttlMs: 10 * 24 * H, org: 'cluster.local', rsaKeySize: 2048, now });
  const bundle = selfSignedBundle(root, 'test');
  const ca = new CertificateAuthority(bundle, { defaultCertTtlMs: 24 * H, maxCertTtlMs: 48 * H, now: () => now });
  const { csr } = opensslCsr(dir, 'rsa');
  const life = (pem: string) => {
    const c = new crypto.X509Certificate(pem);
    return { from: Date.parse(c.validFrom), to: Date.parse(c.validTo) };
  };
  const sec = (ms: number) => Math.floor(ms / 1000) * 1000;
  const ids = ['spiffe://cluster.local/ns/a/sa/b'];

  const def = life(ca.sign(csr, { subjectIds: ids, ttlSeconds: 0 }));
  t.equal(def.from, sec(now - CLOCK_SKEW_GRACE_MS), 'valid from two minutes ago');
  t.equal(def.to, sec(now + 24 * H), 'no TTL: DEFAULT_WORKLOAD_CERT_TTL');
  t.equal(life(ca.sign(csr, { subjectIds: ids, ttlSeconds: -5 })).to, sec(now + 24 * H), 'a negative TTL is the default too');
  t.equal(life(ca.sign(csr, { subjectIds: ids, ttlSeconds: 48 * 3600 })).to, sec(now + 48 * H), 'exactly the maximum is allowed');
  t.match(
    thrown(() => ca.sign(csr, { subjectIds: ids, ttlSeconds: 48 * 3600 + 1 })),
    { type: 'TTL_ERROR', message: 'requested TTL 48h0m1s is greater than the max allowed TTL 48h0m0s' },
  );

  const late = new CertificateAuthority(bundle, { defaultCertTtlMs: 24 * H, maxCertTtlMs: 100 * 24 * H, now: () => now + 9.5 * 24 * H });
  t.equal(life(late.sign(csr, { subjectIds: ids, ttlSeconds: 24 * 3600 })).to, sec(now + 10 * 24 * H), 'a leaf never outlives its signer');
  const expired = new CertificateAuthority(bundle, { defaultCertTtlMs: 24 * H, maxCertTtlMs: 48 * H, now: () => now + 11 * 24 * H });
  t.match(
    thrown(() => expired.sign(csr, { subjectIds: ids, ttlSeconds: 0 })),
    { type: 'CERT_GEN_ERROR' },
  );

  const withCn = opensslCsr(dir, 'ec', { cn: 'whatever' }).csr;
  t.match(
    new crypto.X509Certificate(ca.sign(withCn, { subjectIds: ids, ttlSeconds: 0 })).subject,
    `CN=${ids[0]}`,
    'dual use: a CSR with a CN gets the first identity as CN',
  );
  const longId = `spiffe://cluster.local/ns/${'x'.repeat(60)}/sa/b`;
  t.equal(
    new crypto.X509Certificate(ca.sign(withCn, { subjectIds: [longId], ttlSeconds: 0 })).subject ?? '',
    '',
    'a CN over 64 characters is left out',
  );

  const bad: Array<[string, string, RegExp]> = [
    ['not PEM', 'hello', /not properly encoded/],
    ['a certificate, not a CSR', root.certPem, /not properly encoded/],
    ['garbage in a CSR block', '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n', /failed to parse/],
  ];
  for (const [name, input, msg] of bad) {
    try {
      ca.sign(input, { subjectIds: ids, ttlSeconds: 0 });
      t.fail(name);
    } catch (e) {
      t.ok(e instanceof CaError && e.type === 'CSR_ERROR' && e.grpcCode === status.INVALID_ARGUMENT, `${name}: CSR_ERROR, InvalidArgument`);
      t.match((e as Error).message, msg, name);
    }
  }
  // A CSR whose signature does not verify: flip a byte of the signature.
  const der = Buffer.from(csr.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  der[der.length - 5]! ^= 0xff;
  const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
  t.match(
    thrown(() => ca.sign(tampered, { subjectIds: ids, ttlSeconds: 0 })),
    { type: 'CSR_ERROR' },
    'a CSR with a bad signature',
  );
});

t.test('default TTL is bounded by the plug-in chain (Istio minTTL)', async (t) => {
  const dir = tempDir(t);
  const plug = path.join(dir, 'cacerts');
  opensslPluginCa(plug); // intermediate valid 20 days
  const b = verifiedBundle(
    {
      certPem: fs.readFileSync(path.join(plug, 'ca-cert.pem'), 'utf8'),
      keyPem: fs.readFileSync(path.join(plug, 'ca-key.pem'), 'utf8'),
      chainPem: fs.readFileSync(path.join(plug, 'cert-chain.pem'), 'utf8'),
      rootPem: fs.readFileSync(path.join(plug, 'root-cert.pem'), 'utf8'),
    },
    { cert: 'ca-cert.pem', key: 'ca-key.pem', chain: 'cert-chain.pem', root: 'root-cert.pem' },
  );
  const ca = new CertificateAuthority(b, { defaultCertTtlMs: 40 * 24 * H, maxCertTtlMs: 90 * 24 * H });
  const left = b.signingCert.notAfter.getTime() - Date.now();
  t.ok(Math.abs(ca.defaultTtlMs() - left) < 5000, 'the default is what the chain has left');
});

t.test('bundle verification names what is wrong', async (t) => {
  const a = await generateRoot({ ttlMs: 24 * H, org: 'a', rsaKeySize: 2048 });
  const b = await generateRoot({ ttlMs: 24 * H, org: 'b', rsaKeySize: 2048 });
  const from = { cert: 'ca-cert.pem', key: 'ca-key.pem', chain: 'cert-chain.pem', root: 'root-cert.pem' };
  t.throws(() => verifiedBundle({ certPem: a.certPem, keyPem: b.keyPem, chainPem: '', rootPem: a.certPem }, from), {
    message: /^ca-key\.pem does not match ca-cert\.pem/,
  });
  t.throws(() => verifiedBundle({ certPem: a.certPem, keyPem: a.keyPem, chainPem: '', rootPem: b.certPem }, from), {
    message: /^ca-cert\.pem: cannot verify the cert with the provided root chain/,
  });
  t.throws(() => verifiedBundle({ certPem: '', keyPem: a.keyPem, chainPem: '', rootPem: a.certPem }, from), {
    message: 'ca-cert.pem: no PEM certificate found',
  });
  t.throws(() => verifiedBundle({ certPem: a.certPem, keyPem: 'junk', chainPem: '', rootPem: a.certPem }, from), {
    message: /^ca-key\.pem: failed to parse private key PEM/,
  });
  t.ok(verifiedBundle({ certPem: a.certPem, keyPem: a.keyPem, chainPem: '', rootPem: a.certPem }, from), 'a matching pair');
  t.type(BundleError, 'function');
});

t.test('root rotation: timing (GetWaitTime) and the same key', async (t) => {
  const nb = new Date(0);
  const na = new Date(100_000);
  const cases: Array<[number, number, number]> = [
    // [percentile, now, wait]
    [20, 0, 80_000],
    [20, 50_000, 30_000],
    [20, 80_000, 0],
    [20, 90_000, 0],
    [50, 10_000, 40_000],
    [20, 200_000, 0], // expired
  ];
  for (const [p, now, want] of cases) t.equal(rootRotationWaitMs(nb, na, p, now), want, `percentile ${p}, now ${now}`);

  const dir = tempDir(t);
  const old = await generateRoot({ ttlMs: 24 * H, org: 'td.example', rsaKeySize: 2048 });
  const next = rotatedRoot(old, { ttlMs: 48 * H, org: 'ignored-when-old-has-one' });
  const oldCert = new crypto.X509Certificate(old.certPem);
  const newCert = new crypto.X509Certificate(next);
  t.equal(newCert.subject, oldCert.subject, 'same subject (the old organization is kept)');
  t.ok(newCert.publicKey.equals(oldCert.publicKey), 'same key');
  t.not(newCert.serialNumber, oldCert.serialNumber);
  // A leaf signed under the old root verifies against the new one and vice versa.
  const caOld = new CertificateAuthority(selfSignedBundle(old, 'old'), { defaultCertTtlMs: H, maxCertTtlMs: H });
  const caNew = new CertificateAuthority(selfSignedBundle({ certPem: next, keyPem: old.keyPem }, 'new'), { defaultCertTtlMs: H, maxCertTtlMs: H });
  const { csr } = opensslCsr(dir, 'ec');
  fs.writeFileSync(path.join(dir, 'old.pem'), old.certPem);
  fs.writeFileSync(path.join(dir, 'new.pem'), next);
  fs.writeFileSync(path.join(dir, 'leaf-old.pem'), caOld.sign(csr, { subjectIds: ['a.b'], ttlSeconds: 0 }));
  fs.writeFileSync(path.join(dir, 'leaf-new.pem'), caNew.sign(csr, { subjectIds: ['a.b'], ttlSeconds: 0 }));
  t.match(openssl(['verify', '-CAfile', 'new.pem', 'leaf-old.pem'], { cwd: dir }), /OK/, 'old leaf, new root');
  t.match(openssl(['verify', '-CAfile', 'old.pem', 'leaf-new.pem'], { cwd: dir }), /OK/, 'new leaf, old root');
});

t.test('JWT_RULE parsing and token checks', async (t) => {
  t.same(parseJwtRule('{"issuer":"https://i","jwks_uri":"https://i/k","audiences":["a","b"]}'), {
    issuer: 'https://i',
    jwksUri: 'https://i/k',
    audiences: ['a', 'b'],
  });
  t.same(
    parseJwtRule('{"Issuer":"https://i","Audiences":["a"]}'),
    { issuer: 'https://i', jwksUri: undefined, audiences: ['a'] },
    'field names match case-insensitively, as encoding/json does',
  );
  const bad: Array<[string, RegExp]> = [
    ['nope', /failed to unmarshal JWT rule/],
    ['[]', /expected a JSON object/],
    ['{"jwks_uri":"x"}', /no "issuer"/],
    ['{"issuer":"i","audiences":"a"}', /"audiences" must be a list of strings/],
  ];
  for (const [text, msg] of bad) t.throws(() => parseJwtRule(text), { message: msg }, text);
  t.ok(audienceAccepted('a', ['a']));
  t.ok(audienceAccepted(['x', 'b'], ['a', 'b']));
  t.notOk(audienceAccepted(['x'], ['a']));
  t.notOk(audienceAccepted('a', []), 'a rule without audiences accepts no token (Istio checkAudience)');
  t.same(serviceAccountFromSubject('system:serviceaccount:ns1:sa1'), ['ns1', 'sa1']);
  for (const sub of ['alice', 'system:serviceaccount:ns1', 'system:serviceaccount::sa', undefined]) {
    t.throws(() => serviceAccountFromSubject(sub), { idExtraction: true, message: /^invalid sub/ }, String(sub));
  }
});

t.test('TokenReview results (Istio getTokenReviewResult)', async (t) => {
  const ok = {
    authenticated: true,
    user: {
      username: 'system:serviceaccount:ns1:sa1',
      groups: ['system:serviceaccounts', 'system:serviceaccounts:ns1', 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/pod-name': ['p1'], 'authentication.kubernetes.io/pod-uid': ['u1'] },
    },
  };
  t.same(tokenReviewResult(ok), { podName: 'p1', podNamespace: 'ns1', podUid: 'u1', podServiceAccount: 'sa1' });
  const cases: Array<[string, unknown, RegExp]> = [
    ['error', { error: '[invalid bearer token, token audiences ["x"] is invalid]' }, /returns an error: \[invalid bearer token/],
    ['not authenticated', { authenticated: false }, /not authenticated/],
    ['a user, not a service account', { authenticated: true, user: { username: 'admin', groups: ['system:masters'] } }, /not a service account/],
    [
      'malformed username',
      { authenticated: true, user: { username: 'system:serviceaccount:x', groups: ['system:serviceaccounts'] } },
      /invalid username/,
    ],
  ];
  for (const [name, st, msg] of cases) t.throws(() => tokenReviewResult(st as never), { message: msg }, name);
});

t.test('XFCC headers and trusted addresses', async (t) => {
  const h =
    'By=spiffe://cluster.local/ns/gw/sa/gw;Hash=468ed33be74eee6556d90c0149c1309e9ba61d6425303443c0748a02dd8de688;' +
    'Subject="/C=US/ST=CA/L=San Francisco/OU=Lyft/CN=Test Client";URI=spiffe://cluster.local/ns/ns1/sa/sa1;DNS=client.example,' +
    'By=x;URI=spiffe://cluster.local/ns/ns2/sa/sa2';
  const parsed = parseXfcc(h);
  t.equal(parsed.length, 2);
  t.same(parsed[0]!.uri, ['spiffe://cluster.local/ns/ns1/sa/sa1']);
  t.same(parsed[0]!.dns, ['client.example']);
  t.equal(commonName(parsed[0]!.subject!), 'Test Client');
  t.equal(commonName('CN=a\\,b,OU=c'), 'a,b', 'RFC 2253 with an escaped comma');
  t.throws(() => parseXfcc('By=a;Subject="unterminated'), /unterminated/);
  t.throws(() => parseXfcc('Nonsense=1'), /unknown key/);
  t.equal(hostOf('10.0.0.1:5000'), '10.0.0.1');
  t.equal(hostOf('[::1]:5000'), '::1');
  // grpc-js's getPeer() on a dual-stack listener: IPv6 unbracketed
  t.equal(hostOf('::ffff:127.0.0.1:56288'), '::ffff:127.0.0.1');
  t.equal(hostOf('::1:40000'), '::1');
  t.equal(hostOf('2001:db8::7:40000'), '2001:db8::7');

  const req = (addr: string, header?: string): AuthRequest => ({
    secure: true,
    remoteAddress: addr,
    header: (n) => (n === 'x-forwarded-client-cert' && header ? [header] : []),
  });
  const x = new XfccAuthenticator(['10.8.0.0/16']);
  t.same((await x.authenticate(req('10.8.1.2:1234', h))).identities, [
    'spiffe://cluster.local/ns/ns1/sa/sa1',
    'client.example',
    'Test Client',
    'spiffe://cluster.local/ns/ns2/sa/sa2',
  ]);
  t.same(
    (await x.authenticate(req('127.0.0.1:1234', 'URI=spiffe://td/ns/a/sa/b'))).identities,
    ['spiffe://td/ns/a/sa/b'],
    'loopback is always trusted (Istio)',
  );
  await t.rejects(x.authenticate(req('10.9.0.1:1', h)), /not in the trusted network/);
  await t.rejects(x.authenticate(req('10.8.0.1:1')), /does not have Xfcc header/);
});

t.test('CA_TRUSTED_NODE_ACCOUNTS', async (t) => {
  t.same(parseTrustedNodeAccounts(''), { accounts: new Set(), invalid: [] });
  t.same(parseTrustedNodeAccounts('mesh-system/nodeproxy,bad,kube-system/x'), {
    accounts: new Set(['mesh-system/nodeproxy', 'kube-system/x']),
    invalid: ['bad'],
  });
});

t.test('the authenticator chain (Istio security.Authenticate)', async (t) => {
  const yes = (id: string, type = 'Yes'): Authenticator => ({ type, authenticate: async () => ({ source: 'id-token', identities: [id] }) });
  const no = (msg: string, idExtraction = false): Authenticator => ({
    type: 'No',
    authenticate: async () => Promise.reject(new AuthnError(msg, idExtraction)),
  });
  const secure: AuthRequest = { secure: true, remoteAddress: '127.0.0.1:1', header: () => [] };
  const plain: AuthRequest = { ...secure, secure: false };
  const on = { xdsAuth: true, xdsAuthPlaintext: false };
  t.same(await authenticate([yes('a')], secure, { ...on, xdsAuth: false }), { kind: 'skipped' }, 'XDS_AUTH=false: nothing runs');
  t.same(await authenticate([yes('a')], plain, on), { kind: 'skipped' }, 'plaintext without XDS_AUTH_PLAINTEXT: nothing runs');
  t.match(
    await authenticate([yes('a')], plain, { ...on, xdsAuthPlaintext: true }),
    { kind: 'authenticated' },
    'XDS_AUTH_PLAINTEXT authenticates plaintext',
  );
  t.match(
    await authenticate([no('x'), yes('b', 'Second'), yes('c')], secure, on),
    { kind: 'authenticated', caller: { identities: ['b'] } },
    'the first success wins',
  );
  t.same(await authenticate([no('first'), no('second', true)], secure, on), {
    kind: 'failed',
    failures: ['Authenticator No: first', 'Authenticator No: second'],
    idExtraction: true,
  });
});

t.test('plug-in files: layout, completeness, root changes', async (t) => {
  const files = signingFiles('/x', () => false);
  t.same(files, {
    signingCert: '/x/ca-cert.pem',
    signingKey: '/x/ca-key.pem',
    certChain: ['/x/cert-chain.pem'],
    rootCert: '/x/root-cert.pem',
    tlsLayout: false,
  });
  const tlsFiles = signingFiles('/x', (f) => f === '/x/tls.crt');
  t.same(tlsFiles, {
    signingCert: '/x/tls.crt',
    signingKey: '/x/tls.key',
    certChain: ['/x/tls.crt', '/x/ca.crt'],
    rootCert: '/x/ca.crt',
    tlsLayout: true,
  });
  t.same(
    completeness(files, () => false),
    { complete: false, any: false, missing: ['/x/ca-key.pem', '/x/ca-cert.pem', '/x/root-cert.pem', '/x/cert-chain.pem'] },
  );
  t.same(
    completeness(files, (f) => f !== '/x/ca-key.pem'),
    { complete: false, any: true, missing: ['/x/ca-key.pem'] },
  );
  t.same(
    completeness(files, () => true),
    { complete: true, any: true, missing: [] },
  );

  const r1 = (await generateRoot({ ttlMs: H, org: 'a', rsaKeySize: 2048 })).certPem;
  const r2 = (await generateRoot({ ttlMs: H, org: 'b', rsaKeySize: 2048 })).certPem;
  t.same(rootChangeAllowed(r1, r1, false), { ok: true }, 'unchanged');
  t.match(rootChangeAllowed(r1, r1 + r2, false), { ok: false, reason: /Multi root is disabled/ });
  t.same(rootChangeAllowed(r1, r1 + r2, true), { ok: true }, 'a root added (MESH_MULTIROOT_MESH)');
  t.same(rootChangeAllowed(r1 + r2, r2, true), { ok: true }, 'a root retired');
  t.match(rootChangeAllowed(r1, r2, true), { ok: false, reason: /neither contains nor is contained/ });
});

t.test('the daemon certificate names and COMPLIANCE_POLICY', async (t) => {
  t.same(daemonDnsNames({ namespace: 'mesh-system', discoveryHost: 'meshd.mesh-system.svc', customHosts: ['localhost', '127.0.0.1'] }), [
    '127.0.0.1',
    'localhost',
    'mesh-pilot.mesh-system.svc',
    'meshd-remote.mesh-system.svc',
    'meshd.mesh-system.svc',
  ]);
  t.same(daemonDnsNames({ namespace: 'ops', discoveryHost: 'cp.example.com', customHosts: [], revision: 'canary' }), [
    'cp.example.com',
    'mesh-pilot.ops.svc',
    'meshd-canary.ops.svc',
    'meshd-remote.ops.svc',
    'meshd.ops.svc',
  ]);
  const m = { cert: Buffer.from(''), key: Buffer.from('') };
  t.same(enforceCompliance(m, ''), m);
  // Istio's pkg/model/fips.go: TLS 1.2 only, these four suites, P-256.
  const istioFips = 'ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384';
  t.same(enforceCompliance({ ...m, ciphers: 'AES128-SHA' }, 'fips-140-2'), {
    ...m,
    ciphers: istioFips,
    minVersion: 'TLSv1.2',
    maxVersion: 'TLSv1.2',
    ecdhCurve: 'P-256',
  });
  t.throws(() => enforceCompliance(m, 'fips-140-3'), { message: /^COMPLIANCE_POLICY="fips-140-3": unknown compliance policy/ });
});
