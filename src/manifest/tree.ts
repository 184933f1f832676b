// The untyped MeshOperator tree and Istio's path grammar over it (operator/pkg/values): `a.b.c`, dots inside a
// key escaped with a backslash, list elements by index (`a[0]`, `a.[0]`) or by a field's value (`a.[name:x]`),
// `--set path=value` values typed as Istio types them (int, then float, then bool, else string with `\,`
// unescaped; a few paths always stay strings).
import { goBool } from '../lib/gostrconv';
export type Tree = Record<string, unknown>;

export function isTree(v: unknown): v is Tree {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class PathError extends Error {}

/** Go's path.Clean for the parts that matter in a dotted path: collapses `//`, drops `/./`, resolves `x/..`. */
function cleanPath(p: string): string {
  if (p === '') return '.';
  const rooted = p.startsWith('/');
  const out: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (out.length && out[out.length - 1] !== '..') out.pop();
      else if (!rooted) out.push('..');
      continue;
    }
    out.push(part);
  }
  const s = (rooted ? '/' : '') + out.join('/');
  return s === '' ? '.' : s;
}

function splitEscaped(s: string, sep: string): string[] {
  if (s.length === 0) return [];
  const out: string[] = [];
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === sep && (i === 0 || s[i - 1] !== '\\')) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out;
}

/** Istio's splitPath: `a.b\.c[0]` → `a`, `b.c`, `[0]`. */
export function splitPath(path: string): string[] {
  let p = cleanPath(path);
  if (p.startsWith('.')) p = p.slice(1);
  if (p.endsWith('.')) p = p.slice(0, -1);
  const out: string[] = [];
  for (let seg of splitEscaped(p, '.')) {
    if (seg === '') continue;
    seg = seg.replaceAll('\\.', '.');
    const b = seg.indexOf('[');
    if (b > 0) out.push(seg.slice(0, b), seg.slice(b));
    else out.push(seg);
  }
  return out;
}

function extractIndex(seg: string): number | undefined {
  if (!seg.startsWith('[') || !seg.endsWith(']')) return undefined;
  const inner = seg.slice(1, -1);
  return /^[+-]?\d+$/.test(inner) ? Number(inner) : undefined;
}

function extractKV(seg: string): [string, string] | undefined {
  if (!seg.startsWith('[') || !seg.endsWith(']')) return undefined;
  const inner = seg.slice(1, -1);
  const i = inner.indexOf(':');
  return i < 0 ? undefined : [inner.slice(0, i), inner.slice(i + 1)];
}

function asTree(v: unknown, path: string): Tree {
  if (v === undefined || v === null) return {};
  if (!isTree(v)) throw new PathError(`${path}: not a map, got ${Array.isArray(v) ? 'a list' : JSON.stringify(v)}`);
  return v;
}

function setRecurse(base: Tree, paths: string[], value: unknown, full: string): void {
  const seg = paths[0]!;
  const nextIsArray = paths.length >= 2 && paths[1]!.startsWith('[');
  if (nextIsArray) {
    const last = paths.length === 2;
    if (!(seg in base)) base[seg] = [];
    const list = base[seg];
    if (!Array.isArray(list)) throw new PathError(`${full}: ${seg} is not a list`);
    let index: number;
    const kv = extractKV(paths[1]!);
    const idx = extractIndex(paths[1]!);
    if (kv) {
      index = list.findIndex((e) => isTree(e) && e[kv[0]] === kv[1]);
      if (index === -1) throw new PathError(`${full}: element ${paths[1]} not found`);
    } else if (idx !== undefined) index = idx;
    else throw new PathError(`${full}: unknown segment ${paths[1]}`);
    if (index < 0 || index >= list.length) {
      if (last) list.push(value);
      else {
        const m: Tree = {};
        setRecurse(m, paths.slice(2), value, full);
        list.push(m);
      }
    } else if (last) list[index] = value;
    else {
      const m = asTree(list[index], full);
      setRecurse(m, paths.slice(2), value, full);
      list[index] = m;
    }
    return;
  }
  if (!(seg in base)) base[seg] = {};
  if (paths.length === 1) {
    base[seg] = value;
    return;
  }
  const child = asTree(base[seg], full);
  base[seg] = child;
  setRecurse(child, paths.slice(1), value, full);
}

/** Istio's Map.SetPath. */
export function setPath(tree: Tree, path: string, value: unknown): void {
  const parts = splitPath(path);
  if (parts.length === 0) throw new PathError(`empty path in ${JSON.stringify(path)}`);
  setRecurse(tree, parts, value, path);
}

/** Istio's Map.GetPath: the value and whether it was there. */
export function getPath(tree: Tree, path: string): [unknown, boolean] {
  let cur: unknown = tree;
  for (const n of splitPath(path)) {
    const idx = extractIndex(n);
    const kv = idx === undefined ? extractKV(n) : undefined;
    if (idx !== undefined) {
      if (!Array.isArray(cur) || idx < 0 || idx >= cur.length) return [undefined, false];
      cur = cur[idx];
    } else if (kv) {
      if (!Array.isArray(cur)) return [undefined, false];
      const found = cur.find((e) => isTree(e) && e[kv[0]] === kv[1]);
      if (found === undefined) return [undefined, false];
      cur = found;
    } else {
      if (!isTree(cur) || !(n in cur)) return [undefined, false];
      cur = cur[n];
    }
  }
  return [cur, true];
}

export function getString(tree: Tree, path: string): string {
  const [v] = getPath(tree, path);
  return typeof v === 'string' ? v : '';
}

export function getBool(tree: Tree, path: string): boolean {
  const [v] = getPath(tree, path);
  return v === true;
}

export function deepClone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/** Istio's Map.MergeFrom: maps merge key by key, anything else (lists included) replaces. */
export function mergeFrom(base: Tree, other: Tree): Tree {
  for (const [k, v0] of Object.entries(other)) {
    const v = isTree(v0) ? deepClone(v0) : v0;
    if (isTree(v) && isTree(base[k])) {
      mergeFrom(base[k] as Tree, v);
      continue;
    }
    base[k] = v;
  }
  return base;
}

const ALWAYS_STRING = [
  'spec.values.compatibilityVersion',
  'spec.tag',
  'spec.values.global.tag',
  'spec.meshConfig.defaultConfig.proxyMetadata.',
  'spec.values.meshConfig.defaultConfig.proxyMetadata.',
  'spec.compatibilityVersion',
];

/** Go's strconv.ParseFloat syntax (decimal and hex forms, inf, nan; underscores only with a base prefix). */
const GO_FLOAT = /^[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|0[xX](?:[\da-fA-F]+\.?[\da-fA-F]*|\.[\da-fA-F]+)[pP][+-]?\d+|inf|infinity|nan)$/i;

/** Istio's parseValue: strconv.Atoi, then ParseFloat, then ParseBool, else the string with `\,` → `,`. */
export function parseSetValue(s: string): unknown {
  if (/^[+-]?\d+$/.test(s)) {
    const n = Number(s);
    if (Number.isSafeInteger(n)) return n;
  }
  if (GO_FLOAT.test(s)) {
    const lower = s.toLowerCase().replace(/^[+]/, '');
    if (lower === 'nan') return NaN;
    if (/^-?inf(inity)?$/.test(lower)) return lower.startsWith('-') ? -Infinity : Infinity;
    const n = /0x/i.test(s) ? parseHexFloat(s) : Number(s);
    if (!Number.isNaN(n)) return n;
  }
  const b = goBool(s);
  if (b !== undefined) return b;
  return s.replaceAll('\\,', ',');
}

function parseHexFloat(s: string): number {
  const m = /^([+-]?)0[xX]([\da-fA-F]*)\.?([\da-fA-F]*)[pP]([+-]?\d+)$/.exec(s)!;
  const mant = parseInt((m[2] || '0') + (m[3] || ''), 16) / 16 ** (m[3]?.length ?? 0);
  return (m[1] === '-' ? -1 : 1) * mant * 2 ** Number(m[4]);
}

/** Istio's getPV: `path=value` split at the first `=`, both trimmed; no `=` means an empty value. */
export function splitSetFlag(flag: string): [string, string] {
  const i = flag.indexOf('=');
  if (i < 0) return [flag, ''];
  return [flag.slice(0, i).trim(), flag.slice(i + 1).trim()];
}

/** Istio's SetPaths for `--set` strings already prefixed (`spec.` + flag). */
export function setPaths(tree: Tree, flags: readonly string[]): void {
  for (const f of flags) {
    const [p, v] = splitSetFlag(f);
    const value = ALWAYS_STRING.some((a) => p.startsWith(a)) ? v : parseSetValue(v);
    setPath(tree, p, value);
  }
}

/** Istio's SetSpecPaths: each flag under `spec.`. */
export function setSpecPaths(tree: Tree, flags: readonly string[]): void {
  setPaths(
    tree,
    flags.map((f) => 'spec.' + f),
  );
}
