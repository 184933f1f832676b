// How Go values are represented when a template runs, and the few Go semantics templates observe on them:
// truth, printing with %v, comparison. Templates written for Go (Istio's injection templates, Helm-style
// charts) print and branch on these, so getting them exactly right is what makes output match Go's.
//
//   undefined          Go's invalid reflect.Value: a missing map key reached by field access. Prints "<no value>".
//   null               a nil interface/pointer/map/slice. Prints "<nil>".
//   string, boolean
//   bigint             Go's integer kinds (int, int32, int64…): template integer literals, len, typed struct fields.
//   number             float64 — what a JSON/YAML number becomes in map[string]any. Prints with %v ("1e+06").
//   Array              a slice.
//   GoMap              a typed Go map (map[string]string): `index` of a missing key gives the element's zero value.
//   plain object       map[string]any: missing keys are invalid values.
//   GoStruct subclass  a struct: fields are properties, methods are functions; a missing field is an error.
//   GoStringer         anything with a String method for printing (proto enums print their names).

/** A typed Go map: missing keys index to `zero`, ranges go in key order. */
export class GoMap<V = unknown> extends Map<string, V> {
  constructor(
    entries: Iterable<readonly [string, V]> | Record<string, V> | null | undefined,
    readonly zero: V,
    /** Go type name, for error messages. */
    readonly typeName = 'map[string]string',
  ) {
    super();
    if (entries && typeof (entries as Iterable<unknown>)[Symbol.iterator] === 'function') {
      for (const [k, v] of entries as Iterable<readonly [string, V]>) this.set(k, v);
    } else if (entries) for (const [k, v] of Object.entries(entries)) this.set(k, v);
  }
  /** A nil map is a GoMap with this flag: it prints "map[]" and is falsy like an empty one. */
  toJSON(): Record<string, V> {
    return Object.fromEntries([...this.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

/** Base of classes whose instances are Go structs (as opposed to map[string]any). */
export abstract class GoStruct {
  /** Go type name for error messages, e.g. `v1.ObjectMeta`. */
  abstract goType(): string;
}

export const GO_STRING = Symbol('go.String');
export const GO_TRUTH = Symbol('go.truth');
export const GO_JSON = Symbol('go.json');

/** A value printed through its String method (fmt.Stringer), like a proto enum. */
export interface GoStringer {
  [GO_STRING](): string;
}

export function isStringer(v: unknown): v is GoStringer {
  return typeof v === 'object' && v !== null && typeof (v as Partial<GoStringer>)[GO_STRING] === 'function';
}

export function isGoMap(v: unknown): v is GoMap {
  return v instanceof GoMap;
}

export function isStruct(v: unknown): v is GoStruct {
  return v instanceof GoStruct;
}

export function isPlainMap(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/** Go's template truth: false, 0, "", nil and empty containers are false; structs are true. */
export function truth(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === '' || v === 0 || v === 0n) return false;
  if (typeof v === 'number') return !Number.isNaN(v) || true;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  if (typeof v === 'object') {
    const t = (v as { [GO_TRUTH]?: () => boolean })[GO_TRUTH];
    if (typeof t === 'function') return t.call(v);
    if (isStruct(v)) return true;
    return Object.keys(v).length > 0;
  }
  return true;
}

/** fmt's %v of a float64: strconv.FormatFloat(f, 'g', -1, 64) — the shortest digits that round-trip, in
 *  exponent form when the exponent is < -4 or >= 6 (so 43200 prints "43200" but 1000000 prints "1e+06"). */
export function formatFloat(f: number): string {
  if (Number.isNaN(f)) return 'NaN';
  if (f === Infinity) return '+Inf';
  if (f === -Infinity) return '-Inf';
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const [mant, expPart] = f.toExponential().split('e') as [string, string];
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  const exp = Number(expPart);
  const eprec = 6;
  let out: string;
  if (exp < -4 || exp >= eprec) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    out = `${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  } else if (exp < 0) {
    out = `0.${'0'.repeat(-exp - 1)}${digits}`;
  } else if (digits.length <= exp + 1) {
    out = digits + '0'.repeat(exp + 1 - digits.length);
  } else {
    out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  }
  return neg ? `-${out}` : out;
}

/** fmt.Sprint of one value (%v). */
export function goSprint(v: unknown): string {
  if (v === undefined) return '<no value>';
  if (v === null) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (typeof v === 'number') return formatFloat(v);
  if (isStringer(v)) return v[GO_STRING]();
  if (Array.isArray(v)) return `[${v.map(goSprintNested).join(' ')}]`;
  if (v instanceof Map) {
    const keys = [...v.keys()].sort();
    return `map[${keys.map((k) => `${k}:${goSprintNested(v.get(k))}`).join(' ')}]`;
  }
  if (typeof v === 'function') return '<func>';
  if (typeof v === 'object') {
    if (isStruct(v)) {
      const fields = Object.entries(v).filter(([, x]) => typeof x !== 'function');
      return `{${fields.map(([, x]) => goSprintNested(x)).join(' ')}}`;
    }
    const keys = Object.keys(v).sort();
    return `map[${keys.map((k) => `${k}:${goSprintNested((v as Record<string, unknown>)[k])}`).join(' ')}]`;
  }
  return String(v);
}

/** Inside containers fmt prints nil interfaces as <nil>, never <no value>. */
function goSprintNested(v: unknown): string {
  return v === undefined ? '<nil>' : goSprint(v);
}

/** Go's fmt.Sprint over several operands: spaces between operands when neither is a string. */
export function goSprintMany(args: readonly unknown[]): string {
  let out = '';
  args.forEach((a, i) => {
    if (i > 0 && typeof a !== 'string' && typeof args[i - 1] !== 'string') out += ' ';
    out += goSprint(a);
  });
  return out;
}

type BasicKind = 'bool' | 'int' | 'float' | 'string' | 'invalid' | 'other';

export function basicKind(v: unknown): BasicKind {
  if (v === undefined) return 'invalid';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'bigint') return 'int';
  if (typeof v === 'number') return 'float';
  if (typeof v === 'string') return 'string';
  return 'other';
}

export class TemplateExecError extends Error {}

/** Go's template `eq` for two values (nil-aware, errors on mismatched basic kinds). */
export function goEqual(a: unknown, b: unknown): boolean {
  const ka = basicKind(a);
  const kb = basicKind(b);
  if (ka !== kb) {
    if (ka === 'invalid' || kb === 'invalid') return false;
    if (a === null || b === null) return a === b;
    if (ka === 'other' || kb === 'other') throw new TemplateExecError('incompatible types for comparison');
    throw new TemplateExecError('incompatible types for comparison');
  }
  if (ka === 'other') {
    if (a === null || b === null) return a === b;
    if (isStringer(a) && isStringer(b)) return a[GO_STRING]() === b[GO_STRING]();
    throw new TemplateExecError('non-comparable types');
  }
  return a === b;
}

export function goLess(a: unknown, b: unknown): boolean {
  const ka = basicKind(a);
  const kb = basicKind(b);
  if (ka !== kb || ka === 'other' || ka === 'invalid' || ka === 'bool') {
    throw new TemplateExecError(ka === kb ? 'invalid type for comparison' : 'incompatible types for comparison');
  }
  return (a as string | number | bigint) < (b as string | number | bigint);
}

/** A JS number for a Go int or float argument. */
export function toInt(v: unknown, what = 'value'): number {
  if (typeof v === 'bigint') return Number(v);
  if (typeof v === 'number') return Math.trunc(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v.trim())) return Number(v.trim());
  if (v === null || v === undefined) return 0;
  throw new TemplateExecError(`${what}: expected an integer, got ${goSprint(v)}`);
}
