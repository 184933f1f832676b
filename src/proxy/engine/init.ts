// Envoy's initialisation order (Server::InstanceImpl and the init manager): static clusters warm, then CDS and
// its EDS, then LDS and the RDS/SDS its listeners need, each first fetch bounded by the config source's
// initial_fetch_timeout (15 s by default, 0 waits for ever); then the listeners serve and the server is LIVE.
import type { Bootstrap } from '../../gen/envoy/config/bootstrap/v3/bootstrap_pb';
import type { ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import { durationToMs } from '../common/duration';
import type { Logger } from '../log';
import type { Managers } from './managers';
import type { ConfigSources } from './sources';
import type { ServerStatus } from './state';
import type { WorkerPool } from './worker/pool';

export interface InitContext extends Managers {
  sources: ConfigSources;
  status: ServerStatus;
  log: Logger;
  pool: WorkerPool | undefined;
  /** The engine was closed meanwhile: nothing starts serving. */
  closed: () => boolean;
}

/** Resolves once `subscribe` reports the first response, or the source's initial fetch timed out. */
function firstFetch(log: Logger, subscribe: (onFirst: () => void) => void, cs: ConfigSource | undefined, what: string): Promise<void> {
  return new Promise<void>((resolve) => {
    const ms = durationToMs(cs?.initialFetchTimeout) ?? 15_000;
    const t =
      ms > 0
        ? setTimeout(() => {
            log.warn(`${what}: initial fetch timed out after ${ms}ms; continuing initialization`);
            resolve();
          }, ms)
        : undefined;
    subscribe(() => {
      if (t) clearTimeout(t);
      resolve();
    });
  });
}

/** INITIALIZING → LIVE. */
export async function initialize(bootstrap: Bootstrap, x: InitContext): Promise<void> {
  const { clusters, listeners, routes, log } = x;
  const ads = x.sources.ads;
  const dr = bootstrap.dynamicResources;
  x.status.set('INITIALIZING');
  await clusters.initializeStatics();
  if (dr?.cdsConfig && ads) {
    await firstFetch(
      log,
      (done) => {
        clusters.onFirstCds = () => void clusters.whenWarm().then(done);
        clusters.subscribeCds(ads);
        ads.start();
      },
      dr.cdsConfig,
      'CDS',
    );
  }
  if (ads) routes.setMux(ads);
  if (dr?.ldsConfig && ads) {
    await firstFetch(
      log,
      (done) => {
        listeners.onFirstLds = () => void listeners.whenWarm().then(done);
        listeners.subscribeLds(ads);
        ads.start();
      },
      dr.ldsConfig,
      'LDS',
    );
  }
  ads?.start();
  if (x.closed()) return;
  x.pool?.start();
  listeners.startWorkers();
  x.status.set('LIVE');
  log.info('all dependencies initialized. starting workers');
}
