// The contract between configuration sources (a --configDir folder, the orchestrator API) and the
// code that reads configuration (registries, push context).
import type { Config, Kind } from './types';

export interface ConfigEvent {
  type: 'add' | 'update' | 'delete';
  config: Config;
  /** The previous version, for updates and deletes. */
  old?: Config;
}

export interface ConfigStore {
  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[];
  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined;
  /** Called once per batch of changes (a file reload, a watch event), after the store reflects them. */
  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void;
  /** True once the initial state has been read. */
  hasSynced(): boolean;
  whenSynced(): Promise<void>;
  /** Stop watching and release resources. */
  close(): Promise<void>;
}
