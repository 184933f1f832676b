// The daemon's push policy above the generators, after Istio's DiscoveryServer (pilot/pkg/xds/discovery.go):
// a change is only recorded and queued as a push request (ConfigUpdate; pilot_inbound_updates by type config /
// eds / svc / svcdelete as discovery.go ConfigUpdate, eds.go EDSUpdate and SvcUpdate count them), the ADS
// server's debouncer merges the requests, and when it dispatches a full push the push context is built once for
// everything merged (Push → initPushContext, timed as pilot_pushcontext_init_seconds, its status kept for the
// debug pages), updated from the previous one by the kinds that changed (PushContext.update). Endpoint-only
// changes update the current context in place (Istio's EDS path). Differs on purpose: a new connection or a
// debug page asking for the context while changes wait gets it built now (Istio serves the last pushed one),
// so what was applied is served at once; the builds between two dispatches are then all compared
// (decisions.ts unchangedAcross).
import type { ConfigEvent, ConfigStore } from '../../config/store';
import { configKey, type Config, type Kind } from '../../config/types';
import { initPushContext, type PushContext, type PushContextOptions } from '../../discovery/push-context';
import type { XdsCache } from '../../discovery/push/xds-cache';
import { setLastPushStatus } from '../../discovery/push-status';
import type { Service } from '../../discovery/model';
import type { RegistryEvent, ServiceRegistry } from '../../discovery/registry/types';
import { newPushRequest, type PushAllOptions, type PushRequestInit } from '../server';
import { inboundUpdates, pushContextInitTime } from '../server/metrics';
import type { PushRequest } from '../types';
import {
  changedKinds,
  configEventsToPush,
  configPush,
  dnsEndpointPush,
  dnsEndpointUpdates,
  endpointPush,
  fullPush,
  headlessPush,
  headlessUpdates,
  secretPush,
  secretsOnly,
  serviceKeys,
  servicePush,
  serviceUpdateType,
  unchangedAcross,
  type PushContextStep,
} from './decisions';

/** What the controller needs of the ADS server. */
export interface PushTarget {
  /** Queues the push for every connection; answers how many there are now. */
  pushAll(req: PushRequest<PushContext>, options?: PushAllOptions): number;
  /** Has `prepare` called on every push as it is dispatched (after the debounce), before it is queued. */
  onDispatch(prepare: (req: PushRequest<PushContext>) => PushRequest<PushContext>): void;
}

/** Changes recorded since the push context was last built; `full`: rebuild from scratch. */
interface Pending {
  kinds: Set<Kind>;
  services: boolean;
  full: boolean;
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
  private pending: Pending | undefined;
  /** Builds since the last dispatched full push. */
  private steps: PushContextStep[] = [];

  constructor(private readonly o: PushControllerOptions) {
    this.push = this.build();
    this.steps = [];
    o.server.onDispatch((req) => this.prepare(req));
  }

  /** The push context proxies are served from now: built first when changes wait for one. */
  current(): PushContext {
    if (this.pending) this.build();
    return this.push;
  }

  /** Configuration events from the config store. */
  onConfig(all: readonly ConfigEvent[]): void {
    const events = configEventsToPush(all);
    if (events.length === 0) return;
    inboundUpdates.inc({ type: 'config' }, events.length);
    if (secretsOnly(events)) return this.onSecret(events.map((e) => configKey(e.config)));
    for (const k of changedKinds(events)) this.changed().kinds.add(k);
    this.send(configPush(events));
  }

  /** Secrets changed (`Secret/ns/name` keys, or ALL_SECRETS_OF a namespace whose read access changed). */
  onSecret(keys: readonly string[]): void {
    this.send(secretPush(keys));
  }

  /** A registry event: endpoints alone update the push context in place; a service change is built at dispatch. */
  onRegistry(ev: RegistryEvent): void {
    if (ev.endpointsOnly) {
      inboundUpdates.inc({ type: 'eds' }, ev.hostnames.size);
      this.push = this.push.withRegistryUpdates(this.o.registry, ev.hostnames);
      this.send(endpointPush(ev.hostnames));
      const headless = headlessUpdates(this.push, ev.hostnames);
      if (headless.length > 0) this.send(headlessPush(headless));
      const dns = dnsEndpointUpdates(this.push, ev.hostnames);
      if (dns.length > 0) this.send(dnsEndpointPush(dns));
      return;
    }
    this.changed().services = true;
    const services = this.o.registry.services();
    const live = new Set(services.map((s) => s.hostname));
    for (const h of ev.hostnames) inboundUpdates.inc({ type: serviceUpdateType(live, h) });
    // named by namespace as the registry has them now, or as the last context had them (deleted ones)
    const byHost = new Map<string, Service[]>();
    for (const s of services) byHost.set(s.hostname, [...(byHost.get(s.hostname) ?? []), s]);
    const now = { servicesByHostname: (h: string) => byHost.get(h) ?? [] };
    this.send(servicePush(ev.hostnames, serviceKeys(ev.hostnames, [now, this.push])));
  }

  /** The config sources synced: everything they held is in. */
  onSynced(): void {
    this.changed().full = true;
    this.send(fullPush('global'));
  }

  /** New or rotated keys at a key server: a full push, as Istio's JwksResolver.PushFunc triggers. */
  onKeysChanged(): void {
    this.changed().full = true;
    this.send(fullPush('unknown'));
  }

  /**
   * The mesh config file changed (its telemetry, path normalization…): the options of the next push contexts
   * take `changes`, and every proxy gets a full push (Istio: a mesh config change is a global full push).
   */
  onMeshConfig(changes: Partial<PushContextOptions>): void {
    Object.assign(this.o.options, changes);
    this.changed().full = true;
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

  /**
   * Istio's Push: a full push leaves the debouncer with every change it merged, and is given the push context
   * built once for them and the types those builds left unchanged. Endpoint-only pushes keep their context.
   */
  private prepare(req: PushRequest<PushContext>): PushRequest<PushContext> {
    if (!req.full) return req;
    if (this.pending) this.build();
    const unchangedTypes = unchangedAcross(this.steps, req.configsUpdated);
    this.steps = [];
    const { unchangedTypes: _merged, ...rest } = req;
    return { ...rest, push: this.push, ...(unchangedTypes ? { unchangedTypes } : {}) };
  }

  private changed(): Pending {
    return (this.pending ??= { kinds: new Set(), services: false, full: false });
  }

  private build(): PushContext {
    const pending = this.pending;
    this.pending = undefined;
    const prev = this.push as PushContext | undefined;
    const from = prev && pending && !pending.full ? { prev, changes: pending } : undefined;
    const started = performance.now();
    const next = initPushContext(this.o.store, this.o.registry, this.o.options, this.o.cache, from);
    pushContextInitTime.observe((performance.now() - started) / 1000);
    setLastPushStatus(next.status);
    this.o.prefetchJwks?.(this.o.store.list('RequestAuthentication'), next);
    if (prev) this.steps.push({ prev, next });
    this.push = next;
    return next;
  }

  private send(init: PushRequestInit, options?: PushAllOptions): number {
    return this.o.server.pushAll(newPushRequest(this.push, init), options);
  }
}
