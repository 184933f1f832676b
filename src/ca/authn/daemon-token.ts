// The daemon's own workload tokens (src/ca/token.ts): no Istio counterpart — istiod trusts only the cluster's
// tokens and JWT_RULE issuers. A bearer token issued by DAEMON_TOKEN_ISSUER, signed by the key in the CA
// directory, whose `aud` holds one of TOKEN_AUDIENCES and whose `sub` is system:serviceaccount:<ns>:<sa>, is
// the workload spiffe://<trust domain>/ns/<ns>/sa/<sa> — the same mapping as the JWT_RULE and orchestrator
// authenticators. Tokens of other issuers are passed over without touching the key file, so the chain's
// other authenticators see them as before.
import fs from 'node:fs';
import path from 'node:path';
import { checkTimeAndIssuer, type JwtClaims, type Key, verifyJws } from './jws';
import { audienceAccepted, serviceAccountFromSubject } from './jwt';
import { AuthnError, type Authenticator, type AuthRequest, bearerToken, type Caller } from './types';
import { spiffeUri } from '../../lib/spiffe';
import { DAEMON_TOKEN_ISSUER, TOKEN_KEY_FILE, tokenSigningKey, verificationKey } from '../token';

/**
 * How often the key file is looked at (one stat): replacing the key is how an operator revokes every
 * outstanding token, so the old key must stop working within this long.
 */
const STAT_INTERVAL_MS = 1_000;

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
  /** dev:ino:mtime:size of the key file as last read ('' = absent). */
  private fileStamp = '';
  private checkedAt = -Infinity;
  private readonly file: string;

  constructor(private readonly o: DaemonTokenAuthenticatorOptions) {
    this.file = path.join(o.dir, TOKEN_KEY_FILE);
    this.refresh(true);
  }

  private now(): number {
    return this.o.now?.() ?? Date.now();
  }

  /**
   * Reads the key again when the file changed, checked at most every STAT_INTERVAL_MS unless `now` (a token
   * that no loaded key verifies: the key may have been made or replaced since the last look, e.g. by meshctl
   * right after the daemon started, and one stat is cheaper than a refused workload).
   */
  private refresh(force = false, now = false): void {
    if (!force && !now && this.now() - this.checkedAt < STAT_INTERVAL_MS) return;
    this.checkedAt = this.now();
    let stamp = '';
    try {
      const st = fs.statSync(this.file);
      stamp = `${st.dev}:${st.ino}:${st.mtimeMs}:${st.size}`;
    } catch {
      // absent: no token of ours verifies
    }
    if (!force && stamp === this.fileStamp) return;
    this.fileStamp = stamp;
    // A key file that does not read fails closed: no key until it is fixed.
    this.keys = [];
    const key = stamp === '' ? undefined : tokenSigningKey(this.o.dir, false);
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
    if (iss !== DAEMON_TOKEN_ISSUER)
      throw new AuthnError(`not a token of this daemon (iss ${JSON.stringify(iss)}, expected ${JSON.stringify(DAEMON_TOKEN_ISSUER)})`);
    let claims: JwtClaims;
    try {
      this.refresh();
      try {
        claims = verifyJws(token, this.keys).claims;
      } catch {
        this.refresh(false, true);
        claims = verifyJws(token, this.keys).claims;
      }
      checkTimeAndIssuer(claims, DAEMON_TOKEN_ISSUER, this.now());
    } catch (e) {
      throw new AuthnError(`failed to verify the token with the key in ${this.o.dir} (error ${(e as Error).message})`);
    }
    const [ns, sa] = serviceAccountFromSubject(claims.sub);
    if (!audienceAccepted(claims.aud, this.o.audiences))
      throw new AuthnError(`invalid audiences ${JSON.stringify(claims.aud ?? [])}, expected one of TOKEN_AUDIENCES [${this.o.audiences.join(' ')}]`);
    return { source: 'id-token', identities: [spiffeUri(this.o.trustDomain(), ns, sa)] };
  }
}
