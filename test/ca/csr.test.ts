// PKCS#10 requests as Istio's agent writes them, checked with OpenSSL (`openssl req -verify -text`), and
// requests made by OpenSSL read back by parseCsr.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { createCsrPem, parseCsr, CsrError } from '../../src/ca/pkix/csr';
import { generateKeyPair, generateKeyPairAhead, keySpecFromEnv, KeySpecError, type KeySpec } from '../../src/ca/pkix/keys';
import { fromPem, integer, oid, time } from '../../src/ca/pkix/der';
import { tempDir } from '../helpers/temp';

const parseCsrDer = (pem: string): Buffer => Buffer.from(fromPem(pem, 'CERTIFICATE REQUEST')[0]!);

const dir = tempDir(t, 'mesh-csr-');

function openssl(args: string[], input?: string): string {
  return execFileSync('openssl', args, { input, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
}

const ID = 'spiffe://cluster.local/ns/default/sa/bookinfo-ratings';
const cases: Array<[string, KeySpec, RegExp, string]> = [
  ['RSA 2048', { kind: 'rsa', bits: 2048 }, /Public-Key: \(2048 bit\)/, 'sha256WithRSAEncryption'],
  ['RSA 3072', { kind: 'rsa', bits: 3072 }, /Public-Key: \(3072 bit\)/, 'sha256WithRSAEncryption'],
  ['ECDSA P-256', { kind: 'ec', curve: 'P256' }, /NIST CURVE: P-256/, 'ecdsa-with-SHA256'],
  ['ECDSA P-384', { kind: 'ec', curve: 'P384' }, /NIST CURVE: P-384/, 'ecdsa-with-SHA384'],
];

for (const [name, spec, keyLine, sig] of cases) {
  t.test(`${name}: openssl verifies the signature and reads the critical URI SAN`, async (t) => {
    const key = await generateKeyPair(spec);
    const pem = createCsrPem({ privateKey: key.privateKey, sans: { uris: [ID] } });
    const out = openssl(['req', '-verify', '-noout', '-text'], pem);
    t.match(out, /Version: 1 \(0x0\)/, 'PKCS#10 v1');
    t.match(out, /Subject: O = ?\n/, 'subject O= with an empty value, as Go writes Organization: []string{""}');
    t.match(out, keyLine);
    t.match(
      out,
      /Requested Extensions:\s+X509v3 Subject Alternative Name: critical\s+URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-ratings\n/,
    );
    t.match(out, new RegExp(`Signature Algorithm: ${sig}`));
    // openssl prints "verify OK" / "Certificate request self-signature verify OK" on stderr; a bad signature fails the command.
    const tampered = pem.replace(/(\n[A-Za-z0-9+/]{10})[A-Za-z0-9+/]/, (_m, a: string) => `${a}${a.endsWith('A') ? 'B' : 'A'}`);
    t.throws(() => openssl(['req', '-verify', '-noout'], tampered), 'a changed byte fails verification');
  });
}

t.test('DNS and IP SANs and a common name (the CA side uses these for server certificates)', async (t) => {
  const key = await generateKeyPair({ kind: 'ec', curve: 'P256' });
  const pem = createCsrPem({
    privateKey: key.privateKey,
    org: 'mesh.io',
    commonName: 'meshd',
    sans: { dns: ['meshd.mesh-system.svc'], ips: ['127.0.0.1', '::1'] },
  });
  const out = openssl(['req', '-verify', '-noout', '-text'], pem);
  t.match(out, /Subject: O = mesh\.io, CN = meshd/);
  t.match(out, /DNS:meshd\.mesh-system\.svc, IP Address:127\.0\.0\.1, IP Address:0:0:0:0:0:0:0:1/);
});

t.test('parseCsr reads a request made by openssl', async (t) => {
  const keyFile = path.join(dir, 'k.pem');
  openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', keyFile]);
  const pem = openssl([
    'req',
    '-new',
    '-key',
    keyFile,
    '-subj',
    '/O=other/CN=x',
    '-addext',
    'subjectAltName=URI:spiffe://evil/ns/a/sa/b,DNS:x.example',
  ]);
  const p = parseCsr(pem);
  t.ok(p.signatureValid, 'signature checked');
  t.same(p.subject, [
    { oid: '2.5.4.10', value: 'other' },
    { oid: '2.5.4.3', value: 'x' },
  ]);
  t.same(p.sans, { uris: ['spiffe://evil/ns/a/sa/b'], dns: ['x.example'], ips: [] });
  t.equal(p.signatureAlgorithm, '1.2.840.10045.4.3.2');
  const body = pem.split('\n').filter((l) => l && !l.startsWith('-----'));
  const truncated = `-----BEGIN CERTIFICATE REQUEST-----\n${body.slice(0, 2).join('\n')}\n-----END CERTIFICATE REQUEST-----\n`;
  t.throws(() => parseCsr(truncated), CsrError, 'a truncated request is a CsrError');
  t.throws(() => parseCsr(truncated), { message: /malformed CSR: truncated DER/ });
  const der = parseCsrDer(pem);
  der[der.length - 5] = der[der.length - 5]! ^ 0xff; // inside the signature
  t.equal(parseCsr(der).signatureValid, false, 'a changed signature does not verify');
  t.throws(() => parseCsr('hello'), { message: /no PEM block of type CERTIFICATE REQUEST/ });
});

t.test('key settings as Istio reads them', async (t) => {
  const k = (rsaKeySize: number, eccSignatureAlgorithm = '', eccCurve = 'P256') => keySpecFromEnv({ rsaKeySize, eccSignatureAlgorithm, eccCurve });
  t.same(k(2048), { kind: 'rsa', bits: 2048 });
  t.same(k(4096), { kind: 'rsa', bits: 4096 });
  t.same(k(2048, 'ECDSA'), { kind: 'ec', curve: 'P256' });
  t.same(k(2048, 'ECDSA', 'P384'), { kind: 'ec', curve: 'P384' });
  t.same(k(2048, 'ECDSA', 'P521'), { kind: 'ec', curve: 'P256' }, 'an unknown curve falls back to P-256, as Istio does');
  t.throws(() => k(1024), KeySpecError);
  t.throws(() => k(1024), { message: /WORKLOAD_RSA_KEY_SIZE=1024: requested key size does not meet the minimum required size of 2048/ });
  t.throws(() => k(2048, 'ED25519'), { message: /ECC_SIGNATURE_ALGORITHM=ED25519: unsupported/ });
});

t.test('a key made ahead is taken once, by a request of its own spec only', async (t) => {
  const made = generateKeyPairAhead({ kind: 'ec', curve: 'P256' });
  const other = await generateKeyPair({ kind: 'ec', curve: 'P384' });
  t.equal(other.privateKey.asymmetricKeyDetails?.namedCurve, 'secp384r1', 'another spec gets a key of its own spec');
  const first = await generateKeyPair({ kind: 'ec', curve: 'P256' }, true);
  t.equal(first.privateKey.asymmetricKeyDetails?.namedCurve, 'prime256v1');
  t.ok(first.publicKey.equals((await made)!), 'the first P-256 request got the key made ahead');
  t.match(first.privateKeyPem, /^-----BEGIN PRIVATE KEY-----/, "the PEM encoding is the request's (PKCS#8 here)");
  const second = await generateKeyPair({ kind: 'ec', curve: 'P256' });
  t.notOk(second.publicKey.equals(first.publicKey), 'the ahead key is used once: the next request gets a fresh one');
  t.match(second.privateKeyPem, /^-----BEGIN EC PRIVATE KEY-----/);
});

t.test('DER primitives against openssl asn1parse', async (t) => {
  const f = path.join(dir, 'x.der');
  const show = (der: Buffer) => {
    fs.writeFileSync(f, der);
    return openssl(['asn1parse', '-inform', 'DER', '-in', f]).trim();
  };
  t.match(show(oid('1.2.840.113549.1.9.14')), /OBJECT\s+:Extension Request/);
  t.match(show(oid('2.5.29.17')), /OBJECT\s+:X509v3 Subject Alternative Name/);
  t.match(show(integer(0)), /INTEGER\s+:00/);
  t.match(show(integer(128)), /INTEGER\s+:80/);
  t.match(show(integer(2n ** 64n)), /INTEGER\s+:010000000000000000/);
  t.match(show(integer(Buffer.from([0x80, 0x01]))), /prim: INTEGER\s+:8001/);
  t.match(show(time(new Date('2030-01-02T03:04:05Z'))), /UTCTIME\s+:300102030405Z/);
  t.match(show(time(new Date('2050-01-02T03:04:05Z'))), /GENERALIZEDTIME\s+:20500102030405Z/);
});
