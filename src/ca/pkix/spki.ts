// Public keys from SubjectPublicKeyInfo DER, quickly. OpenSSL 3's DER decoder (what createPublicKey uses
// for `format: 'der'`) costs about as much as an RSA verification; the same key handed over as a JWK is
// built directly — for RSA some fifty times faster. A CA imports one key per CSR, so this is on its hot path.
import crypto, { type KeyObject } from 'node:crypto';
import { children, parse, readBitString, readOid } from './der';

const OID_RSA = '1.2.840.113549.1.1.1';
const OID_EC = '1.2.840.10045.2.1';
const CURVES: Readonly<Record<string, { crv: string; size: number }>> = {
  '1.2.840.10045.3.1.7': { crv: 'P-256', size: 32 },
  '1.3.132.0.34': { crv: 'P-384', size: 48 },
  '1.3.132.0.35': { crv: 'P-521', size: 66 },
};

const b64u = (b: Buffer) => b.toString('base64url');
/** An INTEGER's magnitude without the sign byte. */
const unsigned = (b: Buffer) => (b.length > 1 && b[0] === 0 ? b.subarray(1) : b);

/** The key of an SPKI: RSA and EC on the NIST curves through JWK, anything else through OpenSSL's decoder. */
export function importSpki(der: Buffer): KeyObject {
  try {
    const [alg, bits] = children(parse(der));
    const [algOid, params] = children(alg!);
    const kind = readOid(algOid!);
    const key = readBitString(bits!);
    if (kind === OID_RSA) {
      const [n, e] = children(parse(key));
      return crypto.createPublicKey({ key: { kty: 'RSA', n: b64u(unsigned(n!.content)), e: b64u(unsigned(e!.content)) }, format: 'jwk' });
    }
    if (kind === OID_EC && params) {
      const curve = CURVES[readOid(params)];
      if (curve && key[0] === 0x04 && key.length === 1 + 2 * curve.size) {
        const x = key.subarray(1, 1 + curve.size);
        const y = key.subarray(1 + curve.size);
        return crypto.createPublicKey({ key: { kty: 'EC', crv: curve.crv, x: b64u(x), y: b64u(y) }, format: 'jwk' });
      }
    }
  } catch {
    // Not a shape the fast path knows: let OpenSSL decide (and report what is wrong).
  }
  return crypto.createPublicKey({ key: der, format: 'der', type: 'spki' });
}
