// The aggregate of all registries (Istio serviceregistry/aggregate): one list of services, endpoints
// looked up in the registry that owns the service, and one stream of change notifications.
import type { Endpoint, Service } from '../model';
import { compareServices, Notifier, serviceKey } from './snapshot';
import type { RegistryEvent, RegistryHandler, ServiceRegistry } from './types';

export class AggregateRegistry implements ServiceRegistry {
  readonly id = 'Aggregate';
  private readonly registries: ServiceRegistry[] = [];
  private readonly unsubs = new Map<ServiceRegistry, () => void>();
  private readonly notifier = new Notifier();
  /** Per `namespace/hostname`: the registries that have it, first (winning) first; rebuilt after a change. */
  private index: Map<string, ServiceRegistry[]> | undefined;
  private sorted: readonly Service[] | undefined;

  constructor(registries: Iterable<ServiceRegistry> = []) {
    for (const r of registries) this.addRegistry(r);
  }

  /**
   * Earlier registries win when two define the same hostname in the same namespace: cluster registries
   * come first (the local cluster, then remote ones in the order added), as Istio prefers platform
   * services over ServiceEntries for the same host.
   */
  addRegistry(r: ServiceRegistry): void {
    if (r.provider === 'Orchestrator') {
      let at = 0;
      this.registries.forEach((x, i) => {
        if (x.provider === 'Orchestrator') at = i + 1;
      });
      this.registries.splice(at, 0, r);
    } else {
      this.registries.push(r);
    }
    this.invalidate();
    this.unsubs.set(
      r,
      r.subscribe((e) => {
        this.invalidate();
        this.notifier.emit(e);
      }),
    );
    const hostnames = new Set(r.services().map((s) => s.hostname));
    if (hostnames.size > 0) this.notifier.emit({ registry: r.id, hostnames, endpointsOnly: false });
  }

  removeRegistry(id: string): void {
    const i = this.registries.findIndex((r) => r.id === id);
    if (i < 0) return;
    const [r] = this.registries.splice(i, 1);
    this.unsubs.get(r!)?.();
    this.unsubs.delete(r!);
    this.invalidate();
    const hostnames = new Set(r!.services().map((s) => s.hostname));
    if (hostnames.size > 0) this.notifier.emit({ registry: r!.id, hostnames, endpointsOnly: false });
  }

  getRegistries(): readonly ServiceRegistry[] {
    return this.registries;
  }

  private invalidate(): void {
    this.index = undefined;
    this.sorted = undefined;
  }

  private byKey(): Map<string, ServiceRegistry[]> {
    if (!this.index) {
      const index = new Map<string, ServiceRegistry[]>();
      for (const r of this.registries) {
        for (const s of r.services()) {
          const k = serviceKey(s.hostname, s.namespace);
          const list = index.get(k);
          if (!list) index.set(k, [r]);
          else if (!list.includes(r)) list.push(r);
        }
      }
      this.index = index;
    }
    return this.index;
  }

  services(): readonly Service[] {
    if (!this.sorted) {
      const seen = new Set<string>();
      const out: Service[] = [];
      for (const r of this.registries) {
        for (const s of r.services()) {
          const k = serviceKey(s.hostname, s.namespace);
          if (seen.has(k)) continue;
          seen.add(k);
          out.push(s);
        }
      }
      this.sorted = out.sort(compareServices);
    }
    return this.sorted;
  }

  endpoints(hostname: string, namespace?: string): readonly Endpoint[] {
    const out: Endpoint[] = [];
    const namespaces = namespace !== undefined ? [namespace] : this.namespacesOf(hostname);
    for (const ns of namespaces) {
      const owners = this.byKey().get(serviceKey(hostname, ns));
      if (!owners || owners.length === 0) continue;
      // The winner's endpoints; when a cluster owns the service, those of every cluster that has it too.
      const winner = owners[0]!;
      const from = winner.provider === 'Orchestrator' ? owners.filter((r) => r.provider === 'Orchestrator') : [winner];
      for (const r of from) out.push(...r.endpoints(hostname, ns));
    }
    return out;
  }

  private namespacesOf(hostname: string): string[] {
    const out: string[] = [];
    for (const k of this.byKey().keys()) {
      const slash = k.indexOf('/');
      if (k.slice(slash + 1) === hostname) out.push(k.slice(0, slash));
    }
    return out;
  }

  subscribe(handler: RegistryHandler): () => void {
    return this.notifier.subscribe(handler);
  }

  hasSynced(): boolean {
    return this.registries.every((r) => r.hasSynced());
  }

  close(): void {
    for (const u of this.unsubs.values()) u();
    this.unsubs.clear();
    for (const r of this.registries) r.close();
  }
}

/** Merges events of one debounce window: union of hostnames; endpoints-only only if all were. */
export function mergeRegistryEvents(events: readonly RegistryEvent[]): RegistryEvent | undefined {
  if (events.length === 0) return undefined;
  const hostnames = new Set<string>();
  let endpointsOnly = true;
  for (const e of events) {
    for (const h of e.hostnames) hostnames.add(h);
    endpointsOnly &&= e.endpointsOnly;
  }
  return { registry: events.length === 1 ? events[0]!.registry : 'Aggregate', hostnames, endpointsOnly };
}
