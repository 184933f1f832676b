// JWT_RULE (and TOKEN_ISSUER outside a cluster): Istio's JwtAuthenticator. A bearer token signed by the
// rule's issuer — keys from `jwks_uri`, or found through the issuer's OIDC discovery document — whose `sub`
// is `system:serviceaccount:<namespace>:<service account>` and whose `aud` holds one of the rule's
// audiences is the workload `spiffe://<trust domain>/ns/<namespace>/sa/<service account>`. This is how a
// workload with no cluster proves who it is: any OIDC issuer the operator trusts can mint its tokens.
import { checkTimeAndIssuer, type JwtClaims, RemoteKeySet } from './jws';
import { AuthnError, type Authenticator, type AuthRequest, bearerToken, type Caller } from './types';
import { spiffeUri } from '../../lib/spiffe';

/** The JSON of JWT_RULE: Istio's security.v1beta1.JWTRule as encoding/json reads it. */
export interface JwtRule {
  issuer: string;
  jwksUri?: string;
  audiences: string[];
}

export class JwtRuleError extends Error {}

/** Parses JWT_RULE (`{"issuer": "…", "jwks_uri": "…", "audiences": ["…"]}`). */
export function parseJwtRule(text: string): JwtRule {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new JwtRuleError(`JWT_RULE: failed to unmarshal JWT rule: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new JwtRuleError('JWT_RULE: failed to unmarshal JWT rule: expected a JSON object');
  // encoding/json matches field names case-insensitively; Istio's JSON names are issuer, jwks_uri, audiences.
  const field = (name: string): unknown => {
    for (const [k, v] of Object.entries(doc as Record<string, unknown>)) if (k.toLowerCase() === name) return v;
    return undefined;
  };
  const issuer = field('issuer');
  const jwksUri = field('jwks_uri') ?? field('jwksuri');
  const audiences = field('audiences');
  if (issuer !== undefined && typeof issuer !== 'string') throw new JwtRuleError('JWT_RULE: failed to unmarshal JWT rule: "issuer" must be a string');
  if (jwksUri !== undefined && typeof jwksUri !== 'string')
    throw new JwtRuleError('JWT_RULE: failed to unmarshal JWT rule: "jwks_uri" must be a string');
  if (audiences !== undefined && (!Array.isArray(audiences) || audiences.some((a) => typeof a !== 'string'))) {
    throw new JwtRuleError('JWT_RULE: failed to unmarshal JWT rule: "audiences" must be a list of strings');
  }
  if (!issuer) throw new JwtRuleError('JWT_RULE: the rule has no "issuer"');
  return { issuer, jwksUri: jwksUri || undefined, audiences: (audiences as string[] | undefined) ?? [] };
}

/** go-oidc's NewProvider: the issuer's discovery document names its key set, and must name the same issuer. */
export async function discoverJwksUri(issuer: string, timeoutMs = 10_000): Promise<string> {
  const wellKnown = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let res: Response;
  try {
    res = await fetch(wellKnown, { signal: AbortSignal.timeout(timeoutMs) });
  } catch (e) {
    throw new JwtRuleError(`failed at creating an OIDC provider for ${issuer}: GET ${wellKnown}: ${(e as Error).message}`);
  }
  const body = await res.text();
  if (res.status !== 200)
    throw new JwtRuleError(`failed at creating an OIDC provider for ${issuer}: ${res.status} ${res.statusText}: ${body.slice(0, 200)}`);
  let doc: { issuer?: unknown; jwks_uri?: unknown };
  try {
    doc = JSON.parse(body) as typeof doc;
  } catch (e) {
    throw new JwtRuleError(`failed at creating an OIDC provider for ${issuer}: failed to decode provider discovery object: ${(e as Error).message}`);
  }
  if (doc.issuer !== issuer) {
    throw new JwtRuleError(
      `failed at creating an OIDC provider for ${issuer}: oidc: issuer did not match the issuer returned by provider, expected "${issuer}" got "${String(doc.issuer)}"`,
    );
  }
  if (typeof doc.jwks_uri !== 'string' || doc.jwks_uri === '')
    throw new JwtRuleError(`failed at creating an OIDC provider for ${issuer}: the discovery document has no jwks_uri`);
  return doc.jwks_uri;
}

/** Istio's checkAudience: any token audience among the expected ones. */
export function audienceAccepted(tokenAud: unknown, expected: readonly string[]): boolean {
  const aud = typeof tokenAud === 'string' ? [tokenAud] : Array.isArray(tokenAud) ? tokenAud : [];
  return aud.some((a) => expected.includes(a as string));
}

/** `system:serviceaccount:<ns>:<sa>` → [ns, sa]. */
export function serviceAccountFromSubject(sub: unknown): [string, string] {
  if (typeof sub !== 'string' || !sub.startsWith('system:serviceaccount')) throw new AuthnError(`invalid sub ${String(sub)}`, true);
  const parts = sub.split(':');
  if (parts.length !== 4 || !parts[2] || !parts[3]) throw new AuthnError(`invalid sub ${sub}`, true);
  return [parts[2], parts[3]];
}

export class JwtAuthenticator implements Authenticator {
  readonly type = 'IDTokenAuthenticator';
  private readonly keys: RemoteKeySet;

  constructor(
    readonly rule: JwtRule & { jwksUri: string },
    private readonly trustDomain: () => string,
    private readonly now: () => number = Date.now,
  ) {
    this.keys = new RemoteKeySet(rule.jwksUri, { now });
  }

  /** Resolves the key set location (OIDC discovery when the rule has no jwks_uri) and builds the authenticator. */
  static async create(rule: JwtRule, trustDomain: () => string): Promise<JwtAuthenticator> {
    const jwksUri = rule.jwksUri ?? (await discoverJwksUri(rule.issuer));
    return new JwtAuthenticator({ ...rule, jwksUri }, trustDomain);
  }

  async authenticate(req: AuthRequest): Promise<Caller> {
    let token: string;
    try {
      token = bearerToken(req);
    } catch (e) {
      throw new AuthnError(`ID token extraction error: ${(e as Error).message}`);
    }
    let payload: JwtClaims;
    try {
      payload = await this.keys.verify(token);
      checkTimeAndIssuer(payload, this.rule.issuer, this.now());
    } catch (e) {
      throw new AuthnError(`failed to verify the JWT token (error ${(e as Error).message})`);
    }
    const [ns, sa] = serviceAccountFromSubject(payload.sub);
    if (!audienceAccepted(payload.aud, this.rule.audiences)) throw new AuthnError(`invalid audiences ${JSON.stringify(payload.aud ?? [])}`);
    return { source: 'id-token', identities: [spiffeUri(this.trustDomain(), ns, sa)] };
  }
}
