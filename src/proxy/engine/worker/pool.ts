// Engine workers (`--concurrency N`): the main thread runs the engine as always (ADS, admin API, and it
// serves traffic as worker 0) and N-1 worker threads run the same engine without a config stream or an
// admin API of their own. Threads, not processes: each worker costs one V8 isolate, not a second agent
// and engine (the per-pod memory goal), and listening sockets can be shared inside one process:
//   - sockets: the main thread binds each listener's address (with its options: IP_TRANSPARENT…) and
//     gives each worker its own descriptor of it (dup, in the native addon); workers listen on it, the
//     kernel hands each connection to one thread, and a worker that closes or dies closes only its own
//     descriptor;
//   - xDS: every response the main thread accepts goes to every worker as the same encoded Envoy message
//     (a worker that starts late first gets what the main thread holds, as DeltaDiscoveryResponses), and
//     the worker applies it with the engine's own code, except that it builds an EDS cluster only when a
//     request first needs it (upstream/cluster-manager.ts deferEds: a sidecar with 1000 services in scope
//     talks to few, and an isolate cannot share the main thread's cluster objects as Envoy's workers do);
//   - memory: each worker gives back its isolate's memory when idle (common/memory-relief.ts, from thread.ts);
//   - stats: /stats asks each worker for its stats and merges them (merge.ts); drain, health check
//     failure, counter resets and log levels are repeated in every worker;
//   - a worker that dies is started again (with the current config) and counted in
//     `server.worker_restarts`.
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../log';
import type { Counter } from '../../stats/store';
import type { GrpcMux, RelayedResponse } from '../../xds/grpc-mux';
import type { StatsSnapshot } from './merge';
import type { FromWorker, ToWorker, WorkerData, WorkerEngineOptions } from './protocol';
import { seaAssets } from '../../../lib/sea';

declare const __MESH_BUILD__: unknown;

export const WORKER_ASSET = 'engine-worker.cjs';

/** Where a worker thread's code is: the executable's asset, the file beside the bundle, or the source. */
export function workerScript(): { code: string } | { file: string } {
  const sea = seaAssets();
  if (sea) return { code: sea.getAsset(WORKER_ASSET, 'utf8') };
  if (typeof __MESH_BUILD__ !== 'undefined') {
    let script = process.argv[1] ?? '';
    try {
      script = fs.realpathSync(script);
    } catch {
      // as given
    }
    return { file: path.join(path.dirname(script), WORKER_ASSET) };
  }
  return { file: new URL('./thread.ts', import.meta.url).pathname };
}

export interface PoolOptions {
  /** Worker threads to run (concurrency - 1: the main thread is worker 0). */
  threads: number;
  bootstrap: Uint8Array;
  engineOptions: WorkerEngineOptions;
  log: Logger;
  logWriter: (line: string) => void;
  /** A descriptor of the main thread's socket for an address key, for a worker. */
  shareSocket: (key: string) => Promise<number>;
  restarts: Counter;
}

interface Slot {
  id: number;
  worker: Worker | undefined;
  crashes: number[];
  /** The worker whose last stats answer arrived: it need not send the tagged stats' names again. */
  statsSynced?: Worker | undefined;
}

export class WorkerPool {
  private readonly slots: Slot[] = [];
  private readonly muxes = new Map<string, GrpcMux>();
  private readonly replies = new Map<number, (m: FromWorker) => void>();
  private nextReq = 1;
  private closing = false;

  constructor(private readonly o: PoolOptions) {
    for (let i = 1; i <= o.threads; i++) this.slots.push({ id: i, worker: undefined, crashes: [] });
  }

  /** A config source of the main thread (`ads`, or the static cluster an SDS stream goes to). */
  attach(key: string, mux: GrpcMux): void {
    this.muxes.set(key, mux);
    mux.onRelay = (r: RelayedResponse) => this.broadcast({ t: 'xds', key, delta: r.delta, bytes: r.bytes });
  }

  start(): void {
    for (const s of this.slots) this.spawn(s);
  }

  private spawn(slot: Slot): void {
    if (this.closing) return;
    const data: WorkerData = { id: slot.id, bootstrap: this.o.bootstrap, options: this.o.engineOptions };
    // read for each start, not kept: the worker's bundle as a string is ~1 MB of the main thread's heap
    const script = workerScript();
    const w = 'code' in script ? new Worker(script.code, { eval: true, workerData: data }) : new Worker(script.file, { workerData: data });
    slot.worker = w;
    // what the main thread holds now, then every accepted response after it, in order
    for (const [key, mux] of this.muxes)
      for (const r of mux.snapshot()) w.postMessage({ t: 'xds', key, delta: r.delta, bytes: r.bytes } satisfies ToWorker);
    w.on('message', (m: FromWorker) => this.onMessage(slot, w, m));
    w.on('error', (e) => this.o.log.error(`engine worker ${slot.id}: ${e.stack ?? e.message}`));
    w.on('exit', (code) => {
      if (slot.worker !== w) return;
      slot.worker = undefined;
      if (this.closing) return;
      this.o.restarts.inc();
      const now = Date.now();
      slot.crashes = slot.crashes.filter((t) => now - t < 60_000);
      slot.crashes.push(now);
      // one quick restart; a worker that keeps dying waits longer each time (at most 10 s)
      const delay = Math.min(10_000, 100 * 2 ** (slot.crashes.length - 1));
      this.o.log.warn(`engine worker ${slot.id} exited with code ${code}; starting it again in ${delay}ms`);
      setTimeout(() => this.spawn(slot), delay).unref();
    });
  }

  private onMessage(slot: Slot, w: Worker, m: FromWorker): void {
    switch (m.t) {
      case 'log':
        this.o.logWriter(m.line);
        return;
      case 'fd':
        this.o.shareSocket(m.key).then(
          (fd) => {
            // a worker that died meanwhile never gets it
            if (slot.worker !== w) fs.close(fd, () => undefined);
            else w.postMessage({ t: 'fd', req: m.req, fd } satisfies ToWorker);
          },
          (e: Error) => w.postMessage({ t: 'fd', req: m.req, error: `listener '${m.listener}': ${e.message}` } satisfies ToWorker),
        );
        return;
      case 'live':
        this.o.log.debug(`engine worker ${slot.id} is serving`);
        return;
      case 'stats':
      case 'closed':
        this.replies.get('req' in m ? m.req : -slot.id)?.(m);
        return;
    }
  }

  private broadcast(m: ToWorker): void {
    for (const s of this.slots) s.worker?.postMessage(m);
  }

  /**
   * Each worker's stats by worker id - 1 (undefined for one that did not answer in time). A worker sends the
   * names and tags of its tagged stats once: the caller keeps them (merge.ts StatsMerger) and asks one round at a time.
   */
  stats(timeoutMs = 2000): Promise<Array<StatsSnapshot | undefined>> {
    return Promise.all(
      this.slots.map((s) => {
        const w = s.worker;
        if (!w) return undefined;
        const req = this.nextReq++;
        return new Promise<StatsSnapshot | undefined>((resolve) => {
          const full = s.statsSynced !== w;
          const t = setTimeout(() => {
            this.replies.delete(req);
            s.statsSynced = undefined;
            resolve(undefined);
          }, timeoutMs);
          this.replies.set(req, (m) => {
            clearTimeout(t);
            this.replies.delete(req);
            if (m.t === 'stats') s.statsSynced = w;
            resolve(m.t === 'stats' ? m.snapshot : undefined);
          });
          w.postMessage({ t: 'stats', req, full } satisfies ToWorker);
        });
      }),
    );
  }

  drainListeners(o: { graceful: boolean; inboundOnly: boolean }): void {
    this.broadcast({ t: 'drain', ...o });
  }

  healthcheck(fail: boolean): void {
    this.broadcast({ t: 'healthcheck', fail });
  }

  resetCounters(): void {
    this.broadcast({ t: 'reset_counters' });
  }

  logging(q: URLSearchParams): void {
    this.broadcast({ t: 'logging', query: q.toString() });
  }

  /** Test hook: makes a worker throw, as a bug would. */
  crash(id: number): void {
    const s = this.slots.find((x) => x.id === id);
    if (!s?.worker) throw new Error(`no engine worker ${id} is running (workers: ${this.slots.map((x) => x.id).join(', ')})`);
    s.worker.postMessage({ t: 'crash' } satisfies ToWorker);
  }

  /** Workers alive now (test hooks, logs). */
  running(): number {
    return this.slots.filter((s) => s.worker).length;
  }

  /** Every worker closes its listeners and connections, then its thread ends. */
  async close(timeoutMs = 3000): Promise<void> {
    this.closing = true;
    await Promise.all(
      this.slots.map(async (s) => {
        const w = s.worker;
        if (!w) return;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, timeoutMs);
          this.replies.set(-s.id, () => {
            clearTimeout(t);
            resolve();
          });
          w.postMessage({ t: 'close' } satisfies ToWorker);
        });
        this.replies.delete(-s.id);
        s.worker = undefined;
        await w.terminate();
      }),
    );
  }
}
