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

  constructor(registries: Iterable<ServiceRegistry> = []) {
    for (const r of registries) this.addRegistry(r);
  }

  /**
   * Earlier registries win when two define the same hostname in the same namespace (the orchestrator
   * is added first, as Istio prefers platform services over ServiceEntries for the same host).
   */
  addRegistry(r: ServiceRegistry): void {
    this.registries.push(r);
    this.unsubs.set(
      r,
      r.subscribe((e) => this.notifier.emit(e)),
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
    const hostnames = new Set(r!.services().map((s) => s.hostname));
    if (hostnames.size > 0) this.notifier.emit({ registry: r!.id, hostnames, endpointsOnly: false });
  }

  getRegistries(): readonly ServiceRegistry[] {
    return this.registries;
  }

  services(): readonly Service[] {
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
    return out.sort(compareServices);
  }

  endpoints(hostname: string, namespace?: string): readonly Endpoint[] {
    // endpoints come from the registry whose service won for (hostname, namespace)
    const taken = new Set<string>();
    const out: Endpoint[] = [];
    for (const r of this.registries) {
      for (const s of r.services()) {
        if (s.hostname !== hostname || (namespace !== undefined && s.namespace !== namespace)) continue;
        if (taken.has(s.namespace)) continue;
        taken.add(s.namespace);
        out.push(...r.endpoints(hostname, s.namespace));
      }
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
