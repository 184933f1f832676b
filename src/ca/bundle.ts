// The CA's signing material (Istio's KeyCertBundle): the signing certificate and key, the chain from the
// signing certificate up to (not always including) the root, and the trust bundle of roots. A bundle is only
// ever built verified — key matches certificate, certificate chains to a root — so a bad plug-in file or a
// corrupt stored secret is refused with the name of what is wrong, and the last good bundle keeps signing.
import crypto, { type KeyObject } from 'node:crypto';
import { keyMatchesCertificate, parseCertificatesPem, type ParsedCertificate, verifyChain } from './pkix/cert';

export class BundleError extends Error {}

export interface KeyCertBundle {
  signingCert: ParsedCertificate;
  signingKey: KeyObject;
  /** PEM of the signing certificate (ca-cert.pem). */
  signingCertPem: string;
  /** PEM of the signing key, as stored. */
  signingKeyPem: string;
  /** cert-chain.pem: empty for a self-signed root. */
  certChainPem: string;
  /** root-cert.pem: the trust anchors, one or more. */
  rootCertPem: string;
  roots: ParsedCertificate[];
}

/** Where each part came from, for messages (`ca-cert.pem`, `secret mesh-system/mesh-ca-secret ca-key.pem`…). */
export interface BundleSources {
  cert: string;
  key: string;
  chain: string;
  root: string;
}

export interface BundlePem {
  certPem: string;
  keyPem: string;
  chainPem: string;
  rootPem: string;
}

/** Istio's NewVerifiedKeyCertBundleFromPem; errors name the file (or secret key) at fault. */
export function verifiedBundle(pem: BundlePem, from: BundleSources, now = new Date()): KeyCertBundle {
  let certs: ParsedCertificate[];
  try {
    certs = parseCertificatesPem(pem.certPem);
  } catch (e) {
    throw new BundleError(`${from.cert}: ${(e as Error).message}`);
  }
  const cert = certs[0];
  if (!cert) throw new BundleError(`${from.cert}: no PEM certificate found`);
  let roots: ParsedCertificate[];
  try {
    roots = parseCertificatesPem(pem.rootPem);
  } catch (e) {
    throw new BundleError(`${from.root}: ${(e as Error).message}`);
  }
  if (roots.length === 0) throw new BundleError(`${from.root}: no PEM certificate found`);
  let chain: ParsedCertificate[];
  try {
    chain = parseCertificatesPem(pem.chainPem);
  } catch (e) {
    throw new BundleError(`${from.chain}: ${(e as Error).message}`);
  }
  let key: KeyObject;
  try {
    key = crypto.createPrivateKey(pem.keyPem);
  } catch (e) {
    throw new BundleError(`${from.key}: failed to parse private key PEM: ${(e as Error).message}`);
  }
  const why = verifyChain(cert, [...certs.slice(1), ...chain], roots, now);
  if (why) {
    throw new BundleError(`${from.cert}: cannot verify the cert with the provided root chain and cert pool (${from.root}, ${from.chain}): ${why}`);
  }
  if (!keyMatchesCertificate(key, cert)) throw new BundleError(`${from.key} does not match ${from.cert}: the cert does not match the key`);
  return {
    signingCert: cert,
    signingKey: key,
    signingCertPem: pem.certPem,
    signingKeyPem: pem.keyPem,
    certChainPem: pem.chainPem,
    rootCertPem: pem.rootPem,
    roots,
  };
}

/** Expiry of the first root (what ca_server_root_cert_expiry_* report). */
export function rootExpiry(b: KeyCertBundle): Date {
  return b.roots[0]!.notAfter;
}

/** Expiry of the first certificate of the chain, or undefined for a self-signed CA (no chain). */
export function chainExpiry(b: KeyCertBundle): Date | undefined {
  const first = parseCertificatesPem(b.certChainPem)[0];
  return first?.notAfter;
}
