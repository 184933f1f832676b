// PKCS#10 certificate signing requests (RFC 2986) shaped like the ones Istio's agent sends
// (pkiutil.GenCSR): subject `O=<org>` (empty by default, as Go writes Organization [""]), the identity in a
// critical subjectAltName extension requested through the extensionRequest attribute, signed with the
// workload key. parseCsr reads one back (for the CA and for tests) and checks its signature.
import crypto, { type KeyObject } from 'node:crypto';
import {
  bitString,
  boolean,
  children,
  DerError,
  directoryString,
  expectTag,
  fromPem,
  ia5String,
  implicitConstructed,
  implicitPrimitive,
  integer,
  octetString,
  oid,
  parse,
  readBitString,
  readOid,
  readString,
  sequence,
  set,
  TAG,
  toPem,
} from './der';
import { sign } from './keys';
import { importSpki } from './spki';

export const OID = {
  organization: '2.5.4.10',
  commonName: '2.5.4.3',
  extensionRequest: '1.2.840.113549.1.9.14',
  subjectAltName: '2.5.29.17',
} as const;

export interface SubjectAltNames {
  uris?: readonly string[];
  dns?: readonly string[];
  ips?: readonly string[];
}

/** GeneralNames for a subjectAltName extension value. */
export function generalNames(sans: SubjectAltNames): Buffer {
  const names: Buffer[] = [];
  for (const d of sans.dns ?? []) names.push(implicitPrimitive(2, Buffer.from(d, 'latin1')));
  for (const ip of sans.ips ?? []) names.push(implicitPrimitive(7, ipBytes(ip)));
  for (const u of sans.uris ?? []) names.push(implicitPrimitive(6, ia5String(u).subarray(2)));
  return sequence(...names);
}

function ipBytes(ip: string): Buffer {
  if (/^\d+\.\d+\.\d+\.\d+$/.test(ip)) return Buffer.from(ip.split('.').map(Number));
  // IPv6: expand :: and write 16 bytes
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  if (groups.length !== 8) throw new Error(`invalid IP address ${JSON.stringify(ip)}`);
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING } */
export function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical ? sequence(oid(id), boolean(true), octetString(value)) : sequence(oid(id), octetString(value));
}

/** Name with one attribute per RDN, in the order given. */
export function name(attrs: ReadonlyArray<{ oid: string; value: string }>): Buffer {
  return sequence(...attrs.map((a) => set(sequence(oid(a.oid), directoryString(a.value)))));
}

export interface CsrOptions {
  privateKey: KeyObject;
  sans: SubjectAltNames;
  /** Subject organization; Istio's agent leaves it empty (and still writes the attribute). */
  org?: string;
  /** Subject common name (Istio's dual-use mode); none by default. */
  commonName?: string;
}

/** DER of a signed CertificationRequest. */
export function createCsrDer(o: CsrOptions): Buffer {
  const publicKey = crypto.createPublicKey(o.privateKey).export({ type: 'spki', format: 'der' });
  const subject = name([{ oid: OID.organization, value: o.org ?? '' }, ...(o.commonName ? [{ oid: OID.commonName, value: o.commonName }] : [])]);
  const hasSans = (o.sans.uris?.length ?? 0) + (o.sans.dns?.length ?? 0) + (o.sans.ips?.length ?? 0) > 0;
  const attributes = hasSans
    ? // The SAN is critical because the subject carries no identity (X.509 and SPIFFE both ask for that).
      [sequence(oid(OID.extensionRequest), set(sequence(extension(OID.subjectAltName, true, generalNames(o.sans)))))]
    : [];
  const info = sequence(integer(0), subject, publicKey, implicitConstructed(0, Buffer.concat(attributes)));
  const { algorithm, signature } = sign(o.privateKey, info);
  return sequence(info, algorithm.identifier, bitString(signature));
}

export function createCsrPem(o: CsrOptions): string {
  return toPem('CERTIFICATE REQUEST', createCsrDer(o));
}

export class CsrError extends Error {
  override name = 'CsrError';
}

export interface ParsedCsr {
  /** Subject attributes in order (e.g. [{oid: '2.5.4.10', value: ''}]). */
  subject: Array<{ oid: string; value: string }>;
  publicKey: KeyObject;
  sans: { uris: string[]; dns: string[]; ips: string[] };
  /** Every requested extension by OID, with its criticality and raw value. */
  extensions: Array<{ id: string; critical: boolean; value: Buffer }>;
  signatureAlgorithm: string;
  signatureValid: boolean;
}

const SIG_HASH: Record<string, string> = {
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
  '1.2.840.10045.4.3.2': 'sha256',
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
};

/** Reads GeneralNames (the value of a subjectAltName extension). */
export function readGeneralNames(value: Buffer): { uris: string[]; dns: string[]; ips: string[] } {
  const out = { uris: [] as string[], dns: [] as string[], ips: [] as string[] };
  for (const gn of children(expectTag(parse(value), TAG.SEQUENCE, 'GeneralNames'))) {
    if (gn.tag === 0x86) out.uris.push(gn.content.toString('latin1'));
    else if (gn.tag === 0x82) out.dns.push(gn.content.toString('latin1'));
    else if (gn.tag === 0x87) out.ips.push(gn.content.length === 4 ? [...gn.content].join('.') : formatIpv6(gn.content));
  }
  return out;
}

function formatIpv6(b: Buffer): string {
  const groups: string[] = [];
  for (let i = 0; i + 1 < b.length; i += 2) groups.push(b.readUInt16BE(i).toString(16));
  return groups.join(':');
}

/** Parses a PEM (or DER) CSR; throws CsrError for anything malformed. The signature is checked, not required. */
export function parseCsr(input: string | Buffer): ParsedCsr {
  let der: Buffer;
  if (typeof input === 'string') {
    const blocks = fromPem(input, 'CERTIFICATE REQUEST');
    if (blocks.length === 0) throw new CsrError('no PEM block of type CERTIFICATE REQUEST');
    der = blocks[0]!;
  } else der = input;
  try {
    const [info, alg, sig] = children(expectTag(parse(der), TAG.SEQUENCE, 'CertificationRequest'));
    if (!info || !alg || !sig) throw new CsrError('CertificationRequest: expected info, algorithm and signature');
    const fields = children(expectTag(info, TAG.SEQUENCE, 'CertificationRequestInfo'));
    const [version, subjectNode, spki, attrs] = fields;
    if (!version || !subjectNode || !spki) throw new CsrError('CertificationRequestInfo: missing fields');
    if (version.content.length !== 1 || version.content[0] !== 0) throw new CsrError('CertificationRequestInfo: version must be 0');
    const subject: ParsedCsr['subject'] = [];
    for (const rdn of children(expectTag(subjectNode, TAG.SEQUENCE, 'subject'))) {
      for (const atv of children(expectTag(rdn, TAG.SET, 'RelativeDistinguishedName'))) {
        const [t, v] = children(atv);
        if (!t || !v) throw new CsrError('subject: malformed attribute');
        subject.push({ oid: readOid(t), value: readString(v) });
      }
    }
    let publicKey: KeyObject;
    try {
      publicKey = importSpki(spki.raw);
    } catch (e) {
      throw new CsrError(`subjectPublicKeyInfo: ${(e as Error).message}`);
    }
    const extensions: ParsedCsr['extensions'] = [];
    if (attrs) {
      if (attrs.tag !== 0xa0) throw new CsrError('attributes: expected [0]');
      for (const attr of children(attrs)) {
        const [t, values] = children(attr);
        if (!t || !values || readOid(t) !== OID.extensionRequest) continue;
        for (const exts of children(values)) {
          for (const ext of children(expectTag(exts, TAG.SEQUENCE, 'Extensions'))) {
            const parts = children(ext);
            const id = readOid(parts[0]!);
            const critical = parts.length === 3 && parts[1]!.tag === TAG.BOOLEAN && parts[1]!.content[0] !== 0;
            const value = expectTag(parts[parts.length - 1]!, TAG.OCTET_STRING, 'extnValue').content;
            extensions.push({ id, critical, value: Buffer.from(value) });
          }
        }
      }
    }
    const sanExt = extensions.find((e) => e.id === OID.subjectAltName);
    const sans = sanExt ? readGeneralNames(sanExt.value) : { uris: [], dns: [], ips: [] };
    const algOid = readOid(children(alg)[0]!);
    const hash = SIG_HASH[algOid];
    if (!hash) throw new CsrError(`unsupported signature algorithm ${algOid}`);
    let signatureValid = false;
    try {
      signatureValid = crypto.verify(hash, info.raw, publicKey, readBitString(sig));
    } catch {
      signatureValid = false;
    }
    return { subject, publicKey, sans, extensions, signatureAlgorithm: algOid, signatureValid };
  } catch (e) {
    if (e instanceof CsrError) throw e;
    if (e instanceof DerError || e instanceof TypeError) throw new CsrError(`malformed CSR: ${e.message}`);
    throw e;
  }
}
