// The certificate authority (Istio's IstioCA): signs workload CSRs with the current bundle, applying
// DEFAULT_WORKLOAD_CERT_TTL / MAX_WORKLOAD_CERT_TTL as Istio does, and issues the daemon's own serving
// certificate. Identities always come from the caller (subjectIds); the CSR contributes only its public key
// and, when it has a common name, the dual-use request for one.
import { status } from '@grpc/grpc-js';
import { type KeyObject } from 'node:crypto';
import { formatDurationMs } from '../lib/duration';
import { chainExpiry, type KeyCertBundle } from './bundle';
import { classifyIdentity, certificatePem, CERT_OID, csrPublicKeyDer, distinguishedName, issueCertificate, KEY_USAGE } from './pkix/cert';
import { fromPem } from './pkix/der';
import { CsrError, parseCsr } from './pkix/csr';
import { generateKeyPair, type KeySpec } from './pkix/keys';

/** Istio's caerror types, which label ca_server_csr_sign_err_count{error}. */
export type CaErrorType = 'CA_NOT_READY' | 'CSR_ERROR' | 'TTL_ERROR' | 'CERT_GEN_ERROR';

const GRPC_CODE: Readonly<Record<CaErrorType, status>> = {
  CA_NOT_READY: status.INTERNAL,
  CSR_ERROR: status.INVALID_ARGUMENT,
  TTL_ERROR: status.INVALID_ARGUMENT,
  CERT_GEN_ERROR: status.INTERNAL,
};

export class CaError extends Error {
  constructor(
    readonly type: CaErrorType,
    message: string,
  ) {
    super(message);
  }
  get grpcCode(): status {
    return GRPC_CODE[this.type];
  }
}

/** Certificates are valid from this long before issuance, for clock skew between CA and workloads. */
export const CLOCK_SKEW_GRACE_MS = 2 * 60_000;
/** X.509 ub-common-name. */
const MAX_CN_LENGTH = 64;

export interface CertificateAuthorityOptions {
  /** DEFAULT_WORKLOAD_CERT_TTL, ms. */
  defaultCertTtlMs: number;
  /** MAX_WORKLOAD_CERT_TTL, ms. */
  maxCertTtlMs: number;
  now?: () => number;
}

export interface SignRequest {
  /** The caller's identities: they become the subjectAltName, in order. */
  subjectIds: readonly string[];
  /** Requested lifetime in seconds; non-positive = the default. */
  ttlSeconds: number;
}

export class CertificateAuthority {
  private current: KeyCertBundle;
  private readonly now: () => number;

  constructor(
    bundle: KeyCertBundle,
    readonly options: CertificateAuthorityOptions,
  ) {
    this.current = bundle;
    this.now = options.now ?? Date.now;
  }

  get bundle(): KeyCertBundle {
    return this.current;
  }

  /** Swaps in new signing material (plug-in reload, root rotation); signing continues with it at once. */
  setBundle(bundle: KeyCertBundle): void {
    this.current = bundle;
    this.chainEndOf = undefined;
  }

  private chainEndOf: { bundle: KeyCertBundle; end: Date | undefined } | undefined;
  /** The chain's expiry, read once per bundle (parsing certificates costs as much as signing). */
  private chainEnd(): Date | undefined {
    if (this.chainEndOf?.bundle !== this.current) this.chainEndOf = { bundle: this.current, end: chainExpiry(this.current) };
    return this.chainEndOf.end;
  }

  /**
   * Istio's minTTL: a workload certificate asked for without a TTL gets DEFAULT_WORKLOAD_CERT_TTL, but
   * never more than the signing chain has left.
   */
  defaultTtlMs(): number {
    const chainEnd = this.chainEnd();
    if (!chainEnd) return this.options.defaultCertTtlMs;
    return Math.min(this.options.defaultCertTtlMs, chainEnd.getTime() - this.now());
  }

  /** Signs a PEM CSR for a workload; returns the leaf certificate PEM. Throws CaError. */
  sign(csrPem: string, req: SignRequest): string {
    return this.signWith(csrPem, req, true);
  }

  private signWith(csrPem: string, req: SignRequest, checkLifetime: boolean): string {
    let csr;
    try {
      csr = parseCsr(csrPem);
    } catch (e) {
      if (e instanceof CsrError) {
        const detail = /no PEM block/.test(e.message)
          ? 'certificate signing request is not properly encoded'
          : `failed to parse X.509 certificate signing request: ${e.message}`;
        throw new CaError('CSR_ERROR', detail);
      }
      throw e;
    }
    if (!csr.signatureValid) throw new CaError('CSR_ERROR', 'the CSR signature does not verify with its own public key');
    const requestedMs = req.ttlSeconds * 1000;
    const lifetimeMs = req.ttlSeconds <= 0 ? this.defaultTtlMs() : requestedMs;
    if (checkLifetime && requestedMs > this.options.maxCertTtlMs) {
      throw new CaError(
        'TTL_ERROR',
        `requested TTL ${formatDurationMs(requestedMs)} is greater than the max allowed TTL ${formatDurationMs(this.options.maxCertTtlMs)}`,
      );
    }
    const commonName = csr.subject.some((a) => a.oid === CERT_OID.commonName && a.value !== '') ? req.subjectIds[0] : undefined;
    const spki = csrPublicKeyDer(fromPem(csrPem, 'CERTIFICATE REQUEST')[0]!);
    return this.issue(
      csr.publicKey,
      req.subjectIds,
      lifetimeMs,
      commonName !== undefined && commonName.length <= MAX_CN_LENGTH ? commonName : undefined,
      spki,
    );
  }

  private issue(publicKey: KeyObject, subjectIds: readonly string[], lifetimeMs: number, commonName?: string, publicKeyDer?: Buffer): string {
    const b = this.current;
    const now = this.now();
    const signerEnd = b.signingCert.notAfter.getTime();
    if (now >= signerEnd) throw new CaError('CERT_GEN_ERROR', `signing certificate has expired at ${b.signingCert.notAfter.toISOString()}`);
    // A leaf never outlives the certificate that signed it.
    const notAfter = Math.min(now + lifetimeMs, signerEnd);
    let der: Buffer;
    try {
      der = issueCertificate({
        publicKey,
        publicKeyDer,
        subject: distinguishedName(commonName ? [{ oid: CERT_OID.commonName, value: commonName }] : []),
        notBefore: new Date(now - CLOCK_SKEW_GRACE_MS),
        notAfter: new Date(notAfter),
        isCA: false,
        keyUsage: [KEY_USAGE.digitalSignature, KEY_USAGE.keyEncipherment],
        extKeyUsage: [CERT_OID.serverAuth, CERT_OID.clientAuth],
        sans: subjectIds.map(classifyIdentity),
        issuer: b.signingCert,
        signingKey: b.signingKey,
      });
    } catch (e) {
      throw new CaError('CERT_GEN_ERROR', `failed to generate the certificate: ${(e as Error).message}`);
    }
    return certificatePem(der);
  }

  /**
   * A key and certificate for the daemon's own TLS listeners (Istio's GenKeyCert): DNS SANs for `hosts`, a
   * key of the CA key's kind (RSA 2048, or ECDSA on the CA's curve), the chain up to the signing certificate.
   * No MAX_WORKLOAD_CERT_TTL check: the serving certificate lives as long as the signing certificate allows.
   */
  async genKeyCert(hosts: readonly string[], ttlMs: number): Promise<{ certChainPem: string; keyPem: string }> {
    const key = this.current.signingKey;
    const spec: KeySpec =
      key.asymmetricKeyType === 'ec'
        ? { kind: 'ec', curve: key.asymmetricKeyDetails?.namedCurve === 'secp384r1' ? 'P384' : 'P256' }
        : { kind: 'rsa', bits: 2048 };
    const pair = await generateKeyPair(spec);
    const leaf = this.issue(pair.publicKey, hosts, ttlMs);
    return { certChainPem: leaf + this.current.certChainPem, keyPem: pair.privateKeyPem };
  }
}
