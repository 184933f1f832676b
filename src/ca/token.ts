// Workload tokens the daemon issues itself, for workloads with no cluster to vouch for them. The model is
// Kuma's universal-mode data plane token: a JWT signed with a key the control plane generates at first start
// and keeps beside its CA; tokens are never stored, only the key, and whoever can read the key (the operator
// with access to the CA directory) can mint one offline (`meshctl x workload entry configure --ca-dir`).
// Where we differ from Kuma on purpose: the claims are a Kubernetes service-account token's (`sub`
// system:serviceaccount:<ns>:<sa>, `aud` TOKEN_AUDIENCES, the `kubernetes.io` block), so the daemon maps them
// to `spiffe://<trust domain>/ns/<ns>/sa/<sa>` exactly as it maps a TokenRequest token or a JWT_RULE token,
// and their lifetime is Istio's `--tokenDuration` (1 h by default; Kuma's is 10 years): a token is needed
// only for the first certificate, renewals authenticate with the certificate itself.
// The key is ECDSA P-256 (ES256): small, generated at once, and verified by the same node:crypto code as
// JWT_RULE tokens (authn/jws.ts). Its `kid` is the RFC 7638 thumbprint, so a replaced key is noticed.
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Key } from './authn/jws';

/** The signing key's file in the CA directory (./var/lib/mesh/ca with no cluster), mode 0600. */
export const TOKEN_KEY_FILE = 'token-key.pem';
/**
 * `iss` of the daemon's tokens. Fixed, as Kubernetes' `https://kubernetes.default.svc.cluster.local` is: the
 * key, not the name, is what is trusted; the name only keeps these tokens apart from a JWT_RULE issuer's.
 */
export const DAEMON_TOKEN_ISSUER = 'https://meshd.mesh-system.svc';

export class TokenKeyError extends Error {}

function readKey(file: string): KeyObject | undefined {
  let pem: string;
  try {
    pem = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new TokenKeyError(`${file}: ${(e as Error).message}`);
  }
  let key: KeyObject;
  try {
    key = crypto.createPrivateKey(pem);
  } catch (e) {
    throw new TokenKeyError(`${file}: failed to parse private key PEM: ${(e as Error).message}`);
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    throw new TokenKeyError(`${file}: the token signing key must be an ECDSA P-256 key (ES256), got ${key.asymmetricKeyType}`);
  }
  return key;
}

/**
 * The token signing key of a CA directory. With `create`, a missing key is generated and written exclusively
 * (0600): of a daemon and a meshctl starting together, one writes it and both use it.
 */
export function tokenSigningKey(dir: string, create: boolean): KeyObject | undefined {
  const file = path.join(dir, TOKEN_KEY_FILE);
  const found = readKey(file);
  if (found || !create) return found;
  const { privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(file, pem, { mode: 0o600, flag: 'wx' });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return readKey(file);
    throw new TokenKeyError(`${file}: ${(e as Error).message}`);
  }
  return privateKey;
}

/** RFC 7638 JWK thumbprint of an EC key: SHA-256 over {crv, kty, x, y} in that order, base64url. */
export function keyThumbprint(key: KeyObject): string {
  const jwk = crypto.createPublicKey(key).export({ format: 'jwk' }) as { crv: string; kty: string; x: string; y: string };
  const canonical = `{"crv":"${jwk.crv}","kty":"${jwk.kty}","x":"${jwk.x}","y":"${jwk.y}"}`;
  return crypto.createHash('sha256').update(canonical).digest('base64url');
}

/** The public half as authn/jws.ts's verifier takes keys. */
export function verificationKey(key: KeyObject): Key {
  return { kid: keyThumbprint(key), kty: 'EC', alg: 'ES256', key: crypto.createPublicKey(key) };
}

export interface WorkloadTokenRequest {
  namespace: string;
  serviceAccount: string;
  audiences: readonly string[];
  ttlSeconds: number;
  nowMs?: number;
}

/** The claims of a workload token: a Kubernetes service-account token's, issued by the daemon. */
export function workloadTokenClaims(r: WorkloadTokenRequest): Record<string, unknown> {
  const iat = Math.floor((r.nowMs ?? Date.now()) / 1000);
  return {
    iss: DAEMON_TOKEN_ISSUER,
    sub: `system:serviceaccount:${r.namespace}:${r.serviceAccount}`,
    aud: [...r.audiences],
    iat,
    // Kubernetes sets nbf = iat; a minute earlier keeps a VM whose clock runs behind the operator's working.
    nbf: iat - 60,
    exp: iat + r.ttlSeconds,
    jti: crypto.randomUUID(),
    'kubernetes.io': { namespace: r.namespace, serviceaccount: { name: r.serviceAccount } },
  };
}

/** Signs a workload token (ES256 JWS, compact form). */
export function mintWorkloadToken(key: KeyObject, r: WorkloadTokenRequest): string {
  if (!r.namespace) throw new TokenKeyError('a workload token needs a namespace');
  if (!r.serviceAccount) throw new TokenKeyError('a workload token needs a service account');
  if (!(r.ttlSeconds > 0)) throw new TokenKeyError(`a workload token needs a positive lifetime, got ${r.ttlSeconds} s`);
  const header = { alg: 'ES256', typ: 'JWT', kid: keyThumbprint(key) };
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const input = `${enc(header)}.${enc(workloadTokenClaims(r))}`;
  const signature = crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}
