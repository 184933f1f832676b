// An in-memory ConfigStore: the state behind the --configDir source and the orchestrator source.
// Writers apply, delete or replace a source's whole set; each call is one batch of events. The
// store stamps its own resourceVersion on every stored version, and an unchanged resource (same
// content, any resourceVersion) produces no event, so relists and reloads are cheap for readers.
import { registerScope } from '../lib/log';
import type { ConfigEvent, ConfigStore } from './store';
import { type Config, configKey, type Kind } from './types';
import { deepEqual } from './values';

const log = registerScope('model', 'Configuration model');

export interface ConfigRef {
  kind: Kind;
  namespace: string;
  name: string;
}

export interface MemoryConfigStoreOptions {
  /** Whether the store counts as synced from the start (default true); sources that load first pass false and call markSynced(). */
  synced?: boolean;
}

interface Entry {
  config: Config;
  /** The source that last wrote it ('' for apply without a source). */
  owner: string;
}

/** Content equality: everything but the resourceVersion and the source position. */
export function sameContent(a: Config, b: Config): boolean {
  if (a.kind !== b.kind || a.apiVersion !== b.apiVersion) return false;
  const { resourceVersion: _ra, ...ma } = a.meta;
  const { resourceVersion: _rb, ...mb } = b.meta;
  return deepEqual(ma, mb) && deepEqual(a.spec, b.spec) && deepEqual(a.status, b.status);
}

export class MemoryConfigStore implements ConfigStore {
  private readonly byKind = new Map<Kind, Map<string, Entry>>();
  /** Sorted list per kind, rebuilt lazily after a change. */
  private readonly sorted = new Map<Kind, readonly Config[]>();
  private readonly handlers = new Set<(events: readonly ConfigEvent[]) => void>();
  private version = 0;
  private synced: boolean;
  private syncWaiters: Array<() => void> = [];
  private closed = false;

  constructor(opts: MemoryConfigStoreOptions = {}) {
    this.synced = opts.synced ?? true;
  }

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    let all = this.sorted.get(kind);
    if (!all) {
      all = [...(this.byKind.get(kind)?.values() ?? [])].map((e) => e.config).sort(compareConfigs);
      this.sorted.set(kind, all);
    }
    const out = namespace === undefined ? all : all.filter((c) => c.meta.namespace === namespace);
    return out as readonly Config<K>[];
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    return this.byKind.get(kind)?.get(`${kind}/${namespace}/${name}`)?.config as Config<K> | undefined;
  }

  /** Number of stored resources (all kinds). */
  size(): number {
    let n = 0;
    for (const m of this.byKind.values()) n += m.size;
    return n;
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  hasSynced(): boolean {
    return this.synced;
  }

  whenSynced(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  markSynced(): void {
    if (this.synced) return;
    this.synced = true;
    const waiters = this.syncWaiters;
    this.syncWaiters = [];
    for (const w of waiters) w();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.handlers.clear();
  }

  /** Adds or updates resources (owned by `source`); returns and publishes the batch of events. */
  apply(configs: Config | readonly Config[], source = ''): ConfigEvent[] {
    const events: ConfigEvent[] = [];
    for (const c of Array.isArray(configs) ? configs : [configs as Config]) this.put(c, source, events);
    this.publish(events);
    return events;
  }

  /** Deletes resources by identity, whoever wrote them; absent ones are ignored. */
  delete(refs: ConfigRef | readonly ConfigRef[]): ConfigEvent[] {
    const events: ConfigEvent[] = [];
    for (const ref of Array.isArray(refs) ? refs : [refs as ConfigRef]) this.remove(ref.kind, `${ref.kind}/${ref.namespace}/${ref.name}`, events);
    this.publish(events);
    return events;
  }

  /**
   * One batch for `source`: adds or updates `configs`, and deletes the resources under `removeKeys`
   * (configKey form) that `source` owns. A source that knows what changed uses it instead of replaceAll.
   */
  patch(source: string, configs: readonly Config[], removeKeys: Iterable<string>): ConfigEvent[] {
    const events: ConfigEvent[] = [];
    for (const c of configs) this.put(c, source, events);
    for (const k of removeKeys) {
      const kind = k.slice(0, k.indexOf('/')) as Kind;
      if (this.byKind.get(kind)?.get(k)?.owner === source) this.remove(kind, k, events);
    }
    this.publish(events);
    return events;
  }

  /**
   * Makes `configs` the complete set owned by `source`: adds what is new, updates what changed,
   * deletes what the source owned and no longer lists. Resources of other sources are untouched
   * unless `configs` names them (they then change owner). Later duplicates win.
   */
  replaceAll(source: string, configs: readonly Config[]): ConfigEvent[] {
    const keep = new Set(configs.map(configKey));
    const gone: string[] = [];
    for (const m of this.byKind.values()) for (const [k, e] of m) if (e.owner === source && !keep.has(k)) gone.push(k);
    return this.patch(source, configs, gone);
  }

  private put(c: Config, owner: string, events: ConfigEvent[]): void {
    let m = this.byKind.get(c.kind);
    if (!m) {
      m = new Map();
      this.byKind.set(c.kind, m);
    }
    const k = configKey(c);
    const prev = m.get(k);
    if (prev && sameContent(prev.config, c)) {
      // Same resource: keep its version, but remember the newest owner and position for messages.
      prev.owner = owner;
      if (c.source !== prev.config.source) {
        prev.config = { ...prev.config, source: c.source };
        this.sorted.delete(c.kind);
      }
      return;
    }
    const stored: Config = { ...c, meta: { ...c.meta, resourceVersion: String(++this.version) } };
    m.set(k, { config: stored, owner });
    this.sorted.delete(c.kind);
    events.push(prev ? { type: 'update', config: stored, old: prev.config } : { type: 'add', config: stored });
  }

  private remove(kind: Kind, k: string, events: ConfigEvent[]): void {
    const m = this.byKind.get(kind);
    const prev = m?.get(k);
    if (!m || !prev) return;
    m.delete(k);
    this.sorted.delete(kind);
    events.push({ type: 'delete', config: prev.config, old: prev.config });
  }

  private publish(events: readonly ConfigEvent[]): void {
    if (events.length === 0 || this.closed) return;
    for (const h of [...this.handlers]) {
      try {
        h(events);
      } catch (e) {
        // One failing reader must not stop the others from seeing the change.
        log.error(`config event handler failed: ${(e as Error).message}`);
      }
    }
  }
}

function compareConfigs(a: Config, b: Config): number {
  return a.meta.namespace < b.meta.namespace
    ? -1
    : a.meta.namespace > b.meta.namespace
      ? 1
      : a.meta.name < b.meta.name
        ? -1
        : a.meta.name > b.meta.name
          ? 1
          : 0;
}
