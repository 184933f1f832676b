// What an operator who can read the daemon's CA directory can do without asking the daemon: read its signing
// material and roots, and issue a client certificate (for meshctl's --cert-dir against :15012). No Istio
// counterpart: istioctl gets its credentials from the cluster; this is the no-cluster path, as Kuma's
// `kumactl generate` works offline from the control plane's signing key.
// The directory is either the self-signed store (./var/lib/mesh/ca: ca-cert.pem is the root, ca-key.pem its
// key) or a plug-in CA's ROOT_CA_DIR (ca-cert.pem, ca-key.pem, cert-chain.pem, root-cert.pem, or the
// kubernetes.io/tls names), told apart as the daemon tells them apart.
import fs from 'node:fs';
import path from 'node:path';
import { CertificateAuthority } from './authority';
import { BundleError, type KeyCertBundle } from './bundle';
import { completeness, loadPluginBundle, PluginCaError, signingFiles } from './plugin';
import { selfSignedBundle } from './selfsigned';
import { CA_CERT_FILE, CA_KEY_FILE, readIfExists } from './store';

export class CaDirectoryError extends Error {}

/** The signing material of a CA directory, verified (key matches certificate, chain reaches a root). */
export function loadCaDirectory(dir: string, now = new Date()): KeyCertBundle {
  if (!fs.existsSync(dir))
    throw new CaDirectoryError(`${dir}: no such directory (the daemon's CA directory is ./var/lib/mesh/ca under its working directory)`);
  const files = signingFiles(dir);
  const c = completeness(files);
  try {
    if (c.complete) return loadPluginBundle(files, now);
    const certPem = readIfExists(path.join(dir, CA_CERT_FILE));
    const keyPem = readIfExists(path.join(dir, CA_KEY_FILE));
    if (certPem === undefined || keyPem === undefined) {
      throw new CaDirectoryError(
        `${dir}: not a CA directory: no ${certPem === undefined ? CA_CERT_FILE : CA_KEY_FILE} (a self-signed CA keeps ${CA_CERT_FILE} and ${CA_KEY_FILE} there; ` +
          `a plug-in CA's ROOT_CA_DIR also has ${c.missing.map((f) => path.basename(f)).join(', ')})`,
      );
    }
    return selfSignedBundle({ certPem, keyPem }, dir, '', now);
  } catch (e) {
    if (e instanceof PluginCaError || e instanceof BundleError) throw new CaDirectoryError(e.message);
    throw e;
  }
}

export interface ClientCertificate {
  /** key.pem */
  keyPem: string;
  /** cert-chain.pem: the leaf, then the chain up to (not including) the root. */
  certChainPem: string;
  /** root-cert.pem */
  rootCertPem: string;
}

/** A certificate for `identities` (SPIFFE URIs or names) signed by the directory's CA, with a fresh key. */
export async function issueClientCertificate(bundle: KeyCertBundle, identities: readonly string[], ttlMs: number): Promise<ClientCertificate> {
  // The same issuance as the daemon's own serving certificate: server+client auth, a key of the CA's kind.
  const ca = new CertificateAuthority(bundle, { defaultCertTtlMs: ttlMs, maxCertTtlMs: ttlMs });
  const { certChainPem, keyPem } = await ca.genKeyCert(identities, ttlMs);
  return { keyPem, certChainPem, rootCertPem: bundle.rootCertPem };
}
