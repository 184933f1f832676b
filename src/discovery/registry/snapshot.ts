// A registry state as one immutable snapshot, rebuilt from its sources after every batch of changes.
// Diffing consecutive snapshots tells listeners exactly which hostnames changed and whether only
// endpoints did, which is what incremental EDS needs. Rebuilding is linear in the number of configs,
// which is cheap next to an xDS push.
import type { Endpoint, Service } from '../model';
import { registerScope } from '../../lib/log';
import type { ConfigStore } from '../../config/store';
import type { Kind } from '../../config/types';
import type { RegistryEvent, RegistryHandler, ServiceRegistry } from './types';

const log = registerScope('model', 'Model');

export interface ServiceEntryState {
  service: Service;
  endpoints: Endpoint[];
}

/** Key of a service in a snapshot: hostname and namespace (two ServiceEntries may share a host). */
export function serviceKey(hostname: string, namespace: string): string {
  return `${namespace}/${hostname}`;
}

export class Snapshot {
  readonly byKey: ReadonlyMap<string, ServiceEntryState>;
  readonly byHost: ReadonlyMap<string, ServiceEntryState[]>;
  private sortedServices: readonly Service[] | undefined;

  constructor(states: Iterable<ServiceEntryState>, indexes?: { byKey: Map<string, ServiceEntryState>; byHost: Map<string, ServiceEntryState[]> }) {
    if (indexes) {
      this.byKey = indexes.byKey;
      this.byHost = indexes.byHost;
      return;
    }
    const byKey = new Map<string, ServiceEntryState>();
    for (const s of states) {
      const k = serviceKey(s.service.hostname, s.service.namespace);
      const prev = byKey.get(k);
      if (prev) {
        // Same host declared twice in one namespace: Istio keeps the oldest definition and merges endpoints.
        const [keep, other] = prev.service.creationTime <= s.service.creationTime ? [prev, s] : [s, prev];
        byKey.set(k, { service: keep.service, endpoints: [...keep.endpoints, ...other.endpoints] });
      } else {
        byKey.set(k, s);
      }
    }
    const byHost = new Map<string, ServiceEntryState[]>();
    for (const s of byKey.values()) {
      const list = byHost.get(s.service.hostname);
      if (list) list.push(s);
      else byHost.set(s.service.hostname, [s]);
    }
    this.byKey = byKey;
    this.byHost = byHost;
  }

  /** Services sorted as Istio orders them (creation time, then hostname and namespace); computed once. */
  get services(): readonly Service[] {
    this.sortedServices ??= [...this.byKey.values()].map((s) => s.service).sort(compareServices);
    return this.sortedServices;
  }

  /**
   * This snapshot with some keys (`namespace/hostname`, one state per key) replaced, or removed when
   * undefined; the rest is shared, so a change costs what it touches.
   */
  withChanges(changes: ReadonlyMap<string, ServiceEntryState | undefined>): Snapshot {
    const byKey = new Map(this.byKey);
    /** Per hostname touched: the new states of the changed keys with that hostname. */
    const added = new Map<string, ServiceEntryState[]>();
    for (const [k, s] of changes) {
      const prev = byKey.get(k);
      if (prev && !added.has(prev.service.hostname)) added.set(prev.service.hostname, []);
      if (s) {
        byKey.set(k, s);
        const list = added.get(s.service.hostname);
        if (list) list.push(s);
        else added.set(s.service.hostname, [s]);
      } else byKey.delete(k);
    }
    const byHost = new Map(this.byHost);
    for (const [h, fresh] of added) {
      const list = (this.byHost.get(h) ?? []).filter((s) => !changes.has(serviceKey(s.service.hostname, s.service.namespace)));
      list.push(...fresh);
      if (list.length > 0) byHost.set(h, list);
      else byHost.delete(h);
    }
    return new Snapshot([], { byKey, byHost });
  }

  endpoints(hostname: string, namespace?: string): Endpoint[] {
    const states = this.byHost.get(hostname) ?? [];
    const out: Endpoint[] = [];
    for (const s of states) if (namespace === undefined || s.service.namespace === namespace) out.push(...s.endpoints);
    return out;
  }
}

export function compareServices(a: Service, b: Service): number {
  return a.creationTime - b.creationTime || cmp(a.hostname, b.hostname) || cmp(a.namespace, b.namespace);
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * What changed between two snapshots, or undefined when nothing did; `keys` limits the comparison to
 * the keys that may have changed (the rest is known to be shared).
 */
export function diffSnapshots(registry: string, prev: Snapshot, next: Snapshot, keys?: Iterable<string>): RegistryEvent | undefined {
  const hostnames = new Set<string>();
  let endpointsOnly = true;
  if (keys) {
    for (const k of keys) {
      const p = prev.byKey.get(k);
      const n = next.byKey.get(k);
      if (p === n) continue;
      if (!p || !n || !sameJson(p.service, n.service)) {
        if (p) hostnames.add(p.service.hostname);
        if (n) hostnames.add(n.service.hostname);
        endpointsOnly = false;
      } else if (!sameJson(p.endpoints, n.endpoints)) {
        hostnames.add(n.service.hostname);
      }
    }
    return hostnames.size === 0 ? undefined : { registry, hostnames, endpointsOnly };
  }
  for (const [k, n] of next.byKey) {
    const p = prev.byKey.get(k);
    if (!p) {
      hostnames.add(n.service.hostname);
      endpointsOnly = false;
      continue;
    }
    if (!sameJson(p.service, n.service)) {
      hostnames.add(n.service.hostname);
      endpointsOnly = false;
    } else if (!sameJson(p.endpoints, n.endpoints)) {
      hostnames.add(n.service.hostname);
    }
  }
  for (const [k, p] of prev.byKey) {
    if (!next.byKey.has(k)) {
      hostnames.add(p.service.hostname);
      endpointsOnly = false;
    }
  }
  if (hostnames.size === 0) return undefined;
  return { registry, hostnames, endpointsOnly };
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Fan-out of registry events to subscribers; a failing handler does not stop the others. */
export class Notifier {
  private readonly handlers = new Set<RegistryHandler>();

  subscribe(h: RegistryHandler): () => void {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }

  emit(e: RegistryEvent): void {
    for (const h of [...this.handlers]) {
      try {
        h(e);
      } catch (err) {
        // a subscriber's bug must not break registry bookkeeping or starve the other subscribers
        log.error(`registry event handler failed: ${err instanceof Error ? err.message : String(err)}`, { registry: e.registry });
      }
    }
  }
}

/**
 * A registry rebuilt from a ConfigStore into immutable snapshots; subscribers hear which hostnames
 * changed. Subclasses say how to build a snapshot and call start() once their own fields are set
 * (parameter properties are assigned only after super() returns).
 */
export abstract class StoreBackedRegistry implements ServiceRegistry {
  abstract readonly id: string;
  private snapshot = new Snapshot([]);
  private readonly notifier = new Notifier();
  private unsubscribe: () => void = () => {};

  constructor(
    protected readonly store: ConfigStore,
    private readonly watched: ReadonlySet<Kind>,
  ) {}

  protected start(): void {
    this.snapshot = this.build();
    this.unsubscribe = this.store.subscribe((events) => {
      if (events.some((e) => this.watched.has(e.config.kind))) this.refresh();
    });
  }

  protected abstract build(): Snapshot;

  /** Rebuilds from the store and notifies subscribers of what changed. */
  refresh(): void {
    const next = this.build();
    const ev = diffSnapshots(this.id, this.snapshot, next);
    this.snapshot = next;
    if (ev) this.notifier.emit(ev);
  }

  services(): readonly Service[] {
    return this.snapshot.services;
  }

  endpoints(hostname: string, namespace?: string): readonly Endpoint[] {
    return this.snapshot.endpoints(hostname, namespace);
  }

  subscribe(handler: RegistryHandler): () => void {
    return this.notifier.subscribe(handler);
  }

  hasSynced(): boolean {
    return this.store.hasSynced();
  }

  close(): void {
    this.unsubscribe();
  }
}
