// File primitives of the installer: Go-compatible JSON text, atomic writes with an explicit mode, and a
// watcher that reports any create/write/remove under a set of paths.
import { randomBytes } from 'node:crypto';
import { existsSync, watch, type FSWatcher } from 'node:fs';
import { open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

/**
 * JSON as Go's json.MarshalIndent(v, "", "  ") writes it, plus the newline the installer appends. Go
 * sorts map keys and escapes <, > and & for HTML; `sortKeys` is for values that were generic maps
 * (a struct keeps its field order).
 */
export function goJson(value: unknown, sortKeys: boolean): string {
  const sorted = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(sorted);
    if (v && typeof v === 'object') {
      const keys = Object.keys(v as object);
      if (sortKeys) keys.sort();
      return Object.fromEntries(keys.map((k) => [k, sorted((v as Record<string, unknown>)[k])]));
    }
    return v;
  };
  const text = JSON.stringify(sorted(value), null, 2)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
  return `${text}\n`;
}

/**
 * Writes through a temporary file in the same directory renamed over the target, so readers (kubelet,
 * the container runtime) never see half a file. The mode is set explicitly, whatever the umask.
 */
export async function atomicWrite(file: string, data: string | Buffer, mode: number): Promise<void> {
  const tmp = path.join(path.dirname(file), `${path.basename(file)}.tmp.${randomBytes(4).readUInt32BE(0)}`);
  try {
    const fh = await open(tmp, 'wx', mode);
    try {
      await fh.chmod(mode);
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw e;
  }
}

/**
 * Resolves once anything under the watched paths is created, written or removed (fsnotify's
 * Create|Write|Remove as Istio's installer uses it); paths that do not exist are skipped, as Istio does.
 * Close it when done.
 */
export class ChangeWatcher {
  private readonly watchers: FSWatcher[] = [];
  private fired = false;
  private error: Error | undefined;
  private waiters: Array<{ resolve: (v: string) => void; reject: (e: Error) => void }> = [];
  private lastChange = '';

  constructor(paths: readonly string[]) {
    for (const p of paths) {
      if (!existsSync(p)) continue;
      try {
        const w = watch(p, { persistent: true }, (_event, name) => this.fire(name ? path.join(p, String(name)) : p));
        w.on('error', (e) => this.fail(e));
        this.watchers.push(w);
      } catch (e) {
        this.close();
        throw new Error(`cannot watch ${p}: ${(e as Error).message}`);
      }
    }
  }

  private fire(what: string): void {
    this.fired = true;
    this.lastChange = what;
    for (const w of this.waiters.splice(0)) w.resolve(what);
  }

  private fail(e: Error): void {
    this.error = e;
    for (const w of this.waiters.splice(0)) w.reject(e);
  }

  /** Resolves with the changed path once something changed (at once if it already did), or rejects on abort. */
  wait(signal?: AbortSignal): Promise<string> {
    if (this.error) return Promise.reject(this.error);
    if (this.fired) {
      this.fired = false;
      return Promise.resolve(this.lastChange);
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal!.reason instanceof Error ? signal!.reason : new Error('aborted'));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push({
        resolve: (v) => {
          signal?.removeEventListener('abort', onAbort);
          this.fired = false;
          resolve(v);
        },
        reject,
      });
    });
  }

  close(): void {
    for (const w of this.watchers) w.close();
    this.watchers.length = 0;
  }
}
