// XDS_AUTH semantics (Istio's pilot/pkg/xds authentication.go + auth.go) as pure functions:
// - authentication: the daemon's authenticator chain (src/ca/authn: client certificate, JWT_RULE,
//   orchestrator token, XFCC) names the caller on the TLS listener; a TLS stream none of them accepts is
//   unauthenticated. The plaintext listener carries no identity: it is let through, unless
//   XDS_AUTH_PLAINTEXT asks to authenticate plaintext too.
// - authorization (PILOT_ENABLE_XDS_IDENTITY_CHECK): a proxy may only claim a namespace (and service account,
//   when it states one) that one of its SPIFFE identities names.
import { status } from '@grpc/grpc-js';
import type { AuthOutcome } from '../../ca/authn/types';
import { parseSpiffeIdentity, type SpiffeIdentity } from '../../lib/spiffe';

export { parseSpiffeIdentity, type SpiffeIdentity };

export interface XdsAuthSettings {
  /** XDS_AUTH */
  xdsAuth: boolean;
  /** XDS_AUTH_PLAINTEXT */
  xdsAuthPlaintext: boolean;
  /** PILOT_ENABLE_XDS_IDENTITY_CHECK */
  identityCheck: boolean;
}

/** What the proxy claims in its node. */
export interface XdsClaim {
  namespace: string;
  serviceAccount?: string;
}

export type XdsAuthDenied = { ok: false; code: status.UNAUTHENTICATED | status.PERMISSION_DENIED; message: string };
export type XdsAuthenticated = { ok: true; identities: readonly string[] | undefined };
export type XdsAuthorized = { ok: true; identities: readonly string[] | undefined; identity?: SpiffeIdentity };

/**
 * Authentication of a new stream, before its node is known, from what the authenticator chain made of it
 * (Istio's DiscoveryServer.authenticate): not run → no identities, let through (the plaintext port, or
 * XDS_AUTH off); failed → Unauthenticated, with every authenticator's reason.
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

function goList(items: readonly string[]): string {
  return `[${items.join(' ')}]`;
}

/** Authorization of an authenticated stream once the proxy's claimed namespace is known. */
export function authorizeXdsProxy(
  settings: XdsAuthSettings,
  identities: readonly string[] | undefined,
  claim: XdsClaim,
): XdsAuthorized | XdsAuthDenied {
  if (identities === undefined || !settings.identityCheck) return { ok: true, identities };
  for (const raw of identities) {
    const id = parseSpiffeIdentity(raw);
    if (id instanceof Error) continue;
    if (claim.namespace !== '' && id.namespace !== claim.namespace) continue;
    if (claim.serviceAccount && id.serviceAccount !== claim.serviceAccount) continue;
    return { ok: true, identities, identity: id };
  }
  return {
    ok: false,
    code: status.PERMISSION_DENIED,
    message: `authorization failed: no identities (${goList(identities)}) matched ${claim.namespace}/${claim.serviceAccount ?? ''}`,
  };
}

/** Both checks in order, for callers that know the authentication outcome and the claim at once. */
export function checkXdsAccess(
  settings: XdsAuthSettings,
  outcome: AuthOutcome,
  secure: boolean,
  claim: XdsClaim,
): XdsAuthorized | XdsAuthDenied {
  const authn = authenticateXdsPeer(outcome, secure);
  if (!authn.ok) return authn;
  return authorizeXdsProxy(settings, authn.identities, claim);
}
