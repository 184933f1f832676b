// The CA service: istio.v1.auth.IstioCertificateService/CreateCertificate (Istio's security/pkg/server/ca
// server.go). The caller is authenticated by the daemon's chain; the certificate names the caller's
// identities — or, for a trusted node proxy, the one identity it may impersonate — and never what the CSR
// asks for. The answer is the leaf, the chain, then the whole root bundle as the last element.
import * as grpc from '@grpc/grpc-js';
import type { JsonObject } from '@bufbuild/protobuf';
import { create } from '@bufbuild/protobuf';
import {
  IstioCertificateResponseSchema,
  IstioCertificateService,
  type IstioCertificateRequest,
  type IstioCertificateResponse,
} from '../gen/security/v1alpha1/ca_pb';
import { registerScope } from '../lib/log';
import { addGrpcService } from '../lib/xds/grpc';
import { CaError, type CertificateAuthority } from './authority';
import type { CertificateIssuer } from './ra';
import { grpcAuthRequest } from './authn/grpc';
import type { NodeAuthorizer } from './authn/node-authorizer';
import { authenticate, type AuthGate, type Authenticator, type AuthRequest } from './authn/types';
import { authnFailureCount, certSignErrorCount, csrCount, csrParsingErrorCount, idExtractionErrorCount, successCount } from './metrics';
import { splitPemCertificates } from './pkix/cert';

const log = registerScope('serverca', 'CA server log');

/** Request metadata keys (Istio's security.ImpersonatedIdentity / CertSigner). */
export const IMPERSONATED_IDENTITY = 'ImpersonatedIdentity';
export const CERT_SIGNER = 'CertSigner';

/** The built-in CA as an issuer: its leaf, its chain, its root bundle. */
export function caIssuer(ca: CertificateAuthority): CertificateIssuer {
  return {
    issue: async (csrPem, req) => {
      const bundle = ca.bundle;
      const leaf = ca.sign(csrPem, req);
      return { chain: splitPemCertificates(leaf + bundle.certChainPem), rootPem: bundle.rootCertPem };
    },
  };
}

export interface CaServiceOptions {
  /** The built-in CA (caIssuer) or the registration authority. */
  issuer: CertificateIssuer;
  /** The chain, in Istio's order; read per call so that authenticators added after start apply. */
  authenticators: () => readonly Authenticator[];
  gate: AuthGate;
  /** CA_TRUSTED_NODE_ACCOUNTS; absent = impersonation is refused. */
  nodeAuthorizer?: NodeAuthorizer;
}

export type CreateCertificateResult = { ok: true; response: IstioCertificateResponse } | { ok: false; code: grpc.status; message: string };

function metadataString(m: JsonObject | undefined, key: string): string {
  const v = m?.[key];
  return typeof v === 'string' ? v : '';
}

/** Seconds from the proto's int64, bounded so that a huge value is rejected by the TTL check, not wrapped. */
function ttlSeconds(v: bigint): number {
  const max = BigInt(Number.MAX_SAFE_INTEGER);
  return Number(v > max ? max : v < -max ? -max : v);
}

/** One CreateCertificate call, transport-independent. */
export async function createCertificate(o: CaServiceOptions, req: IstioCertificateRequest, auth: AuthRequest): Promise<CreateCertificateResult> {
  csrCount.inc();
  const outcome = await authenticate(o.authenticators(), auth, o.gate);
  if (outcome.kind !== 'authenticated') {
    authnFailureCount.inc();
    if (outcome.kind === 'failed') {
      if (outcome.idExtraction) idExtractionErrorCount.inc();
      log.warn(`Failed to authenticate client from ${auth.remoteAddress}: ${outcome.failures.join('; ')}`);
    } else {
      log.warn(
        `Failed to authenticate client from ${auth.remoteAddress}: ${auth.secure ? 'XDS_AUTH is false' : 'plaintext connection and XDS_AUTH_PLAINTEXT is false'}`,
      );
    }
    return { ok: false, code: grpc.status.UNAUTHENTICATED, message: 'request authenticate failure' };
  }
  const caller = outcome.caller;
  let sans = caller.identities;
  const impersonated = metadataString(req.metadata, IMPERSONATED_IDENTITY);
  if (impersonated !== '') {
    if (!o.nodeAuthorizer) {
      authnFailureCount.inc();
      log.warn(`impersonation not allowed, as node authorizer (CA_TRUSTED_NODE_ACCOUNTS) is not configured`, { client: auth.remoteAddress });
      return { ok: false, code: grpc.status.UNAUTHENTICATED, message: 'request impersonation authentication failure' };
    }
    try {
      await o.nodeAuthorizer.authorize(caller.orch, impersonated);
    } catch (e) {
      authnFailureCount.inc();
      log.warn(`impersonation failed for identity ${impersonated}, error: ${(e as Error).message}`, { client: auth.remoteAddress });
      return { ok: false, code: grpc.status.UNAUTHENTICATED, message: 'request impersonation authentication failure' };
    }
    sans = [impersonated];
  }
  const ttl = ttlSeconds(req.validityDuration);
  log.debug(`generating a certificate, sans: [${sans.join(' ')}], requested ttl: ${ttl}s`, { client: auth.remoteAddress });
  let issued: { chain: string[]; rootPem: string };
  try {
    const certSigner = metadataString(req.metadata, CERT_SIGNER);
    issued = await o.issuer.issue(req.csr, { subjectIds: sans, ttlSeconds: ttl, ...(certSigner ? { certSigner } : {}) });
  } catch (e) {
    if (!(e instanceof CaError)) throw e;
    log.error(`CSR signing error: ${e.message}`, { client: auth.remoteAddress });
    certSignErrorCount.inc({ error: e.type });
    if (e.type === 'CSR_ERROR') csrParsingErrorCount.inc();
    return { ok: false, code: e.grpcCode, message: `CSR signing error (${e.message})` };
  }
  const certChain = [...issued.chain];
  // The root bundle stays one element, the last, so that a client can tell the roots from the chain.
  if (issued.rootPem !== '') certChain.push(issued.rootPem);
  successCount.inc();
  log.debug(`CSR successfully signed, sans [${sans.join(' ')}].`, { client: auth.remoteAddress });
  return { ok: true, response: create(IstioCertificateResponseSchema, { certChain }) };
}

/** Registers the service on a gRPC server; `secure` says whether that server's listener is TLS. */
export function registerCaService(server: grpc.Server, o: CaServiceOptions, opts: { secure: boolean }): void {
  addGrpcService(server, IstioCertificateService, {
    createCertificate: (call, callback) => {
      createCertificate(o, call.request, grpcAuthRequest(call, opts.secure)).then(
        (r) => (r.ok ? callback(null, r.response) : callback({ code: r.code, details: r.message })),
        (e: unknown) => {
          log.error(`CreateCertificate: ${(e as Error).message}`);
          callback({ code: grpc.status.INTERNAL, details: (e as Error).message });
        },
      );
    },
  });
}
