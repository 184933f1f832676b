// Go's text/template builtin functions and the fmt.Sprintf they use.
import type { FuncMap } from './exec';
import {
  formatFloat,
  goEqual,
  goLess,
  goSprint,
  goSprintMany,
  GO_STRING,
  isGoMap,
  isPlainMap,
  isStringer,
  TemplateExecError,
  toInt,
  truth,
} from './values';

/** fmt.Sprintf with Go's verbs (%v %s %d %q %t %f %g %e %x %X %o %b %c %%), flags, width and precision. */
export function sprintf(format: string, args: readonly unknown[]): string {
  let out = '';
  let argi = 0;
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    if (c !== '%') {
      out += c;
      continue;
    }
    let j = i + 1;
    let flags = '';
    while (j < format.length && '-+# 0'.includes(format[j]!)) flags += format[j++];
    let width: number | undefined;
    if (format[j] === '*') {
      width = toInt(args[argi++]);
      j++;
    } else {
      const m = /^\d+/.exec(format.slice(j));
      if (m) {
        width = Number(m[0]);
        j += m[0].length;
      }
    }
    let prec: number | undefined;
    if (format[j] === '.') {
      j++;
      if (format[j] === '*') {
        prec = toInt(args[argi++]);
        j++;
      } else {
        const m = /^\d*/.exec(format.slice(j))!;
        prec = m[0] ? Number(m[0]) : 0;
        j += m[0].length;
      }
    }
    const verb = format[j];
    i = j;
    if (verb === undefined) {
      out += '%!(NOVERB)';
      break;
    }
    if (verb === '%') {
      out += '%';
      continue;
    }
    if (argi >= args.length) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    const a = args[argi++];
    out += pad(formatVerb(verb, a, flags, prec), width, flags);
  }
  if (argi < args.length) {
    out += `%!(EXTRA ${args
      .slice(argi)
      .map((a) => `${goTypeName(a)}=${goSprint(a)}`)
      .join(', ')})`;
  }
  return out;
}

function goTypeName(a: unknown): string {
  if (typeof a === 'string') return 'string';
  if (typeof a === 'bigint') return 'int';
  if (typeof a === 'number') return 'float64';
  if (typeof a === 'boolean') return 'bool';
  return 'interface {}';
}

function pad(s: string, width: number | undefined, flags: string): string {
  if (width === undefined || s.length >= width) return s;
  if (flags.includes('-')) return s + ' '.repeat(width - s.length);
  if (flags.includes('0') && /^[-+]?\d/.test(s)) {
    const sign = /^[-+]/.test(s) ? s[0]! : '';
    return sign + '0'.repeat(width - s.length) + s.slice(sign.length);
  }
  return ' '.repeat(width - s.length) + s;
}

function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\t') out += '\\t';
    else if (ch === '\r') out += '\\r';
    else if (c === 7) out += '\\a';
    else if (c === 8) out += '\\b';
    else if (c === 12) out += '\\f';
    else if (c === 11) out += '\\v';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + '"';
}

export { goQuote };

function formatVerb(verb: string, a: unknown, flags: string, prec: number | undefined): string {
  switch (verb) {
    case 'v':
      return goSprint(a);
    case 's':
      if (typeof a === 'string' || isStringer(a)) {
        const s = typeof a === 'string' ? a : a[GO_STRING]();
        return prec !== undefined ? [...s].slice(0, prec).join('') : s;
      }
      if (Array.isArray(a) || typeof a === 'bigint' || typeof a === 'number' || typeof a === 'boolean')
        return typeof a === 'bigint' || typeof a === 'number' || typeof a === 'boolean' ? `%!s(${goTypeName(a)}=${goSprint(a)})` : goSprint(a);
      return goSprint(a);
    case 'q':
      if (typeof a === 'string') return goQuote(a);
      if (typeof a === 'bigint') return `'${String.fromCodePoint(Number(a))}'`;
      return goQuote(goSprint(a));
    case 'd':
      if (typeof a === 'bigint') return (flags.includes('+') && a >= 0n ? '+' : '') + a.toString();
      return `%!d(${goTypeName(a)}=${goSprint(a)})`;
    case 't':
      return typeof a === 'boolean' ? String(a) : `%!t(${goTypeName(a)}=${goSprint(a)})`;
    case 'f':
    case 'F':
      if (typeof a === 'number') return a.toFixed(prec ?? 6);
      return `%!f(${goTypeName(a)}=${goSprint(a)})`;
    case 'e':
      if (typeof a === 'number') return a.toExponential(prec ?? 6).replace(/e([+-])(\d)$/, 'e$10$2');
      return `%!e(${goTypeName(a)}=${goSprint(a)})`;
    case 'g':
      if (typeof a === 'number') return prec === undefined ? formatFloat(a) : a.toPrecision(prec);
      return `%!g(${goTypeName(a)}=${goSprint(a)})`;
    case 'x':
    case 'X': {
      let s: string;
      if (typeof a === 'bigint') s = a.toString(16);
      else if (typeof a === 'string') s = Buffer.from(a).toString('hex');
      else return `%!${verb}(${goTypeName(a)}=${goSprint(a)})`;
      return verb === 'X' ? s.toUpperCase() : s;
    }
    case 'o':
      return typeof a === 'bigint' ? a.toString(8) : `%!o(${goTypeName(a)}=${goSprint(a)})`;
    case 'b':
      return typeof a === 'bigint' ? a.toString(2) : `%!b(${goTypeName(a)}=${goSprint(a)})`;
    case 'c':
      return typeof a === 'bigint' ? String.fromCodePoint(Number(a)) : `%!c(${goTypeName(a)}=${goSprint(a)})`;
    case 'T':
      return goTypeName(a);
    default:
      return `%!${verb}(${goTypeName(a)}=${goSprint(a)})`;
  }
}

function index(item: unknown, ...indexes: unknown[]): unknown {
  let v = item;
  for (const k of indexes) {
    if (v === undefined || v === null) throw new TemplateExecError('index of untyped nil');
    if (Array.isArray(v) || typeof v === 'string') {
      if (typeof k !== 'bigint' && typeof k !== 'number') throw new TemplateExecError(`cannot index slice/array with type ${goTypeName(k)}`);
      const n = Number(k);
      const len = typeof v === 'string' ? Buffer.byteLength(v) : v.length;
      if (n < 0 || n >= len) throw new TemplateExecError(`index out of range: ${n}`);
      v = typeof v === 'string' ? BigInt(Buffer.from(v)[n]!) : v[n];
    } else if (isGoMap(v)) {
      if (typeof k !== 'string') throw new TemplateExecError(`value has type ${goTypeName(k)}; should be string`);
      v = v.has(k) ? v.get(k) : v.zero;
    } else if (isPlainMap(v)) {
      if (typeof k !== 'string') throw new TemplateExecError(`value has type ${goTypeName(k)}; should be string`);
      v = Object.prototype.hasOwnProperty.call(v, k) ? v[k] : null;
    } else throw new TemplateExecError(`can't index item of type ${goTypeName(v)}`);
  }
  return v;
}

function length(v: unknown): bigint {
  if (typeof v === 'string') return BigInt(Buffer.byteLength(v));
  if (Array.isArray(v)) return BigInt(v.length);
  if (v instanceof Map) return BigInt(v.size);
  if (isPlainMap(v)) return BigInt(Object.keys(v).length);
  if (v === null) throw new TemplateExecError('len of nil pointer');
  throw new TemplateExecError(`len of type ${goTypeName(v)}`);
}

function htmlEscape(s: string): string {
  return s.replace(/[&'<>"\0]/g, (c) => ({ '&': '&amp;', "'": '&#39;', '<': '&lt;', '>': '&gt;', '"': '&#34;', '\0': '\uFFFD' })[c]!);
}

function jsEscape(s: string): string {
  let out = '';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\') out += '\\\\';
    else if (ch === "'") out += "\\'";
    else if (ch === '"') out += '\\"';
    else if (ch === '<') out += '\\u003C';
    else if (ch === '>') out += '\\u003E';
    else if (ch === '&') out += '\\u0026';
    else if (ch === '=') out += '\\u003D';
    else if (c < 0x20) out += `\\u${c.toString(16).toUpperCase().padStart(4, '0')}`;
    else out += ch;
  }
  return out;
}

export const BUILTINS: FuncMap = {
  and: () => undefined, // handled lazily by the executor
  or: () => undefined,
  not: (v) => !truth(v),
  eq: (a, ...bs) => {
    if (!bs.length) throw new TemplateExecError('missing argument for comparison');
    return bs.some((b) => goEqual(a, b));
  },
  ne: (a, b) => !goEqual(a, b),
  lt: (a, b) => goLess(a, b),
  le: (a, b) => goLess(a, b) || goEqual(a, b),
  gt: (a, b) => !(goLess(a, b) || goEqual(a, b)),
  ge: (a, b) => !goLess(a, b),
  len: length,
  index,
  slice: (item, ...idx) => {
    if (typeof item !== 'string' && !Array.isArray(item)) throw new TemplateExecError(`can't slice item of type ${goTypeName(item)}`);
    const from = idx[0] === undefined ? 0 : toInt(idx[0]);
    const to = idx[1] === undefined ? item.length : toInt(idx[1]);
    return item.slice(from, to);
  },
  call: (fn, ...args) => {
    if (typeof fn !== 'function') throw new TemplateExecError('non-function of type ' + goTypeName(fn));
    return (fn as (...a: unknown[]) => unknown)(...args.map((a) => (a === undefined ? null : a)));
  },
  print: (...args) => goSprintMany(args),
  println: (...args) => args.map(goSprint).join(' ') + '\n',
  printf: (format, ...args) => sprintf(String(format), args),
  html: (...args) => htmlEscape(goSprintMany(args)),
  js: (...args) => jsEscape(goSprintMany(args)),
  urlquery: (...args) => encodeURIComponent(goSprintMany(args)).replace(/%20/g, '+'),
};
