// RE2 patterns (what Envoy's safe_regex uses) as JavaScript RegExps. RE2 syntax is checked with the
// project's Go-compatible parser, then the few RE2-only spellings are rewritten: `(?P<n>`, `\A`, `\z`,
// `\Q…\E`, POSIX classes and leading flag groups. Lookarounds and backreferences never reach here:
// RE2 rejects them.
import { re2SyntaxError } from '../../config/validate/re2';

const POSIX: Record<string, string> = {
  alnum: '0-9A-Za-z', alpha: 'A-Za-z', ascii: '\\x00-\\x7F', blank: '\\t ', cntrl: '\\x00-\\x1F\\x7F', digit: '0-9',
  graph: '!-~', lower: 'a-z', print: ' -~', punct: '!-\\/:-@\\[-`{-~', space: '\\t\\n\\v\\f\\r ', upper: 'A-Z',
  word: '0-9A-Za-z_', xdigit: '0-9A-Fa-f',
};

export interface JsRegExpSource {
  source: string;
  flags: string;
}

const escapeLiteral = (s: string) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');

/** Rewrites an RE2 pattern for RegExp; throws Go's `error parsing regexp: …` for invalid RE2. */
export function toJsRegExpSource(pattern: string): JsRegExpSource {
  const err = re2SyntaxError(pattern);
  if (err) throw new Error(err);
  let flags = '';
  let p = pattern;
  const lead = /^\(\?([imsU]+)\)/.exec(p);
  if (lead) {
    for (const f of lead[1]!) {
      if (f === 'U') throw new Error(`regex '${pattern}': the (?U) flag is not supported`);
      if (!flags.includes(f)) flags += f;
    }
    p = p.slice(lead[0].length);
  }
  let out = '';
  let inClass = false;
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    if (c === '\\') {
      const n = p[i + 1];
      if (n === 'Q') {
        const end = p.indexOf('\\E', i + 2);
        const lit = end < 0 ? p.slice(i + 2) : p.slice(i + 2, end);
        out += escapeLiteral(lit);
        i = end < 0 ? p.length : end + 1;
        continue;
      }
      if (!inClass && n === 'A') {
        out += '^';
        i++;
        continue;
      }
      if (!inClass && n === 'z') {
        out += '$';
        i++;
        continue;
      }
      if (n === 'p' || n === 'P') {
        if (!flags.includes('u')) flags += 'u';
        const name = p[i + 2] === '{' ? p.slice(i + 3, p.indexOf('}', i + 3)) : p[i + 2]!;
        out += `\\${n}{${name}}`;
        i += p[i + 2] === '{' ? name.length + 3 : 2;
        continue;
      }
      out += c + (n ?? '');
      i++;
      continue;
    }
    if (inClass) {
      if (c === '[' && p[i + 1] === ':') {
        const end = p.indexOf(':]', i + 2);
        let name = p.slice(i + 2, end);
        const neg = name.startsWith('^');
        if (neg) name = name.slice(1);
        const body = POSIX[name];
        if (end > 0 && body !== undefined) {
          if (neg) throw new Error(`regex '${pattern}': negated POSIX classes are not supported`);
          out += body;
          i = end + 1;
          continue;
        }
      }
      if (c === ']') inClass = false;
      out += c;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      if (p[i + 1] === '^') {
        out += '^';
        i++;
      }
      if (p[i + 1] === ']') {
        out += '\\]';
        i++;
      }
      continue;
    }
    if (c === '(' && p.startsWith('(?P<', i)) {
      out += '(?<';
      i += 3;
      continue;
    }
    if (c === '(' && p[i + 1] === '?' && /^\(\?[imsU-]+[:)]/.test(p.slice(i))) {
      throw new Error(`regex '${pattern}': inline flag groups are only supported at the start of the pattern`);
    }
    out += c;
  }
  return { source: out, flags };
}

/** A RegExp matching the whole input (Envoy's safe_regex semantics). */
export function compileFullMatch(pattern: string): RegExp {
  const { source, flags } = toJsRegExpSource(pattern);
  return new RegExp(`^(?:${source})$`, flags);
}

/** A global RegExp for substitution (regex_rewrite, RE2::GlobalReplace). */
export function compileGlobal(pattern: string): RegExp {
  const { source, flags } = toJsRegExpSource(pattern);
  return new RegExp(source, `${flags}g`);
}

/** RE2 substitution (`\1`, `\\`) as a String.replace replacement (`$1`, `\`). */
export function toJsReplacement(sub: string): string {
  let out = '';
  for (let i = 0; i < sub.length; i++) {
    const c = sub[i]!;
    if (c === '\\' && i + 1 < sub.length) {
      const n = sub[i + 1]!;
      if (/[0-9]/.test(n)) {
        out += `$${n}`;
        i++;
        continue;
      }
      if (n === '\\') {
        out += '\\';
        i++;
        continue;
      }
    }
    out += c === '$' ? '$$' : c;
  }
  return out;
}
