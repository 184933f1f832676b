// XDS_AUTH as the ADS server sees it (Istio's pilot/pkg/xds authentication.go + auth.go):
// - authentication is the wiring's: the `authenticate` hook gets each new stream (its metadata, peer and
//   verified client certificate, and the listener it came in on) and names the caller or refuses the stream
//   (the daemon runs its authenticator chain, src/meshd/identity/authenticators.ts). Without a hook no stream
//   is authenticated and every one is let through.
// - authorization (PILOT_ENABLE_XDS_IDENTITY_CHECK) is the server's: a proxy may only claim a namespace (and
//   service account, when it states one) that one of its SPIFFE identities names.
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import { parseSpiffeIdentity, type SpiffeIdentity } from '../../lib/spiffe';

export interface XdsAuthSettings {
  /** PILOT_ENABLE_XDS_IDENTITY_CHECK */
  identityCheck: boolean;
}

/** What the proxy claims in its node. */
export interface XdsClaim {
  namespace: string;
  serviceAccount?: string;
}

export type XdsAuthDenied = { ok: false; code: status.UNAUTHENTICATED | status.PERMISSION_DENIED; message: string };
/** identities undefined: the stream was not authenticated (the plaintext port, or XDS_AUTH off) and is let through. */
export type XdsAuthenticated = { ok: true; identities: readonly string[] | undefined };
export type XdsAuthorized = { ok: true; identities: readonly string[] | undefined; identity?: SpiffeIdentity };

/** What the authenticate hook sees of a new stream: its peer, TLS auth context and metadata. */
export type XdsStreamCall = Pick<grpc.ServerDuplexStream<unknown, unknown>, 'getPeer' | 'getAuthContext' | 'metadata'>;

/**
 * Authentication of a new stream before its node is known (Istio's DiscoveryServer.authenticate); `secure`:
 * it came in on the TLS listener.
 */
export type XdsAuthenticate = (call: XdsStreamCall, secure: boolean) => Promise<XdsAuthenticated | XdsAuthDenied>;

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
