// Readiness as Istio's agent decides it (pilot-agent status/ready): the proxy has applied CDS and LDS from
// the daemon (update_success > 0 for both), reports LIVE, and its listeners accept connections; with DNS
// capture on, the name table has also arrived. Once passed, the proxy checks are not repeated (Istio
// caches them too): the state only goes back when the agent begins shutting down, or while the workload
// certificate has expired without a renewal (the certificate service unreachable for its whole lifetime).
import * as net from 'node:net';
import type { NodeType } from './config';
import { updateStatsText, type AdminClient, type ListenerStatus } from './admin-client';
import { joinHostPort } from '../lib/hostport';

export class NotReadyError extends Error {}

/** Sidecars bind only the virtual listeners (the others are reached through them); gateways bind all. */
export function listenersToDial(listeners: readonly ListenerStatus[], nodeType: NodeType): Array<{ host: string; port: number; name: string }> {
  const out: Array<{ host: string; port: number; name: string }> = [];
  for (const l of listeners) {
    if (l.port === undefined || l.port === 0 || l.address === undefined) continue;
    if (nodeType === 'sidecar' && l.name !== 'virtualOutbound' && l.name !== 'virtualInbound') continue;
    const host = l.address === '0.0.0.0' ? '127.0.0.1' : l.address === '::' ? '::1' : l.address;
    out.push({ host, port: l.port, name: l.name });
  }
  return out;
}

function dial(host: string, port: number, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host, port });
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error('i/o timeout'));
    }, timeoutMs);
    s.once('connect', () => {
      clearTimeout(timer);
      s.destroy();
      resolve();
    });
    s.once('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Error(e.code === 'ECONNREFUSED' ? 'connect: connection refused' : e.message));
    });
  });
}

export interface ReadinessOptions {
  admin: AdminClient;
  nodeType: NodeType;
  /** DISABLE_PROXY: no proxy to ask; the agent alone is ready. */
  noProxy: boolean;
  /** Set when DNS capture is on: whether the name table has arrived. */
  nameTableReady?: () => boolean;
  /** Why the workload identity makes the agent not ready (an expired certificate), or undefined. */
  identityNotReady?: () => string | undefined;
  /** Called once, the first time every check passes (startup_duration_seconds). */
  onFirstReady?: () => void;
}

export class ProxyReadiness {
  private receivedFirstUpdate = false;
  private proxyReady = false;
  private everReady = false;
  private terminated: string | undefined;

  constructor(private readonly o: ReadinessOptions) {}

  /** After this, every check fails: the agent is shutting down or draining. */
  terminate(reason: string): void {
    this.terminated ??= reason;
  }

  /** Resolves when ready; rejects with NotReadyError saying why not. */
  async check(): Promise<void> {
    if (this.terminated) throw new NotReadyError(`server is terminated: ${this.terminated}`);
    if (!this.o.noProxy) {
      await this.checkConfigReceived();
      await this.checkProxyReady();
    }
    if (this.o.nameTableReady && !this.o.nameTableReady()) {
      throw new NotReadyError('mesh DNS capture is turned ON and DNS lookup table is not ready yet');
    }
    // Checked every time (not cached like the proxy checks): an expired certificate comes back once renewed.
    const identity = this.o.identityNotReady?.();
    if (identity) throw new NotReadyError(identity);
    if (this.terminated) throw new NotReadyError(`server is terminated: ${this.terminated}`);
    if (!this.everReady) {
      this.everReady = true;
      this.o.onFirstReady?.();
    }
  }

  private async checkConfigReceived(): Promise<void> {
    if (this.receivedFirstUpdate) return;
    let s;
    try {
      s = await this.o.admin.updateStats();
    } catch (e) {
      throw new NotReadyError(`failed to get update stats from the proxy: ${(e as Error).message}`);
    }
    const cds = s.cdsSuccess > 0;
    const lds = s.ldsSuccess > 0;
    if (cds && lds) {
      this.receivedFirstUpdate = true;
      return;
    }
    if (!cds && !lds && s.cdsRejected === 0 && s.ldsRejected === 0) {
      throw new NotReadyError(`config not received from XDS server (is meshd running?): ${updateStatsText(s)}`);
    }
    if (s.ldsRejected > 0 || s.cdsRejected > 0) throw new NotReadyError(`config received from XDS server, but was rejected: ${updateStatsText(s)}`);
    throw new NotReadyError(`config not fully received from XDS server: ${updateStatsText(s)}`);
  }

  private async checkProxyReady(): Promise<void> {
    if (this.proxyReady) return;
    let state: string;
    try {
      state = await this.o.admin.serverState();
    } catch (e) {
      throw new NotReadyError(`failed to get readiness stats: ${(e as Error).message}`);
    }
    if (state !== 'LIVE') throw new NotReadyError(`server is not live, current state is: ${state}`);
    let listeners: ListenerStatus[];
    try {
      listeners = await this.o.admin.listeners();
    } catch (e) {
      throw new NotReadyError(`failed to get listeners: ${(e as Error).message}`);
    }
    for (const l of listenersToDial(listeners, this.o.nodeType)) {
      try {
        await dial(l.host, l.port, 1000);
      } catch (e) {
        const hp = joinHostPort(l.host, l.port);
        throw new NotReadyError(`listener ${l.name} on address ${hp} is still not listening: ${(e as Error).message}`);
      }
    }
    this.proxyReady = true;
  }
}
