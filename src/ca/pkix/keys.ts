// Workload and CA key pairs as Istio's pkiutil makes them: RSA (at least 2048 bits) or ECDSA on P-256 /
// P-384, written as PKCS#1 / SEC1 PEM ("RSA PRIVATE KEY" / "EC PRIVATE KEY"), or PKCS#8 when asked
// (PKCS8_KEY), and the signature algorithm Go's x509 picks for each key.
import crypto, { type KeyObject } from 'node:crypto';
import { nullValue, oid, sequence } from './der';

/** Istio's MinimumRsaKeySize. */
export const MINIMUM_RSA_KEY_SIZE = 2048;

export type KeySpec = { kind: 'rsa'; bits: number } | { kind: 'ec'; curve: 'P256' | 'P384' };

export class KeySpecError extends Error {
  override name = 'KeySpecError';
}

/**
 * The key Istio's agent makes from WORKLOAD_RSA_KEY_SIZE, ECC_SIGNATURE_ALGORITHM and ECC_CURVE: ECDSA when
 * the algorithm is `ECDSA` (P-384 for ECC_CURVE=P384, P-256 for anything else), RSA otherwise.
 */
export function keySpecFromEnv(o: { rsaKeySize: number; eccSignatureAlgorithm: string; eccCurve: string }): KeySpec {
  if (o.eccSignatureAlgorithm !== '') {
    if (o.eccSignatureAlgorithm !== 'ECDSA') {
      throw new KeySpecError(`ECC_SIGNATURE_ALGORITHM=${o.eccSignatureAlgorithm}: unsupported EC signature algorithm (the supported one is ECDSA)`);
    }
    return { kind: 'ec', curve: o.eccCurve === 'P384' ? 'P384' : 'P256' };
  }
  if (o.rsaKeySize < MINIMUM_RSA_KEY_SIZE) {
    throw new KeySpecError(
      `WORKLOAD_RSA_KEY_SIZE=${o.rsaKeySize}: requested key size does not meet the minimum required size of ${MINIMUM_RSA_KEY_SIZE} (requested: ${o.rsaKeySize})`,
    );
  }
  return { kind: 'rsa', bits: o.rsaKeySize };
}

export function describeKeySpec(k: KeySpec): string {
  return k.kind === 'rsa' ? `RSA ${k.bits}` : `ECDSA ${k.curve === 'P384' ? 'P-384' : 'P-256'}`;
}

export interface KeyPair {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** The private key as PEM, in the encoding Istio writes. */
  privateKeyPem: string;
}

const CURVES = { P256: 'prime256v1', P384: 'secp384r1' } as const;

type RawPair = { privateKey: KeyObject; publicKey: KeyObject };

function generateRaw(spec: KeySpec): Promise<RawPair> {
  return new Promise<RawPair>((resolve, reject) => {
    const done = (err: Error | null, publicKey: KeyObject, privateKey: KeyObject) => (err ? reject(err) : resolve({ privateKey, publicKey }));
    if (spec.kind === 'rsa') crypto.generateKeyPair('rsa', { modulusLength: spec.bits, publicExponent: 0x10001 }, done);
    else crypto.generateKeyPair('ec', { namedCurve: CURVES[spec.curve] }, done);
  });
}

/** One key made ahead of need (see generateKeyPairAhead), taken by the first request of its spec. */
let ahead: { spec: string; pair: Promise<RawPair | undefined> } | undefined;

/**
 * Starts making a key of `spec` now, in libuv's thread pool, for the next generateKeyPair of the same spec.
 * The agent calls it before it loads the rest of itself, so that key generation (RSA 2048: 100–300 ms of
 * prime search) runs beside module loading instead of after it. A failure is forgotten: the request then
 * generates its own key and reports its own error. Resolves to the public key (for tests).
 */
export function generateKeyPairAhead(spec: KeySpec): Promise<KeyObject | undefined> {
  const pair = generateRaw(spec).catch(() => undefined);
  ahead = { spec: describeKeySpec(spec), pair };
  return pair.then((p) => p?.publicKey);
}

export async function generateKeyPair(spec: KeySpec, pkcs8 = false): Promise<KeyPair> {
  let pair: RawPair | undefined;
  if (ahead?.spec === describeKeySpec(spec)) {
    const early = ahead.pair;
    ahead = undefined;
    pair = await early;
  }
  const { privateKey, publicKey } = pair ?? (await generateRaw(spec));
  return { privateKey, publicKey, privateKeyPem: privateKeyPem(privateKey, pkcs8) };
}

export function privateKeyPem(key: KeyObject, pkcs8 = false): string {
  if (pkcs8) return key.export({ type: 'pkcs8', format: 'pem' }) as string;
  return key.export({ type: key.asymmetricKeyType === 'ec' ? 'sec1' : 'pkcs1', format: 'pem' }) as string;
}

export interface SignatureAlgorithm {
  /** Digest for crypto.sign. */
  hash: 'sha256' | 'sha384';
  /** The AlgorithmIdentifier DER. */
  identifier: Buffer;
  name: string;
}

const OID_SHA256_RSA = '1.2.840.113549.1.1.11';
const OID_ECDSA_SHA256 = '1.2.840.10045.4.3.2';
const OID_ECDSA_SHA384 = '1.2.840.10045.4.3.3';

/** Go's choice: SHA256WithRSA for RSA keys; ECDSAWithSHA256 on P-256, ECDSAWithSHA384 on P-384. */
export function signatureAlgorithm(key: KeyObject): SignatureAlgorithm {
  if (key.asymmetricKeyType === 'rsa')
    return { hash: 'sha256', identifier: sequence(oid(OID_SHA256_RSA), nullValue()), name: 'sha256WithRSAEncryption' };
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'secp384r1') return { hash: 'sha384', identifier: sequence(oid(OID_ECDSA_SHA384)), name: 'ecdsa-with-SHA384' };
    if (curve === 'prime256v1') return { hash: 'sha256', identifier: sequence(oid(OID_ECDSA_SHA256)), name: 'ecdsa-with-SHA256' };
    throw new KeySpecError(`unsupported elliptic curve ${curve ?? '(unknown)'}`);
  }
  throw new KeySpecError(`unsupported key type ${key.asymmetricKeyType ?? '(unknown)'}`);
}

/** Signs `data` with the key's algorithm; ECDSA signatures are DER (as X.509 wants them). */
export function sign(key: KeyObject, data: Buffer): { algorithm: SignatureAlgorithm; signature: Buffer } {
  const algorithm = signatureAlgorithm(key);
  return { algorithm, signature: crypto.sign(algorithm.hash, data, key) };
}
