// Engine worker threads (--concurrency N): the main thread starts N-1 (src/proxy/engine/worker/), each running
// this engine on the same bootstrap, when the native addon can share the listening sockets with them.
import { toBinary } from '@bufbuild/protobuf';
import { BootstrapSchema, type Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import { originalDstAddon } from '../../native/original-dst';
import type { ListenerManager } from '../listener/manager';
import type { Logger } from '../log';
import type { EngineOptions } from './options';
import type { ServerStatus } from './state';
import type { WorkerPool } from './worker/pool';

/** The pool of worker threads, or undefined (with a warning) when sockets cannot be shared. */
export async function startWorkerPool(
  bootstrap: Bootstrap,
  options: EngineOptions,
  concurrency: number,
  listeners: ListenerManager,
  status: ServerStatus,
  log: Logger,
): Promise<WorkerPool | undefined> {
  const dup = originalDstAddon();
  const dupFd = dup.ok ? dup.source.dupFd : undefined;
  if (!dupFd) {
    log.warn(
      `concurrency ${concurrency}: running one engine thread: worker threads share listening sockets through the native addon, which ${dup.ok ? 'has no dupFd in this build' : `is not loaded (${dup.reason})`}`,
    );
    status.singleThreaded();
    return undefined;
  }
  const { WorkerPool } = await import('./worker/pool');
  return new WorkerPool({
    threads: concurrency - 1,
    bootstrap: toBinary(BootstrapSchema, bootstrap),
    engineOptions: {
      concurrency,
      drainTimeS: options.drainTimeS ?? 600,
      ...(options.logLevel ? { logLevel: options.logLevel } : {}),
      ...(options.componentLogLevel ? { componentLogLevel: options.componentLogLevel } : {}),
      ...(options.logFormat ? { logFormat: options.logFormat } : {}),
      ...(options.drainStrategy ? { drainStrategy: options.drainStrategy } : {}),
      ...(options.parentShutdownTimeS !== undefined ? { parentShutdownTimeS: options.parentShutdownTimeS } : {}),
      ...(options.localAddressIpVersion ? { localAddressIpVersion: options.localAddressIpVersion } : {}),
      ...(options.xdsBackoff ? { xdsBackoff: options.xdsBackoff } : {}),
    },
    log,
    logWriter: options.logWriter ?? ((line) => process.stderr.write(`${line}\n`)),
    shareSocket: (key) => listeners.shareSocket(key, dupFd, 15_000),
    restarts: status.scope.counter('worker_restarts'),
  });
}
