// The registration authority (EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API, Istio's KubernetesRA): the daemon still
// authenticates every caller and checks the CSR, but the certificate is signed by the orchestrator's
// certificate API for K8S_SIGNER (or CERT_SIGNER_DOMAIN/<the request's CertSigner>). Istio's ValidateCSR
// holds: a CSR may name only the caller's identities, no subject but an empty organization, one URI at most,
// no extension but the subjectAltName.
import * as fs from 'node:fs';
import { formatDurationMs } from '../lib/duration';
import type { OrchClient } from '../config/orch/client';
import { CaError, type SignRequest } from './authority';
import { OrchCsrError, signWithOrchestrator } from './orch-csr';
import { parseCertificatesPem, splitPemCertificates, verifyChain } from './pkix/cert';
import { CsrError, OID, parseCsr } from './pkix/csr';

/** Istio's ra.ExtCAK8s. */
export const EXTERNAL_CA_ORCH = 'ISTIOD_RA_KUBERNETES_API';
/** Istio's DefaultExtCACertDir + root-cert.pem: the external CA's root, mounted by the operator. */
export const EXTERNAL_CA_ROOT_FILE = './etc/external-ca-cert/root-cert.pem';

export interface IssueRequest extends SignRequest {
  /** The request's CertSigner metadata (with CERT_SIGNER_DOMAIN). */
  certSigner?: string;
}

/** What signs workload certificates: the built-in CA or this RA. Chains are leaf first, root bundle last. */
export interface CertificateIssuer {
  issue(csrPem: string, req: IssueRequest): Promise<{ chain: string[]; rootPem: string }>;
}

export interface RaOptions {
  api: OrchClient;
  /** K8S_SIGNER: the signer of requests without a CertSigner. */
  signer: string;
  /** CERT_SIGNER_DOMAIN. */
  signerDomain: string;
  defaultCertTtlMs: number;
  maxCertTtlMs: number;
  /** The external CA's root, when the operator mounted it; else the root at the end of the signed chain. */
  rootCertFile: string;
  timeoutMs?: number;
}

/** Istio's ValidateCSR; undefined when the CSR is acceptable, else why not. */
export function csrProblem(csrPem: string, subjectIds: readonly string[]): string | undefined {
  let csr;
  try {
    csr = parseCsr(csrPem);
  } catch (e) {
    if (e instanceof CsrError) return `failed to parse the CSR: ${e.message}`;
    throw e;
  }
  if (!csr.signatureValid) return 'the CSR signature does not verify with its own public key';
  const ids = [...csr.sans.uris, ...csr.sans.dns, ...csr.sans.ips];
  const foreign = ids.filter((id) => !subjectIds.includes(id));
  if (foreign.length > 0) return `the CSR asks for ${foreign.join(', ')}, which the caller (${subjectIds.join(', ')}) may not have`;
  if (csr.subject.some((a) => !(a.oid === OID.organization && a.value === '')) || csr.subject.length > 1) {
    return 'the CSR has a subject: a workload CSR names its identity only in the subjectAltName';
  }
  if (csr.sans.uris.length > 1) return 'the CSR has more than one URI';
  const other = csr.extensions.filter((e) => e.id !== OID.subjectAltName);
  if (other.length > 0) return `the CSR asks for extensions other than subjectAltName (${other.map((e) => e.id).join(', ')})`;
  return undefined;
}

/** The external CA's root bundle as mounted (Istio's ./etc/external-ca-cert), or '' when there is none. */
export function readExternalRoot(file = EXTERNAL_CA_ROOT_FILE): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

export class OrchRegistrationAuthority implements CertificateIssuer {
  constructor(private readonly o: RaOptions) {}

  /** The root workloads trust: the mounted file's bundle, or '' when the signer's chain must tell. */
  mountedRoot(): string {
    return readExternalRoot(this.o.rootCertFile);
  }

  signerFor(certSigner: string | undefined): string {
    if (certSigner) {
      if (this.o.signerDomain === '') throw new CaError('CERT_GEN_ERROR', `certSignerDomain is required for signer ${certSigner}`);
      return `${this.o.signerDomain}/${certSigner}`;
    }
    return this.o.signer;
  }

  async issue(csrPem: string, req: IssueRequest): Promise<{ chain: string[]; rootPem: string }> {
    const problem = csrProblem(csrPem, req.subjectIds);
    if (problem) throw new CaError('CSR_ERROR', `CSR is not valid for this caller: ${problem}`);
    const requestedMs = req.ttlSeconds * 1000;
    if (requestedMs > this.o.maxCertTtlMs) {
      throw new CaError(
        'TTL_ERROR',
        `requested TTL ${formatDurationMs(requestedMs)} is greater than the max allowed TTL ${formatDurationMs(this.o.maxCertTtlMs)}`,
      );
    }
    const lifetimeMs = req.ttlSeconds <= 0 ? this.o.defaultCertTtlMs : requestedMs;
    const signerName = this.signerFor(req.certSigner);
    let pem: string;
    try {
      pem = await signWithOrchestrator(this.o.api, {
        csrPem,
        signerName,
        expirationSeconds: lifetimeMs / 1000,
        ...(this.o.timeoutMs !== undefined ? { timeoutMs: this.o.timeoutMs } : {}),
      });
    } catch (e) {
      if (e instanceof OrchCsrError) throw new CaError('CERT_GEN_ERROR', e.message);
      throw e;
    }
    const chain = splitPemCertificates(pem);
    const certs = parseCertificatesPem(pem);
    let rootPem = this.mountedRoot();
    if (rootPem === '') {
      const last = certs[certs.length - 1];
      if (!last || certs.length < 2 || !last.x509.checkIssued(last.x509)) {
        throw new CaError(
          'CSR_ERROR',
          `failed to find the root certificate of signer ${signerName}: mount it as ${this.o.rootCertFile}, or have the signer return its chain up to the root`,
        );
      }
      rootPem = chain.pop()!;
    }
    const roots = parseCertificatesPem(rootPem);
    const why = verifyChain(certs[0]!, certs.slice(1), roots, new Date());
    if (why) throw new CaError('CSR_ERROR', `the certificate signer ${signerName} issued does not verify against its root: ${why}`);
    return { chain, rootPem };
  }
}
