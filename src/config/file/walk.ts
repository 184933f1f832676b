// Finding the configuration files under a directory: `.yaml`, `.yml` and `.json`, recursively,
// skipping hidden entries (dot files, editor locks, Kubernetes ConfigMap `..data` internals) and
// editor temporaries. Symbolic links are followed (ConfigMap mounts are links), with a guard
// against directory cycles.
import { promises as fs, type BigIntStats } from 'node:fs';
import * as path from 'node:path';

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

/** Whether a file name is one we read (hidden and editor temporary files are not). */
export function isConfigFileName(name: string): boolean {
  if (name.startsWith('.') || name.startsWith('#') || name.endsWith('~')) return false;
  return EXTENSIONS.has(path.extname(name).toLowerCase());
}

export interface FileStamp {
  /** Path relative to the root, with `/` separators. */
  rel: string;
  abs: string;
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  ctimeNs: bigint;
}

export interface Scan {
  /** Config files by relative path. */
  files: Map<string, FileStamp>;
  /** Every directory visited (absolute paths), the root first: the ones to watch. */
  dirs: string[];
}

/** Two stamps of the same path describe the same content (inode, size and times unchanged). */
export function sameStamp(a: FileStamp, b: FileStamp): boolean {
  return a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;
}

/** Scans `root`; throws if the root itself cannot be read. Entries that vanish mid-scan are skipped. */
export async function scanTree(root: string): Promise<Scan> {
  const files = new Map<string, FileStamp>();
  const dirs: string[] = [];
  const seenDirs = new Set<string>();
  const rootReal = await fs.realpath(root);
  const rootStat = await fs.stat(rootReal);
  if (!rootStat.isDirectory()) throw Object.assign(new Error(`${root} is not a directory`), { code: 'ENOTDIR' });

  async function visit(dirAbs: string, relDir: string, isRoot: boolean): Promise<void> {
    let real: string;
    try {
      real = await fs.realpath(dirAbs);
    } catch (e) {
      if (isRoot) throw e;
      return;
    }
    if (seenDirs.has(real)) return;
    seenDirs.add(real);
    dirs.push(dirAbs);
    let entries;
    try {
      entries = await fs.readdir(dirAbs, { withFileTypes: true });
    } catch (e) {
      if (isRoot) throw e;
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    // A directory of a thousand files is stat'ed concurrently (one at a time costs a thread-pool round trip
    // each, and every change rescans); results are still recorded in name order.
    const stats = new Map<string, Promise<BigIntStats | undefined>>();
    for (const ent of entries) {
      if (!ent.name.startsWith('.') && ent.isFile() && isConfigFileName(ent.name)) {
        stats.set(
          ent.name,
          fs.stat(path.join(dirAbs, ent.name), { bigint: true }).catch(() => undefined),
        );
      }
    }
    for (const ent of entries) {
      if (ent.name.startsWith('.')) continue;
      const abs = path.join(dirAbs, ent.name);
      const rel = relDir === '' ? ent.name : `${relDir}/${ent.name}`;
      let isDir = ent.isDirectory();
      let isFile = ent.isFile();
      if (ent.isSymbolicLink()) {
        try {
          const st = await fs.stat(abs);
          isDir = st.isDirectory();
          isFile = st.isFile();
        } catch {
          continue; // dangling link
        }
      }
      if (isDir) {
        await visit(abs, rel, false);
      } else if (isFile && isConfigFileName(ent.name)) {
        const st = await (stats.get(ent.name) ?? fs.stat(abs, { bigint: true }).catch(() => undefined));
        // undefined: removed between readdir and stat
        if (st) files.set(rel, toStamp(st, rel, abs));
      }
    }
  }

  await visit(root, '', true);
  return { files, dirs };
}

/**
 * The stamp of one file the watcher named (links followed, as scanTree does); undefined when it is gone
 * or is not a regular file, 'directory' when the name is a directory's.
 */
export async function stampOf(abs: string, rel: string): Promise<FileStamp | undefined | 'directory'> {
  let st: BigIntStats;
  try {
    st = await fs.stat(abs, { bigint: true });
  } catch {
    return undefined;
  }
  if (st.isDirectory()) return 'directory';
  if (!st.isFile()) return undefined;
  return toStamp(st, rel, abs);
}

function toStamp(st: BigIntStats, rel: string, abs: string): FileStamp {
  return { rel, abs, dev: st.dev, ino: st.ino, size: st.size, mtimeNs: st.mtimeNs, ctimeNs: st.ctimeNs };
}
