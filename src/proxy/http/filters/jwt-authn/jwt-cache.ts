// jwt_cache_config: a per-provider LRU of tokens that already passed signature verification, keyed by
// the token string. Only present when the provider configures it, as in Envoy; a cached token still
// goes through issuer, time and audience checks on every request, only parsing and the signature
// check are skipped.
import { DEFAULT_CLOCK_SKEW_SECONDS, verifyTimeConstraint, type Jwt } from '../../../../lib/jwt-verify/jwt';
import { Status } from '../../../../lib/jwt-verify/status';

export const DEFAULT_JWT_CACHE_SIZE = 100;

export class JwtCache {
  private readonly entries = new Map<string, Jwt>();
  constructor(private readonly size: number) {}

  lookup(token: string, nowSeconds: number): Jwt | undefined {
    const jwt = this.entries.get(token);
    if (!jwt) return undefined;
    if (verifyTimeConstraint(jwt, nowSeconds, DEFAULT_CLOCK_SKEW_SECONDS) === Status.JwtExpired) {
      this.entries.delete(token);
      return undefined;
    }
    // most recently used goes last
    this.entries.delete(token);
    this.entries.set(token, jwt);
    return jwt;
  }

  insert(jwt: Jwt): void {
    if (this.size <= 0) return;
    this.entries.delete(jwt.token);
    this.entries.set(jwt.token, jwt);
    while (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value as string);
  }

  get count(): number {
    return this.entries.size;
  }
}

/**
 * Signatures this provider already verified, per key set: verifying a signature is a pure function of the
 * signed bytes, the signature and the keys, and it is the bulk of the filter's cost (an RS256 check is tens of
 * microseconds against a few for everything else). Unlike jwt_cache_config this changes no decision and
 * skips nothing else: the token is parsed and its issuer, times and audiences checked on every request, and
 * an entry only counts for the very key set (object) it was verified with, so a key rotation re-verifies.
 */
export class VerifiedSignatures {
  private readonly entries = new Map<string, object>();
  constructor(private readonly size = 1000) {}

  has(token: string, keys: object): boolean {
    return this.entries.get(token) === keys;
  }

  add(token: string, keys: object): void {
    this.entries.delete(token);
    this.entries.set(token, keys);
    if (this.entries.size > this.size) this.entries.delete(this.entries.keys().next().value as string);
  }
}
