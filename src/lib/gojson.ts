// Go's encoding/json for plain structs, as istioctl decodes a node proxy's config dump into its own types and
// prints them again (json.MarshalIndent): fields matched by JSON name (exact first, then case-insensitively),
// unknown fields dropped, type errors in Go's words, omitempty, map keys sorted as strings, `<>&` escaped.

export type GoType =
  | { k: 'string' }
  | { k: 'bool' }
  | { k: 'int'; name: 'int' | 'uint16' | 'uint32'; min: number; max: number }
  | { k: 'any' }
  | { k: 'slice'; elem: GoType }
  | { k: 'ptr'; elem: GoType }
  | { k: 'map'; key: 'string' | 'uint16'; elem: GoType }
  | { k: 'struct'; name: string; fields: GoField[] };

export interface GoField {
  json: string;
  type: GoType;
  omitempty?: boolean;
}

export const T = {
  string: { k: 'string' } as GoType,
  bool: { k: 'bool' } as GoType,
  int: { k: 'int', name: 'int', min: -(2 ** 63), max: 2 ** 63 - 1 } as GoType,
  uint16: { k: 'int', name: 'uint16', min: 0, max: 65535 } as GoType,
  uint32: { k: 'int', name: 'uint32', min: 0, max: 2 ** 32 - 1 } as GoType,
  any: { k: 'any' } as GoType,
  slice: (elem: GoType): GoType => ({ k: 'slice', elem }),
  ptr: (elem: GoType): GoType => ({ k: 'ptr', elem }),
  map: (key: 'string' | 'uint16', elem: GoType): GoType => ({ k: 'map', key, elem }),
  struct: (name: string, fields: GoField[]): GoType => ({ k: 'struct', name, fields }),
};

/** A decoded Go value: structs keep their fields in declaration order, maps their entries. */
export type GoValue = string | number | boolean | null | GoValue[] | GoStructValue | GoMapValue | { any: unknown };
export interface GoStructValue {
  struct: Map<string, GoValue>;
}
export interface GoMapValue {
  map: Map<string, GoValue>;
}

export class GoJsonError extends Error {}

/** Go's reflect type string of t, for error messages (`pkg` qualifies struct names). */
export function goTypeName(t: GoType, pkg = 'configdump'): string {
  switch (t.k) {
    case 'string':
    case 'bool':
      return t.k;
    case 'int':
      return t.name;
    case 'any':
      return 'interface {}';
    case 'slice':
      return `[]${goTypeName(t.elem, pkg)}`;
    case 'ptr':
      return `*${goTypeName(t.elem, pkg)}`;
    case 'map':
      return `map[${t.key}]${goTypeName(t.elem, pkg)}`;
    case 'struct':
      return `${pkg}.${t.name}`;
  }
}

function jsonKind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'object';
  return typeof v; // string, number, boolean
}

interface Ctx {
  struct: string;
  path: string[];
  top: GoType;
}

function typeError(ctx: Ctx, value: string, t: GoType): GoJsonError {
  if (ctx.path.length === 0) return new GoJsonError(`json: cannot unmarshal ${value} into Go value of type ${goTypeName(t)}`);
  return new GoJsonError(`json: cannot unmarshal ${value} into Go struct field ${ctx.struct}.${ctx.path.join('.')} of type ${goTypeName(t)}`);
}

function zero(t: GoType): GoValue {
  switch (t.k) {
    case 'string':
      return '';
    case 'bool':
      return false;
    case 'int':
      return 0;
    case 'struct':
      return { struct: new Map(t.fields.map((f) => [f.json, zero(f.type)])) };
    default:
      return null;
  }
}

function decodeInto(v: unknown, t: GoType, ctx: Ctx, into?: GoValue): GoValue {
  // JSON null leaves the Go value as it was (its zero for a new one)
  if (v === null) return t.k === 'slice' || t.k === 'map' || t.k === 'ptr' || t.k === 'any' ? null : (into ?? zero(t));
  switch (t.k) {
    case 'string':
      if (typeof v !== 'string') throw typeError(ctx, jsonKind(v), t);
      return v;
    case 'bool':
      if (typeof v !== 'boolean') throw typeError(ctx, jsonKind(v), t);
      return v;
    case 'int':
      if (typeof v !== 'number') throw typeError(ctx, jsonKind(v), t);
      if (!Number.isInteger(v) || v < t.min || v > t.max) throw typeError(ctx, `number ${v}`, t);
      return v;
    case 'any':
      return { any: v };
    case 'ptr':
      return decodeInto(v, t.elem, ctx, into ?? undefined);
    case 'slice': {
      if (!Array.isArray(v)) throw typeError(ctx, jsonKind(v), t);
      return v.map((x) => decodeInto(x, t.elem, ctx));
    }
    case 'map': {
      if (typeof v !== 'object' || Array.isArray(v)) throw typeError(ctx, jsonKind(v), t);
      const m = new Map<string, GoValue>();
      for (const [key, x] of Object.entries(v as Record<string, unknown>)) {
        let k = key;
        if (t.key === 'uint16') {
          if (!/^\d+$/.test(key) || Number(key) > 65535) throw typeError({ ...ctx, path: [...ctx.path, key] }, `number ${key}`, T.uint16);
          k = String(Number(key));
        }
        m.set(k, decodeInto(x, t.elem, { ...ctx, path: [...ctx.path, key] }));
      }
      return { map: m };
    }
    case 'struct': {
      if (typeof v !== 'object' || Array.isArray(v)) throw typeError(ctx, jsonKind(v), t);
      const out = into && typeof into === 'object' && 'struct' in into ? into : (zero(t) as GoStructValue);
      for (const [key, x] of Object.entries(v as Record<string, unknown>)) {
        const f = t.fields.find((f) => f.json === key) ?? t.fields.find((f) => f.json.toLowerCase() === key.toLowerCase());
        if (!f) continue;
        out.struct.set(f.json, decodeInto(x, f.type, { ...ctx, struct: t.name, path: [...ctx.path, f.json] }, out.struct.get(f.json)));
      }
      return out;
    }
  }
}

/** json.Unmarshal of an already parsed JSON value into a value of type t. */
export function goDecode(v: unknown, t: GoType): GoValue {
  return decodeInto(v, t, { struct: t.k === 'struct' ? t.name : '', path: [], top: t });
}

function isEmpty(v: GoValue): boolean {
  if (v === null || v === false || v === 0 || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object' && 'map' in v) return v.map.size === 0;
  return false;
}

/** Go's encodeState string: JSON with <, >, & and U+2028/2029 escaped. */
export function goQuote(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

function anyEncode(v: unknown, indent: string, step: string): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return goQuote(v);
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return '[]';
    const inner = indent + step;
    return `[\n${v.map((x) => inner + anyEncode(x, inner, step)).join(',\n')}\n${indent}]`;
  }
  const keys = Object.keys(v as object).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  if (keys.length === 0) return '{}';
  const inner = indent + step;
  return `{\n${keys.map((k) => `${inner}${goQuote(k)}: ${anyEncode((v as Record<string, unknown>)[k], inner, step)}`).join(',\n')}\n${indent}}`;
}

function encode(v: GoValue, t: GoType, indent: string, step: string): string {
  if (t.k === 'ptr') return v === null ? 'null' : encode(v, t.elem, indent, step);
  if (v === null) return 'null';
  switch (t.k) {
    case 'string':
      return goQuote(v as string);
    case 'bool':
    case 'int':
      return String(v);
    case 'any':
      return anyEncode((v as { any: unknown }).any, indent, step);
    case 'slice': {
      const a = v as GoValue[];
      if (a.length === 0) return '[]';
      const inner = indent + step;
      return `[\n${a.map((x) => inner + encode(x, t.elem, inner, step)).join(',\n')}\n${indent}]`;
    }
    case 'map': {
      const m = (v as GoMapValue).map;
      if (m.size === 0) return '{}';
      const inner = indent + step;
      const keys = [...m.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      return `{\n${keys.map((k) => `${inner}${goQuote(k)}: ${encode(m.get(k)!, t.elem, inner, step)}`).join(',\n')}\n${indent}}`;
    }
    case 'struct': {
      const s = (v as GoStructValue).struct;
      const inner = indent + step;
      const parts: string[] = [];
      for (const f of t.fields) {
        const fv = s.get(f.json) ?? zero(f.type);
        if (f.omitempty && isEmpty(fv)) continue;
        parts.push(`${inner}${goQuote(f.json)}: ${encode(fv, f.type, inner, step)}`);
      }
      return parts.length === 0 ? '{}' : `{\n${parts.join(',\n')}\n${indent}}`;
    }
  }
}

/** json.MarshalIndent(v, "", indent). */
export function goMarshalIndent(v: GoValue, t: GoType, indent = '    '): string {
  return encode(v, t, '', indent);
}

/** A struct field of a decoded struct value. */
export function field<V extends GoValue = GoValue>(v: GoValue, name: string): V {
  return ((v as GoStructValue).struct.get(name) ?? null) as V;
}
