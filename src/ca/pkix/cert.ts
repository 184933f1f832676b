// X.509 certificates as the CA issues and reads them. Issuing follows what Istio gets from Go's
// x509.CreateCertificate for its templates (pkiutil genCertTemplateFromCSR / genCertTemplateFromOptions):
// v3, a random 128-bit serial, the issuer's subject copied byte for byte, keyUsage (critical), extKeyUsage,
// basicConstraints (critical), a subjectKeyIdentifier on CA certificates, an authorityKeyIdentifier when the
// issuer has one, then the subjectAltName Istio adds itself (critical: the subject carries no identity).
// Reading pulls out only what the CA needs: names, validity, key identifiers and the SAN identities.
import crypto, { type KeyObject } from 'node:crypto';
import { ipFamily } from '../../lib/ip';
import {
  bitString,
  boolean,
  children,
  DerError,
  expectTag,
  explicit,
  fromPem,
  implicitPrimitive,
  integer,
  octetString,
  oid,
  parse,
  readBitString,
  readOid,
  readString,
  sequence,
  TAG,
  time,
  toPem,
  type Node,
} from './der';
import { signatureAlgorithm } from './keys';

export { name as distinguishedName } from './csr';

export const CERT_OID = {
  organization: '2.5.4.10',
  commonName: '2.5.4.3',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
} as const;

/** keyUsage bits as RFC 5280 numbers them (Go's KeyUsage constants are 1 << bit). */
export const KEY_USAGE = { digitalSignature: 0, keyEncipherment: 2, keyCertSign: 5, cRLSign: 6 } as const;

export class CertificateError extends Error {}

export interface Extension {
  id: string;
  critical: boolean;
  value: Buffer;
}

export interface SubjectIdentity {
  type: 'dns' | 'ip' | 'uri';
  value: string;
}

/**
 * Istio's BuildSubjectAltNameExtension classification of a host string: an IP address becomes an IP SAN,
 * `spiffe://…` a URI SAN, anything else a DNS SAN. Order is kept.
 */
export function classifyIdentity(host: string): SubjectIdentity {
  if (ipFamily(host)) return { type: 'ip', value: host };
  if (host.startsWith('spiffe://')) return { type: 'uri', value: host };
  return { type: 'dns', value: host };
}

function ipBytes(ip: string): Buffer {
  if (ipFamily(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  // IPv4-mapped IPv6 addresses are written in their 4-byte form, as Istio does.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return Buffer.from(mapped[1]!.split('.').map(Number));
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const last = (tail === undefined ? h : t).at(-1);
  let v4: number[] = [];
  if (last && last.includes('.')) {
    v4 = last.split('.').map(Number);
    (tail === undefined ? h : t).pop();
  }
  const words = 8 - v4.length / 2;
  const groups = tail === undefined ? h : [...h, ...Array<string>(words - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  v4.forEach((b, i) => (out[12 + i] = b));
  return out;
}

/** GeneralNames (the subjectAltName value) for identities, in the given order. */
export function subjectAltNameValue(ids: readonly SubjectIdentity[]): Buffer {
  return sequence(
    ...ids.map((id) => {
      if (id.type === 'ip') return implicitPrimitive(7, ipBytes(id.value));
      if (!/^[\x00-\x7f]*$/.test(id.value)) throw new CertificateError(`identity ${JSON.stringify(id.value)} is not ASCII`);
      return implicitPrimitive(id.type === 'uri' ? 6 : 2, Buffer.from(id.value, 'latin1'));
    }),
  );
}

function formatIp(b: Buffer): string {
  if (b.length === 4) return [...b].join('.');
  const groups: string[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) groups.push(b.readUInt16BE(i).toString(16));
  // The canonical short form (longest run of zero groups collapsed), as Go prints it.
  let best = { at: -1, len: 0 };
  for (let i = 0; i < groups.length;) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === '0') j++;
    if (j - i > best.len && j - i > 1) best = { at: i, len: j - i };
    i = j;
  }
  if (best.at < 0) return groups.join(':');
  return `${groups.slice(0, best.at).join(':')}::${groups.slice(best.at + best.len).join(':')}`;
}

/** Every GeneralName of a subjectAltName value that Istio turns into an identity (URI, DNS, IP), in order. */
export function readSubjectAltNames(value: Buffer): SubjectIdentity[] {
  const out: SubjectIdentity[] = [];
  for (const gn of children(expectTag(parse(value), TAG.SEQUENCE, 'GeneralNames'))) {
    if (gn.tag === 0x86) out.push({ type: 'uri', value: gn.content.toString('latin1') });
    else if (gn.tag === 0x82) out.push({ type: 'dns', value: gn.content.toString('latin1') });
    else if (gn.tag === 0x87) out.push({ type: 'ip', value: formatIp(gn.content) });
  }
  return out;
}

export function extensionDer(e: Extension): Buffer {
  return e.critical ? sequence(oid(e.id), boolean(true), octetString(e.value)) : sequence(oid(e.id), octetString(e.value));
}

function keyUsageValue(bits: readonly number[]): Buffer {
  const max = Math.max(...bits);
  const bytes = Buffer.alloc(Math.floor(max / 8) + 1);
  for (const b of bits) bytes[Math.floor(b / 8)]! |= 0x80 >> (b % 8);
  // DER: trailing zero bits are dropped and counted as unused.
  const unused = 7 - (max % 8);
  return Buffer.concat([Buffer.from([TAG.BIT_STRING, bytes.length + 1, unused]), bytes]);
}

/** RFC 5280 method 1: SHA-1 of the subjectPublicKey bits. */
export function subjectKeyId(publicKey: KeyObject): Buffer {
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const [, bits] = children(parse(spki));
  return crypto.createHash('sha1').update(readBitString(bits!)).digest();
}

export interface IssueOptions {
  /** The certified public key. */
  publicKey: KeyObject;
  /** Its SubjectPublicKeyInfo DER, when the caller has it (exporting a KeyObject costs as much as a signature). */
  publicKeyDer?: Buffer;
  /** DER Name of the subject. */
  subject: Buffer;
  notBefore: Date;
  notAfter: Date;
  isCA: boolean;
  /** keyUsage bits (KEY_USAGE). */
  keyUsage: readonly number[];
  extKeyUsage?: readonly string[];
  /** SAN entries; none = no subjectAltName extension. */
  sans?: readonly SubjectIdentity[];
  /** The signer; absent = self-signed with `signingKey` (which must then belong to `publicKey`). */
  issuer?: ParsedCertificate;
  signingKey: KeyObject;
  /** 16 random bytes when absent. */
  serial?: Buffer;
}

/** Builds and signs a certificate; returns its DER. */
export function issueCertificate(o: IssueOptions): Buffer {
  const serial = o.serial ?? crypto.randomBytes(16);
  serial[0]! &= 0x7f; // positive, at most 128 bits, as Go's rand.Int(2^128)
  const exts: Extension[] = [];
  exts.push({ id: CERT_OID.keyUsage, critical: true, value: keyUsageValue(o.keyUsage) });
  if (o.extKeyUsage && o.extKeyUsage.length > 0) {
    exts.push({ id: CERT_OID.extKeyUsage, critical: false, value: sequence(...o.extKeyUsage.map((u) => oid(u))) });
  }
  exts.push({ id: CERT_OID.basicConstraints, critical: true, value: o.isCA ? sequence(boolean(true)) : sequence() });
  if (o.isCA) exts.push({ id: CERT_OID.subjectKeyIdentifier, critical: false, value: octetString(subjectKeyId(o.publicKey)) });
  const issuerSubject = o.issuer ? o.issuer.subjectDer : o.subject;
  if (o.issuer?.subjectKeyId && !o.issuer.subjectDer.equals(o.subject)) {
    exts.push({ id: CERT_OID.authorityKeyIdentifier, critical: false, value: sequence(implicitPrimitive(0, o.issuer.subjectKeyId)) });
  }
  if (o.sans && o.sans.length > 0) {
    // Critical because the subject is empty: X.509 and SPIFFE both ask for that (Istio always marks it).
    exts.push({ id: CERT_OID.subjectAltName, critical: true, value: subjectAltNameValue(o.sans) });
  }
  const spki = o.publicKeyDer ?? o.publicKey.export({ type: 'spki', format: 'der' });
  const algorithm = signatureAlgorithm(o.signingKey);
  const tbs = sequence(
    explicit(0, integer(2)),
    integer(serial),
    algorithm.identifier,
    issuerSubject,
    sequence(time(o.notBefore), time(o.notAfter)),
    o.subject,
    spki,
    explicit(3, sequence(...exts.map(extensionDer))),
  );
  const signature = crypto.sign(algorithm.hash, tbs, o.signingKey);
  return sequence(tbs, algorithm.identifier, bitString(signature));
}

/** The SubjectPublicKeyInfo DER of a PKCS#10 request (CertificationRequestInfo's third field), as is. */
export function csrPublicKeyDer(csrDer: Buffer): Buffer {
  const [info] = children(parse(csrDer));
  const spki = children(info!)[2];
  if (!spki) throw new DerError('CertificationRequestInfo: no subjectPublicKeyInfo');
  return Buffer.from(spki.raw);
}

export function certificatePem(der: Buffer): string {
  return toPem('CERTIFICATE', der);
}

export interface ParsedCertificate {
  der: Buffer;
  pem: string;
  x509: crypto.X509Certificate;
  serialHex: string;
  /** The subject Name exactly as encoded (copied into the issuer field of what this certificate signs). */
  subjectDer: Buffer;
  issuerDer: Buffer;
  /** Subject attributes in order. */
  subject: Array<{ oid: string; value: string }>;
  notBefore: Date;
  notAfter: Date;
  isCA: boolean;
  subjectKeyId?: Buffer;
  authorityKeyId?: Buffer;
  extensions: Extension[];
  /** SAN identities (URI, DNS, IP) in order; empty when there is no subjectAltName extension. */
  sans: SubjectIdentity[];
  publicKey: KeyObject;
}

function readTime(n: Node): Date {
  const s = n.content.toString('latin1');
  if (n.tag === TAG.UTC_TIME) {
    const m = /^(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(s);
    if (!m) throw new DerError(`bad UTCTime ${s}`);
    const yy = Number(m[1]);
    return new Date(Date.UTC(yy < 50 ? 2000 + yy : 1900 + yy, Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])));
  }
  if (n.tag === TAG.GENERALIZED_TIME) {
    const m = /^(\d{4})(\d\d)(\d\d)(\d\d)(\d\d)(\d\d)Z$/.exec(s);
    if (!m) throw new DerError(`bad GeneralizedTime ${s}`);
    return new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])));
  }
  throw new DerError(`expected a time, got tag 0x${n.tag.toString(16)}`);
}

function readName(n: Node): Array<{ oid: string; value: string }> {
  const out: Array<{ oid: string; value: string }> = [];
  for (const rdn of children(expectTag(n, TAG.SEQUENCE, 'Name'))) {
    for (const atv of children(expectTag(rdn, TAG.SET, 'RelativeDistinguishedName'))) {
      const [t, v] = children(atv);
      if (!t || !v) throw new DerError('Name: malformed attribute');
      let value: string;
      try {
        value = readString(v);
      } catch {
        value = v.content.toString('latin1');
      }
      out.push({ oid: readOid(t), value });
    }
  }
  return out;
}

/** Parses one DER certificate. Throws CertificateError naming what is wrong. */
export function parseCertificate(der: Buffer): ParsedCertificate {
  let x509: crypto.X509Certificate;
  try {
    x509 = new crypto.X509Certificate(der);
  } catch (e) {
    throw new CertificateError(`not an X.509 certificate: ${(e as Error).message}`);
  }
  try {
    const [tbs] = children(expectTag(parse(der), TAG.SEQUENCE, 'Certificate'));
    const f = children(expectTag(tbs!, TAG.SEQUENCE, 'TBSCertificate'));
    let i = f[0]!.tag === 0xa0 ? 1 : 0;
    const serial = f[i++]!;
    i++; // signature algorithm
    const issuer = f[i++]!;
    const validity = children(f[i++]!);
    const subject = f[i++]!;
    i++; // subjectPublicKeyInfo
    const extensions: Extension[] = [];
    for (; i < f.length; i++) {
      if (f[i]!.tag !== 0xa3) continue;
      for (const ext of children(children(f[i]!)[0]!)) {
        const parts = children(ext);
        const critical = parts.length === 3 && parts[1]!.tag === TAG.BOOLEAN && parts[1]!.content[0] !== 0;
        extensions.push({ id: readOid(parts[0]!), critical, value: Buffer.from(expectTag(parts.at(-1)!, TAG.OCTET_STRING, 'extnValue').content) });
      }
    }
    const ext = (id: string) => extensions.find((e) => e.id === id);
    const ski = ext(CERT_OID.subjectKeyIdentifier);
    const aki = ext(CERT_OID.authorityKeyIdentifier);
    const akiKeyId = aki ? children(parse(aki.value)).find((n) => n.tag === 0x80)?.content : undefined;
    const bc = ext(CERT_OID.basicConstraints);
    const bcFields = bc ? children(parse(bc.value)) : [];
    const san = ext(CERT_OID.subjectAltName);
    return {
      der,
      pem: certificatePem(der),
      x509,
      serialHex: serial.content.toString('hex'),
      subjectDer: Buffer.from(subject.raw),
      issuerDer: Buffer.from(issuer.raw),
      subject: readName(subject),
      notBefore: readTime(validity[0]!),
      notAfter: readTime(validity[1]!),
      isCA: bcFields[0]?.tag === TAG.BOOLEAN && bcFields[0].content[0] !== 0,
      subjectKeyId: ski ? Buffer.from(parse(ski.value).content) : undefined,
      authorityKeyId: akiKeyId ? Buffer.from(akiKeyId) : undefined,
      extensions,
      sans: san ? readSubjectAltNames(san.value) : [],
      publicKey: x509.publicKey,
    };
  } catch (e) {
    if (e instanceof DerError || e instanceof TypeError) throw new CertificateError(`malformed certificate: ${e.message}`);
    throw e;
  }
}

/** Every certificate of a PEM text, parsed; blocks of other types are skipped (as Go's AppendCertsFromPEM). */
export function parseCertificatesPem(text: string): ParsedCertificate[] {
  return fromPem(text, 'CERTIFICATE').map(parseCertificate);
}

/** One PEM string per certificate, each ending in a newline (Istio's PemCertBytestoString + "\n"). */
export function splitPemCertificates(text: string): string[] {
  return [...text.matchAll(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g)].map((m) => `${m[0]}\n`);
}

/** Whether `issuer` signed `cert` (names match and the signature verifies). */
export function issuedBy(cert: ParsedCertificate, issuer: ParsedCertificate): boolean {
  if (!cert.issuerDer.equals(issuer.subjectDer)) return false;
  try {
    return cert.x509.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/**
 * Go's cert.Verify for the CA bundle checks: a path from `cert` through `intermediates` to one of `roots`,
 * every certificate in its validity period at `now` and every issuer a CA. Returns undefined when one
 * exists, or why not.
 */
export function verifyChain(
  cert: ParsedCertificate,
  intermediates: readonly ParsedCertificate[],
  roots: readonly ParsedCertificate[],
  now: Date,
): string | undefined {
  if (roots.length === 0) return 'no root certificate';
  const valid = (c: ParsedCertificate) => c.notBefore <= now && now <= c.notAfter;
  if (!valid(cert))
    return `certificate has expired or is not yet valid: current time ${now.toISOString()} is outside [${cert.notBefore.toISOString()}, ${cert.notAfter.toISOString()}]`;
  let reason = 'certificate signed by unknown authority';
  const walk = (c: ParsedCertificate, depth: number): boolean => {
    if (depth > 10) return false;
    for (const r of roots) {
      if (r.der.equals(c.der)) return true;
      if (issuedBy(c, r)) {
        if (!valid(r)) {
          reason = `root certificate ${r.x509.subject.replace(/\n/g, ',') || '(empty subject)'} has expired or is not yet valid`;
          continue;
        }
        if (!r.isCA) {
          reason = 'the issuing root is not a CA certificate';
          continue;
        }
        return true;
      }
    }
    for (const im of intermediates) {
      if (im.der.equals(c.der) || !issuedBy(c, im)) continue;
      if (!valid(im) || !im.isCA) continue;
      if (walk(im, depth + 1)) return true;
    }
    return false;
  };
  return walk(cert, 0) ? undefined : reason;
}

/** Whether a private key belongs to the certificate's public key. */
export function keyMatchesCertificate(key: KeyObject, cert: ParsedCertificate): boolean {
  const pub = crypto.createPublicKey(key).export({ type: 'spki', format: 'der' });
  return pub.equals(cert.publicKey.export({ type: 'spki', format: 'der' }));
}
