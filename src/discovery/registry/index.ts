// Building the registries the daemon's `--registries` flag asks for.
import type { ConfigStore } from '../../config/store';
import { AggregateRegistry } from './aggregate';
import { MemoryRegistry, MOCK_REGISTRY } from './memory';
import { ORCHESTRATOR_REGISTRY, OrchestratorRegistry, type OrchestratorOptions } from './orchestrator';
import { ServiceEntryRegistry } from './serviceentry';

export * from './aggregate';
export * from './memory';
export * from './orchestrator';
export * from './protocol';
export * from './serviceentry';
export * from './snapshot';
export * from './types';
export * from './workload';

export class UnsupportedRegistryError extends Error {}

/**
 * The aggregate for `--registries`: orchestrator and/or Mock in the order given (duplicates ignored),
 * then the ServiceEntry registry, which is always present. Unknown names fail like Istio:
 * `service registry X is not supported`.
 */
export function buildRegistries(store: ConfigStore, registries: readonly string[], opts: OrchestratorOptions = {}): AggregateRegistry {
  const agg = new AggregateRegistry();
  const seen = new Set<string>();
  for (const name of registries) {
    if (seen.has(name)) continue;
    seen.add(name);
    switch (name) {
      case ORCHESTRATOR_REGISTRY:
        agg.addRegistry(new OrchestratorRegistry(store, opts));
        break;
      case MOCK_REGISTRY:
        agg.addRegistry(new MemoryRegistry(MOCK_REGISTRY));
        break;
      default:
        agg.close();
        throw new UnsupportedRegistryError(`service registry ${name} is not supported`);
    }
  }
  agg.addRegistry(new ServiceEntryRegistry(store, opts));
  return agg;
}
