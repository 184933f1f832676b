// The --configDir source: a directory of manifests, watched and reloaded on change.
//
// Each directory is watched on its own (new sub-directories are picked up on the rescan their
// creation triggers), and any event schedules a debounced reload that re-reads only the files
// whose inode, size or times changed, so editors that write through a rename, moves and deletes
// all look the same. When every event of a burst names a configuration file, only those files are
// looked at again, and only the resources they held or hold are merged and handed to the store: an
// edit costs the same in a tree of ten files as in one of thousands. Any other event (a directory, a
// hidden name such as a ConfigMap's `..data` swap, a watcher error) rescans the whole tree.
// A resource that fails to parse or validate is logged, counted in
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
import { type FileStamp, isConfigFileName, sameStamp, scanTree, stampOf } from './walk';

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
  /** The files whose resources carry each identity (configKey). */
  private readonly keyFiles = new Map<string, Set<string>>();
  /** Duplicate warnings last logged, per identity (logged again only when they change). */
  private readonly duplicatesLogged = new Map<string, Set<string>>();
  /** Relative paths of the configuration files named by events since the last reload. */
  private readonly pending = new Set<string>();
  /** An event since the last reload that only a rescan of the whole tree can answer. */
  private fullScanDue = true;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private readonly initial: Promise<void>;
  private reloads = 0;
  private reads = 0;

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

  /** Files read so far (the initial read included), for diagnostics. */
  filesRead(): number {
    return this.reads;
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
    this.fullScanDue = true;
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
    const full = initial || this.fullScanDue;
    const named = [...this.pending];
    this.pending.clear();
    this.fullScanDue = false;
    let stamps: Map<string, FileStamp | undefined>;
    let newDirs = 0;
    if (full) {
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
        this.fullScanDue = true;
        this.retryLater();
        return;
      }
      if (this.closed) return;
      newDirs = this.watchDirs(scan.dirs);
      stamps = new Map(scan.files);
      for (const rel of this.files.keys()) if (!scan.files.has(rel)) stamps.set(rel, undefined);
    } else {
      stamps = new Map();
      for (const rel of named) {
        const stamp = await stampOf(path.join(this.dir, rel), rel);
        if (stamp === 'directory') {
          // A directory under a name that looked like a file: only a rescan knows what it holds.
          this.fullScanDue = true;
          this.schedule(0);
          continue;
        }
        stamps.set(rel, stamp);
      }
      if (this.closed) return;
    }

    const changedFiles: string[] = [];
    for (const [rel, stamp] of stamps) {
      const prev = this.files.get(rel);
      if (stamp === undefined) {
        if (prev) changedFiles.push(rel);
        continue;
      }
      if (prev && sameStamp(prev.stamp, stamp)) continue;
      changedFiles.push(rel);
    }
    const affected = new Set<string>();
    for (const rel of changedFiles) {
      const prev = this.files.get(rel);
      const stamp = stamps.get(rel);
      if (stamp) this.reads++;
      const load = stamp ? await loadFile(stamp.abs, path.join(this.dir, rel), this.validate) : undefined;
      if (prev) for (const item of prev.load.items) this.unindex(item.key, rel, affected);
      if (!stamp || load!.missing) {
        // Gone (or deleted between the stat and the read).
        this.files.delete(rel);
        continue;
      }
      this.files.set(rel, { stamp, load: load! });
      for (const item of load!.items) this.index(item.key, rel, affected);
      this.report(load!);
    }
    if (changedFiles.length > 0 || initial) {
      // What a changed file served may now come from nowhere (or stay, if the file has an unreadable document).
      const changed = new Set(changedFiles);
      for (const [key, rel] of this.servedFrom) if (changed.has(rel)) affected.add(key);
      this.publish(affected);
    }
    this.reloads++;
    if (initial) {
      fileLog.info(`loaded ${this.store.size()} resources from ${this.files.size} files under ${this.dir}`);
      this.store.markSynced();
    }
    // Files created in a new directory before its watcher existed are caught by one more pass.
    if (newDirs > 0 && !initial) {
      this.fullScanDue = true;
      this.again = true;
    }
  }

  private index(key: string, rel: string, affected: Set<string>): void {
    let rels = this.keyFiles.get(key);
    if (!rels) this.keyFiles.set(key, (rels = new Set()));
    rels.add(rel);
    affected.add(key);
  }

  private unindex(key: string, rel: string, affected: Set<string>): void {
    const rels = this.keyFiles.get(key);
    rels?.delete(rel);
    if (rels?.size === 0) this.keyFiles.delete(key);
    affected.add(key);
  }

  /**
   * Decides the served version of each identity in `keys` from every file that defines it (the merge of
   * mergeLoads, restricted to those identities) and hands the differences to the memory store as one batch.
   */
  private publish(keys: ReadonlySet<string>): void {
    const rels = new Set<string>();
    for (const key of keys) for (const rel of this.keyFiles.get(key) ?? []) rels.add(rel);
    const loads = [...rels].sort().map((rel) => {
      const load = this.files.get(rel)!.load;
      return { rel, load: { ...load, items: load.items.filter((item) => keys.has(item.key)) } };
    });
    const merged = mergeLoads(loads.map((l) => l.load));
    const desired = new Map<string, Config>();
    const from = new Map<string, string>();
    for (const { rel, load } of loads) for (const item of load.items) if (item.errors.length === 0) from.set(item.key, rel);
    for (const c of merged.configs) desired.set(configKey(c), c);
    const present = new Set<string>();
    for (const { load } of loads) for (const item of load.items) present.add(item.key);

    for (const key of keys) {
      if (desired.has(key)) continue;
      const rel = this.servedFrom.get(key);
      if (rel === undefined) continue;
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

    const duplicates = new Map<string, Set<string>>();
    for (const d of merged.duplicates) {
      let set = duplicates.get(d.resource!);
      if (!set) duplicates.set(d.resource!, (set = new Set()));
      const text = formatConfigError(d);
      set.add(text);
      if (!this.duplicatesLogged.get(d.resource!)?.has(text)) fileLog.warn(text, fields(d));
    }
    for (const key of keys) {
      const set = duplicates.get(key);
      if (set) this.duplicatesLogged.set(key, set);
      else this.duplicatesLogged.delete(key);
    }

    const removed = [...keys].filter((key) => !desired.has(key));
    this.store.patch(OWNER, [...desired.values()], removed);
    for (const key of removed) this.servedFrom.delete(key);
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

  /** An event in the directory `relDir` ('' for the root) about the entry `name`. */
  private changed(relDir: string, name: string | Buffer | null): void {
    const n = typeof name === 'string' ? name : name?.toString('utf8');
    if (n && isConfigFileName(n)) this.pending.add(relDir === '' ? n : `${relDir}/${n}`);
    else this.fullScanDue = true;
    this.schedule();
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
        const relDir = path.relative(this.dir, d).split(path.sep).join('/');
        const w = watch(d, { persistent: false }, (_event, name) => this.changed(relDir, name));
        w.on('error', () => {
          // The directory went away (or the watch broke): drop it and let a rescan decide.
          w.close();
          if (this.watchers.get(d) === w) this.watchers.delete(d);
          this.fullScanDue = true;
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
    this.timer = setTimeout(
      () => {
        this.timer = undefined;
        void this.runReload(false).catch(() => undefined);
      },
      Math.max(ROOT_RETRY_MS, this.debounceMs),
    );
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
