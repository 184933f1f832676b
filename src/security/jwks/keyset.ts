// Key-set documents: the placeholder the daemon inlines while it has no keys, and the comparison that
// decides whether a refreshed document is news (Istio CreateFakeJwks / compareJWKSResponse).

/**
 * Bytes of the smallest modulus Envoy takes: its jwt_authn (BoringSSL RSA_new_public_key) refuses one under
 * 512 bits, and the text's leading 'E' (0x45) leaves 64 bytes one bit short.
 */
const MIN_MODULUS_BYTES = 65;

/**
 * Istio's fake JWKS: one RSA key whose modulus is derived from the URI, which no issuer's private key
 * matches, so every token fails verification (401) instead of passing unverified. Differs from Istio where
 * Envoy 1.36 would refuse Istio's modulus (and NACK the whole listener): under 512 bits it is padded with zero
 * bytes, and an even one gets its lowest bit set. A URI long enough and ending in an odd byte keeps Istio's text.
 */
export function createFakeJwks(jwksUri: string): string {
  let modulus = Buffer.from(`Error-IstiodFailedToFetchJwksUri-${jwksUri}`);
  if (modulus.length < MIN_MODULUS_BYTES) modulus = Buffer.concat([modulus, Buffer.alloc(MIN_MODULUS_BYTES - modulus.length)]);
  modulus[modulus.length - 1]! |= 1;
  return `{"keys":[ {"e":"AQAB","kid":"abc","kty":"RSA","n":"${modulus.toString('base64url')}"}]}`;
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
