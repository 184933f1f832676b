// An in-memory registry that code (and tests) fill directly. `--registries Mock` adds one: Istio's
// mock registry (serviceregistry/mock, `NewDiscovery(map[host.Name]*model.Service{}, 2)`) started
// empty and served no service until something added one; Istio 1.26 no longer wires it at all.
import type { Endpoint, Service } from '../model';
import { Notifier, Snapshot, diffSnapshots, serviceKey, type ServiceEntryState } from './snapshot';
import type { RegistryHandler, ServiceRegistry } from './types';

export const MOCK_REGISTRY = 'Mock';

export class MemoryRegistry implements ServiceRegistry {
  private readonly states = new Map<string, ServiceEntryState>();
  private snapshot = new Snapshot([]);
  private readonly notifier = new Notifier();

  constructor(readonly id: string = MOCK_REGISTRY) {}

  /** Adds or replaces a service; its endpoints are kept when `endpoints` is omitted. */
  addService(service: Service, endpoints?: Endpoint[]): void {
    const k = serviceKey(service.hostname, service.namespace);
    const prev = this.states.get(k);
    this.states.set(k, { service, endpoints: endpoints ?? prev?.endpoints ?? [] });
    this.commit();
  }

  removeService(hostname: string, namespace: string): void {
    if (this.states.delete(serviceKey(hostname, namespace))) this.commit();
  }

  setEndpoints(hostname: string, namespace: string, endpoints: Endpoint[]): void {
    const k = serviceKey(hostname, namespace);
    const prev = this.states.get(k);
    if (!prev) throw new Error(`mock registry: no service ${hostname} in namespace ${namespace}`);
    this.states.set(k, { service: prev.service, endpoints });
    this.commit();
  }

  private commit(): void {
    const next = new Snapshot(this.states.values());
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
    return true;
  }

  close(): void {}
}
