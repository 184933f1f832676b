// Who is calling (Istio's security.Authenticator / Caller): one interface for every credential the daemon
// accepts on its gRPC ports — the CA service and secured xDS share the same chain, in Istio's order, and the
// first authenticator that yields identities wins. Identities are always derived from a verified credential;
// nothing a caller asks for in its request can add to them.

/** What an authenticator sees of one call. */
export interface AuthRequest {
  /** The call arrived over TLS (the secured port). */
  secure: boolean;
  /** Peer `ip:port` (`[v6]:port`), as the socket reports it. */
  remoteAddress: string;
  /** DER of the client certificate, present only when the TLS handshake verified it against the mesh roots. */
  peerCertificate?: Buffer;
  /** Values of a request header / gRPC metadata key (lower-case). */
  header(name: string): readonly string[];
}

/** Pod facts the orchestrator's TokenReview adds (Istio's KubernetesInfo), for node impersonation. */
export interface OrchCallerInfo {
  podName: string;
  podNamespace: string;
  podUid: string;
  podServiceAccount: string;
}

export interface Caller {
  source: 'client-certificate' | 'id-token';
  identities: string[];
  orch?: OrchCallerInfo;
}

/**
 * An authenticator refused the credential. `idExtraction` marks the case where the credential itself was
 * good but no identity could be read from it (ca_server_id_extraction_err_count).
 */
export class AuthnError extends Error {
  constructor(
    message: string,
    readonly idExtraction = false,
  ) {
    super(message);
  }
}

export interface Authenticator {
  /** Istio's AuthenticatorType, used in failure messages. */
  readonly type: string;
  /** The caller, or an AuthnError saying why not. */
  authenticate(req: AuthRequest): Promise<Caller>;
}

/** XDS_AUTH and XDS_AUTH_PLAINTEXT: whether authentication runs at all for a call. */
export interface AuthGate {
  xdsAuth: boolean;
  xdsAuthPlaintext: boolean;
}

export type AuthOutcome =
  /** Authentication did not run (XDS_AUTH off, or plaintext without XDS_AUTH_PLAINTEXT). */
  { kind: 'skipped' } | { kind: 'authenticated'; caller: Caller } | { kind: 'failed'; failures: string[]; idExtraction: boolean };

/**
 * Istio's security.Authenticate: nothing runs when XDS_AUTH is false or when the call is plaintext and
 * XDS_AUTH_PLAINTEXT is false; otherwise each authenticator in order until one yields identities.
 */
export async function authenticate(authenticators: readonly Authenticator[], req: AuthRequest, gate: AuthGate): Promise<AuthOutcome> {
  if (!gate.xdsAuth) return { kind: 'skipped' };
  if (!req.secure && !gate.xdsAuthPlaintext) return { kind: 'skipped' };
  const failures: string[] = [];
  let idExtraction = false;
  for (const a of authenticators) {
    try {
      const caller = await a.authenticate(req);
      if (caller.identities.length > 0) return { kind: 'authenticated', caller };
      failures.push(`Authenticator ${a.type}: no identities`);
      idExtraction = true;
    } catch (e) {
      failures.push(`Authenticator ${a.type}: ${(e as Error).message}`);
      if (e instanceof AuthnError && e.idExtraction) idExtraction = true;
    }
  }
  if (authenticators.length === 0) failures.push('no authenticators are configured');
  return { kind: 'failed', failures, idExtraction };
}

/**
 * The chain without the XDS_AUTH gate, as Istio's debug endpoints run it for callers that are not on
 * loopback: the first authenticator's identities, or undefined (with every reason).
 */
export async function authenticateAny(
  authenticators: readonly Authenticator[],
  req: AuthRequest,
): Promise<{ identities?: string[]; failures: string[] }> {
  const failures: string[] = [];
  for (const a of authenticators) {
    try {
      const caller = await a.authenticate(req);
      if (caller.identities.length > 0) return { identities: caller.identities, failures };
    } catch (e) {
      failures.push(`Authenticator ${a.type}: ${(e as Error).message}`);
    }
  }
  return { failures };
}

export const BEARER_PREFIX = 'Bearer ';

/** Istio's ExtractBearerToken: the first `authorization` value that starts with `Bearer `. */
export function bearerToken(req: AuthRequest): string {
  const values = req.header('authorization');
  if (values.length === 0) throw new AuthnError('no HTTP authorization header exists');
  for (const v of values) if (v.startsWith(BEARER_PREFIX)) return v.slice(BEARER_PREFIX.length);
  throw new AuthnError('no bearer token exists in HTTP authorization header');
}
