// Server TLS material for the TLS gRPC listener and the HTTPS webhook listener: from --tlsCertFile/
// --tlsKeyFile/--caCertFile and --tls-cipher-suites, or issued by the daemon's own CA (and then replaced when
// the CA's root or signing certificate changes), with COMPLIANCE_POLICY applied over either.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { complianceTlsOptions, type CompliancePolicy, CompliancePolicyError, parseCompliancePolicy } from '../lib/compliance';

export class TlsConfigError extends Error {}

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caCertFile: string;
}

export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  /** Client CA bundle (--caCertFile); client certificates are verified against it when presented. */
  ca?: Buffer;
  /** OpenSSL cipher list for Node's `ciphers`; undefined = Node's defaults. */
  ciphers?: string;
  /** TLS versions; undefined = TLSv1.2 up to Node's maximum. */
  minVersion?: 'TLSv1.2' | 'TLSv1.3';
  maxVersion?: 'TLSv1.2' | 'TLSv1.3';
  /** ECDH groups (OpenSSL names); undefined = Node's defaults. */
  ecdhCurve?: string;
  /** The files it came from, for log lines; absent when the daemon's CA issued it. */
  files?: TlsFiles;
}

/** TLS material that may be replaced while the listeners run (a re-issued serving certificate, new roots). */
export interface TlsSource {
  current(): TlsMaterial;
  /** Called after every change; returns the unsubscribe function. */
  subscribe(fn: () => void): () => void;
}

export class MutableTlsSource implements TlsSource {
  private readonly listeners = new Set<() => void>();
  constructor(private material: TlsMaterial) {}
  current(): TlsMaterial {
    return this.material;
  }
  set(material: TlsMaterial): void {
    this.material = material;
    for (const fn of this.listeners) fn();
  }
  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }
}

export function staticTlsSource(material: TlsMaterial): TlsSource {
  return new MutableTlsSource(material);
}

/** Node's secure-context options for a server with this material. */
export function secureContextOptions(m: TlsMaterial): {
  cert: Buffer;
  key: Buffer;
  ca?: Buffer;
  ciphers?: string;
  minVersion: 'TLSv1.2' | 'TLSv1.3';
  maxVersion?: 'TLSv1.2' | 'TLSv1.3';
  ecdhCurve?: string;
} {
  return {
    cert: m.cert,
    key: m.key,
    ca: m.ca,
    ciphers: m.ciphers,
    minVersion: m.minVersion ?? 'TLSv1.2',
    maxVersion: m.maxVersion,
    ecdhCurve: m.ecdhCurve,
  };
}

/** COMPLIANCE_POLICY over whatever else was configured (Istio's EnforceGoCompliance, applied last). */
export function enforceCompliance(m: TlsMaterial, policy: string): TlsMaterial {
  return { ...m, ...complianceTlsOptions(checkCompliancePolicy(policy)) } as TlsMaterial;
}

/** An unknown COMPLIANCE_POLICY is a start-up error: running without the restrictions asked for would be worse. */
export function checkCompliancePolicy(policy: string): CompliancePolicy {
  try {
    return parseCompliancePolicy(policy);
  } catch (e) {
    if (e instanceof CompliancePolicyError) throw new TlsConfigError(e.message);
    throw e;
  }
}

// Go's names (what --tls-cipher-suites accepts) → OpenSSL's. TLS 1.3 suites keep their IANA names.
const OPENSSL_NAME: Readonly<Record<string, string>> = {
  TLS_AES_128_GCM_SHA256: 'TLS_AES_128_GCM_SHA256',
  TLS_AES_256_GCM_SHA384: 'TLS_AES_256_GCM_SHA384',
  TLS_CHACHA20_POLY1305_SHA256: 'TLS_CHACHA20_POLY1305_SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: 'ECDHE-ECDSA-AES128-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: 'ECDHE-ECDSA-AES128-GCM-SHA256',
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: 'ECDHE-ECDSA-AES256-SHA',
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: 'ECDHE-ECDSA-AES256-GCM-SHA384',
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-ECDSA-CHACHA20-POLY1305',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: 'ECDHE-RSA-AES128-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: 'ECDHE-RSA-AES128-GCM-SHA256',
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: 'ECDHE-RSA-AES256-SHA',
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: 'ECDHE-RSA-AES256-GCM-SHA384',
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: 'ECDHE-RSA-CHACHA20-POLY1305',
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: 'ECDHE-ECDSA-AES128-SHA256',
  TLS_ECDHE_ECDSA_WITH_RC4_128_SHA: 'ECDHE-ECDSA-RC4-SHA',
  TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA: 'ECDHE-RSA-DES-CBC3-SHA',
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: 'ECDHE-RSA-AES128-SHA256',
  TLS_ECDHE_RSA_WITH_RC4_128_SHA: 'ECDHE-RSA-RC4-SHA',
  TLS_RSA_WITH_3DES_EDE_CBC_SHA: 'DES-CBC3-SHA',
  TLS_RSA_WITH_AES_128_CBC_SHA: 'AES128-SHA',
  TLS_RSA_WITH_AES_128_CBC_SHA256: 'AES128-SHA256',
  TLS_RSA_WITH_AES_128_GCM_SHA256: 'AES128-GCM-SHA256',
  TLS_RSA_WITH_AES_256_CBC_SHA: 'AES256-SHA',
  TLS_RSA_WITH_AES_256_GCM_SHA384: 'AES256-GCM-SHA384',
  TLS_RSA_WITH_RC4_128_SHA: 'RC4-SHA',
};

const TLS13_SUITES = ['TLS_AES_128_GCM_SHA256', 'TLS_AES_256_GCM_SHA384', 'TLS_CHACHA20_POLY1305_SHA256'];

/**
 * The OpenSSL cipher list for Go cipher-suite names. Go's CipherSuites only restricts TLS 1.0–1.2 and always
 * offers its TLS 1.3 suites, so the 1.3 suites are always kept here too. Empty input = undefined (defaults).
 */
export function opensslCiphers(goNames: readonly string[]): string | undefined {
  if (goNames.length === 0) return undefined;
  const out: string[] = [];
  for (const name of goNames) {
    const mapped = OPENSSL_NAME[name];
    if (!mapped) throw new TlsConfigError(`--tls-cipher-suites: unknown cipher suite ${name}`);
    if (!TLS13_SUITES.includes(mapped)) out.push(mapped);
  }
  return [...out, ...TLS13_SUITES].join(':');
}

function readFlagFile(flag: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'ENOENT' ? 'no such file or directory' : err.code === 'EACCES' ? 'permission denied' : err.message;
    throw new TlsConfigError(`--${flag} ${file}: open ${file}: ${why}`);
  }
}

/**
 * Reads and checks the server certificate material. Undefined when neither --tlsCertFile nor --tlsKeyFile
 * is given (the listeners that need it are then not started); an error when only one is, when a file
 * cannot be read, or when the key does not match the certificate.
 */
export function loadTlsMaterial(files: TlsFiles, cipherSuites: readonly string[]): TlsMaterial | undefined {
  if (!files.certFile && !files.keyFile) return undefined;
  if (!files.certFile) throw new TlsConfigError(`--tlsKeyFile ${files.keyFile} given without --tlsCertFile`);
  if (!files.keyFile) throw new TlsConfigError(`--tlsCertFile ${files.certFile} given without --tlsKeyFile`);
  const cert = readFlagFile('tlsCertFile', files.certFile);
  const key = readFlagFile('tlsKeyFile', files.keyFile);
  const ca = files.caCertFile ? readFlagFile('caCertFile', files.caCertFile) : undefined;
  const ciphers = opensslCiphers(cipherSuites);
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new TlsConfigError(`--tlsCertFile ${files.certFile} / --tlsKeyFile ${files.keyFile}: ${(e as Error).message}`);
  }
  if (ca) {
    // OpenSSL silently skips PEM blocks that are not certificates; Go refuses a bundle without any.
    if (!ca.toString('latin1').includes('-----BEGIN CERTIFICATE-----')) {
      throw new TlsConfigError(`--caCertFile ${files.caCertFile}: no PEM certificate found`);
    }
    try {
      new X509Certificate(ca);
      createSecureContext({ ca });
    } catch (e) {
      throw new TlsConfigError(`--caCertFile ${files.caCertFile}: ${(e as Error).message}`);
    }
  }
  if (ciphers) {
    try {
      createSecureContext({ ciphers });
    } catch (e) {
      throw new TlsConfigError(`--tls-cipher-suites: ${(e as Error).message}`);
    }
  }
  return { cert, key, ca, ciphers, files };
}
