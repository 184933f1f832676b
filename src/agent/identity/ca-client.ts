// The client of the certificate service (Istio's CitadelClient): IstioCertificateService/CreateCertificate
// over TLS (or plaintext, see options.ts), with `ClusterID`, CA_HEADER_* and `authorization: Bearer <token>`
// metadata on every call, and Istio's CA retry policy (5 attempts, 100 ms doubling with 10 % jitter, on
// transient codes). After a failed call the channel is rebuilt, re-reading the roots and the client
// certificate, as Istio reconnects after an error. The client certificate is PROV_CERT's (Istio), or else the
// workload's current one while it is valid, so a renewal authenticates even when the token has expired
// (the CA accepts certificates it issued).
import * as fs from 'node:fs';
import { X509Certificate } from 'node:crypto';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { CREATE_CERTIFICATE_PATH, decodeCertificateResponse, encodeCertificateRequest } from './ca-wire';
import { registerScope } from '../../lib/log';
import type { CompliancePolicy } from '../../lib/compliance';
import { numOutgoingRetries } from '../metrics';
import { grpcChannelCredentials, oneLine, protocolMismatchHint } from '../tls-client';
import { caRootCerts, IdentityOptionsError, type CaConnection, type Credential } from './options';

const log = registerScope('citadelclient', 'citadel client debugging');
const caLog = registerScope('ca', 'ca client');

/** Istio's CARetryOptions. */
export const CA_RETRY = {
  maxAttempts: 5,
  baseMs: 100,
  jitter: 0.1,
  codes: new Set([
    grpc.status.CANCELLED,
    grpc.status.DEADLINE_EXCEEDED,
    grpc.status.RESOURCE_EXHAUSTED,
    grpc.status.ABORTED,
    grpc.status.INTERNAL,
    grpc.status.UNAVAILABLE,
  ]),
};
/** One attempt may not hang forever on a CA that accepted the connection and went quiet. */
const ATTEMPT_TIMEOUT_MS = 10_000;

export class CaCallError extends Error {
  constructor(
    message: string,
    readonly code?: grpc.status,
  ) {
    super(message);
  }
}

/** Reads the caller's credential for each call; a missing token file sends no header (other authenticators may apply). */
export class TokenSource {
  private warned = false;
  constructor(
    private readonly credential: Credential,
    private readonly cwd: string,
  ) {}

  token(): string {
    if (this.credential.kind !== 'token-file') return '';
    let error: Error | undefined;
    for (const p of this.credential.paths) {
      try {
        const t = fs.readFileSync(path.resolve(this.cwd, p), 'utf8').trim();
        this.warned = false;
        return t;
      } catch (e) {
        error ??= e as Error;
      }
    }
    if (!this.warned) log.warn(`failed to fetch token from file: ${error?.message} (also tried ${this.credential.paths.slice(1).join(', ')})`);
    this.warned = true;
    return '';
  }

  /** `authorization: Bearer <token>` when there is a token. */
  apply(md: grpc.Metadata): void {
    const t = this.token();
    if (t) md.set('authorization', `Bearer ${t}`);
  }
}

export interface CaClientOptions {
  ca: CaConnection;
  /** The workload's current certificate and key, when it has a valid one. */
  workloadCertificate?: () => { certChain: Buffer; privateKey: Buffer; expiresAt: number } | undefined;
  tokens: TokenSource;
  cwd: string;
  compliance: CompliancePolicy;
  /** Test hook: the wait before retry `attempt` (1-based). */
  retryDelayMs?: (attempt: number) => number;
}

function jitteredBackoff(attempt: number): number {
  const base = CA_RETRY.baseMs * ((1 << attempt) >> 1);
  return Math.round(base * (1 + CA_RETRY.jitter * (2 * Math.random() - 1)));
}

function statusText(e: grpc.ServiceError): string {
  return `rpc error: code = ${grpc.status[e.code] ?? e.code} desc = ${oneLine(e.details)}`;
}

export class CaClient {
  private client: grpc.Client | undefined;
  private presented: Buffer | undefined;

  constructor(private readonly o: CaClientOptions) {}

  get address(): string {
    return this.o.ca.address;
  }

  private channel(): grpc.Client {
    const ca = this.o.ca;
    const workload = ca.provCertDir || ca.plaintext ? undefined : this.o.workloadCertificate?.();
    const usable = workload && workload.expiresAt > Date.now() ? workload : undefined;
    if (this.client && usable && !usable.certChain.equals(this.presented ?? Buffer.alloc(0))) this.reconnect();
    if (this.client) return this.client;
    let tlsConfig: Parameters<typeof grpcChannelCredentials>[0];
    if (!ca.plaintext) {
      const roots = caRootCerts(ca, this.o.cwd);
      let certChain: Buffer | undefined;
      let privateKey: Buffer | undefined;
      if (ca.provCertDir) {
        // Istio presents PROV_CERT only while it is valid; an expired one leaves the token to authenticate.
        try {
          const chain = fs.readFileSync(path.resolve(this.o.cwd, ca.provCertDir, 'cert-chain.pem'));
          if (new Date(new X509Certificate(chain).validTo).getTime() > Date.now()) {
            certChain = chain;
            privateKey = fs.readFileSync(path.resolve(this.o.cwd, ca.provCertDir, 'key.pem'));
          } else log.warn('cert expired, using token instead');
        } catch (e) {
          log.warn(`cannot read the provisioning certificate in ${ca.provCertDir} (PROV_CERT), using token instead: ${(e as Error).message}`);
        }
      } else if (usable) {
        certChain = usable.certChain;
        privateKey = usable.privateKey;
      }
      this.presented = certChain;
      tlsConfig = { rootCerts: roots.pem, serverName: ca.serverName, certChain, privateKey, compliance: this.o.compliance };
    }
    const { credentials, options } = grpcChannelCredentials(tlsConfig);
    this.client = new grpc.Client(ca.address, credentials, { ...options, 'grpc.max_receive_message_length': 16 << 20 });
    // Connect now: the TLS handshake then overlaps making the key and the CSR instead of following them.
    this.client.getChannel().getConnectivityState(true);
    return this.client;
  }

  private reconnect(): void {
    this.client?.close();
    this.client = undefined;
    this.presented = undefined;
  }

  /** Istio's CSRSign: the PEM chain, leaf first. Throws CaCallError after the retries. */
  async sign(csrPem: string, ttlSeconds: number): Promise<string[]> {
    try {
      return await this.signWithRetries(csrPem, ttlSeconds);
    } catch (e) {
      log.error(`failed to sign CSR: ${(e as Error).message}`);
      this.reconnect();
      throw e;
    }
  }

  private async signWithRetries(csrPem: string, ttlSeconds: number): Promise<string[]> {
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0) {
        const wait = this.o.retryDelayMs ? this.o.retryDelayMs(attempt) : jitteredBackoff(attempt);
        caLog.warn(`ca request failed, starting attempt ${attempt} in ${wait}ms`);
        numOutgoingRetries.inc({ request_type: 'csr' });
        await new Promise((r) => setTimeout(r, wait));
      }
      try {
        const resp = await this.call(csrPem, ttlSeconds);
        if (resp.certChain.length <= 1) throw new CaCallError('invalid empty CertChain');
        return resp.certChain;
      } catch (e) {
        const code = (e as CaCallError).code;
        if (code === undefined || !CA_RETRY.codes.has(code) || attempt + 1 >= CA_RETRY.maxAttempts) throw e;
      }
    }
  }

  /** Builds the channel now (roots read, TLS set up); throws CaCallError when it cannot be, before a key is made for nothing. */
  prepare(): grpc.Client {
    try {
      return this.channel();
    } catch (e) {
      if (e instanceof IdentityOptionsError) throw new CaCallError(e.message);
      throw new CaCallError(`cannot connect to the certificate service at ${this.o.ca.address}: ${(e as Error).message}`);
    }
  }

  private call(csrPem: string, ttlSeconds: number): Promise<{ certChain: string[] }> {
    const client = this.prepare();
    const md = new grpc.Metadata();
    md.set('ClusterID', this.o.ca.clusterId);
    for (const [k, v] of Object.entries(this.o.ca.headers)) md.add(k, v);
    this.o.tokens.apply(md);
    const request = { csr: csrPem, validityDuration: BigInt(ttlSeconds), metadata: { CertSigner: this.o.ca.certSigner } };
    return new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        CREATE_CERTIFICATE_PATH,
        encodeCertificateRequest,
        decodeCertificateResponse,
        request,
        md,
        { deadline: Date.now() + ATTEMPT_TIMEOUT_MS },
        (err, resp) => {
          if (err) {
            const hint = protocolMismatchHint(err.details ?? err.message, {
              address: this.o.ca.address,
              tls: !this.o.ca.plaintext,
              setting: 'CA_ADDR (default: the discoveryAddress)',
            });
            reject(new CaCallError(hint ? `create certificate: ${hint} (${statusText(err)})` : `create certificate: ${statusText(err)}`, err.code));
          } else resolve(resp!);
        },
      );
    });
  }

  close(): void {
    this.client?.close();
    this.client = undefined;
  }
}
