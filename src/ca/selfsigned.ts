// The self-signed root (Istio's NewSelfSignedIstioCAOptions and root rotator): made once at first start —
// RSA of CA_SELF_SIGNED_CA_RSA_KEY_SIZE, `O=<trust domain>`, CA_SELF_SIGNED_CA_CERT_TTL — and persisted, so
// that a restart signs with the same root. Rotation re-issues the root over the SAME key and subject: every
// certificate signed before or after verifies against either root, so workloads that still hold the old root
// keep trusting new certificates until they pick up the new one.
import crypto, { type KeyObject } from 'node:crypto';
import { type KeyCertBundle, verifiedBundle } from './bundle';
import { CERT_OID, certificatePem, distinguishedName, issueCertificate, KEY_USAGE, parseCertificatesPem } from './pkix/cert';
import { generateKeyPair, MINIMUM_RSA_KEY_SIZE } from './pkix/keys';

export class SelfSignedError extends Error {}

export interface RootOptions {
  /** CA_SELF_SIGNED_CA_CERT_TTL, ms. */
  ttlMs: number;
  /** Subject organization: the mesh trust domain. */
  org: string;
  now?: number;
}

/** A self-signed CA certificate over `key` (Istio's genCertTemplateFromOptions with IsCA, IsSelfSigned). */
export function rootCertificate(key: KeyObject, o: RootOptions): string {
  const now = o.now ?? Date.now();
  const publicKey = crypto.createPublicKey(key);
  return certificatePem(
    issueCertificate({
      publicKey,
      subject: distinguishedName([{ oid: CERT_OID.organization, value: o.org }]),
      notBefore: new Date(now),
      notAfter: new Date(now + o.ttlMs),
      isCA: true,
      keyUsage: [KEY_USAGE.keyCertSign],
      signingKey: key,
    }),
  );
}

/** A new root key (CA_SELF_SIGNED_CA_RSA_KEY_SIZE) and its certificate. */
export async function generateRoot(o: RootOptions & { rsaKeySize: number }): Promise<{ certPem: string; keyPem: string }> {
  if (o.rsaKeySize < MINIMUM_RSA_KEY_SIZE) {
    throw new SelfSignedError(
      `CA_SELF_SIGNED_CA_RSA_KEY_SIZE=${o.rsaKeySize}: requested key size does not meet the minimum required size of ${MINIMUM_RSA_KEY_SIZE} (requested: ${o.rsaKeySize})`,
    );
  }
  const pair = await generateKeyPair({ kind: 'rsa', bits: o.rsaKeySize });
  return { certPem: rootCertificate(pair.privateKey, o), keyPem: pair.privateKeyPem };
}

/**
 * The rotated root: same key, same organization as the current root (Istio merges the old certificate's
 * options so that nothing else changes), a fresh validity period.
 */
export function rotatedRoot(current: { certPem: string; keyPem: string }, o: RootOptions): string {
  const old = parseCertificatesPem(current.certPem)[0];
  const org = old?.subject.find((a) => a.oid === CERT_OID.organization)?.value;
  return rootCertificate(crypto.createPrivateKey(current.keyPem), { ...o, org: org || o.org });
}

/**
 * Istio's GetWaitTime with CA_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE: how long until the root enters
 * its grace period (the last `percentile` % of its lifetime). 0 when it is due (or expired) now.
 */
export function rootRotationWaitMs(notBefore: Date, notAfter: Date, gracePercentile: number, now: number): number {
  const toExpiry = notAfter.getTime() - now;
  if (toExpiry < 0) return 0;
  const grace = (notAfter.getTime() - notBefore.getTime()) * (gracePercentile / 100);
  return Math.max(0, toExpiry - grace);
}

/** The bundle of a self-signed root: no chain; the trust bundle is the root plus ROOT_CA_DIR/root-cert.pem when present. */
export function selfSignedBundle(stored: { certPem: string; keyPem: string }, where: string, extraRootsPem = '', now = new Date()): KeyCertBundle {
  const rootPem = extraRootsPem ? `${stored.certPem.replace(/\n*$/, '\n')}${extraRootsPem}` : stored.certPem;
  return verifiedBundle(
    { certPem: stored.certPem, keyPem: stored.keyPem, chainPem: '', rootPem },
    { cert: `${where} ca-cert.pem`, key: `${where} ca-key.pem`, chain: `${where} cert-chain.pem`, root: `${where} ca-cert.pem` },
    now,
  );
}
