// The daemon's authenticator chain (Istio's authenticator list in NewServer and RunCA), shared by the CA
// service and secured xDS, the node authorizer of CA_TRUSTED_NODE_ACCOUNTS, and the chain's two other uses:
// the ADS server's authenticate hook (Istio's DiscoveryServer.authenticate, pilot/pkg/xds/authentication.go)
// and the check of debug callers that are not on loopback (Istio's debug-endpoint authentication).
import fs from 'node:fs';
import path from 'node:path';
import type { IncomingMessage } from 'node:http';
import { TLSSocket } from 'node:tls';
import { status } from '@grpc/grpc-js';
import { CommandError } from '../../cli/context';
import type { OrchClient } from '../../config/orch';
import { ClientCertAuthenticator } from '../../ca/authn/client-cert';
import { DaemonTokenAuthenticator } from '../../ca/authn/daemon-token';
import { JwtAuthenticator, JwtRuleError, parseJwtRule } from '../../ca/authn/jwt';
import { NodeAuthorizer, parseTrustedNodeAccounts } from '../../ca/authn/node-authorizer';
import { OrchTokenAuthenticator } from '../../ca/authn/orch-token';
import { grpcAuthRequest } from '../../ca/authn/grpc';
import { type AuthGate, type AuthOutcome, type Authenticator, authenticate, authenticateAny } from '../../ca/authn/types';
import { XfccAuthenticator } from '../../ca/authn/xfcc';
import type { MeshCa } from '../../ca/runtime';
import type { CaSettings } from '../../ca/settings';
import { DEFAULT_CA_DIR } from '../../ca/store';
import { TOKEN_KEY_FILE, tokenSigningKey, TokenKeyError } from '../../ca/token';
import { joinHostPort } from '../../lib/hostport';
import { registerScope } from '../../lib/log';
import type { XdsAuthDenied, XdsAuthenticate, XdsAuthenticated } from '../../xds/server';

const log = registerScope('security', 'daemon identity');

/** Istio's third-party token path (./var/run/secrets/tokens/istio-token), renamed. */
export const THIRD_PARTY_JWT_PATH = './var/run/secrets/tokens/mesh-token';

/** iss and aud[0] of the daemon's own token, when it has one (Istio's detectAuthEnv). */
function ownTokenClaims(): { iss?: string; aud?: string } {
  let token: string;
  try {
    token = fs.readFileSync(THIRD_PARTY_JWT_PATH, 'utf8').trim();
  } catch {
    return {};
  }
  try {
    const payload = JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss?: unknown; aud?: unknown };
    const aud = Array.isArray(payload.aud) ? payload.aud[0] : payload.aud;
    return { iss: typeof payload.iss === 'string' ? payload.iss : undefined, aud: typeof aud === 'string' ? aud : undefined };
  } catch (e) {
    log.warn(`Starting with invalid orchestrator JWT token ${THIRD_PARTY_JWT_PATH}: ${(e as Error).message}`);
    return {};
  }
}

export interface ChainOptions {
  settings: CaSettings;
  trustDomain: string;
  meshCa?: MeshCa;
  orch?: OrchClient;
  /** --clusterID and --clusterAliases, for the orchestrator's TokenReview. */
  clusterId: string;
  clusterAliases: Record<string, string>;
  /** The daemon runs inside a cluster: no out-of-cluster OIDC check of its own token's issuer. */
  inCluster: boolean;
}

/**
 * Istio's order: client certificate, JWT_RULE, (the daemon's own tokens,) orchestrator token, XFCC, then
 * RunCA's out-of-cluster issuer; the first that yields identities wins.
 */
export async function buildAuthenticators(o: ChainOptions): Promise<Authenticator[]> {
  const { settings, meshCa, orch } = o;
  const authenticators: Authenticator[] = [new ClientCertAuthenticator()];
  const trustDomain = () => o.trustDomain;
  if (settings.jwtRule !== '') authenticators.push(await jwtRuleAuthenticator(settings.jwtRule, trustDomain));
  if (meshCa) authenticators.push(daemonTokenAuthenticator(settings, meshCa, !orch, trustDomain));
  if (orch) {
    authenticators.push(
      new OrchTokenAuthenticator({
        api: orch,
        audiences: settings.tokenAudiences,
        clusterId: o.clusterId,
        clusterAliases: o.clusterAliases,
        trustDomain,
      }),
    );
  }
  if (settings.trustedGatewayCidrs.length > 0) authenticators.push(new XfccAuthenticator(settings.trustedGatewayCidrs));
  if (meshCa) {
    const issuer = await outOfClusterAuthenticator(settings, o.inCluster, trustDomain);
    if (issuer) authenticators.push(issuer);
  }
  return authenticators;
}

async function jwtRuleAuthenticator(jwtRule: string, trustDomain: () => string): Promise<Authenticator> {
  try {
    const rule = parseJwtRule(jwtRule);
    if (rule.audiences.length === 0) log.warn('JWT_RULE has no "audiences": every token will be refused (invalid audiences)');
    const a = await JwtAuthenticator.create(rule, trustDomain);
    log.info(`authenticating with JWT_RULE: issuer ${rule.issuer}, audiences [${rule.audiences.join(' ')}]`);
    return a;
  } catch (e) {
    if (e instanceof JwtRuleError) throw new CommandError(`error initializing OIDC: ${e.message}`);
    throw e;
  }
}

/**
 * The daemon's own tokens (meshctl x workload entry configure --ca-dir): the key lives beside the signing
 * material. With no cluster it is made at first start beside the self-signed root; a plug-in CA's
 * ROOT_CA_DIR (the operator's, perhaps read-only) and a cluster's daemon only trust one an operator put
 * there (meshctl --ca-dir makes it). Checked before the orchestrator's TokenReview, a round trip.
 */
function daemonTokenAuthenticator(settings: CaSettings, meshCa: MeshCa, noCluster: boolean, trustDomain: () => string): Authenticator {
  const caDir = path.resolve(meshCa.kind === 'plug-in' ? settings.rootCaDir : DEFAULT_CA_DIR);
  try {
    if (tokenSigningKey(caDir, noCluster && meshCa.kind === 'self-signed'))
      log.info(`trusting workload tokens signed by ${path.join(caDir, TOKEN_KEY_FILE)} (audiences [${settings.tokenAudiences.join(' ')}])`);
  } catch (e) {
    if (e instanceof TokenKeyError) throw new CommandError(e.message);
    throw e;
  }
  return new DaemonTokenAuthenticator({ dir: caDir, audiences: settings.tokenAudiences, trustDomain });
}

/**
 * RunCA: outside a cluster, tokens of TOKEN_ISSUER (or of the issuer of the daemon's own token) are checked
 * by OIDC discovery; an issuer without it leaves only the in-cluster authenticators.
 */
async function outOfClusterAuthenticator(settings: CaSettings, inCluster: boolean, trustDomain: () => string): Promise<Authenticator | undefined> {
  const own = ownTokenClaims();
  const issuer = settings.tokenIssuer || own.iss || '';
  const audience = settings.audience || own.aud || '';
  if (issuer === '' || inCluster) return undefined;
  try {
    const a = await JwtAuthenticator.create({ issuer, audiences: [audience] }, trustDomain);
    log.info('Using out-of-cluster JWT authentication');
    return a;
  } catch (e) {
    log.info(`the token issuer ${issuer} does not support OIDC discovery (${(e as Error).message}); using only in-cluster auth`);
    return undefined;
  }
}

/** CA_TRUSTED_NODE_ACCOUNTS: node agents that may ask for the certificates of the pods on their node. */
export function nodeAuthorizerFor(settings: CaSettings, orch: OrchClient | undefined): NodeAuthorizer | undefined {
  const trusted = parseTrustedNodeAccounts(settings.trustedNodeAccounts);
  for (const bad of trusted.invalid) log.warn(`Invalid CA_TRUSTED_NODE_ACCOUNTS, ignoring: ${bad}`);
  if (trusted.accounts.size === 0) return undefined;
  if (orch) return new NodeAuthorizer(orch, trusted.accounts);
  log.warn('CA_TRUSTED_NODE_ACCOUNTS is set but there is no orchestrator to check which pods run on a node: impersonation is refused');
  return undefined;
}

/** Istio's debug-endpoint authentication for callers not on loopback: the chain, ungated. */
export async function authenticateDebug(authenticators: readonly Authenticator[], req: IncomingMessage): Promise<readonly string[] | undefined> {
  const sock = req.socket;
  const secure = sock instanceof TLSSocket;
  const cert = secure && sock.authorized ? sock.getPeerCertificate().raw : undefined;
  // A dual-stack listener reports IPv4 peers as ::ffff:a.b.c.d.
  const host = (sock.remoteAddress ?? '').replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');
  const r = await authenticateAny(authenticators, {
    secure,
    remoteAddress: joinHostPort(host, sock.remotePort ?? 0),
    peerCertificate: cert,
    header: (name) => {
      const v = req.headers[name];
      return v === undefined ? [] : Array.isArray(v) ? v : [v];
    },
  });
  if (!r.identities) log.warn(`debug request from ${host} not authenticated: ${r.failures.join('; ')}`);
  return r.identities;
}

/**
 * What the chain concluded of a new xDS stream, as the stream sees it: not run → no identities, let through
 * (the plaintext port, or XDS_AUTH off); failed → Unauthenticated, with every authenticator's reason.
 */
export function authenticateXdsPeer(outcome: AuthOutcome, secure: boolean): XdsAuthenticated | XdsAuthDenied {
  if (outcome.kind === 'skipped') return { ok: true, identities: undefined };
  if (outcome.kind === 'authenticated') return { ok: true, identities: outcome.caller.identities };
  const why = outcome.failures.join('; ');
  return {
    ok: false,
    code: status.UNAUTHENTICATED,
    message: secure
      ? `authentication failure: ${why}`
      : `authentication failure: XDS_AUTH_PLAINTEXT is true and the plaintext connection carries no credential the daemon accepts: ${why}`,
  };
}

/** The ADS server's authenticate hook: the chain over the stream's credentials, gated by XDS_AUTH / XDS_AUTH_PLAINTEXT. */
export function xdsAuthenticator(authenticators: readonly Authenticator[], gate: AuthGate): XdsAuthenticate {
  return async (call, secure) => authenticateXdsPeer(await authenticate(authenticators, grpcAuthRequest(call, secure), gate), secure);
}
