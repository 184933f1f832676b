// The workload's identity inside the agent (Istio's Agent.initSdsServer + newSecretManager): the secret cache
// with its CA client (none with mounted certificates), and the SDS server the proxy reads them from — unless
// WORKLOAD_IDENTITY_SOCKET_FILE names a socket another SDS server (e.g. SPIRE) already serves, in which case the
// agent leaves the workload's certificates to it.
import * as fs from 'node:fs';
import * as net from 'node:net';
import path from 'node:path';
import { registerScope } from '../../lib/log';
import type { ClientCertificate } from '../xds-proxy';
import type { Guard } from '../boundary';
import { CaClient, TokenSource } from './ca-client';
import type { IdentityOptions } from './options';
import type { SdsServer } from './sds-server';
import { WorkloadSecrets, WORKLOAD_CERT } from './secrets';

const log = registerScope('security', 'security debugging');

export class IdentityStartError extends Error {}

/** Whether a live server answers on the Unix socket; a stale socket file is removed (Istio's checkSocket). */
async function socketInUse(socketPath: string): Promise<boolean> {
  try {
    if (fs.statSync(socketPath).isFile()) return false;
  } catch {
    return false;
  }
  const live = await new Promise<boolean>((resolve) => {
    const s = net.connect({ path: socketPath });
    const timer = setTimeout(() => {
      s.destroy();
      resolve(false);
    }, 1000);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve(true);
    });
    s.once('error', () => {
      clearTimeout(timer);
      resolve(false);
    });
  });
  if (!live) {
    try {
      fs.unlinkSync(socketPath);
    } catch (e) {
      throw new IdentityStartError(`existing SDS socket could not be removed: ${(e as Error).message}`);
    }
  }
  return live;
}

export interface WorkloadIdentityOptions {
  options: IdentityOptions;
  cwd: string;
  /** Serve SDS (there is a proxy to read it); without a proxy the certificates are only issued and rotated. */
  serveSds: boolean;
  /** The agent's fault boundary around the SDS server's handlers. */
  guard?: Guard;
}

export class WorkloadIdentity {
  readonly secrets: WorkloadSecrets;
  readonly tokens: TokenSource;
  private sds: SdsServer | undefined;
  /** False when another SDS server owns the workload socket. */
  private managed = true;

  constructor(private readonly o: WorkloadIdentityOptions) {
    const id = o.options;
    this.tokens = new TokenSource(id.credential, o.cwd);
    const ca = id.fileMountedCerts
      ? undefined
      : new CaClient({
          ca: id.ca,
          tokens: this.tokens,
          cwd: o.cwd,
          compliance: id.compliance,
          workloadCertificate: () => {
            const w = this.secrets.workloadItem();
            return w?.certificateChain && w.privateKey && w.expiresAt
              ? { certChain: w.certificateChain, privateKey: w.privateKey, expiresAt: w.expiresAt }
              : undefined;
          },
        });
    if (!ca) log.info('Workload is using file mounted certificates. Skipping connecting to CA');
    else log.info(`CA Endpoint ${id.ca.address}, identity ${id.spiffeId}`);
    this.secrets = new WorkloadSecrets({ identity: id, cwd: o.cwd, ca });
  }

  private begun: Promise<void> | undefined;

  /**
   * Asks for the first certificate (unless another SDS server owns the workload socket). Cheap to load:
   * the SDS server and Envoy's message types it needs come later, in start().
   */
  begin(): Promise<void> {
    return (this.begun ??= this.beginOnce());
  }

  private async beginOnce(): Promise<void> {
    const id = this.o.options;
    const socketPath = path.resolve(this.o.cwd, id.sdsSocketPath);
    if (this.o.serveSds && (await socketInUse(socketPath))) {
      log.info(
        `Existing workload SDS socket found at ${id.sdsSocketPath}. The agent's SDS server is not started; the proxy reads its certificates there`,
      );
      this.managed = false;
      return;
    }
    if (id.customSdsSocket) {
      throw new IdentityStartError(
        `agent configured for non-default SDS socket path: ${id.sdsSocketPath} but no socket found (WORKLOAD_IDENTITY_SOCKET_FILE=${id.socketFile})`,
      );
    }
    this.secrets.start();
  }

  async start(): Promise<void> {
    await this.begin();
    if (this.managed && this.o.serveSds && !this.sds) {
      const { SdsServer } = await import('./sds-server');
      this.sds = new SdsServer(path.resolve(this.o.cwd, this.o.options.sdsSocketPath), this.secrets, this.o.guard);
      await this.sds.start();
    }
  }

  /** The SDS server alone is stopped (and, with restart, started anew); certificates keep rotating. */
  async stopSds(): Promise<void> {
    const sds = this.sds;
    this.sds = undefined;
    await sds?.stop();
  }

  async restartSds(): Promise<void> {
    await this.stopSds();
    await this.start();
  }

  async stop(): Promise<void> {
    await this.sds?.stop();
    this.secrets.stop();
  }

  /** The certificate to present to the control plane, when the agent has one. */
  clientCertificate(): ClientCertificate | undefined {
    if (!this.managed) return undefined;
    const w = this.secrets.workloadItem();
    return w?.certificateChain && w.privateKey ? { certChain: w.certificateChain, privateKey: w.privateKey } : undefined;
  }

  /** Resolves when a workload certificate exists, or after `timeoutMs` (then the connection goes without). */
  async certificateOrTimeout(timeoutMs: number): Promise<void> {
    if (!this.managed || this.clientCertificate()) return;
    // A timer of our own, not AbortSignal.timeout: that one is unref'd, and before the agent's servers
    // start nothing else may keep the process alive while the CA retries.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      await this.secrets.whenAvailable(WORKLOAD_CERT, abort.signal).catch(() => undefined);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Why the agent is not ready, when the workload certificate has expired. */
  notReadyReason(): string | undefined {
    if (!this.managed) return undefined;
    const expiredMs = this.secrets.expiredFor();
    if (expiredMs === undefined) return undefined;
    return `the workload certificate expired ${Math.round(expiredMs / 1000)}s ago and no new one could be issued by the certificate service at ${this.o.options.ca.address}`;
  }
}
