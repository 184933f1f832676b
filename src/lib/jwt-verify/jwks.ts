// JSON Web Key Sets as Envoy's JWT library reads them (Jwks::createFrom): the `{"keys": [...]}` form
// with RSA, EC, oct and OKP (Ed25519) keys, and Google's `{"<kid>": "<PEM certificate>"}` form. Keys
// that cannot be used are skipped when at least one key is good. Public keys are imported once into
// node:crypto KeyObjects; a parsed set is shared by every provider and listener that carries the same
// text, so an LDS push with an unchanged inline JWKS costs a map lookup.
import { createPublicKey, X509Certificate, type KeyObject } from 'node:crypto';
import { decodeBase64Url } from './jwt';
import { Status } from './status';

export interface Jwk {
  readonly kty: string;
  readonly kid: string;
  readonly alg: string;
  readonly crv: string;
  /** RSA, EC and OKP public key. */
  readonly key?: KeyObject;
  /** oct (HMAC) secret. */
  readonly secret?: Buffer;
}

export interface Jwks {
  /** Ok when at least one key is usable; otherwise the first problem found. */
  readonly status: Status;
  readonly keys: readonly Jwk[];
}

type Obj = Record<string, unknown>;

/** OK / missing / wrong type, like the library's StructUtils::GetString. */
function getString(o: Obj, k: string): string | undefined | null {
  const v = o[k];
  if (v === undefined) return undefined;
  return typeof v === 'string' ? v : null;
}

function importJwk(jwk: Record<string, string>): KeyObject | undefined {
  try {
    return createPublicKey({ key: jwk, format: 'jwk' });
  } catch {
    return undefined;
  }
}

function rsaKey(o: Obj, kid: string, alg: string): Jwk | Status {
  if (alg && !(alg.startsWith('RS') || alg.startsWith('PS'))) return Status.JwksRSAKeyBadAlg;
  const n = getString(o, 'n');
  if (n === undefined) return Status.JwksRSAKeyMissingN;
  if (n === null) return Status.JwksRSAKeyBadN;
  const e = getString(o, 'e');
  if (e === undefined) return Status.JwksRSAKeyMissingE;
  if (e === null) return Status.JwksRSAKeyBadE;
  const nb = decodeBase64Url(n);
  const eb = decodeBase64Url(e);
  if (!nb || !eb || nb.length === 0 || eb.length === 0) return Status.JwksRsaParseError;
  // the library rejects non-standard public exponents early
  const ev = eb.length <= 4 ? eb.readUIntBE(0, eb.length) : -1;
  if (ev !== 3 && ev !== 65537) return Status.JwksRsaParseError;
  const key = importJwk({ kty: 'RSA', n, e });
  if (!key) return Status.JwksRsaParseError;
  return { kty: 'RSA', kid, alg, crv: '', key };
}

const EC_CURVE_OF_ALG: Record<string, string> = { ES256: 'P-256', ES384: 'P-384', ES512: 'P-521' };

function ecKey(o: Obj, kid: string, alg: string): Jwk | Status {
  if (alg && !alg.startsWith('ES')) return Status.JwksECKeyBadAlg;
  const c = getString(o, 'crv');
  if (c === null) return Status.JwksECKeyBadCrv;
  let crv = c ?? '';
  if (alg && crv && EC_CURVE_OF_ALG[alg] !== crv) return Status.JwksECKeyAlgNotCompatibleWithCrv;
  if (!alg && !crv) crv = 'P-256';
  if (alg === 'ES256' || crv === 'P-256') crv = 'P-256';
  else if (alg === 'ES384' || crv === 'P-384') crv = 'P-384';
  else if (alg === 'ES512' || crv === 'P-521') crv = 'P-521';
  else return Status.JwksECKeyAlgOrCrvUnsupported;
  const x = getString(o, 'x');
  if (x === undefined) return Status.JwksECKeyMissingX;
  if (x === null) return Status.JwksECKeyBadX;
  const y = getString(o, 'y');
  if (y === undefined) return Status.JwksECKeyMissingY;
  if (y === null) return Status.JwksECKeyBadY;
  if (!decodeBase64Url(x) || !decodeBase64Url(y)) return Status.JwksEcXorYBadBase64;
  const key = importJwk({ kty: 'EC', crv, x, y });
  if (!key) return Status.JwksEcParseError;
  return { kty: 'EC', kid, alg, crv, key };
}

function octKey(o: Obj, kid: string, alg: string): Jwk | Status {
  if (alg && alg !== 'HS256' && alg !== 'HS384' && alg !== 'HS512') return Status.JwksHMACKeyBadAlg;
  const k = getString(o, 'k');
  if (k === undefined) return Status.JwksHMACKeyMissingK;
  if (k === null) return Status.JwksHMACKeyBadK;
  const secret = decodeBase64Url(k);
  if (!secret || secret.length === 0) return Status.JwksOctBadBase64;
  return { kty: 'oct', kid, alg, crv: '', secret };
}

function okpKey(o: Obj, kid: string, alg: string): Jwk | Status {
  if (alg && alg !== 'EdDSA') return Status.JwksOKPKeyBadAlg;
  const crv = getString(o, 'crv');
  if (crv === undefined) return Status.JwksOKPKeyMissingCrv;
  if (crv === null) return Status.JwksOKPKeyBadCrv;
  if (crv !== 'Ed25519') return Status.JwksOKPKeyCrvUnsupported;
  const x = getString(o, 'x');
  if (x === undefined) return Status.JwksOKPKeyMissingX;
  if (x === null) return Status.JwksOKPKeyBadX;
  const raw = decodeBase64Url(x);
  if (!raw) return Status.JwksOKPXBadBase64;
  if (raw.length !== 32) return Status.JwksOKPXWrongLength;
  const key = importJwk({ kty: 'OKP', crv, x });
  if (!key) return Status.JwksOKPXBadBase64;
  return { kty: 'OKP', kid, alg, crv, key };
}

function extractJwk(o: Obj): Jwk | Status {
  const kty = getString(o, 'kty');
  if (kty === undefined) return Status.JwksMissingKty;
  if (kty === null) return Status.JwksBadKty;
  const kid = getString(o, 'kid') ?? '';
  const alg = getString(o, 'alg') ?? '';
  switch (kty) {
    case 'EC':
      return ecKey(o, kid, alg);
    case 'RSA':
      return rsaKey(o, kid, alg);
    case 'oct':
      return octKey(o, kid, alg);
    case 'OKP':
      return okpKey(o, kid, alg);
    default:
      return Status.JwksNotImplementedKty;
  }
}

const CERT_BEGIN = '-----BEGIN CERTIFICATE-----';
const CERT_END = '-----END CERTIFICATE-----';

function isX509Map(o: Obj): boolean {
  const entries = Object.entries(o);
  if (entries.length === 0) return false;
  return entries.every(([k, v]) => k !== '' && typeof v === 'string' && v.trim().startsWith(CERT_BEGIN) && v.trim().endsWith(CERT_END));
}

function fromX509(o: Obj): Jwks {
  const keys: Jwk[] = [];
  for (const [kid, pem] of Object.entries(o)) {
    let cert: X509Certificate;
    try {
      cert = new X509Certificate(pem as string);
    } catch {
      return { status: Status.JwksX509ParseError, keys: [] };
    }
    const key = cert.publicKey;
    if (key.asymmetricKeyType !== 'rsa') return { status: Status.JwksX509GetPubkeyError, keys: [] };
    keys.push({ kty: 'RSA', kid, alg: '', crv: '', key });
  }
  return { status: Status.Ok, keys };
}

/** Parses JWKS text (uncached). */
export function parseJwks(text: string): Jwks {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return { status: Status.JwksParseError, keys: [] };
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return { status: Status.JwksParseError, keys: [] };
  const o = doc as Obj;
  if (!('keys' in o)) return isX509Map(o) ? fromX509(o) : { status: Status.JwksNoKeys, keys: [] };
  if (!Array.isArray(o['keys'])) return { status: Status.JwksBadKeys, keys: [] };
  const keys: Jwk[] = [];
  let first: Status = Status.Ok;
  for (const k of o['keys'] as unknown[]) {
    if (k === null || typeof k !== 'object' || Array.isArray(k)) continue;
    const r = extractJwk(k as Obj);
    if (typeof r === 'object') keys.push(r);
    else if (first === Status.Ok) first = r;
  }
  if (keys.length > 0) return { status: Status.Ok, keys };
  return { status: first === Status.Ok ? Status.JwksNoValidKeys : first, keys: [] };
}

const CACHE_MAX = 64;
const cache = new Map<string, Jwks>();

/** parseJwks with a small process-wide LRU keyed by the text. */
export function jwksFromText(text: string): Jwks {
  const hit = cache.get(text);
  if (hit) {
    cache.delete(text);
    cache.set(text, hit);
    return hit;
  }
  const j = parseJwks(text);
  cache.set(text, j);
  if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value as string);
  return j;
}
