// Verifying the tokens JWT_RULE accepts, synchronously with node:crypto. A CA checks one token per
// certificate: through WebCrypto (jose) that cost as much again as parsing the CSR, so this is the hot-path
// verifier — the same checks go-oidc makes for Istio (signature by a key of the issuer's key set, `iss`,
// `exp`, `nbf`), with the key set fetched once and refetched when a token names a key it does not hold.
import crypto, { type KeyObject } from 'node:crypto';
import { fetchDocument, loadTrustedRoots, EXTRA_CA_BUNDLE_PATH } from '../../lib/jwks-fetch';

export class JwtError extends Error {}

/** alg → how node:crypto verifies it. */
const ALGS: Readonly<Record<string, { hash: string; kty: string; pss?: boolean; dsa?: 'ieee-p1363' }>> = {
  RS256: { hash: 'sha256', kty: 'RSA' },
  RS384: { hash: 'sha384', kty: 'RSA' },
  RS512: { hash: 'sha512', kty: 'RSA' },
  PS256: { hash: 'sha256', kty: 'RSA', pss: true },
  PS384: { hash: 'sha384', kty: 'RSA', pss: true },
  PS512: { hash: 'sha512', kty: 'RSA', pss: true },
  ES256: { hash: 'sha256', kty: 'EC', dsa: 'ieee-p1363' },
  ES384: { hash: 'sha384', kty: 'EC', dsa: 'ieee-p1363' },
  ES512: { hash: 'sha512', kty: 'EC', dsa: 'ieee-p1363' },
};

interface Jwk {
  kty?: string;
  kid?: string;
  alg?: string;
  use?: string;
  [k: string]: unknown;
}

/** A verification key of an issuer (from its JWKS, or the daemon's own token key). */
export interface Key {
  kid?: string;
  kty: string;
  alg?: string;
  key: KeyObject;
}

export interface JwtClaims {
  iss?: unknown;
  sub?: unknown;
  aud?: unknown;
  exp?: unknown;
  nbf?: unknown;
  [k: string]: unknown;
}

/** The keys of a JWKS document usable for signatures; keys that do not import are skipped. */
export function importJwks(doc: string): Key[] {
  let parsed: { keys?: Jwk[] };
  try {
    parsed = JSON.parse(doc) as typeof parsed;
  } catch (e) {
    throw new JwtError(`the key set is not JSON: ${(e as Error).message}`);
  }
  if (!Array.isArray(parsed.keys)) throw new JwtError('the key set has no "keys" list');
  const out: Key[] = [];
  for (const jwk of parsed.keys) {
    if (jwk.use !== undefined && jwk.use !== 'sig') continue;
    if (jwk.kty !== 'RSA' && jwk.kty !== 'EC') continue;
    try {
      out.push({ kid: jwk.kid, kty: jwk.kty, alg: jwk.alg, key: crypto.createPublicKey({ key: jwk as crypto.JsonWebKey, format: 'jwk' }) });
    } catch {
      // a key node:crypto cannot use is not one a token can be checked with
    }
  }
  return out;
}

function part(s: string, what: string): Record<string, unknown> {
  try {
    const v = JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new JwtError(`malformed JWT ${what}: ${(e as Error).message}`);
  }
}

/** Checks the signature with `keys` (by kid, else every key of the algorithm's type); returns the claims. */
export function verifyJws(token: string, keys: readonly Key[]): { header: Record<string, unknown>; claims: JwtClaims } {
  const segments = token.split('.');
  if (segments.length !== 3) throw new JwtError('malformed JWT: expected three dot-separated parts');
  const [h, p, s] = segments as [string, string, string];
  const header = part(h, 'header');
  const alg = typeof header.alg === 'string' ? header.alg : '';
  const spec = ALGS[alg];
  if (!spec) throw new JwtError(`unsupported signing algorithm ${JSON.stringify(header.alg)}`);
  const kid = typeof header.kid === 'string' ? header.kid : undefined;
  const candidates = keys.filter((k) => k.kty === spec.kty && (kid === undefined || k.kid === kid) && (k.alg === undefined || k.alg === alg));
  if (candidates.length === 0) throw new KeyNotFound(kid);
  const data = Buffer.from(`${h}.${p}`, 'latin1');
  const signature = Buffer.from(s, 'base64url');
  const ok = candidates.some((k) =>
    crypto.verify(
      spec.hash,
      data,
      spec.pss
        ? { key: k.key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: crypto.constants.RSA_PSS_SALTLEN_DIGEST }
        : spec.dsa
          ? { key: k.key, dsaEncoding: spec.dsa }
          : k.key,
      signature,
    ),
  );
  if (!ok) throw new JwtError('failed to verify signature');
  return { header, claims: part(p, 'claims') };
}

export class KeyNotFound extends JwtError {
  constructor(readonly kid: string | undefined) {
    super(kid === undefined ? 'no key of the key set fits the token' : `no key with kid ${JSON.stringify(kid)} in the key set`);
  }
}

/** go-oidc's claim checks: `iss` is the issuer, `exp` is in the future, `nbf` (when given) is past. */
export function checkTimeAndIssuer(claims: JwtClaims, issuer: string, nowMs: number): void {
  if (claims.iss !== issuer)
    throw new JwtError(`id token issued by a different provider, expected ${JSON.stringify(issuer)} got ${JSON.stringify(claims.iss)}`);
  if (typeof claims.exp !== 'number') throw new JwtError('token has no expiry ("exp")');
  const now = nowMs / 1000;
  if (claims.exp <= now) throw new JwtError(`token is expired (Token Expiry: ${new Date(claims.exp * 1000).toISOString()})`);
  if (typeof claims.nbf === 'number' && claims.nbf > now)
    throw new JwtError(
      `current time ${new Date(nowMs).toISOString()} before the nbf (not before) time: ${new Date(claims.nbf * 1000).toISOString()}`,
    );
}

/**
 * An issuer's key set from its JWKS URI: fetched on first use, refetched (at most every `cooldownMs`) when a
 * token names a key it lacks or the set is older than `maxAgeMs`.
 */
export class RemoteKeySet {
  private keys: Key[] | undefined;
  private fetchedAt = 0;
  private inFlight: Promise<Key[]> | undefined;
  private readonly ca: string[] | undefined;

  constructor(
    readonly uri: string,
    private readonly o: { cooldownMs?: number; maxAgeMs?: number; timeoutMs?: number; insecureSkipVerify?: boolean; now?: () => number } = {},
  ) {
    this.ca = loadTrustedRoots([EXTRA_CA_BUNDLE_PATH]);
  }

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  private refresh(): Promise<Key[]> {
    this.inFlight ??= fetchDocument(this.uri, {
      timeoutMs: this.o.timeoutMs ?? 10_000,
      insecureSkipVerify: this.o.insecureSkipVerify ?? false,
      ca: this.ca,
    })
      .then((doc) => {
        this.keys = importJwks(doc);
        this.fetchedAt = this.now();
        return this.keys;
      })
      .catch((e: unknown) => {
        throw new JwtError(`fetching keys from ${this.uri}: ${(e as Error).message}`);
      })
      .finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  /** Verifies a token's signature with the issuer's current keys; returns its claims. */
  async verify(token: string): Promise<JwtClaims> {
    let keys = this.keys;
    if (keys === undefined || this.now() - this.fetchedAt > (this.o.maxAgeMs ?? 10 * 60_000)) {
      try {
        keys = await this.refresh();
      } catch (e) {
        // An issuer that is down does not invalidate the keys already known.
        if (keys === undefined) throw e;
      }
    }
    try {
      return verifyJws(token, keys).claims;
    } catch (e) {
      // A new key at the issuer: look again, but not more often than the cooldown allows.
      if (e instanceof KeyNotFound && this.now() - this.fetchedAt > (this.o.cooldownMs ?? 30_000))
        return verifyJws(token, await this.refresh()).claims;
      throw e;
    }
  }
}
