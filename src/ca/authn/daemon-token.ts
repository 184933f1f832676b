// The daemon's own workload tokens (src/ca/token.ts): no Istio counterpart — istiod trusts only the cluster's
// tokens and JWT_RULE issuers. A bearer token issued by DAEMON_TOKEN_ISSUER, signed by the key in the CA
// directory, whose `aud` holds one of TOKEN_AUDIENCES and whose `sub` is system:serviceaccount:<ns>:<sa>, is
// the workload spiffe://<trust domain>/ns/<ns>/sa/<sa> — the same mapping as the JWT_RULE and orchestrator
// authenticators. Tokens of other issuers are passed over without touching the key file, so the chain's
// other authenticators see them as before.
import { checkTimeAndIssuer, type JwtClaims, type Key, KeyNotFound, verifyJws } from './jws';
import { audienceAccepted, serviceAccountFromSubject } from './jwt';
import { AuthnError, type Authenticator, type AuthRequest, bearerToken, type Caller, spiffeUri } from './types';
import { DAEMON_TOKEN_ISSUER, tokenSigningKey, verificationKey } from '../token';

/** A replaced key file is read again at most this often (a token naming an unknown key triggers it). */
const RELOAD_COOLDOWN_MS = 5_000;

export interface DaemonTokenAuthenticatorOptions {
  /** The CA directory holding the token key. */
  dir: string;
  /** TOKEN_AUDIENCES. */
  audiences: readonly string[];
  trustDomain: () => string;
  now?: () => number;
}

/** The `iss` of a compact JWS without verifying it ('' when it cannot be read). */
function unverifiedIssuer(token: string): string {
  try {
    const claims = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss?: unknown };
    return typeof claims.iss === 'string' ? claims.iss : '';
  } catch {
    return '';
  }
}

export class DaemonTokenAuthenticator implements Authenticator {
  readonly type = 'MeshTokenAuthenticator';
  private keys: Key[] = [];
  private loadedAt = -Infinity;

  constructor(private readonly o: DaemonTokenAuthenticatorOptions) {
    this.reload();
  }

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  private reload(): void {
    this.loadedAt = this.now();
    const key = tokenSigningKey(this.o.dir, false);
    this.keys = key ? [verificationKey(key)] : [];
  }

  async authenticate(req: AuthRequest): Promise<Caller> {
    let token: string;
    try {
      token = bearerToken(req);
    } catch (e) {
      throw new AuthnError(`token extraction error: ${(e as Error).message}`);
    }
    const iss = unverifiedIssuer(token);
    if (iss !== DAEMON_TOKEN_ISSUER) throw new AuthnError(`not a token of this daemon (iss ${JSON.stringify(iss)}, expected ${JSON.stringify(DAEMON_TOKEN_ISSUER)})`);
    let claims: JwtClaims;
    try {
      try {
        claims = verifyJws(token, this.keys).claims;
      } catch (e) {
        // The operator replaced the key (or the daemon started before meshctl made it): look again.
        if (!(e instanceof KeyNotFound) || this.now() - this.loadedAt < RELOAD_COOLDOWN_MS) throw e;
        this.reload();
        claims = verifyJws(token, this.keys).claims;
      }
      checkTimeAndIssuer(claims, DAEMON_TOKEN_ISSUER, this.now());
    } catch (e) {
      throw new AuthnError(`failed to verify the token with the key in ${this.o.dir} (error ${(e as Error).message})`);
    }
    const [ns, sa] = serviceAccountFromSubject(claims.sub);
    if (!audienceAccepted(claims.aud, this.o.audiences)) throw new AuthnError(`invalid audiences ${JSON.stringify(claims.aud ?? [])}, expected one of TOKEN_AUDIENCES [${this.o.audiences.join(' ')}]`);
    return { source: 'id-token', identities: [spiffeUri(this.o.trustDomain(), ns, sa)] };
  }
}
