// Publishing the mesh roots so that workloads can trust the daemon and each other when there is no
// cluster: ./var/run/secrets/mesh/root-cert.pem under the daemon's working directory, the path an agent
// reads its root from (the mount point of the ConfigMap `mesh-ca-root-cert` in a pod). In a cluster the
// namespace controller (src/meshd/namespace-controller.ts) writes that ConfigMap into every namespace.
import fs from 'node:fs';
import path from 'node:path';
import { registerScope } from '../lib/log';
import { writeFileAtomic } from './store';

const log = registerScope('ca', 'CA bootstrap');

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
