// YAML exactly as Go's gopkg.in/yaml.v2 (through sigs.k8s.io/yaml) writes it, which is what Kubernetes tools,
// istioctl and Helm print: block style, mapping keys in yaml.v2's "natural" order, sequences under a key not
// indented, plain scalars unless YAML 1.1 would read them as something else, single quotes for indicators,
// literal blocks for multi-line text, double quotes with escapes for the rest, and lines folded at spaces past
// column 80. Output that must equal Istio's byte for byte (orch-inject, manifests) goes through here.

/** Values as yaml.v2 holds them after decoding: bigint for ints, number for floats. */
export type GoYamlValue = null | boolean | bigint | number | string | GoYamlValue[] | { [key: string]: GoYamlValue } | Map<string, GoYamlValue>;

const BEST_WIDTH = 80;
const BEST_INDENT = 2;

// ---- YAML 1.1 implicit resolution (yaml.v2 resolve.go): would a plain scalar read back as a string? ----

const NULLS = new Set(['', '~', 'null', 'Null', 'NULL']);
const BOOLS = new Set([
  'y',
  'Y',
  'yes',
  'Yes',
  'YES',
  'n',
  'N',
  'no',
  'No',
  'NO',
  'true',
  'True',
  'TRUE',
  'false',
  'False',
  'FALSE',
  'on',
  'On',
  'ON',
  'off',
  'Off',
  'OFF',
]);
const FLOAT_WORDS = new Set(['.nan', '.NaN', '.NAN', '.inf', '.Inf', '.INF', '+.inf', '+.Inf', '+.INF', '-.inf', '-.Inf', '-.INF']);
const YAML_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;
const BASE60_FLOAT = /^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$/;
const TIMESTAMP = /^\d{4}-\d{1,2}-\d{1,2}(?:(?:[Tt]|[ \t]+)\d{1,2}:\d{1,2}:\d{1,2}(?:\.\d*)?(?:[ \t]*(?:Z|[-+]\d{1,2}(?::\d{2})?))?)?$/;

/** Go's strconv.ParseInt(s, 0, 64) / ParseUint accepting the string (after yaml.v2 removed underscores). */
function goParsesInt(s: string): boolean {
  return /^[-+]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO]?[0-7]*|[1-9][0-9]*|0)$/.test(s) && withinInt64(s);
}

function withinInt64(s: string): boolean {
  try {
    const neg = s.startsWith('-');
    const body = s.replace(/^[-+]/, '');
    let v: bigint;
    if (/^0[xX]/.test(body)) v = BigInt(body);
    else if (/^0[bB]/.test(body)) v = BigInt(body);
    else if (/^0[oO]/.test(body)) v = BigInt('0o' + body.slice(2));
    else if (/^0[0-7]+$/.test(body)) v = BigInt('0o' + body.slice(1));
    else v = BigInt(body);
    return neg ? -v >= -(2n ** 63n) : v <= 2n ** 64n - 1n;
  } catch {
    return false;
  }
}

/** True when yaml.v2 would resolve the plain scalar `s` to a non-string (so it must be quoted). */
export function resolvesToNonString(s: string): boolean {
  if (NULLS.has(s) || BOOLS.has(s) || FLOAT_WORDS.has(s) || s === '<<') return true;
  const c = s[0];
  if (c === undefined) return true;
  if (/[-+0-9.]/.test(c)) {
    if (c !== '.') {
      if (TIMESTAMP.test(s)) return true;
      const plain = s.replace(/_/g, '');
      if (goParsesInt(plain)) return true;
      if (/^-0[bB][01]+$/.test(plain)) return true;
    }
    if (YAML_FLOAT.test(s.replace(/_/g, ''))) return true;
  }
  return false;
}

// ---- key order (yaml.v2 sorter.go keyList.Less) ----

function isLetter(c: string): boolean {
  return /\p{L}/u.test(c);
}
function isDigit(c: string): boolean {
  return /\p{Nd}/u.test(c);
}

export function goYamlKeyLess(a: string, b: string): boolean {
  const ar = [...a];
  const br = [...b];
  for (let i = 0; i < ar.length && i < br.length; i++) {
    if (ar[i] === br[i]) continue;
    const al = isLetter(ar[i]!);
    const bl = isLetter(br[i]!);
    if (al && bl) return ar[i]! < br[i]!;
    if (al || bl) return bl;
    let an = 0n;
    let bn = 0n;
    if (ar[i] === '0' || br[i] === '0') {
      for (let j = i - 1; j >= 0 && isDigit(ar[j]!); j--) {
        if (ar[j] !== '0') {
          an = 1n;
          bn = 1n;
          break;
        }
      }
    }
    let ai = i;
    for (; ai < ar.length && isDigit(ar[ai]!); ai++) an = an * 10n + BigInt(ar[ai]!.charCodeAt(0) - 48);
    let bi = i;
    for (; bi < br.length && isDigit(br[bi]!); bi++) bn = bn * 10n + BigInt(br[bi]!.charCodeAt(0) - 48);
    if (an !== bn) return an < bn;
    if (ai !== bi) return ai < bi;
    return ar[i]! < br[i]!;
  }
  return ar.length < br.length;
}

export function goYamlKeyCompare(a: string, b: string): number {
  return goYamlKeyLess(a, b) ? -1 : goYamlKeyLess(b, a) ? 1 : 0;
}

// ---- scalar analysis (libyaml yaml_emitter_analyze_scalar) ----

interface Analysis {
  multiline: boolean;
  blockPlainAllowed: boolean;
  singleQuotedAllowed: boolean;
  blockAllowed: boolean;
}

function isBreakChar(c: string | undefined): boolean {
  return c === '\n' || c === '\r' || c === '\u0085' || c === '\u2028' || c === '\u2029';
}

/** libyaml's is_printable over one code point. */
function isPrintable(c: string): boolean {
  const cp = c.codePointAt(0)!;
  if (cp === 0x0a) return true;
  if (cp >= 0x20 && cp <= 0x7e) return true;
  if (cp >= 0xa0 && cp <= 0xd7ff) return true;
  if (cp >= 0xe000 && cp <= 0xfffd) return cp !== 0xfeff;
  return false;
}

function analyze(value: string): Analysis {
  if (value.length === 0) return { multiline: false, blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: false };
  let blockIndicators = false;
  let lineBreaks = false;
  let special = false;
  let leadingSpace = false;
  let leadingBreak = false;
  let trailingSpace = false;
  let trailingBreak = false;
  let breakSpace = false;
  let spaceBreak = false;
  let previousSpace = false;
  let previousBreak = false;
  if (value.startsWith('---') || value.startsWith('...')) blockIndicators = true;
  const chars = [...value];
  let precededByWhitespace = true;
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i]!;
    const next = chars[i + 1];
    const followedByWhitespace = next === undefined || next === ' ' || next === '\t' || isBreakChar(next);
    if (i === 0) {
      if ('#,[]{}&*!|>\'"%@`'.includes(c)) blockIndicators = true;
      else if ((c === '?' || c === ':' || c === '-') && followedByWhitespace) blockIndicators = true;
    } else if (c === ':' && followedByWhitespace) blockIndicators = true;
    else if (c === '#' && precededByWhitespace) blockIndicators = true;
    if (!isPrintable(c)) special = true;
    if (c === ' ') {
      if (i === 0) leadingSpace = true;
      if (i === chars.length - 1) trailingSpace = true;
      if (previousBreak) breakSpace = true;
      previousSpace = true;
      previousBreak = false;
    } else if (isBreakChar(c)) {
      lineBreaks = true;
      if (i === 0) leadingBreak = true;
      if (i === chars.length - 1) trailingBreak = true;
      if (previousSpace) spaceBreak = true;
      previousSpace = false;
      previousBreak = true;
    } else {
      previousSpace = false;
      previousBreak = false;
    }
    precededByWhitespace = c === ' ' || c === '\t' || isBreakChar(c) || c === '\0';
  }
  const a: Analysis = { multiline: lineBreaks, blockPlainAllowed: true, singleQuotedAllowed: true, blockAllowed: true };
  if (leadingSpace || leadingBreak || trailingSpace || trailingBreak) a.blockPlainAllowed = false;
  if (trailingSpace) a.blockAllowed = false;
  if (breakSpace) {
    a.blockPlainAllowed = false;
    a.singleQuotedAllowed = false;
  }
  if (spaceBreak || special) {
    a.blockPlainAllowed = false;
    a.singleQuotedAllowed = false;
    a.blockAllowed = false;
  }
  if (lineBreaks) a.blockPlainAllowed = false;
  if (blockIndicators) a.blockPlainAllowed = false;
  return a;
}

type Style = 'plain' | 'single' | 'double' | 'literal';

function chooseStyle(s: string, simpleKey: boolean): Style {
  // yaml.v2 encoder: literal for text with newlines, plain unless it would resolve to another type.
  let style: Style = s.includes('\n') ? 'literal' : !resolvesToNonString(s) && !BASE60_FLOAT.test(s) ? 'plain' : 'double';
  const a = analyze(s);
  if (simpleKey && a.multiline) style = 'double';
  if (style === 'plain') {
    if (!a.blockPlainAllowed) style = 'single';
    if (s.length === 0 && simpleKey) style = 'single';
  }
  if (style === 'single' && !a.singleQuotedAllowed) style = 'double';
  if (style === 'literal' && (!a.blockAllowed || simpleKey)) style = 'double';
  return style;
}

// ---- writer ----

class Writer {
  out = '';
  column = 0;
  /** At the start of a line's indentation (libyaml's `indention`). */
  indention = true;
  whitespace = true;

  put(s: string): void {
    for (const ch of s) {
      this.out += ch;
      if (ch === '\n') {
        this.column = 0;
      } else this.column++;
    }
  }

  newline(): void {
    this.out += '\n';
    this.column = 0;
    this.indention = true;
    this.whitespace = true;
  }

  /** libyaml write_indent. */
  writeIndent(indent: number): void {
    if (!this.indention || this.column > indent || (this.column === indent && !this.whitespace)) this.newline();
    while (this.column < indent) this.put(' ');
    this.whitespace = true;
    this.indention = true;
  }

  indicator(s: string, needWhitespace: boolean, isWhitespace: boolean, isIndention: boolean): void {
    if (needWhitespace && !this.whitespace) this.put(' ');
    this.put(s);
    this.whitespace = isWhitespace;
    this.indention = this.indention && isIndention;
  }

  text(s: string): void {
    this.put(s);
    this.indention = false;
    this.whitespace = false;
  }

  scalar(s: string, indent: number, simpleKey: boolean): void {
    const style = chooseStyle(s, simpleKey);
    const allowBreaks = !simpleKey;
    switch (style) {
      case 'plain':
        return this.plain(s, indent, allowBreaks);
      case 'single':
        return this.single(s, indent, allowBreaks);
      case 'double':
        return this.double(s, indent, allowBreaks);
      case 'literal':
        return this.literal(s, indent);
    }
  }

  private plain(s: string, indent: number, allowBreaks: boolean): void {
    if (!this.whitespace) this.put(' ');
    const chars = [...s];
    let spaces = false;
    for (let i = 0; i < chars.length; i++) {
      const c = chars[i]!;
      if (c === ' ') {
        if (allowBreaks && !spaces && this.column > BEST_WIDTH && chars[i + 1] !== ' ') {
          this.writeIndent(indent);
        } else this.put(c);
        spaces = true;
      } else {
        this.put(c);
        this.indention = false;
        spaces = false;
      }
    }
    this.whitespace = false;
    this.indention = false;
  }

  private single(s: string, indent: number, allowBreaks: boolean): void {
    this.indicator("'", true, false, false);
    const chars = [...s];
    let spaces = false;
    let breaks = false;
    for (let i = 0; i < chars.length; i++) {
      const c = chars[i]!;
      if (c === ' ') {
        if (allowBreaks && !spaces && this.column > BEST_WIDTH && i > 0 && i < chars.length - 1 && chars[i + 1] !== ' ') {
          this.writeIndent(indent);
        } else this.put(c);
        spaces = true;
      } else if (isBreakChar(c)) {
        if (!breaks && c === '\n') this.newline();
        this.newline();
        this.indention = true;
        breaks = true;
      } else {
        if (breaks) this.writeIndent(indent);
        if (c === "'") this.put("'");
        this.put(c);
        this.indention = false;
        spaces = false;
        breaks = false;
      }
    }
    this.indicator("'", false, false, false);
  }

  private double(s: string, indent: number, allowBreaks: boolean): void {
    this.indicator('"', true, false, false);
    const chars = [...s];
    let spaces = false;
    for (let i = 0; i < chars.length; i++) {
      const c = chars[i]!;
      const cp = c.codePointAt(0)!;
      if (!isPrintable(c) || cp === 0xfeff || isBreakChar(c) || c === '"' || c === '\\') {
        this.put('\\');
        const named: Record<number, string> = {
          0: '0',
          7: 'a',
          8: 'b',
          9: 't',
          10: 'n',
          11: 'v',
          12: 'f',
          13: 'r',
          0x1b: 'e',
          0x22: '"',
          0x5c: '\\',
          0x85: 'N',
          0xa0: '_',
          0x2028: 'L',
          0x2029: 'P',
        };
        if (named[cp] !== undefined) this.put(named[cp]!);
        else if (cp <= 0xff) this.put('x' + cp.toString(16).toUpperCase().padStart(2, '0'));
        else if (cp <= 0xffff) this.put('u' + cp.toString(16).toUpperCase().padStart(4, '0'));
        else this.put('U' + cp.toString(16).toUpperCase().padStart(8, '0'));
        spaces = false;
      } else if (c === ' ') {
        if (allowBreaks && !spaces && this.column > BEST_WIDTH && i > 0 && i < chars.length - 1) {
          this.writeIndent(indent);
          if (chars[i + 1] === ' ') this.put('\\');
        } else this.put(c);
        spaces = true;
      } else {
        this.put(c);
        spaces = false;
      }
    }
    this.indicator('"', false, false, false);
  }

  private literal(s: string, indent: number): void {
    this.indicator('|', true, false, false);
    const chars = [...s];
    if (chars[0] === ' ' || isBreakChar(chars[0])) this.indicator(String(BEST_INDENT), false, false, false);
    let chomp = '';
    const last = chars[chars.length - 1];
    if (chars.length === 0 || !isBreakChar(last)) chomp = '-';
    else if (chars.length === 1) chomp = '+';
    else if (isBreakChar(chars[chars.length - 2])) chomp = '+';
    if (chomp) this.indicator(chomp, false, false, false);
    this.newline();
    let breaks = true;
    for (const c of chars) {
      if (isBreakChar(c)) {
        this.newline();
        breaks = true;
      } else {
        if (breaks) this.writeIndent(indent);
        this.put(c);
        this.indention = false;
        breaks = false;
      }
    }
  }
}

function isMapping(v: unknown): v is Record<string, GoYamlValue> | Map<string, GoYamlValue> {
  return v instanceof Map || (typeof v === 'object' && v !== null && !Array.isArray(v));
}

function entriesOf(v: Record<string, GoYamlValue> | Map<string, GoYamlValue>): Array<[string, GoYamlValue]> {
  const e = v instanceof Map ? [...v.entries()] : Object.entries(v);
  return e.sort(([a], [b]) => goYamlKeyCompare(a, b));
}

function isEmptyCollection(v: unknown): boolean {
  if (Array.isArray(v)) return v.length === 0;
  if (v instanceof Map) return v.size === 0;
  if (isMapping(v)) return Object.keys(v).length === 0;
  return false;
}

function scalarText(v: GoYamlValue): string | undefined {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number') {
    if (Number.isNaN(v)) return '.nan';
    if (v === Infinity) return '.inf';
    if (v === -Infinity) return '-.inf';
    return formatGoFloat(v);
  }
  return undefined;
}

/** strconv.FormatFloat(f, 'g', -1, 64). */
function formatGoFloat(f: number): string {
  if (f === 0) return Object.is(f, -0) ? '-0' : '0';
  const [mant, expPart] = f.toExponential().split('e') as [string, string];
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  const exp = Number(expPart);
  let out: string;
  if (exp < -4 || exp >= 21) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    out = `${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  } else if (exp < 0) out = `0.${'0'.repeat(-exp - 1)}${digits}`;
  else if (digits.length <= exp + 1) out = digits + '0'.repeat(exp + 1 - digits.length);
  else out = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  return neg ? `-${out}` : out;
}

function writeValue(w: Writer, v: GoYamlValue, indent: number): void {
  const text = scalarText(v);
  if (text !== undefined) {
    w.indicator(text, true, false, false);
    return;
  }
  if (typeof v === 'string') {
    w.scalar(v, indent + BEST_INDENT, false);
    return;
  }
  if (Array.isArray(v)) {
    if (v.length === 0) return w.indicator('[]', true, false, false);
    return writeSequence(w, v, indent);
  }
  if (isEmptyCollection(v)) return w.indicator('{}', true, false, false);
  writeMapping(w, v as Record<string, GoYamlValue>, indent);
}

function writeMapping(w: Writer, m: Record<string, GoYamlValue> | Map<string, GoYamlValue>, indent: number): void {
  for (const [k, v] of entriesOf(m)) {
    w.writeIndent(indent);
    w.scalar(k, indent, true);
    w.indicator(':', false, false, false);
    if (Array.isArray(v) && v.length > 0) {
      // A sequence under a key is not indented further (yaml.v2 "indentless" sequences).
      writeSequence(w, v, indent);
    } else if (isMapping(v) && !isEmptyCollection(v)) {
      writeMapping(w, v, indent + BEST_INDENT);
    } else writeValue(w, v, indent);
  }
}

function writeSequence(w: Writer, list: GoYamlValue[], indent: number): void {
  for (const item of list) {
    w.writeIndent(indent);
    w.indicator('-', true, false, true);
    if (Array.isArray(item) && item.length > 0) writeSequence(w, item, indent + BEST_INDENT);
    else if (isMapping(item) && !isEmptyCollection(item)) writeMapping(w, item, indent + BEST_INDENT);
    else writeValue(w, item, indent);
  }
}

/** yaml.v2 Marshal of a decoded value (ints as bigint). Ends with a newline. */
export function marshalGoYaml(v: GoYamlValue): string {
  const w = new Writer();
  if (Array.isArray(v) && v.length > 0) writeSequence(w, v, 0);
  else if (isMapping(v) && !isEmptyCollection(v)) writeMapping(w, v, 0);
  else {
    const text = scalarText(v);
    if (text !== undefined) w.text(text);
    else if (typeof v === 'string') w.scalar(v, 0, false);
    else w.text(Array.isArray(v) ? '[]' : '{}');
  }
  // yaml.v2 ends the document with a line break unless the last literal block already did.
  return w.out.endsWith('\n') ? w.out : w.out + '\n';
}

/** What yaml.v2 makes of JSON text: integral numbers become ints. */
export function fromJsonValue(v: unknown): GoYamlValue {
  if (v === null || v === undefined) return null;
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 1e21 ? BigInt(v) : v;
  if (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'bigint') return v;
  if (Array.isArray(v)) return v.map(fromJsonValue);
  if (v instanceof Map) return new Map([...v.entries()].map(([k, x]) => [String(k), fromJsonValue(x)]));
  if (typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function') return fromJsonValue((v as { toJSON(): unknown }).toJSON());
  const out: Record<string, GoYamlValue> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) if (x !== undefined) out[k] = fromJsonValue(x);
  return out;
}

/** sigs.k8s.io/yaml Marshal: JSON encoding first, then yaml.v2. */
export function jsonToGoYaml(v: unknown): string {
  return marshalGoYaml(fromJsonValue(v));
}
