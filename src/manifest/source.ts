// Where charts and profiles come from: the copy of manifests/ built into the program, or a directory given with
// --manifests/-d (spec.installPackagePath) laid out the same way (charts/<chart>/…, profiles/<name>.yaml).
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { BUILTIN_FILES } from './builtin.gen';

export class ManifestInputError extends Error {}

export interface ManifestSource {
  /** For messages: `built-in manifests` or the directory. */
  readonly where: string;
  /** A file by its path under the manifests root, undefined when absent. `.gz` files come back as base64. */
  read(rel: string): string | undefined;
  /** Every file path under `prefix/` (recursively), sorted. */
  list(prefix: string): string[];
}

export function builtinSource(): ManifestSource {
  const keys = Object.keys(BUILTIN_FILES).sort();
  return {
    where: 'built-in manifests',
    read: (rel) => BUILTIN_FILES[rel],
    list: (prefix) => keys.filter((k) => k.startsWith(prefix + '/')),
  };
}

export function directorySource(dir: string): ManifestSource {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new ManifestInputError(`manifests directory ${JSON.stringify(dir)} does not exist or is not a directory`);
  }
  const walk = (d: string, out: string[] = []): string[] => {
    if (!existsSync(d)) return out;
    for (const name of readdirSync(d).sort()) {
      const p = path.join(d, name);
      if (statSync(p).isDirectory()) walk(p, out);
      else out.push(path.relative(dir, p).split(path.sep).join('/'));
    }
    return out;
  };
  return {
    where: dir,
    read: (rel) => {
      const p = path.join(dir, rel);
      if (!existsSync(p) || !statSync(p).isFile()) return undefined;
      return p.endsWith('.gz') ? readFileSync(p).toString('base64') : readFileSync(p, 'utf8');
    },
    list: (prefix) => walk(path.join(dir, prefix)).sort(),
  };
}

/** Istio's BuiltinOrDir: the directory when one is given, else the built-in copy. */
export function manifestSource(dir: string): ManifestSource {
  return dir ? directorySource(dir) : builtinSource();
}
