// Key-set documents: the placeholder the daemon inlines while it has no keys, and the comparison that
// decides whether a refreshed document is news (Istio CreateFakeJwks / compareJWKSResponse).
import { createHash } from 'node:crypto';

// P-256 (SEC 2): field prime and curve constant b; a = -3. The cofactor is 1, so every point on the curve is
// a valid public key.
const P256_P = 2n ** 256n - 2n ** 224n + 2n ** 192n + 2n ** 96n - 1n;
const P256_B = 0x5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604bn;

function modPow(base: bigint, exp: bigint, m: bigint): bigint {
  let r = 1n;
  let b = base % m;
  for (let e = exp; e > 0n; e >>= 1n) {
    if (e & 1n) r = (r * b) % m;
    b = (b * b) % m;
  }
  return r;
}

const coord = (v: bigint) => Buffer.from(v.toString(16).padStart(64, '0'), 'hex').toString('base64url');

/**
 * The reject-everything key set (Istio's CreateFakeJwks): a public key no issuer's private key matches, so
 * every token fails verification (401) instead of passing unverified. Differs from Istio on purpose: Istio's
 * RSA key, whose modulus is the URI's bytes, is refused by Envoy (jwt_verify_lib: "Jwks RSA [n] or [e] field
 * is missing or has a parse error"), and a refused key set NACKs the whole listener. This one is a well-formed
 * P-256 key whose point is hashed from the same text (x = SHA-256 of it and a counter, until x is on the
 * curve), so nobody knows its private key.
 */
export function createFakeJwks(jwksUri: string): string {
  const seed = `Error-IstiodFailedToFetchJwksUri-${jwksUri}`;
  for (let i = 0; ; i++) {
    const x = BigInt(`0x${createHash('sha256').update(`${seed}#${i}`).digest('hex')}`) % P256_P;
    const rhs = (((x * x * x - 3n * x + P256_B) % P256_P) + P256_P) % P256_P;
    // p ≡ 3 (mod 4): the square root, when there is one, is rhs^((p+1)/4)
    const y = modPow(rhs, (P256_P + 1n) / 4n, P256_P);
    if ((y * y) % P256_P !== rhs) continue;
    return JSON.stringify({ keys: [{ kty: 'EC', crv: 'P-256', kid: 'abc', x: coord(x), y: coord(y) }] });
  }
}

/** Why a fetched body cannot be inlined as a key set; undefined when it can. */
export function keySetError(body: string): string | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (e) {
    return `not JSON: ${(e as Error).message}`;
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return 'not a JSON object';
  const keys = (doc as { keys?: unknown }).keys;
  if (!Array.isArray(keys)) return 'no "keys" array';
  return undefined;
}

type Jwk = Record<string, unknown>;

function kidOrder(a: unknown, b: unknown): number {
  const ka = (a as Jwk | null)?.['kid'];
  const kb = (b as Jwk | null)?.['kid'];
  if (typeof ka === 'string' && typeof kb === 'string') return ka < kb ? -1 : ka > kb ? 1 : 0;
  return 0;
}

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Jwk;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * Whether `next` holds other keys than `prev`: byte-equal documents are the same; otherwise the `keys`
 * arrays are compared by `kid` order and content, so a reordered or reformatted document is not a change.
 * An unparsable previous document (or none) makes any valid new one a change.
 */
export function keySetChanged(prev: string, next: string): boolean {
  if (prev === next) return false;
  let a: unknown;
  let b: unknown;
  try {
    b = JSON.parse(next);
  } catch {
    return false;
  }
  try {
    a = JSON.parse(prev);
  } catch {
    return true;
  }
  const ka = (a as { keys?: unknown } | null)?.keys;
  const kb = (b as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(ka) || !Array.isArray(kb)) return true;
  return canonical([...ka].sort(kidOrder)) !== canonical([...kb].sort(kidOrder));
}
