// Publishing the mesh roots so that workloads can trust the daemon and each other. In a cluster: the
// ConfigMap `mesh-ca-root-cert` (PILOT_CA_CERT_CONFIGMAP), key `root-cert.pem` — written here into the
// daemon's own namespace (copying it into every namespace is the namespace controller's job). With no
// cluster: ./var/run/secrets/mesh/root-cert.pem under the daemon's working directory, the path an agent
// reads its root from (the ConfigMap's mount point in a pod).
import fs from 'node:fs';
import path from 'node:path';
import { OrchApiError } from '../config/orch';
import { registerScope } from '../lib/log';
import type { OrchApi } from './authn/orch-token';
import { writeFileAtomic } from './store';

const log = registerScope('ca', 'CA bootstrap');

/** Istio's CACertNamespaceConfigMapDataName. */
export const ROOT_CONFIGMAP_KEY = 'root-cert.pem';
/** The no-cluster root file (Istio's ./var/run/secrets/istio/root-cert.pem, renamed). */
export const DEFAULT_ROOT_FILE = './var/run/secrets/mesh/root-cert.pem';

export interface RootPublisher {
  readonly describe: string;
  publish(rootPem: string): Promise<void>;
}

export class FileRootPublisher implements RootPublisher {
  readonly describe: string;
  constructor(readonly file: string = DEFAULT_ROOT_FILE) {
    this.describe = `file ${file}`;
  }
  async publish(rootPem: string): Promise<void> {
    fs.mkdirSync(path.dirname(this.file), { recursive: true });
    writeFileAtomic(this.file, rootPem, 0o644);
  }
}

export class ConfigMapRootPublisher implements RootPublisher {
  readonly describe: string;
  constructor(
    private readonly api: OrchApi,
    readonly namespace: string,
    readonly name: string,
  ) {
    this.describe = `configmap ${namespace}/${name}`;
  }

  async publish(rootPem: string): Promise<void> {
    const p = `/api/v1/namespaces/${encodeURIComponent(this.namespace)}/configmaps`;
    let current: { metadata?: Record<string, unknown>; data?: Record<string, string> } | undefined;
    try {
      current = (await this.api.send('GET', `${p}/${encodeURIComponent(this.name)}`)) as typeof current;
    } catch (e) {
      if (!(e instanceof OrchApiError && e.statusCode === 404)) throw e;
    }
    if (!current) {
      await this.api.send('POST', p, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: this.name, namespace: this.namespace, labels: { 'mesh.io/config': 'true' } },
        data: { [ROOT_CONFIGMAP_KEY]: rootPem },
      });
      return;
    }
    if (current.data?.[ROOT_CONFIGMAP_KEY] === rootPem) return;
    await this.api.send('PUT', `${p}/${encodeURIComponent(this.name)}`, {
      ...current,
      apiVersion: 'v1',
      kind: 'ConfigMap',
      data: { ...(current.data ?? {}), [ROOT_CONFIGMAP_KEY]: rootPem },
    });
  }
}

/**
 * Publishes now and after every change; a failed write is retried with back-off (1 s doubling to 1 min)
 * until it succeeds or a newer root supersedes it.
 */
export class RootPublication {
  private latest = '';
  private timer: NodeJS.Timeout | undefined;
  private backoffMs = 1000;
  private closed = false;

  constructor(private readonly publishers: readonly RootPublisher[]) {}

  async publish(rootPem: string): Promise<void> {
    this.latest = rootPem;
    this.backoffMs = 1000;
    await this.attempt();
  }

  private async attempt(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const rootPem = this.latest;
    let failed = false;
    for (const p of this.publishers) {
      try {
        await p.publish(rootPem);
        log.info(`published the mesh root certificates to ${p.describe}`);
      } catch (e) {
        failed = true;
        log.error(`cannot publish the mesh root certificates to ${p.describe}: ${(e as Error).message}; retrying in ${this.backoffMs / 1000}s`);
      }
    }
    if (failed && !this.closed && rootPem === this.latest) {
      this.timer = setTimeout(() => void this.attempt(), this.backoffMs);
      this.timer.unref();
      this.backoffMs = Math.min(this.backoffMs * 2, 60_000);
    }
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
