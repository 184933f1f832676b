// Fixtures for the xDS generator tests: the push context over a list of configs (no platform registry, only
// what the configs declare) and the full push request over it, as Istio's generator tests get them from
// pilot/pkg/networking/core's fake (pilot/test/xds/fake.go: a full PushRequest over a fresh PushContext).
import type { Config } from '../../../src/config/types';
import { initPushContext, type PushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import type { PushRequest } from '../../../src/xds/types';
import { ListStore } from '../../discovery/fixtures';

/** The push context over `configs`, as the daemon builds it from its config store. */
export function pushOf(configs: Config[]): PushContext {
  const store = new ListStore(configs);
  return initPushContext(store, buildRegistries(store, []));
}

/** A full push of `push` with nothing named as changed, started at `start`. */
export function fullPush(push: PushContext, start = Date.now()): PushRequest<PushContext> {
  return { full: true, configsUpdated: new Set(), edsUpdates: new Set(), reasons: new Map(), push, start };
}
