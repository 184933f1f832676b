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
  readonly services: readonly Service[];

  constructor(states: Iterable<ServiceEntryState>) {
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
    this.services = [...byKey.values()].map((s) => s.service).sort(compareServices);
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

/** What changed between two snapshots, or undefined when nothing did. */
export function diffSnapshots(registry: string, prev: Snapshot, next: Snapshot): RegistryEvent | undefined {
  const hostnames = new Set<string>();
  let endpointsOnly = true;
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
