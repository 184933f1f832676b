// The Masterminds/sprig v3 functions (TxtFuncMap) that charts and injection templates use, with sprig's
// semantics: `default` tests emptiness the sprig way, `quote` skips nils, list functions copy, dict functions
// work on map[string]any.
import { createHash } from 'node:crypto';
import type { FuncMap } from './exec';
import { sprintf, goQuote } from './builtins';
import { GoMap, goSprint, isGoMap, isPlainMap, isStruct, TemplateExecError, toInt } from './values';

/** sprig's empty(): zero values and empty containers. */
export function sprigEmpty(v: unknown): boolean {
  if (v === null || v === undefined) return true;
  if (typeof v === 'string') return v.length === 0;
  if (typeof v === 'boolean') return !v;
  if (typeof v === 'bigint') return v === 0n;
  if (typeof v === 'number') return v === 0;
  if (Array.isArray(v)) return v.length === 0;
  if (v instanceof Map) return v.size === 0;
  if (isStruct(v)) return false;
  if (typeof v === 'object') return Object.keys(v).length === 0;
  return false;
}

/** sprig's strval: strings as is, the rest with %v. */
export function strval(v: unknown): string {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined) return '';
  if (Buffer.isBuffer(v)) return v.toString();
  return goSprint(v);
}

function toList(v: unknown, fn: string): unknown[] {
  if (Array.isArray(v)) return v;
  if (v === null || v === undefined) return [];
  throw new TemplateExecError(`Cannot ${fn} on type ${typeof v}`);
}

function asDict(v: unknown, fn: string): Record<string, unknown> {
  if (isPlainMap(v)) return v;
  if (isGoMap(v)) return Object.fromEntries(v.entries());
  throw new TemplateExecError(`${fn}: expected a dict`);
}

function toFloat(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'string') {
    const n = Number(v);
    return Number.isNaN(n) ? 0 : n;
  }
  if (typeof v === 'boolean') return v ? 1 : 0;
  return 0;
}

function toInt64(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number') return BigInt(Math.trunc(v));
  if (typeof v === 'string') {
    const t = v.trim();
    if (/^-?\d+$/.test(t)) return BigInt(t);
    const n = Number(t);
    return Number.isNaN(n) ? 0n : BigInt(Math.trunc(n));
  }
  if (typeof v === 'boolean') return v ? 1n : 0n;
  return 0n;
}

function deepCopy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(deepCopy);
  if (isGoMap(v))
    return new GoMap(
      [...v.entries()].map(([k, x]) => [k, deepCopy(x)] as const),
      v.zero,
      v.typeName,
    );
  if (isPlainMap(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deepCopy(x)]));
  return v;
}

function mergeInto(dst: Record<string, unknown>, src: Record<string, unknown>, overwrite: boolean): void {
  for (const [k, v] of Object.entries(src)) {
    const cur = dst[k];
    if (isPlainMap(cur) && isPlainMap(v)) mergeInto(cur, v, overwrite);
    else if (!(k in dst) || (overwrite ? true : sprigEmpty(cur))) dst[k] = deepCopy(v);
  }
}

function indent(spaces: unknown, v: unknown): string {
  const pad = ' '.repeat(toInt(spaces));
  return pad + String(v).replace(/\n/g, '\n' + pad);
}

function kindOf(v: unknown): string {
  if (v === null || v === undefined) return 'invalid';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'bigint') return 'int';
  if (typeof v === 'number') return 'float64';
  if (Array.isArray(v)) return 'slice';
  if (v instanceof Map || isPlainMap(v)) return 'map';
  if (isStruct(v)) return 'struct';
  return 'ptr';
}

function goJson(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(goJson);
  if (v instanceof Map) return Object.fromEntries([...v.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([k, x]) => [k, goJson(x)]));
  if (isPlainMap(v)) {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, goJson(v[k])]),
    );
  }
  return v === undefined ? null : v;
}

/** encoding/json Marshal: sorted map keys, HTML-safe escaping of <, >, &. */
export function goJsonMarshal(v: unknown, indentStr = ''): string {
  const s = JSON.stringify(goJson(v), null, indentStr || undefined) ?? 'null';
  return s.replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

export const SPRIG: FuncMap = {
  // strings
  trim: (s) => strval(s).trim(),
  trimAll: (cut, s) => {
    const c = strval(cut);
    let t = strval(s);
    while (t && c.includes(t[0]!)) t = t.slice(1);
    while (t && c.includes(t[t.length - 1]!)) t = t.slice(0, -1);
    return t;
  },
  trimPrefix: (p, s) => (strval(s).startsWith(strval(p)) ? strval(s).slice(strval(p).length) : strval(s)),
  trimSuffix: (p, s) => (strval(p) && strval(s).endsWith(strval(p)) ? strval(s).slice(0, -strval(p).length) : strval(s)),
  upper: (s) => strval(s).toUpperCase(),
  lower: (s) => strval(s).toLowerCase(),
  title: (s) => strval(s).replace(/(^|[^\p{L}\p{N}'])(\p{L})/gu, (_, a: string, b: string) => a + b.toUpperCase()),
  untitle: (s) => strval(s).replace(/(^|\s)(\p{L})/gu, (_, a: string, b: string) => a + b.toLowerCase()),
  substr: (start, end, s) => {
    const str = strval(s);
    const a = toInt(start);
    const b = toInt(end);
    if (a < 0) return str.slice(0, b);
    if (b < 0 || b > str.length) return str.slice(a);
    return str.slice(a, b);
  },
  repeat: (n, s) => strval(s).repeat(Math.max(0, toInt(n))),
  trunc: (n, s) => {
    const c = toInt(n);
    const str = strval(s);
    if (c < 0 && str.length + c > 0) return str.slice(str.length + c);
    if (c >= 0 && str.length > c) return str.slice(0, c);
    return str;
  },
  nospace: (s) => strval(s).replace(/\s/g, ''),
  abbrev: (width, s) => {
    const w = toInt(width);
    const str = strval(s);
    return w < 4 || str.length <= w ? str : str.slice(0, w - 3) + '...';
  },
  initials: (s) =>
    strval(s)
      .split(/\s+/)
      .filter(Boolean)
      .map((w) => w[0])
      .join(''),
  wrap: (_n, s) => strval(s),
  contains: (substr, s) => strval(s).includes(strval(substr)),
  hasPrefix: (p, s) => strval(s).startsWith(strval(p)),
  hasSuffix: (p, s) => strval(s).endsWith(strval(p)),
  quote: (...args) =>
    args
      .filter((a) => a !== null && a !== undefined)
      .map((a) => goQuote(strval(a)))
      .join(' '),
  squote: (...args) =>
    args
      .filter((a) => a !== null && a !== undefined)
      .map((a) => `'${strval(a)}'`)
      .join(' '),
  cat: (...args) =>
    args
      .filter((a) => a !== null && a !== undefined)
      .map(strval)
      .join(' '),
  indent,
  nindent: (spaces, v) => '\n' + indent(spaces, v),
  replace: (old, nw, s) => strval(s).split(strval(old)).join(strval(nw)),
  plural: (one, many, count) => (toInt(count) === 1 ? one : many),
  snakecase: (s) =>
    strval(s)
      .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
      .replace(/[-\s]+/g, '_')
      .toLowerCase(),
  kebabcase: (s) =>
    strval(s)
      .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
      .replace(/[_\s]+/g, '-')
      .toLowerCase(),
  camelcase: (s) =>
    strval(s)
      .split(/[_\-\s]+/)
      .map((w) => (w ? w[0]!.toUpperCase() + w.slice(1) : ''))
      .join(''),
  sha1sum: (s) => createHash('sha1').update(strval(s)).digest('hex'),
  sha256sum: (s) => createHash('sha256').update(strval(s)).digest('hex'),
  b64enc: (s) => Buffer.from(strval(s)).toString('base64'),
  b64dec: (s) => Buffer.from(strval(s), 'base64').toString(),
  b32enc: (s) => strval(s),
  toString: (v: unknown) => strval(v),
  toStrings: (v) => toList(v, 'toStrings').map(strval),
  split: (sep, s) =>
    Object.fromEntries(
      strval(s)
        .split(strval(sep))
        .map((p, i) => [`_${i}`, p]),
    ),
  splitList: (sep, s) => strval(s).split(strval(sep)),
  splitn: (sep, n, s) => {
    const parts = strval(s).split(strval(sep));
    const c = toInt(n);
    const head = parts.slice(0, c - 1);
    head.push(parts.slice(c - 1).join(strval(sep)));
    return Object.fromEntries(head.map((p, i) => [`_${i}`, p]));
  },
  join: (sep, v) => {
    if (typeof v === 'string') return v;
    return toList(v, 'join').map(strval).join(strval(sep));
  },
  sortAlpha: (v) => [...toList(v, 'sortAlpha').map(strval)].sort(),
  printf: (format, ...args) => sprintf(strval(format), args),
  regexMatch: (re, s) => new RegExp(strval(re)).test(strval(s)),
  regexFind: (re, s) => new RegExp(strval(re)).exec(strval(s))?.[0] ?? '',
  regexFindAll: (re, s, n) => {
    const all = strval(s).match(new RegExp(strval(re), 'g')) ?? [];
    const c = toInt(n);
    return c < 0 ? all : all.slice(0, c);
  },
  regexReplaceAll: (re, s, repl) => strval(s).replace(new RegExp(strval(re), 'g'), strval(repl).replace(/\$\{?(\d+)\}?/g, '$$$1')),
  regexReplaceAllLiteral: (re, s, repl) => strval(s).replace(new RegExp(strval(re), 'g'), () => strval(repl)),
  regexSplit: (re, s, n) => {
    const parts = strval(s).split(new RegExp(strval(re)));
    const c = toInt(n);
    return c < 0 ? parts : parts.slice(0, c);
  },
  regexQuoteMeta: (s) => strval(s).replace(/[\\.+*?()|[\]{}^$]/g, '\\$&'),
  // conversions and math
  atoi: (s) => {
    const t = strval(s);
    return /^[-+]?\d+$/.test(t) ? BigInt(t) : 0n;
  },
  int: (v) => toInt64(v),
  int64: (v) => toInt64(v),
  float64: (v) => toFloat(v),
  toDecimal: (v) => {
    const n = parseInt(strval(v), 8);
    return Number.isNaN(n) ? 0n : BigInt(n);
  },
  add: (...xs) => xs.reduce<bigint>((a, b) => a + toInt64(b), 0n),
  add1: (x) => toInt64(x) + 1n,
  sub: (a, b) => toInt64(a) - toInt64(b),
  mul: (...xs) => xs.reduce<bigint>((a, b) => a * toInt64(b), 1n),
  div: (a, b) => {
    const d = toInt64(b);
    if (d === 0n) throw new TemplateExecError('integer divide by zero');
    return toInt64(a) / d;
  },
  mod: (a, b) => {
    const d = toInt64(b);
    if (d === 0n) throw new TemplateExecError('integer divide by zero');
    return toInt64(a) % d;
  },
  max: (a, ...xs) => xs.reduce<bigint>((m, x) => (toInt64(x) > m ? toInt64(x) : m), toInt64(a)),
  min: (a, ...xs) => xs.reduce<bigint>((m, x) => (toInt64(x) < m ? toInt64(x) : m), toInt64(a)),
  addf: (...xs) => xs.reduce<number>((a, b) => a + toFloat(b), 0),
  subf: (a, ...xs) => xs.reduce<number>((m, x) => m - toFloat(x), toFloat(a)),
  mulf: (...xs) => xs.reduce<number>((a, b) => a * toFloat(b), 1),
  divf: (a, ...xs) => xs.reduce<number>((m, x) => m / toFloat(x), toFloat(a)),
  maxf: (a, ...xs) => Math.max(toFloat(a), ...xs.map(toFloat)),
  minf: (a, ...xs) => Math.min(toFloat(a), ...xs.map(toFloat)),
  ceil: (v) => Math.ceil(toFloat(v)),
  floor: (v) => Math.floor(toFloat(v)),
  round: (v, p) => {
    const f = 10 ** toInt(p);
    return Math.round(toFloat(v) * f) / f;
  },
  until: (n) => Array.from({ length: Math.max(0, toInt(n)) }, (_, i) => BigInt(i)),
  untilStep: (start, stop, step) => {
    const out: bigint[] = [];
    const a = toInt(start);
    const b = toInt(stop);
    const s = toInt(step);
    if (s === 0) return out;
    for (let i = a; s > 0 ? i < b : i > b; i += s) out.push(BigInt(i));
    return out;
  },
  seq: (...xs) => {
    const n = xs.map((x) => toInt(x));
    const [start, step, end] = n.length === 1 ? [1, 1, n[0]!] : n.length === 2 ? [n[0]!, n[0]! <= n[1]! ? 1 : -1, n[1]!] : [n[0]!, n[1]!, n[2]!];
    const out: number[] = [];
    for (let i = start; step > 0 ? i <= end : i >= end; i += step) out.push(i);
    return out.join(' ');
  },
  // defaults and logic
  default: (d, ...given) => (given.length === 0 || sprigEmpty(given[0]) ? d : given[0]),
  empty: (v) => sprigEmpty(v),
  coalesce: (...xs) => xs.find((x) => !sprigEmpty(x)) ?? null,
  all: (...xs) => xs.every((x) => !sprigEmpty(x)),
  any: (...xs) => xs.some((x) => !sprigEmpty(x)),
  compact: (v) => toList(v, 'compact').filter((x) => !sprigEmpty(x)),
  ternary: (a, b, cond) => (cond ? a : b),
  fail: (msg) => {
    throw new TemplateExecError(strval(msg));
  },
  required: (msg, v) => {
    if (v === null || v === undefined || v === '') throw new TemplateExecError(strval(msg));
    return v;
  },
  // encoding
  toJson: (v) => goJsonMarshal(v),
  toPrettyJson: (v) => goJsonMarshal(v, '  '),
  toRawJson: (v) => JSON.stringify(goJson(v)),
  fromJson: (s) => {
    try {
      return JSON.parse(strval(s));
    } catch {
      return {};
    }
  },
  // reflection
  typeOf: (v) => kindOf(v),
  kindOf: (v) => kindOf(v),
  kindIs: (k, v) => kindOf(v) === strval(k),
  typeIs: (t, v) => kindOf(v) === strval(t),
  deepEqual: (a, b) => JSON.stringify(goJson(a)) === JSON.stringify(goJson(b)),
  deepCopy: (v) => deepCopy(v),
  // paths
  base: (p) => {
    const s = strval(p).replace(/\/+$/, '');
    return s === '' ? (strval(p) ? '/' : '.') : s.slice(s.lastIndexOf('/') + 1);
  },
  dir: (p) => {
    const s = strval(p);
    const i = s.lastIndexOf('/');
    return i < 0 ? '.' : i === 0 ? '/' : s.slice(0, i);
  },
  ext: (p) => {
    const s = strval(p);
    const m = /\.[^./]*$/.exec(s);
    return m ? m[0] : '';
  },
  isAbs: (p) => strval(p).startsWith('/'),
  // lists
  list: (...xs) => [...xs],
  tuple: (...xs) => [...xs],
  append: (l, v) => [...toList(l, 'append'), v],
  push: (l, v) => [...toList(l, 'push'), v],
  prepend: (l, v) => [v, ...toList(l, 'prepend')],
  concat: (...ls) => ls.flatMap((l) => toList(l, 'concat')),
  first: (l) => toList(l, 'first')[0] ?? null,
  last: (l) => {
    const a = toList(l, 'last');
    return a.length ? a[a.length - 1] : null;
  },
  rest: (l) => toList(l, 'rest').slice(1),
  initial: (l) => toList(l, 'initial').slice(0, -1),
  reverse: (l) => [...toList(l, 'reverse')].reverse(),
  uniq: (l) => {
    const out: unknown[] = [];
    for (const x of toList(l, 'uniq')) if (!out.some((y) => JSON.stringify(goJson(y)) === JSON.stringify(goJson(x)))) out.push(x);
    return out;
  },
  without: (l, ...omit) => toList(l, 'without').filter((x) => !omit.some((o) => JSON.stringify(goJson(o)) === JSON.stringify(goJson(x)))),
  has: (needle, l) => toList(l, 'has').some((x) => JSON.stringify(goJson(x)) === JSON.stringify(goJson(needle))),
  chunk: (size, l) => {
    const a = toList(l, 'chunk');
    const n = toInt(size);
    const out: unknown[][] = [];
    for (let i = 0; i < a.length; i += n) out.push(a.slice(i, i + n));
    return out;
  },
  // dicts
  dict: (...kv) => {
    const out: Record<string, unknown> = {};
    for (let i = 0; i < kv.length; i += 2) out[strval(kv[i])] = i + 1 < kv.length ? kv[i + 1] : '';
    return out;
  },
  get: (d, k) => {
    const m = asDict(d, 'get');
    return Object.prototype.hasOwnProperty.call(m, strval(k)) ? m[strval(k)] : '';
  },
  set: (d, k, v) => {
    if (isGoMap(d)) d.set(strval(k), v);
    else asDict(d, 'set')[strval(k)] = v;
    return d;
  },
  unset: (d, k) => {
    if (isGoMap(d)) d.delete(strval(k));
    else delete asDict(d, 'unset')[strval(k)];
    return d;
  },
  hasKey: (d, k) => (isGoMap(d) ? d.has(strval(k)) : Object.prototype.hasOwnProperty.call(asDict(d, 'hasKey'), strval(k))),
  keys: (...ds) => ds.flatMap((d) => Object.keys(asDict(d, 'keys'))),
  values: (d) => Object.values(asDict(d, 'values')),
  pluck: (k, ...ds) =>
    ds
      .map((d) => asDict(d, 'pluck'))
      .filter((m) => strval(k) in m)
      .map((m) => m[strval(k)]),
  pick: (d, ...ks) => {
    const m = asDict(d, 'pick');
    return Object.fromEntries(
      ks
        .map(strval)
        .filter((k) => k in m)
        .map((k) => [k, m[k]]),
    );
  },
  omit: (d, ...ks) => {
    const m = asDict(d, 'omit');
    const drop = new Set(ks.map(strval));
    return Object.fromEntries(Object.entries(m).filter(([k]) => !drop.has(k)));
  },
  merge: (dst, ...srcs) => {
    const d = asDict(dst, 'merge');
    for (const s of srcs) mergeInto(d, asDict(s, 'merge'), false);
    return d;
  },
  mergeOverwrite: (dst, ...srcs) => {
    const d = asDict(dst, 'mergeOverwrite');
    for (const s of srcs) mergeInto(d, asDict(s, 'mergeOverwrite'), true);
    return d;
  },
  dig: (...args) => {
    const d = args[args.length - 1];
    const def = args[args.length - 2];
    let cur: unknown = d;
    for (const k of args.slice(0, -2)) {
      if (!isPlainMap(cur) || !(strval(k) in cur)) return def;
      cur = cur[strval(k)];
    }
    return cur;
  },
  env: (k) => process.env[strval(k)] ?? '',
  expandenv: (s) => strval(s).replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (_, k: string) => process.env[k] ?? ''),
};
