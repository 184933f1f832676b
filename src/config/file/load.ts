// Reading one configuration file into accepted and rejected resources, and the one-shot load of a
// whole directory (for tools that do not watch).
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { ConfigError, FieldError } from '../errors';
import { parseDocuments } from '../parse';
import { type Config, configKey } from '../types';
import { validateConfig } from '../validate';
import { scanTree } from './walk';

export interface FileItem {
  key: string;
  config: Config;
  /** Empty when the resource is accepted. */
  errors: FieldError[];
  warnings: FieldError[];
}

export interface FileLoad {
  /** Path as shown in messages (the directory as given, joined with the relative path). */
  display: string;
  /** Identified resources in document order, accepted or not. */
  items: FileItem[];
  /** Every problem of the file: unparseable documents and rejected resources' fields. */
  errors: ConfigError[];
  warnings: ConfigError[];
  /** A document failed before its resource could be identified (syntax error, missing name...). */
  unidentified: boolean;
  /** The file could not be read at all (it vanished: ENOENT is reported as `missing`). */
  missing: boolean;
}

/** Splits `file.yaml[2].items[0]` into the file and the document position. */
function splitSource(source: string | undefined, display: string): { document?: string } {
  if (!source || !source.startsWith(display)) return {};
  return { document: source.slice(display.length) };
}

/** Parses (and with `validate`, validates) the text of one file. */
export function loadText(text: string, display: string, validate: boolean): FileLoad {
  const parsed = parseDocuments(text, display);
  const out: FileLoad = {
    display,
    items: [],
    errors: [...parsed.errors],
    warnings: [...parsed.warnings],
    unidentified: parsed.errors.length > 0,
    missing: false,
  };
  for (const c of parsed.configs) {
    const key = configKey(c);
    const v = validate ? validateConfig(c, { object: parsed.objects.get(c) }) : { errors: [], warnings: [] };
    out.items.push({ key, config: c, errors: v.errors, warnings: v.warnings });
    const at = { source: display, ...splitSource(c.source, display), resource: key };
    for (const e of v.errors) out.errors.push({ ...at, field: e.field, message: e.message });
    for (const w of v.warnings) out.warnings.push({ ...at, field: w.field, message: w.message });
  }
  return out;
}

export async function loadFile(abs: string, display: string, validate: boolean): Promise<FileLoad> {
  let text: string;
  try {
    text = await fs.readFile(abs, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const missing = code === 'ENOENT';
    return {
      display,
      items: [],
      errors: missing ? [] : [{ source: display, message: `cannot read file: ${(e as Error).message}` }],
      warnings: [],
      unidentified: !missing,
      missing,
    };
  }
  return loadText(text, display, validate);
}

export interface DirLoad {
  /** The accepted resources, one per identity (the last loaded wins), sorted by file then document. */
  configs: Config[];
  errors: ConfigError[];
  warnings: ConfigError[];
}

/**
 * Reads every configuration file under `dir` once. Files are read in path order; when two
 * documents define the same resource the later one wins and a warning says so.
 */
export async function loadConfigDir(dir: string, opts: { validate?: boolean } = {}): Promise<DirLoad> {
  const validate = opts.validate ?? true;
  const scan = await scanTree(dir);
  const loads: FileLoad[] = [];
  for (const rel of [...scan.files.keys()].sort()) loads.push(await loadFile(scan.files.get(rel)!.abs, path.join(dir, rel), validate));
  const merged = mergeLoads(loads);
  return {
    configs: merged.configs,
    errors: loads.flatMap((l) => l.errors),
    warnings: [...loads.flatMap((l) => l.warnings), ...merged.duplicates],
  };
}

export interface Merge {
  /** Last accepted occurrence per identity, in load order. */
  configs: Config[];
  /** Identities whose last occurrence was rejected. */
  rejected: Set<string>;
  duplicates: ConfigError[];
}

/** Merges file loads in order: the last occurrence of an identity decides (accepted or rejected). */
export function mergeLoads(loads: readonly FileLoad[]): Merge {
  const last = new Map<string, { item: FileItem; display: string }>();
  const duplicates: ConfigError[] = [];
  for (const l of loads) {
    for (const item of l.items) {
      const prev = last.get(item.key);
      if (prev)
        duplicates.push({
          source: l.display,
          ...splitSource(item.config.source, l.display),
          resource: item.key,
          message: `duplicate resource: also defined in ${prev.item.config.source ?? prev.display}; the definition loaded last (${item.config.source ?? l.display}) is used`,
        });
      // Re-insert so that map order follows the winning occurrence.
      last.delete(item.key);
      last.set(item.key, { item, display: l.display });
    }
  }
  const configs: Config[] = [];
  const rejected = new Set<string>();
  for (const [key, { item }] of last) {
    if (item.errors.length === 0) configs.push(item.config);
    else rejected.add(key);
  }
  return { configs, rejected, duplicates };
}
