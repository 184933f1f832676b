// Several ConfigStores read as one (files plus the orchestrator, say). A resource present in more
// than one store is read from the first store that has it; events of every store are forwarded
// as they come, one batch per source batch.
import type { ConfigEvent, ConfigStore } from './store';
import { type Config, configKey, type Kind } from './types';

export class AggregateConfigStore implements ConfigStore {
  constructor(private readonly stores: readonly ConfigStore[]) {}

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    if (this.stores.length === 1) return this.stores[0]!.list(kind, namespace);
    const seen = new Set<string>();
    const out: Config<K>[] = [];
    for (const s of this.stores) {
      for (const c of s.list(kind, namespace)) {
        const k = configKey(c);
        if (seen.has(k)) continue;
        seen.add(k);
        out.push(c);
      }
    }
    return out.sort((a, b) => (a.meta.namespace === b.meta.namespace ? cmp(a.meta.name, b.meta.name) : cmp(a.meta.namespace, b.meta.namespace)));
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    for (const s of this.stores) {
      const c = s.get(kind, namespace, name);
      if (c) return c;
    }
    return undefined;
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    const offs = this.stores.map((s) => s.subscribe(handler));
    return () => offs.forEach((off) => off());
  }

  hasSynced(): boolean {
    return this.stores.every((s) => s.hasSynced());
  }

  async whenSynced(): Promise<void> {
    await Promise.all(this.stores.map((s) => s.whenSynced()));
  }

  async close(): Promise<void> {
    await Promise.all(this.stores.map((s) => s.close()));
  }
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
