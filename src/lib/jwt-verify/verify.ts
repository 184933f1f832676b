// Signature verification against a key set (verifyJwtWithoutTimeChecking of Envoy's JWT library):
// keys are tried in order, skipping those whose kid or alg do not match the token; the outcome tells
// "no key matched kid/alg" apart from "a key matched but the signature is wrong". Synchronous
// node:crypto with KeyObjects imported when the key set was parsed.
import { constants, createHmac, timingSafeEqual, verify as cryptoVerify } from 'node:crypto';
import type { Jwk, Jwks } from './jwks';
import type { Jwt } from './jwt';
import { Status } from './status';

function digestOf(alg: string): string {
  switch (alg) {
    case 'ES384':
    case 'RS384':
    case 'PS384':
    case 'HS384':
      return 'sha384';
    case 'ES512':
    case 'RS512':
    case 'PS512':
    case 'HS512':
      return 'sha512';
    default:
      return 'sha256';
  }
}

function tryVerify(alg: string | null, data: Buffer, key: Parameters<typeof cryptoVerify>[2], sig: Buffer): boolean {
  try {
    return cryptoVerify(alg, data, key, sig);
  } catch {
    return false;
  }
}

/** One key; undefined = this key type cannot check this alg (not an attempt). */
function verifyWithKey(jwt: Jwt, jwk: Jwk, data: Buffer): Status | undefined {
  const alg = jwt.alg;
  switch (jwk.kty) {
    case 'EC':
      return tryVerify(digestOf(alg), data, { key: jwk.key!, dsaEncoding: 'ieee-p1363' }, jwt.signature) ? Status.Ok : Status.JwtVerificationFail;
    case 'RSA':
      if (alg.startsWith('RS')) return tryVerify(digestOf(alg), data, jwk.key!, jwt.signature) ? Status.Ok : Status.JwtVerificationFail;
      if (alg.startsWith('PS')) {
        const ok = tryVerify(
          digestOf(alg),
          data,
          { key: jwk.key!, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: constants.RSA_PSS_SALTLEN_AUTO },
          jwt.signature,
        );
        return ok ? Status.Ok : Status.JwtVerificationFail;
      }
      return Status.JwtVerificationFail;
    case 'oct': {
      const mac = createHmac(digestOf(alg), jwk.secret!).update(data).digest();
      return mac.length === jwt.signature.length && timingSafeEqual(mac, jwt.signature) ? Status.Ok : Status.JwtVerificationFail;
    }
    case 'OKP':
      if (jwk.crv !== 'Ed25519') return undefined;
      if (jwt.signature.length !== 64) return Status.JwtEd25519SignatureWrongLength;
      return tryVerify(null, data, jwk.key!, jwt.signature) ? Status.Ok : Status.JwtVerificationFail;
    default:
      return undefined;
  }
}

export function verifySignature(jwt: Jwt, jwks: Jwks): Status {
  let matched = false;
  let data: Buffer | undefined;
  for (const jwk of jwks.keys) {
    if (jwt.kid && jwk.kid && jwk.kid !== jwt.kid) continue;
    if (jwk.alg && jwk.alg !== jwt.alg) continue;
    matched = true;
    data ??= Buffer.from(jwt.signingInput, 'latin1');
    const s = verifyWithKey(jwt, jwk, data);
    if (s === Status.Ok || s === Status.JwtEd25519SignatureWrongLength) return s;
  }
  return matched ? Status.JwtVerificationFail : Status.JwksKidAlgMismatch;
}
