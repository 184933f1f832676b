// jwt_cache_config: a per-provider LRU of tokens that already passed signature verification, keyed by
// the token string. Only present when the provider configures it, as in Envoy; a cached token still
// goes through issuer, time and audience checks on every request, only parsing and the signature
// check are skipped.
import { DEFAULT_CLOCK_SKEW_SECONDS, verifyTimeConstraint, type Jwt } from './jwt';
import { Status } from './status';

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
