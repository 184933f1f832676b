// XDS_AUTH semantics (Istio's pilot/pkg/xds authentication.go + auth.go) as pure functions:
// - authentication: on the TLS listener the client certificate's URI SANs are the caller's identities; a
//   TLS stream without a verified client certificate is unauthenticated. The plaintext listener carries no
//   identity: it is let through, unless XDS_AUTH_PLAINTEXT asks to authenticate plaintext too.
// - authorization (PILOT_ENABLE_XDS_IDENTITY_CHECK): a proxy may only claim a namespace (and service account,
//   when it states one) that one of its SPIFFE identities names.
import { status } from '@grpc/grpc-js';
import { parseSpiffeIdentity, type SpiffeIdentity } from '../../ca/spiffe';

export { parseSpiffeIdentity, type SpiffeIdentity };

export interface XdsAuthSettings {
  /** XDS_AUTH */
  xdsAuth: boolean;
  /** XDS_AUTH_PLAINTEXT */
  xdsAuthPlaintext: boolean;
  /** PILOT_ENABLE_XDS_IDENTITY_CHECK */
  identityCheck: boolean;
}

/** What the transport says about the caller. `peerUris` undefined: no verified client certificate. */
export type XdsTransport = { secure: false } | { secure: true; peerUris: readonly string[] | undefined };

/** What the proxy claims in its node. */
export interface XdsClaim {
  namespace: string;
  serviceAccount?: string;
}

export type XdsAuthDenied = { ok: false; code: status.UNAUTHENTICATED | status.PERMISSION_DENIED; message: string };
export type XdsAuthenticated = { ok: true; identities: readonly string[] | undefined };
export type XdsAuthorized = { ok: true; identities: readonly string[] | undefined; identity?: SpiffeIdentity };

/**
 * URI entries of Node's `subjectaltname` string (`DNS:a, URI:spiffe://…, IP Address:…`). Node quotes values
 * containing separators as JSON strings, which are unquoted here.
 */
export function uriSans(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  const out: string[] = [];
  let i = 0;
  const s = subjectAltName;
  while (i < s.length) {
    const colon = s.indexOf(':', i);
    if (colon < 0) break;
    const kind = s.slice(i, colon).trim();
    let j = colon + 1;
    let value: string;
    if (s[j] === '"') {
      let k = j + 1;
      while (k < s.length && s[k] !== '"') k += s[k] === '\\' ? 2 : 1;
      try {
        value = JSON.parse(s.slice(j, k + 1)) as string;
      } catch {
        value = s.slice(j + 1, k);
      }
      j = k + 1;
    } else {
      const comma = s.indexOf(', ', j);
      const end = comma < 0 ? s.length : comma;
      value = s.slice(j, end);
      j = end;
    }
    if (kind === 'URI') out.push(value);
    const next = s.indexOf(', ', j);
    if (next < 0) break;
    i = next + 2;
  }
  return out;
}

/** Authentication of a new stream, before its node is known. */
export function authenticateXdsPeer(settings: XdsAuthSettings, transport: XdsTransport): XdsAuthenticated | XdsAuthDenied {
  if (!settings.xdsAuth) return { ok: true, identities: undefined };
  if (!transport.secure) {
    if (!settings.xdsAuthPlaintext) return { ok: true, identities: undefined };
    return {
      ok: false,
      code: status.UNAUTHENTICATED,
      message:
        'authentication failure: XDS_AUTH_PLAINTEXT is true and a plaintext xDS connection carries no client identity; connect to the TLS port with a client certificate',
    };
  }
  if (transport.peerUris === undefined) {
    return {
      ok: false,
      code: status.UNAUTHENTICATED,
      message: 'authentication failure: the TLS connection presented no client certificate signed by the mesh CA (XDS_AUTH is true)',
    };
  }
  if (transport.peerUris.length === 0) {
    return {
      ok: false,
      code: status.UNAUTHENTICATED,
      message: 'authentication failure: the client certificate has no URI SAN identity (expected spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>)',
    };
  }
  return { ok: true, identities: transport.peerUris };
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

/** Both checks in order, for callers that know the transport and the claim at once. */
export function checkXdsAccess(
  settings: XdsAuthSettings,
  transport: XdsTransport,
  claim: XdsClaim,
): XdsAuthorized | XdsAuthDenied {
  const authn = authenticateXdsPeer(settings, transport);
  if (!authn.ok) return authn;
  return authorizeXdsProxy(settings, authn.identities, claim);
}
