// A plug-in CA from ROOT_CA_DIR (Istio's /etc/cacerts, the `cacerts` Secret mounted): the operator's
// intermediate signs workload certificates. Istio's two layouts are read — ca-cert.pem, ca-key.pem,
// cert-chain.pem, root-cert.pem, or a kubernetes.io/tls Secret's tls.crt, tls.key, ca.crt. A partial set, a
// key that is not the certificate's, or a certificate that does not chain to the root stops the daemon with
// the file named; a later change is verified the same way and, when good, replaces the signing material.
import fs from 'node:fs';
import path from 'node:path';
import { BundleError, type KeyCertBundle, verifiedBundle } from './bundle';
import { parseCertificatesPem } from './pkix/cert';
import { CA_CERT_FILE, CA_KEY_FILE, CERT_CHAIN_FILE, ROOT_CERT_FILE } from './store';

export const TLS_CERT_FILE = 'tls.crt';
export const TLS_KEY_FILE = 'tls.key';
export const TLS_ROOT_FILE = 'ca.crt';
/** Marks a `cacerts` Secret the daemon generated itself (Istio: istio-generated). */
export const GENERATED_MARKER = 'mesh-generated';

export interface SigningFiles {
  signingCert: string;
  signingKey: string;
  certChain: string[];
  rootCert: string;
  /** The kubernetes.io/tls layout. */
  tlsLayout: boolean;
}

/** Istio's detectSigningCABundleAndCRL: the tls.crt layout when tls.crt exists, else Istio's own names. */
export function signingFiles(dir: string, exists: (f: string) => boolean = fs.existsSync): SigningFiles {
  const tls = path.join(dir, TLS_CERT_FILE);
  if (exists(tls)) {
    return {
      signingCert: tls,
      signingKey: path.join(dir, TLS_KEY_FILE),
      certChain: [tls, path.join(dir, TLS_ROOT_FILE)],
      rootCert: path.join(dir, TLS_ROOT_FILE),
      tlsLayout: true,
    };
  }
  return {
    signingCert: path.join(dir, CA_CERT_FILE),
    signingKey: path.join(dir, CA_KEY_FILE),
    certChain: [path.join(dir, CERT_CHAIN_FILE)],
    rootCert: path.join(dir, ROOT_CERT_FILE),
    tlsLayout: false,
  };
}

export interface Completeness {
  /** Every file is there: the plug-in CA is used. */
  complete: boolean;
  /** Some file is there. */
  any: boolean;
  missing: string[];
}

/** Istio's checkCABundleCompleteness, also saying which files are missing. */
export function completeness(files: SigningFiles, exists: (f: string) => boolean = fs.existsSync): Completeness {
  const checks: Array<[string, boolean]> = [
    [files.signingKey, exists(files.signingKey)],
    [files.signingCert, exists(files.signingCert)],
    [files.rootCert, exists(files.rootCert)],
    [files.certChain.join(' or '), files.certChain.some((f) => exists(f))],
  ];
  const missing = checks.filter(([, ok]) => !ok).map(([f]) => f);
  return { complete: missing.length === 0, any: checks.some(([, ok]) => ok), missing };
}

export class PluginCaError extends Error {}

function read(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new PluginCaError(`${file}: ${(e as Error).message}`);
  }
}

/** Reads and verifies the plug-in material (Istio's NewPluggedCertIstioCAOptions). */
export function loadPluginBundle(files: SigningFiles, now = new Date()): KeyCertBundle {
  const certPem = read(files.signingCert);
  const keyPem = read(files.signingKey);
  const chainPem = files.certChain
    .filter((f) => fs.existsSync(f))
    .map(read)
    .join('');
  const rootPem = read(files.rootCert);
  let bundle: KeyCertBundle;
  try {
    bundle = verifiedBundle(
      { certPem, keyPem, chainPem, rootPem },
      { cert: files.signingCert, key: files.signingKey, chain: files.certChain.join(' + '), root: files.rootCert },
      now,
    );
  } catch (e) {
    if (e instanceof BundleError) throw new PluginCaError(e.message);
    throw e;
  }
  if (!bundle.signingCert.isCA)
    throw new PluginCaError(`${files.signingCert}: certificate is not authorized to sign other certificates (basicConstraints CA:TRUE is missing)`);
  return bundle;
}

/** DER bytes of each certificate of a PEM bundle. */
function derSet(pem: string): Set<string> {
  try {
    return new Set(parseCertificatesPem(pem).map((c) => c.der.toString('base64')));
  } catch {
    return new Set();
  }
}

/** Istio's pemBundleHasSubsetRelation: one root bundle is a subset of the other (roots added or retired). */
export function rootsSubsetRelated(a: string, b: string): boolean {
  const sa = derSet(a);
  const sb = derSet(b);
  if (sa.size === 0 || sb.size === 0) return false;
  const within = (x: Set<string>, y: Set<string>) => [...x].every((c) => y.has(c));
  return within(sa, sb) || within(sb, sa);
}

/** Whether a changed root-cert.pem may replace the current one (MESH_MULTIROOT_MESH). */
export function rootChangeAllowed(current: string, next: string, multiRoot: boolean): { ok: true } | { ok: false; reason: string } {
  if (derSet(current).size === derSet(next).size && rootsSubsetRelated(current, next)) return { ok: true };
  if (!multiRoot) return { ok: false, reason: 'Multi root is disabled (MESH_MULTIROOT_MESH=false), updating new ROOT-CA not supported' };
  if (!rootsSubsetRelated(current, next))
    return { ok: false, reason: 'Updating new ROOT-CA not supported: the new root bundle neither contains nor is contained in the current one' };
  return { ok: true };
}
