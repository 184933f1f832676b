// SPIFFE workload identities as Istio writes and reads them (pkg/spiffe): `spiffe://<trust domain>/ns/<ns>/sa/<sa>`.

export interface SpiffeIdentity {
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
}

const SPIFFE_PREFIX = 'spiffe://';

/** Istio's MustGenSpiffeURI (an `@` in the trust domain becomes `.`). */
export function spiffeUri(trustDomain: string, namespace: string, serviceAccount: string): string {
  return `${SPIFFE_PREFIX}${trustDomain.replace(/@/g, '.')}/ns/${namespace}/sa/${serviceAccount}`;
}

/** `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`, or an Error saying what is wrong. */
export function parseSpiffeIdentity(id: string): SpiffeIdentity | Error {
  if (!id.startsWith(SPIFFE_PREFIX)) return new Error(`identity is not a spiffe format: ${id}`);
  const parts = id.slice(SPIFFE_PREFIX.length).split('/');
  if (parts.length !== 5 || parts[1] !== 'ns' || parts[3] !== 'sa' || !parts[0] || !parts[2] || !parts[4]) {
    return new Error(`identity is not a spiffe format: ${id}`);
  }
  return { trustDomain: parts[0], namespace: parts[2], serviceAccount: parts[4] };
}
