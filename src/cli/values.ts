// pflag semantics for each flag type: how text becomes a value, how it is shown in help, and the
// exact error texts Go users know (`strconv.ParseInt: parsing "abc": invalid syntax`).
import * as t from 'typanion';
import type { FlagSpec, FlagType } from '../../commands/types';
import type { FlagValue } from './context';
import { DurationError, goQuote, parseDurationMs } from '../lib/duration';
import { EnvError, type EnvVars } from '../lib/env';
import { BoolSyntaxError, parseGoBool } from '../lib/gostrconv';

export class ValueError extends Error {}

/** strconv.ParseInt/ParseUint with base 0 (0x, 0o, 0b prefixes and `_` separators), range-checked. */
function parseGoInt(s: string, bits: number, unsigned: boolean, base0 = true): number {
  const fn = unsigned ? 'strconv.ParseUint' : 'strconv.ParseInt';
  const syntax = () => new ValueError(`${fn}: parsing ${goQuote(s)}: invalid syntax`);
  let body = s;
  let neg = false;
  if (!unsigned && (body.startsWith('-') || body.startsWith('+'))) {
    neg = body[0] === '-';
    body = body.slice(1);
  }
  let radix = 10;
  if (base0) {
    const prefix = /^0([xXoObB])/.exec(body);
    if (prefix) {
      radix = { x: 16, o: 8, b: 2 }[prefix[1]!.toLowerCase() as 'x' | 'o' | 'b'];
      body = body.slice(2);
    } else if (/^0[0-7_]+$/.test(body)) {
      radix = 8;
      body = body.slice(1);
    }
    if (body.includes('_')) {
      if (!/^[0-9a-fA-F]+(_[0-9a-fA-F]+)*$/.test(body) && !/^_/.test(body)) throw syntax();
      body = body.replace(/_/g, '');
    }
  }
  const digits = { 2: /^[01]+$/, 8: /^[0-7]+$/, 10: /^[0-9]+$/, 16: /^[0-9a-fA-F]+$/ }[radix as 2 | 8 | 10 | 16];
  if (body === '' || !digits.test(body)) throw syntax();
  let v = 0n;
  for (const c of body) v = v * BigInt(radix) + BigInt(parseInt(c, radix));
  if (neg) v = -v;
  const max = unsigned ? (1n << BigInt(bits)) - 1n : (1n << BigInt(bits - 1)) - 1n;
  const min = unsigned ? 0n : -(1n << BigInt(bits - 1));
  if (v > max || v < min) throw new ValueError(`${fn}: parsing ${goQuote(s)}: value out of range`);
  return Number(v);
}

function parseGoFloat32(s: string): number {
  const syntax = () => new ValueError(`strconv.ParseFloat: parsing ${goQuote(s)}: invalid syntax`);
  const body = s.replace(/_/g, '');
  let v: number;
  if (/^[+-]?(inf|infinity)$/i.test(body)) v = body.startsWith('-') ? -Infinity : Infinity;
  else if (/^nan$/i.test(body)) v = NaN;
  else if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(body) || /^[+-]?0[xX][0-9a-fA-F.]+[pP][+-]?\d+$/.test(body)) v = Number(body);
  else throw syntax();
  const f = Math.fround(v);
  if (Number.isFinite(v) && !Number.isFinite(f)) throw new ValueError(`strconv.ParseFloat: parsing ${goQuote(s)}: value out of range`);
  return f;
}

/** encoding/csv-style split used by pflag's stringSlice and stringToString. */
export function splitCSV(s: string): string[] {
  if (s === '') return [];
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let i = 0;
  let fieldStart = true;
  while (i < s.length) {
    const c = s[i]!;
    if (fieldStart && c === '"') {
      quoted = true;
      fieldStart = false;
      i++;
      continue;
    }
    fieldStart = false;
    if (quoted) {
      if (c === '"') {
        if (s[i + 1] === '"') {
          cur += '"';
          i += 2;
          continue;
        }
        quoted = false;
        i++;
        continue;
      }
      cur += c;
      i++;
      continue;
    }
    if (c === ',') {
      out.push(cur);
      cur = '';
      fieldStart = true;
      i++;
      continue;
    }
    cur += c;
    i++;
  }
  if (quoted) throw new ValueError(`parse error on line 1, column ${s.length + 1}: extraneous or missing " in quoted-field`);
  out.push(cur);
  return out;
}

/** Parses one occurrence of a flag's text. `prev` is the value so far for accumulating types. */
export function parseFlagValue(type: FlagType, text: string, prev?: FlagValue): FlagValue {
  switch (type) {
    case 'bool':
      try {
        return parseGoBool(text);
      } catch (e) {
        if (e instanceof BoolSyntaxError) throw new ValueError(e.message);
        throw e;
      }
    case 'string':
      return text;
    case 'int':
      return parseGoInt(text, 64, false);
    case 'int32':
      return parseGoInt(text, 32, false);
    case 'uint16':
      return parseGoInt(text, 16, true);
    case 'uint32':
      return parseGoInt(text, 32, true);
    case 'Level':
      // klog's Level.Set: strconv.ParseInt(value, 10, 32).
      return parseGoInt(text, 32, false, false);
    case 'float32':
      return parseGoFloat32(text);
    case 'duration':
      try {
        return parseDurationMs(text);
      } catch (e) {
        if (e instanceof DurationError) throw new ValueError(e.message);
        throw e;
      }
    case 'stringSlice': {
      const items = splitCSV(text);
      return prev ? [...(prev as string[]), ...items] : items;
    }
    case 'stringArray':
      return prev ? [...(prev as string[]), text] : [text];
    case 'stringToString': {
      const out: Record<string, string> = prev ? { ...(prev as Record<string, string>) } : {};
      for (const pair of splitCSV(text)) {
        const eq = pair.indexOf('=');
        if (eq < 0) throw new ValueError(`${pair} must be formatted as key=value`);
        out[pair.slice(0, eq)] = pair.slice(eq + 1);
      }
      return out;
    }
  }
}

/** Types whose repeated occurrences accumulate rather than replace. */
export function accumulates(type: FlagType): boolean {
  return type === 'stringSlice' || type === 'stringArray' || type === 'stringToString';
}

/** Parses a default written in pflag's rendering (`[a,b]`, `[]`, `30s`, `true`). */
export function parseDefault(flag: FlagSpec, text: string | undefined = flag.default): FlagValue {
  const type = flag.type;
  if (text === undefined) return zeroValue(type);
  if (type === 'stringSlice' || type === 'stringArray') {
    const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
    return inner === '' ? [] : splitCSV(inner);
  }
  if (type === 'stringToString') {
    const inner = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
    return inner === '' ? {} : parseFlagValue(type, inner);
  }
  return parseFlagValue(type, text);
}

export function zeroValue(type: FlagType): FlagValue {
  switch (type) {
    case 'bool':
      return false;
    case 'string':
      return '';
    case 'stringSlice':
    case 'stringArray':
      return [];
    case 'stringToString':
      return {};
    default:
      return 0;
  }
}

/** pflag's defaultIsZeroValue: zero defaults are not shown in help. */
export function defaultIsZero(flag: FlagSpec, shown: string | undefined): boolean {
  if (shown === undefined) return true;
  switch (flag.type) {
    case 'bool':
      return shown === 'false';
    case 'duration':
      return shown === '0' || shown === '0s';
    case 'int':
    case 'int32':
    case 'uint16':
    case 'uint32':
    case 'float32':
      return shown === '0';
    case 'string':
      return shown === '';
    case 'stringSlice':
    case 'stringArray':
      return shown === '[]';
    default:
      // pflag falls back to Value.String(): stringToString's empty map prints "[]" and is shown.
      return shown === 'false' || shown === '<nil>' || shown === '' || shown === '0';
  }
}

/** The type word pflag prints after the flag name (`string`, `strings`, `duration`; nothing for bool). */
export function typeWord(flag: FlagSpec): string {
  const m = /`([^`]+)`/.exec(flag.help);
  if (m) return m[1]!;
  switch (flag.type) {
    case 'bool':
      return '';
    case 'stringSlice':
      return 'strings';
    default:
      return flag.type;
  }
}

/** Renders a parsed value back the way pflag's Value.String() does (used for env-derived defaults). */
export function renderValue(type: FlagType, v: FlagValue, raw?: string): string {
  if (type === 'duration' && raw !== undefined) return raw;
  if (Array.isArray(v)) return `[${v.join(',')}]`;
  if (typeof v === 'object')
    return `[${Object.entries(v)
      .map(([k, x]) => `${k}=${x}`)
      .join(',')}]`;
  return String(v);
}

/** Post-parse checks with typanion: enumerations and numeric ranges that pflag's type alone does not give. */
export function checkAllowed(flag: FlagSpec, value: FlagValue): string | undefined {
  if (!flag.enum) return undefined;
  const isAllowed = t.isEnum(flag.enum);
  const items = Array.isArray(value) ? (value as string[]) : [value];
  for (const item of items) {
    if (typeof item === 'string' && item === '' && !Array.isArray(value)) continue; // unset
    if (!isAllowed(item)) return `${goQuote(String(item))} is not one of ${flag.enum.join(', ')}`;
  }
  return undefined;
}

/** A flag's fallback from its environment variable, parsed with the flag's own type. */
export function flagEnvFallback(flag: FlagSpec, env: EnvVars): { value: FlagValue; raw: string } | undefined {
  if (!flag.env) return undefined;
  const raw = env[flag.env];
  if (raw === undefined || raw === '') return undefined;
  try {
    return { value: parseFlagValue(flag.type, raw), raw };
  } catch (e) {
    throw new EnvError(
      `invalid value ${goQuote(raw)} for environment variable ${flag.env} (default of --${flag.name}, a ${flag.type}): ${(e as Error).message}`,
    );
  }
}
