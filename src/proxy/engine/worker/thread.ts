// An engine worker thread (see pool.ts): the engine started from the main thread's bootstrap, with its
// config sources relayed from the main thread and its listeners on descriptors of the main thread's
// sockets. Bundled on its own (dist/engine-worker.cjs, an asset of the executable) so a worker loads
// only the engine.
import { parentPort, workerData } from 'node:worker_threads';
import { fromBinary } from '@bufbuild/protobuf';
import { BootstrapSchema } from '../../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { applyLoggingQuery } from '../../admin/server';
import { startMemoryRelief } from '../../common/memory-relief';
import { originalDstAddon } from '../../../native/original-dst';
import { startEngine, type Engine } from '../index';
import type { GrpcMux, RelayedResponse } from '../../xds/grpc-mux';
import type { TaggedName } from '../../stats/store';
import { snapshotOf } from './merge';
import type { FromWorker, ToWorker, WorkerData } from './protocol';

const port = parentPort!;
const data = workerData as WorkerData;
const post = (m: FromWorker) => port.postMessage(m);

const muxes = new Map<string, GrpcMux>();
/** Responses for a config source the engine has not opened yet (SDS streams open on first use). */
const early = new Map<string, RelayedResponse[]>();
const fdWaits = new Map<number, { resolve: (fd: number) => void; reject: (e: Error) => void }>();
let nextReq = 1;
let engine: Engine | undefined;
/** The tagged stats whose names and tags the main thread's merged view has (merge.ts snapshotOf). */
let taggedSent = new WeakSet<TaggedName>();

port.on('message', (m: ToWorker) => {
  switch (m.t) {
    case 'xds': {
      const r = { delta: m.delta, bytes: m.bytes };
      const mux = muxes.get(m.key);
      if (mux) mux.receive(r);
      else early.set(m.key, [...(early.get(m.key) ?? []), r]);
      return;
    }
    case 'fd': {
      const w = fdWaits.get(m.req);
      fdWaits.delete(m.req);
      if (m.fd !== undefined) w?.resolve(m.fd);
      else w?.reject(new Error(m.error ?? 'no socket'));
      return;
    }
    case 'stats':
      engine?.control.refreshStats();
      if (m.full) taggedSent = new WeakSet();
      post({ t: 'stats', req: m.req, snapshot: engine ? snapshotOf(engine.stats, taggedSent) : { counters: [], gauges: [], histograms: [] } });
      return;
    case 'drain':
      engine?.control.drainListeners({ graceful: m.graceful, inboundOnly: m.inboundOnly });
      return;
    case 'healthcheck':
      engine?.control.healthcheck(m.fail);
      return;
    case 'reset_counters':
      engine?.control.resetCounters();
      return;
    case 'logging':
      if (engine) {
        try {
          applyLoggingQuery(engine.loggers, new URLSearchParams(m.query));
        } catch {
          // the main thread answered the request with its usage already
        }
      }
      return;
    case 'close':
      void (engine ? engine.close(0) : Promise.resolve()).then(() => post({ t: 'closed' }));
      return;
    case 'crash':
      setImmediate(() => {
        throw new Error(`engine worker ${data.id}: crash requested through the test hook`);
      });
      return;
  }
});

async function main(): Promise<void> {
  engine = await startEngine(fromBinary(BootstrapSchema, data.bootstrap), {
    ...data.options,
    logWriter: (line) => post({ t: 'log', line }),
    worker: {
      id: data.id,
      registerMux(key, mux) {
        muxes.set(key, mux);
        const waiting = early.get(key);
        early.delete(key);
        for (const r of waiting ?? []) mux.receive(r);
      },
      sharedSocket(key, listener) {
        const req = nextReq++;
        return new Promise<number>((resolve, reject) => {
          fdWaits.set(req, { resolve, reject });
          post({ t: 'fd', req, key, listener });
        });
      },
    },
  });
  await engine.initialized;
  post({ t: 'live' });
  // This isolate's own idle release (the main thread's works on its isolate only): without it a worker keeps
  // the young generation and the old-generation pages that decoding the first config grew (~50 MB with 1000
  // services). The executable's pages are the process's: the main thread unmaps those.
  const addon = originalDstAddon();
  if (addon.ok && addon.memory) startMemoryRelief({}, { releaseMemory: addon.memory.releaseMemory, releaseExecutablePages: () => 0 });
}

main().catch((e: Error) => {
  post({ t: 'log', line: `engine worker ${data.id} cannot start: ${e.message}` });
  process.exit(1);
});
