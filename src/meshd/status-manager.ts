// Istio's status manager (pilot/pkg/status): writers of resource status hand it the desired state of
// one resource; a pool of at most PILOT_STATUS_MAX_WORKERS workers writes it, never two at once for the
// same resource, and a resource pushed again before its turn is written once with the latest value.
// A write is skipped when the object's generation moved past the one the status was computed for (a
// newer computation follows the change), and, unlike Istio (which writes on every push), when the live
// status already equals what would be written: an unchanged status costs no write and no resourceVersion.
// Writes go through the daemon's client, so they share its QPS/burst limiter (--orchApiQPS/--orchApiBurst).
import { OrchApiError, type OrchClient } from '../config/orch/client';
import { registerScope } from '../lib/log';
import { sameStatus } from '../analysis/status';

const log = registerScope('status', 'status controller for mesh');

/** One resource whose status is written, at the generation its status was computed for. */
export interface StatusTarget {
  /** REST path of the object (`/apis/networking.mesh.io/v1/namespaces/ns/virtualservices/name`). */
  path: string;
  generation: number;
}

/** Makes the status to write from the live one. */
export type StatusFn = (live: unknown, generation: number) => Record<string, unknown>;

interface Pending {
  target: StatusTarget;
  fn: StatusFn;
}

type Obj = { metadata?: { generation?: number; resourceVersion?: string }; status?: unknown; [k: string]: unknown };

export class StatusManager {
  private readonly pending = new Map<string, Pending>();
  private readonly working = new Set<string>();
  private workers = 0;
  private stopped = false;
  private readonly idleWaiters: Array<() => void> = [];
  /** Status last seen live or written, per path and generation: an equal desired status needs no read. */
  private readonly known = new Map<string, { generation: number; status: unknown }>();
  /** Writes made (for tests and debugging). */
  writes = 0;

  constructor(
    private readonly client: OrchClient,
    private readonly maxWorkers: number,
  ) {}

  push(target: StatusTarget, fn: StatusFn): void {
    if (this.stopped) return;
    this.pending.set(target.path, { target, fn });
    this.maybeAddWorker();
  }

  /** Resolves once nothing is pending or being written. */
  idle(): Promise<void> {
    if (this.pending.size === 0 && this.workers === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.pending.clear();
    await this.idle();
  }

  private maybeAddWorker(): void {
    if (this.workers >= Math.max(1, this.maxWorkers) || this.pending.size === 0) return;
    this.workers += 1;
    // A worker ends when nothing it may take is left: what waits behind a write in progress is taken by
    // the worker doing that write once it is done (a new worker for it would find nothing and spin).
    void this.work().finally(() => {
      this.workers -= 1;
      if (this.workers === 0) for (const w of this.idleWaiters.splice(0)) w();
    });
  }

  private next(): Pending | undefined {
    for (const [path, p] of this.pending) {
      if (this.working.has(path)) continue;
      this.pending.delete(path);
      return p;
    }
    return undefined;
  }

  private async work(): Promise<void> {
    for (;;) {
      if (this.stopped) return;
      const p = this.next();
      if (!p) return;
      this.working.add(p.target.path);
      try {
        await this.write(p);
      } catch (e) {
        log.error(`Encountered unexpected error updating status for ${p.target.path}, will try again later: ${(e as Error).message}`);
      } finally {
        this.working.delete(p.target.path);
      }
    }
  }

  private async write(p: Pending, retried = false): Promise<void> {
    const { path, generation } = p.target;
    const known = this.known.get(path);
    if (!retried && known && known.generation === generation && sameStatus(known.status, p.fn(known.status, generation))) return;
    let live: Obj;
    try {
      live = (await this.client.getJson(path)) as Obj;
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 404) {
        log.debug(`no current config found for ${path}`);
        this.known.delete(path);
        return;
      }
      throw e;
    }
    if (live.metadata?.generation !== generation) {
      log.debug(`generation of ${path} is ${String(live.metadata?.generation)}, not ${generation}: a newer status follows`);
      return;
    }
    const desired = p.fn(live.status, generation);
    if (sameStatus(live.status, desired)) {
      this.known.set(path, { generation, status: live.status });
      return;
    }
    log.debug(`writing status for resource ${path}`);
    try {
      await this.client.request('PUT', `${path}/status`, { body: { ...live, status: desired } });
      this.writes += 1;
      this.known.set(path, { generation, status: desired });
    } catch (e) {
      if (e instanceof OrchApiError && e.statusCode === 409) {
        log.debug(`warning: object has changed ${path}: ${e.message}`);
        // Someone wrote between our read and write: read it again once (Istio drops the write).
        if (!retried) return this.write(p, true);
        return;
      }
      if (e instanceof OrchApiError && e.statusCode === 404) return;
      throw e;
    }
  }
}
