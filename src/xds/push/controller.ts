// The daemon's push policy above the generators: it holds the current push context, rebuilds it when a
// change needs that (Istio's initPushContext, timed as pilot_pushcontext_init_seconds, its status kept for
// the debug pages), asks the ADS server for the push each change needs (decisions.ts) and counts inbound
// updates as Istio's DiscoveryServer does (pilot/pkg/xds/discovery.go ConfigUpdate, eds.go EDSUpdate and
// SvcUpdate: pilot_inbound_updates by type config / eds / svc / svcdelete).
import type { ConfigEvent, ConfigStore } from '../../config/store';
import { configKey, type Config } from '../../config/types';
import { initPushContext, type PushContext, type PushContextOptions } from '../../discovery/push-context';
import type { XdsCache } from '../../discovery/push/xds-cache';
import { setLastPushStatus } from '../../discovery/push-status';
import type { RegistryEvent, ServiceRegistry } from '../../discovery/registry/types';
import { newPushRequest, type PushAllOptions, type PushRequestInit } from '../server';
import { inboundUpdates, pushContextInitTime } from '../server/metrics';
import type { PushRequest } from '../types';
import {
  configEventsToPush,
  configPush,
  endpointPush,
  fullPush,
  headlessPush,
  headlessUpdates,
  secretPush,
  secretsOnly,
  servicePush,
  serviceUpdateType,
} from './decisions';

/** What the controller needs of the ADS server. */
export interface PushTarget {
  /** Queues the push for every connection; answers how many there are now. */
  pushAll(req: PushRequest<PushContext>, options?: PushAllOptions): number;
}

export interface PushControllerOptions {
  server: PushTarget;
  store: ConfigStore;
  registry: ServiceRegistry;
  options: PushContextOptions;
  /** Lives across push contexts: unchanged clusters and virtual hosts are reused by content. */
  cache?: XdsCache;
  /** Starts fetching the key sets a push context's RequestAuthentications need (the daemon's JWKS resolver). */
  prefetchJwks?(policies: readonly Config<'RequestAuthentication'>[], push: PushContext): void;
}

export class PushController {
  private push: PushContext;

  constructor(private readonly o: PushControllerOptions) {
    this.push = this.rebuild();
  }

  /** The push context proxies are served from now. */
  current(): PushContext {
    return this.push;
  }

  /** Configuration events from the config store. */
  onConfig(all: readonly ConfigEvent[]): void {
    const events = configEventsToPush(all);
    if (events.length === 0) return;
    inboundUpdates.inc({ type: 'config' }, events.length);
    if (secretsOnly(events)) return this.onSecret(events.map((e) => configKey(e.config)));
    const prev = this.push;
    this.send(configPush(prev, this.rebuild(), events));
  }

  /** Secrets changed (`Secret/ns/name` keys, or ALL_SECRETS_OF a namespace whose read access changed). */
  onSecret(keys: readonly string[]): void {
    this.send(secretPush(keys));
  }

  /** A registry event: endpoints alone update the push context in place; a service change rebuilds it. */
  onRegistry(ev: RegistryEvent): void {
    if (ev.endpointsOnly) {
      inboundUpdates.inc({ type: 'eds' }, ev.hostnames.size);
      this.push = this.push.withRegistryUpdates(this.o.registry, ev.hostnames);
      this.send(endpointPush(ev.hostnames));
      const headless = headlessUpdates(this.push, ev.hostnames);
      if (headless.length > 0) this.send(headlessPush(headless));
      return;
    }
    const next = this.rebuild();
    for (const h of ev.hostnames) inboundUpdates.inc({ type: serviceUpdateType(next, h) });
    this.send(servicePush(ev.hostnames));
  }

  /** The config sources synced: everything they held is in. */
  onSynced(): void {
    this.rebuild();
    this.send(fullPush('global'));
  }

  /** New or rotated keys at a key server: a full push, as Istio's JwksResolver.PushFunc triggers. */
  onKeysChanged(): void {
    this.rebuild();
    this.send(fullPush('unknown'));
  }

  /**
   * The mesh config file changed (its telemetry, path normalization…): the options of the next push contexts
   * take `changes`, and every proxy gets a full push (Istio: a mesh config change is a global full push).
   */
  onMeshConfig(changes: Partial<PushContextOptions>): void {
    Object.assign(this.o.options, changes);
    this.rebuild();
    this.send({ ...fullPush('global'), configsUpdated: ['MeshConfig'] });
  }

  /** A push asked for on the debug endpoint: now, not debounced. Answers how many proxies it goes to. */
  onDebug(): number {
    return this.send(fullPush('debug'), { immediate: true });
  }

  /** The daemon stopped: the debug pages no longer show this daemon's last push status. */
  close(): void {
    setLastPushStatus(undefined);
  }

  private rebuild(): PushContext {
    const started = performance.now();
    const next = initPushContext(this.o.store, this.o.registry, this.o.options, this.o.cache);
    pushContextInitTime.observe((performance.now() - started) / 1000);
    setLastPushStatus(next.status);
    this.o.prefetchJwks?.(this.o.store.list('RequestAuthentication'), next);
    this.push = next;
    return next;
  }

  private send(init: PushRequestInit, options?: PushAllOptions): number {
    return this.o.server.pushAll(newPushRequest(this.push, init), options);
  }
}
