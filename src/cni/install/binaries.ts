// Putting the plugin binary on the node (Istio's cni/pkg/install/binaries.go): each source file copied
// atomically into every target directory, leftovers of interrupted copies removed first.
import { readdirSync, statSync } from 'node:fs';
import { copyFile, chmod, rename, rm } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { registerScope } from '../../lib/log';

const log = registerScope('cni-agent', 'CNI agent');

export interface BinarySource {
  /** Name in the target directory (`mesh-cni`, the plugin's `type`). */
  name: string;
  /** File copied; its mode is kept. */
  path: string;
}

/** Every regular file of a directory, under its own name. */
export function sourcesInDir(dir: string): BinarySource[] {
  return readdirSync(dir, { withFileTypes: true })
    .filter((d) => !d.isDirectory())
    .map((d) => ({ name: d.name, path: path.join(dir, d.name) }));
}

/** Copies the sources into each target dir; returns the names copied. */
export async function copyBinaries(sources: readonly BinarySource[], targetDirs: readonly string[]): Promise<string[]> {
  const copied: string[] = [];
  for (const src of sources) {
    const mode = statSync(src.path).mode & 0o7777;
    for (const dir of targetDirs) {
      const stale = readdirSync(dir).filter((n) => n.startsWith(`${src.name}.tmp.`));
      if (stale.length > 0) {
        log.info(`Target folder ${dir} contains one or more temporary files with a ${src.name} name. The temp files will be deleted.`);
        for (const n of stale)
          await rm(path.join(dir, n), { force: true }).catch((e: Error) =>
            log.warn(`Failed to delete tmp file ${n} from previous run: ${e.message}`),
          );
      }
      const target = path.join(dir, src.name);
      const tmp = `${target}.tmp.${randomBytes(4).readUInt32BE(0)}`;
      try {
        await copyFile(src.path, tmp);
        await chmod(tmp, mode);
        await rename(tmp, target);
      } catch (e) {
        await rm(tmp, { force: true });
        log.error(`failed file copy of ${src.path} to ${dir}: ${(e as Error).message}`);
        throw e;
      }
      log.info(`Copied ${src.name} to ${dir}`);
    }
    copied.push(src.name);
  }
  return copied;
}
