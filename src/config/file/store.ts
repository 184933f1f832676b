// The --configDir source: a directory of manifests, watched and reloaded on change.
//
// Each directory is watched on its own (new sub-directories are picked up on the rescan their
// creation triggers), and any event schedules a debounced rescan that re-reads only the files
// whose inode, size or times changed, so editors that write through a rename, moves and deletes
// all look the same. A resource that fails to parse or validate is logged, counted in
// pilot_total_rejected_configs and skipped: if it was served before, the previous version keeps
// serving; if its file is gone, it is deleted; if it never was valid, it is absent.
import { type FSWatcher, watch } from 'node:fs';
import * as path from 'node:path';
import { registerScope } from '../../lib/log';
import { type ConfigError, formatConfigError } from '../errors';
import { MemoryConfigStore } from '../memory';
import { recordRejectedConfig } from '../metrics';
import type { ConfigEvent, ConfigStore } from '../store';
import { type Config, configKey, type Kind } from '../types';
import { type FileLoad, loadFile, mergeLoads } from './load';
import { type FileStamp, sameStamp, scanTree } from './walk';

const fileLog = registerScope('file', 'File client messages');
const validationLog = registerScope('validation', 'CRD validation debugging');

/** Istio's FILE_DEBOUNCE_DURATION default. */
export const DEFAULT_FILE_DEBOUNCE_MS = 100;
const ROOT_RETRY_MS = 1000;
const OWNER = 'file';

export interface FileConfigStoreOptions {
  dir: string;
  /** Quiet time after the first change event before reloading (default 100ms). */
  debounceMs?: number;
  /** Validate resources and reject invalid ones (default true). */
  validate?: boolean;
}

interface FileState {
  stamp: FileStamp;
  load: FileLoad;
}

export class FileConfigStore implements ConfigStore {
  readonly dir: string;
  private readonly debounceMs: number;
  private readonly validate: boolean;
  private readonly store = new MemoryConfigStore({ synced: false });
  private readonly files = new Map<string, FileState>();
  private readonly watchers = new Map<string, FSWatcher>();
  /** Which file each served resource came from (relative path). */
  private readonly servedFrom = new Map<string, string>();
  private lastDuplicates = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private readonly initial: Promise<void>;
  private reloads = 0;

  constructor(opts: FileConfigStoreOptions) {
    this.dir = opts.dir;
    this.debounceMs = opts.debounceMs ?? DEFAULT_FILE_DEBOUNCE_MS;
    this.validate = opts.validate ?? true;
    this.initial = this.runReload(true);
    // whenSynced() hands the failure to the caller; do not let it surface as an unhandled rejection.
    this.initial.catch(() => undefined);
  }

  list<K extends Kind>(kind: K, namespace?: string): readonly Config<K>[] {
    return this.store.list(kind, namespace);
  }

  get<K extends Kind>(kind: K, namespace: string, name: string): Config<K> | undefined {
    return this.store.get(kind, namespace, name);
  }

  subscribe(handler: (events: readonly ConfigEvent[]) => void): () => void {
    return this.store.subscribe(handler);
  }

  hasSynced(): boolean {
    return this.store.hasSynced();
  }

  /** Resolves after the first full read; rejects if the directory cannot be read at start. */
  whenSynced(): Promise<void> {
    return this.initial;
  }

  /** Completed reloads (the initial read included), for diagnostics. */
  reloadCount(): number {
    return this.reloads;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    await this.running?.catch(() => undefined);
    await this.store.close();
  }

  /** Reload now (after the debounce) as if a file had changed. */
  refresh(): void {
    this.schedule(0);
  }

  private schedule(delay = this.debounceMs): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.timer) return; // the first event of a burst sets the deadline
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runReload(false).catch(() => undefined);
    }, delay);
    this.timer.unref();
  }

  private runReload(initial: boolean): Promise<void> {
    const p = this.reload(initial).finally(() => {
      this.running = undefined;
      if (this.again && !this.closed) {
        this.again = false;
        this.schedule();
      }
    });
    this.running = p;
    return p;
  }

  private async reload(initial: boolean): Promise<void> {
    let scan;
    try {
      scan = await scanTree(this.dir);
    } catch (e) {
      const msg = `cannot read config directory ${this.dir}: ${(e as Error).message}`;
      if (initial) {
        fileLog.error(msg);
        throw new Error(msg);
      }
      // Keep serving what we have (a ConfigMap swap, an unmounted volume) and look again soon.
      fileLog.warn(`${msg}; keeping the current configuration`);
      this.retryLater();
      return;
    }
    if (this.closed) return;
    const newDirs = this.watchDirs(scan.dirs);

    let changed = 0;
    for (const [rel, stamp] of scan.files) {
      const prev = this.files.get(rel);
      if (prev && sameStamp(prev.stamp, stamp)) continue;
      const load = await loadFile(stamp.abs, path.join(this.dir, rel), this.validate);
      changed++;
      if (load.missing) {
        // Deleted between the scan and the read.
        this.files.delete(rel);
        continue;
      }
      this.files.set(rel, { stamp, load });
      this.report(load);
    }
    for (const rel of [...this.files.keys()]) {
      if (scan.files.has(rel)) continue;
      this.files.delete(rel);
      changed++;
    }

    if (changed > 0 || initial) this.publish();
    this.reloads++;
    if (initial) {
      fileLog.info(`loaded ${this.store.size()} resources from ${scan.files.size} files under ${this.dir}`);
      this.store.markSynced();
    }
    // Files created in a new directory before its watcher existed are caught by one more pass.
    if (newDirs > 0 && !initial) this.again = true;
  }

  /** Computes the served set from the current file loads and hands it to the memory store. */
  private publish(): void {
    const rels = [...this.files.keys()].sort();
    const loads = rels.map((r) => this.files.get(r)!.load);
    const merged = mergeLoads(loads);
    const desired = new Map<string, Config>();
    const from = new Map<string, string>();
    rels.forEach((rel) => {
      for (const item of this.files.get(rel)!.load.items) if (item.errors.length === 0) from.set(item.key, rel);
    });
    for (const c of merged.configs) desired.set(configKey(c), c);
    const present = new Set<string>();
    for (const l of loads) for (const item of l.items) present.add(item.key);

    for (const [key, rel] of this.servedFrom) {
      if (desired.has(key)) continue;
      const current = this.currentConfig(key);
      if (!current) continue;
      if (merged.rejected.has(key)) {
        // Invalid now, valid before: the last good version keeps serving.
        desired.set(key, current);
        from.set(key, rel);
        continue;
      }
      const state = this.files.get(rel);
      if (state && state.load.unidentified && !present.has(key)) {
        // Its file has a document we could not read: it may still be in there.
        desired.set(key, current);
        from.set(key, rel);
      }
    }

    const dupKeys = new Set(merged.duplicates.map(formatConfigError));
    for (const d of merged.duplicates) if (!this.lastDuplicates.has(formatConfigError(d))) fileLog.warn(formatConfigError(d), fields(d));
    this.lastDuplicates = dupKeys;

    this.store.replaceAll(OWNER, [...desired.values()]);
    this.servedFrom.clear();
    for (const key of desired.keys()) this.servedFrom.set(key, from.get(key) ?? '');
  }

  private currentConfig(key: string): Config | undefined {
    const [kind, namespace, ...rest] = key.split('/');
    return this.store.get(kind as Kind, namespace!, rest.join('/'));
  }

  /** Logs and counts the problems of a freshly read file. */
  private report(load: FileLoad): void {
    for (const w of load.warnings) fileLog.warn(formatConfigError(w), fields(w));
    for (const e of load.errors) {
      if (e.resource) {
        validationLog.warn(`rejected ${formatConfigError(e)}`, fields(e));
      } else {
        fileLog.warn(`skipped ${formatConfigError(e)}`, fields(e));
        recordRejectedConfig('file', load.display);
      }
    }
    for (const item of load.items) {
      if (item.errors.length === 0) continue;
      const [kind] = item.key.split('/');
      recordRejectedConfig(kind!.toLowerCase() as Lowercase<Kind>, `${item.config.meta.namespace}/${item.config.meta.name}`);
    }
  }

  /** Watches directories not yet watched and forgets vanished ones; returns how many were added. */
  private watchDirs(dirs: readonly string[]): number {
    const want = new Set(dirs);
    for (const [d, w] of this.watchers) {
      if (!want.has(d)) {
        w.close();
        this.watchers.delete(d);
      }
    }
    let added = 0;
    for (const d of dirs) {
      if (this.watchers.has(d)) continue;
      try {
        const w = watch(d, { persistent: false }, () => this.schedule());
        w.on('error', () => {
          // The directory went away (or the watch broke): drop it and let a rescan decide.
          w.close();
          if (this.watchers.get(d) === w) this.watchers.delete(d);
          this.schedule();
        });
        this.watchers.set(d, w);
        added++;
      } catch (e) {
        fileLog.warn(`cannot watch ${d}: ${(e as Error).message}`);
      }
    }
    return added;
  }

  private retryLater(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runReload(false).catch(() => undefined);
    }, Math.max(ROOT_RETRY_MS, this.debounceMs));
    this.timer.unref();
  }
}

function fields(e: ConfigError): Record<string, unknown> {
  const f: Record<string, unknown> = { file: e.source };
  if (e.document) f.document = e.document;
  if (e.resource) f.resource = e.resource;
  if (e.field) f.field = e.field;
  return f;
}
