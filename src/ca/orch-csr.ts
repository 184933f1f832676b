// Certificates from the orchestrator's certificate API (certificates.k8s.io/v1 CertificateSigningRequest), as
// Istio's chiron.SignCSRK8s: create the request for a signer, approve it (the daemon is the registration
// authority: it has already checked who asks), wait for the signer to fill status.certificate, then delete
// the request. The signer is whatever serves that signerName in the cluster (cert-manager, a cloud CA…).
import { ipFamily } from '../lib/ip';
import type { OrchClient } from '../config/orch/client';
import { parseCertificatesPem, splitPemCertificates } from './pkix/cert';
import { createCsrPem } from './pkix/csr';
import { generateKeyPair } from './pkix/keys';
import { registerScope } from '../lib/log';

const log = registerScope('pkira', 'meshd RA log');

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

/** Istio's key usages for workload and serving certificates. */
export const MESH_CSR_USAGES = ['digital signature', 'key encipherment', 'server auth', 'client auth'] as const;

export class OrchCsrError extends Error {}

export interface OrchCsrRequest {
  csrPem: string;
  signerName: string;
  usages?: readonly string[];
  /** spec.expirationSeconds (the signer may honour it); omitted when undefined or ≤ 0. */
  expirationSeconds?: number;
  /** How long to wait for the signer (Istio: 60 s). */
  timeoutMs?: number;
  pollMs?: number;
  /** Name prefix of the request object. */
  namePrefix?: string;
}

interface CsrObject {
  metadata?: { name?: string };
  status?: { certificate?: string; conditions?: Array<{ type?: string; status?: string; reason?: string; message?: string }> };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Returns the PEM chain the signer issued (leaf first). Throws OrchCsrError naming the request and the signer. */
export async function signWithOrchestrator(api: OrchClient, r: OrchCsrRequest): Promise<string> {
  const spec: Record<string, unknown> = {
    request: Buffer.from(r.csrPem).toString('base64'),
    signerName: r.signerName,
    usages: [...(r.usages ?? MESH_CSR_USAGES)],
  };
  // The API's minimum is 600 s; a shorter wish is rounded up rather than refused.
  if (r.expirationSeconds !== undefined && r.expirationSeconds > 0) spec['expirationSeconds'] = Math.max(600, Math.round(r.expirationSeconds));
  let created: CsrObject;
  try {
    created = (await api.request('POST', CSR_PATH, {
      body: {
        apiVersion: 'certificates.k8s.io/v1',
        kind: 'CertificateSigningRequest',
        metadata: { generateName: r.namePrefix ?? 'csr-workload-' },
        spec,
      },
    })) as CsrObject;
  } catch (e) {
    throw new OrchCsrError(`failed to create a CertificateSigningRequest for signer ${r.signerName}: ${(e as Error).message}`);
  }
  const name = created.metadata?.name;
  if (!name) throw new OrchCsrError(`the API server created a CertificateSigningRequest without a name`);
  try {
    try {
      await api.request('PUT', `${CSR_PATH}/${name}/approval`, {
        body: {
          apiVersion: 'certificates.k8s.io/v1',
          kind: 'CertificateSigningRequest',
          metadata: created.metadata,
          spec,
          status: {
            conditions: [{ type: 'Approved', status: 'True', reason: 'MeshdApproved', message: 'approved by meshd, the registration authority' }],
          },
        },
      });
    } catch (e) {
      throw new OrchCsrError(`failed to approve CertificateSigningRequest ${name}: ${(e as Error).message}`);
    }
    const deadline = Date.now() + (r.timeoutMs ?? 60_000);
    let wait = r.pollMs ?? 50;
    for (;;) {
      const o = (await api.request('GET', `${CSR_PATH}/${name}`)) as CsrObject;
      const failed = o.status?.conditions?.find((c) => (c.type === 'Denied' || c.type === 'Failed') && c.status === 'True');
      if (failed)
        throw new OrchCsrError(
          `CertificateSigningRequest ${name} for signer ${r.signerName} ${failed.type === 'Denied' ? 'was denied' : 'failed'}: ${failed.reason ?? ''} ${failed.message ?? ''}`.trimEnd(),
        );
      if (o.status?.certificate) {
        const pem = Buffer.from(o.status.certificate, 'base64').toString('utf8');
        if (!pem.includes('-----BEGIN CERTIFICATE-----'))
          throw new OrchCsrError(`CertificateSigningRequest ${name}: status.certificate is not a PEM certificate`);
        return pem;
      }
      if (Date.now() >= deadline) {
        throw new OrchCsrError(
          `timed out after ${Math.round((r.timeoutMs ?? 60_000) / 1000)}s waiting for signer ${r.signerName} to issue CertificateSigningRequest ${name}: is a signer for it running?`,
        );
      }
      await sleep(wait);
      wait = Math.min(wait * 2, 1000);
    }
  } finally {
    // Istio deletes the request once read (or given up): they hold no secret but pile up otherwise.
    api
      .request('DELETE', `${CSR_PATH}/${name}`)
      .catch((e: unknown) => log.warn(`failed to delete CertificateSigningRequest ${name}: ${(e as Error).message}`));
  }
}

/** A key and a certificate for `dnsNames` from `signerName` (Istio's chiron.GenKeyCertK8sCA, RSA 2048). */
export async function orchServingCertificate(
  api: OrchClient,
  o: { signerName: string; dnsNames: readonly string[]; ttlMs: number; mountedRootPem: string; timeoutMs?: number },
): Promise<{ certChainPem: string; keyPem: string; rootPem: string; notAfter: Date }> {
  const pair = await generateKeyPair({ kind: 'rsa', bits: 2048 });
  const dns: string[] = [];
  const ips: string[] = [];
  for (const n of o.dnsNames) (ipFamily(n) ? ips : dns).push(n);
  const csrPem = createCsrPem({ privateKey: pair.privateKey, sans: { dns, ips } });
  const pem = await signWithOrchestrator(api, {
    csrPem,
    signerName: o.signerName,
    expirationSeconds: o.ttlMs / 1000,
    namePrefix: 'csr-meshd-',
    ...(o.timeoutMs !== undefined ? { timeoutMs: o.timeoutMs } : {}),
  });
  const chain = splitPemCertificates(pem);
  const certs = parseCertificatesPem(pem);
  let rootPem = o.mountedRootPem;
  const last = certs[certs.length - 1]!;
  if (certs.length > 1 && last.x509.checkIssued(last.x509)) {
    chain.pop();
    if (rootPem === '') rootPem = splitPemCertificates(pem).pop()!;
  }
  if (rootPem === '')
    throw new OrchCsrError(`signer ${o.signerName} returned no root certificate and none is mounted: the daemon cannot tell clients what to trust`);
  return { certChainPem: chain.join(''), keyPem: pair.privateKeyPem, rootPem, notAfter: certs[0]!.notAfter };
}
