// RE2 syntax check with Go's regexp error messages. Envoy matches with RE2 and Istio validates with
// Go's regexp (the same syntax), so a JavaScript RegExp is the wrong judge: it accepts lookarounds
// and backreferences that RE2 rejects, and rejects RE2 forms such as `(?P<name>…)`, `\z`, `[[:alpha:]]`.
// This follows Go's regexp/syntax parser (Perl flags) closely enough to give the same verdicts and
// messages for the errors people actually make.

const POSIX_CLASSES = new Set(['alnum', 'alpha', 'ascii', 'blank', 'cntrl', 'digit', 'graph', 'lower', 'print', 'punct', 'space', 'upper', 'word', 'xdigit']);
const MAX_REPEAT = 1000;

class Re2Error extends Error {
  constructor(code: string, expr: string) {
    super(`error parsing regexp: ${code}: \`${expr}\``);
  }
}

/** Go's `error parsing regexp: …` message for an invalid RE2 pattern, or undefined when it compiles. */
export function re2SyntaxError(pattern: string): string | undefined {
  try {
    new Re2Parser(pattern).parse();
    return undefined;
  } catch (e) {
    if (e instanceof Re2Error) return e.message;
    throw e;
  }
}

class Re2Parser {
  private i = 0;
  private depth = 0;
  /** Whether the last item can take a repetition operator. */
  private canRepeat = false;
  /** Start of the previous token when it was a repetition operator (Perl forbids stacking them). */
  private lastRepeat = -1;

  constructor(private readonly s: string) {}

  parse(): void {
    const s = this.s;
    while (this.i < s.length) {
      const start = this.i;
      let repeatStart = -1;
      const c = s[this.i]!;
      switch (c) {
        case '(':
          if (s[this.i + 1] === '?') this.parsePerlFlags();
          else {
            this.i++;
            this.depth++;
            this.canRepeat = false;
          }
          if (this.depth > 1000) throw new Re2Error('expression nests too deeply', s);
          break;
        case '|':
          this.i++;
          this.canRepeat = false;
          break;
        case ')':
          if (this.depth === 0) throw new Re2Error('unexpected )', s);
          this.depth--;
          this.i++;
          this.canRepeat = true;
          break;
        case '^':
        case '$':
        case '.':
          this.i++;
          this.canRepeat = true;
          break;
        case '[':
          this.parseClass();
          this.canRepeat = true;
          break;
        case '*':
        case '+':
        case '?': {
          this.i++;
          repeatStart = start;
          this.repeat(start);
          break;
        }
        case '{': {
          const rep = /^\{([0-9]+)(,([0-9]*))?\}/.exec(s.slice(this.i));
          if (!rep) {
            // Not a well-formed repeat: a literal brace.
            this.i++;
            this.canRepeat = true;
            break;
          }
          this.i += rep[0].length;
          repeatStart = start;
          const lo = Number(rep[1]);
          const hi = rep[2] === undefined ? lo : rep[3] === '' ? -1 : Number(rep[3]);
          if (lo > MAX_REPEAT || hi > MAX_REPEAT || (hi >= 0 && hi < lo)) throw new Re2Error('invalid repeat count', rep[0]);
          this.repeat(start);
          break;
        }
        case '\\':
          this.parseEscapeOutsideClass();
          break;
        default:
          this.i += codePointLength(s, this.i);
          this.canRepeat = true;
      }
      this.lastRepeat = repeatStart;
    }
    if (this.depth > 0) throw new Re2Error('missing closing )', s);
  }

  private repeat(opStart: number): void {
    const s = this.s;
    if (s[this.i] === '?') this.i++; // non-greedy
    if (this.lastRepeat >= 0) throw new Re2Error('invalid nested repetition operator', s.slice(this.lastRepeat, this.i));
    if (!this.canRepeat) throw new Re2Error('missing argument to repetition operator', s.slice(opStart, this.i));
  }

  private parsePerlFlags(): void {
    const s = this.s;
    const t = s.slice(this.i);
    const startsWithP = t.length > 4 && t[2] === 'P' && t[3] === '<';
    const startsWithName = t.length > 3 && t[2] === '<';
    if (startsWithP || startsWithName) {
      const end = t.indexOf('>');
      if (end < 0) throw new Re2Error('invalid named capture', t);
      const capture = t.slice(0, end + 1);
      const name = t.slice(startsWithP ? 4 : 3, end);
      if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Re2Error('invalid named capture', capture);
      this.i += end + 1;
      this.depth++;
      this.canRepeat = false;
      return;
    }
    // Flags (?imsU-imsU) alone or opening a non-capturing group (?flags:…).
    let j = 2;
    let negated = false;
    let sawFlag = false;
    while (j < t.length) {
      const c = t[j]!;
      j++;
      if (c === 'i' || c === 'm' || c === 's' || c === 'U') {
        sawFlag = true;
        continue;
      }
      if (c === '-') {
        if (negated) break;
        negated = true;
        sawFlag = false;
        continue;
      }
      if (c === ':' || c === ')') {
        if (negated && !sawFlag) break;
        this.i += j;
        if (c === ':') {
          this.depth++;
          this.canRepeat = false;
        }
        // A bare flag group leaves nothing to repeat either; Go keeps the previous item, which is
        // equivalent for validation purposes.
        return;
      }
      break;
    }
    throw new Re2Error('invalid or unsupported Perl syntax', t.slice(0, j));
  }

  private parseEscapeOutsideClass(): void {
    const s = this.s;
    const next = s[this.i + 1];
    if (next === undefined) throw new Re2Error('trailing backslash at end of expression', '');
    switch (next) {
      case 'A':
      case 'z':
      case 'b':
      case 'B':
        this.i += 2;
        this.canRepeat = true;
        return;
      case 'Q': {
        // Literal text up to \E (or the end).
        const end = s.indexOf('\\E', this.i + 2);
        this.i = end < 0 ? s.length : end + 2;
        this.canRepeat = true;
        return;
      }
      case 'C':
        this.i += 2;
        this.canRepeat = true;
        return;
      case 'p':
      case 'P':
        this.parseUnicodeClass();
        this.canRepeat = true;
        return;
      case 'd':
      case 'D':
      case 's':
      case 'S':
      case 'w':
      case 'W':
        this.i += 2;
        this.canRepeat = true;
        return;
    }
    this.parseEscape();
    this.canRepeat = true;
  }

  /** A single-character escape (Go's parseEscape); returns the code point. */
  private parseEscape(): number {
    const s = this.s;
    const start = this.i;
    let j = this.i + 1;
    if (j >= s.length) throw new Re2Error('trailing backslash at end of expression', '');
    const c = s.codePointAt(j)!;
    const cs = String.fromCodePoint(c);
    j += cs.length;
    const bad = (): never => {
      throw new Re2Error('invalid escape sequence', s.slice(start, j));
    };
    if (c < 0x80 && !/[A-Za-z0-9]/.test(cs)) {
      this.i = j;
      return c; // escaped punctuation
    }
    switch (cs) {
      case '1':
      case '2':
      case '3':
      case '4':
      case '5':
      case '6':
      case '7':
        // A lone digit is a backreference, which RE2 does not have; two or three are octal.
        if (j >= s.length || s[j]! < '0' || s[j]! > '7') bad();
      // falls through
      case '0': {
        let v = c - 48;
        for (let k = 0; k < 2 && j < s.length && s[j]! >= '0' && s[j]! <= '7'; k++, j++) v = v * 8 + (s.charCodeAt(j) - 48);
        this.i = j;
        return v;
      }
      case 'x': {
        if (j >= s.length) bad();
        if (s[j] === '{') {
          const end = s.indexOf('}', j);
          const hex = end < 0 ? '' : s.slice(j + 1, end);
          if (end < 0) {
            j = s.length;
            bad();
          }
          j = end + 1;
          if (!/^[0-9A-Fa-f]+$/.test(hex) || parseInt(hex, 16) > 0x10ffff) bad();
          this.i = j;
          return parseInt(hex, 16);
        }
        const hex = s.slice(j, j + 2);
        j = Math.min(j + 2, s.length);
        if (!/^[0-9A-Fa-f]{2}$/.test(hex)) bad();
        this.i = j;
        return parseInt(hex, 16);
      }
      case 'a':
        this.i = j;
        return 7;
      case 'f':
        this.i = j;
        return 12;
      case 'n':
        this.i = j;
        return 10;
      case 'r':
        this.i = j;
        return 13;
      case 't':
        this.i = j;
        return 9;
      case 'v':
        this.i = j;
        return 11;
    }
    return bad();
  }

  /** `\pL`, `\p{Greek}`, `\PN`, `\p{^L}`. */
  private parseUnicodeClass(): void {
    const s = this.s;
    const start = this.i;
    let j = this.i + 2;
    if (j >= s.length) throw new Re2Error('invalid character class range', s.slice(start));
    if (s[j] === '{') {
      const end = s.indexOf('}', j);
      if (end < 0) throw new Re2Error('invalid character class range', s.slice(start));
      const name = s.slice(j + 1, end).replace(/^\^/, '');
      j = end + 1;
      if (!/^[A-Za-z_]+$/.test(name)) throw new Re2Error('invalid character class range', s.slice(start, j));
    } else {
      if (!/[A-Za-z]/.test(s[j]!)) throw new Re2Error('invalid character class range', s.slice(start, j + 1));
      j++;
    }
    this.i = j;
  }

  private parseClass(): void {
    const s = this.s;
    const wholeClass = s.slice(this.i);
    let j = this.i + 1;
    if (s[j] === '^') j++;
    let first = true;
    while (j < s.length && (s[j] !== ']' || first)) {
      first = false;
      // POSIX class [:alpha:]
      if (s[j] === '[' && s[j + 1] === ':') {
        const end = s.indexOf(':]', j + 2);
        if (end >= 0) {
          const name = s.slice(j + 2, end).replace(/^\^/, '');
          const text = s.slice(j, end + 2);
          if (!POSIX_CLASSES.has(name)) throw new Re2Error('invalid character class range', text);
          j = end + 2;
          continue;
        }
      }
      if (s[j] === '\\' && (s[j + 1] === 'p' || s[j + 1] === 'P')) {
        this.i = j;
        this.parseUnicodeClass();
        j = this.i;
        continue;
      }
      if (s[j] === '\\' && s[j + 1] !== undefined && 'dDsSwW'.includes(s[j + 1]!)) {
        j += 2;
        continue;
      }
      const rangeStart = j;
      const lo = this.classChar(j, wholeClass);
      j = this.i;
      if (s[j] === '-' && j + 1 < s.length && s[j + 1] !== ']') {
        const hi = this.classChar(j + 1, wholeClass);
        j = this.i;
        if (hi < lo) throw new Re2Error('invalid character class range', s.slice(rangeStart, j));
      }
    }
    if (j >= s.length) throw new Re2Error('missing closing ]', wholeClass);
    this.i = j + 1;
  }

  private classChar(j: number, wholeClass: string): number {
    const s = this.s;
    if (j >= s.length) throw new Re2Error('missing closing ]', wholeClass);
    if (s[j] === '\\') {
      this.i = j;
      return this.parseEscape();
    }
    const c = s.codePointAt(j)!;
    this.i = j + String.fromCodePoint(c).length;
    return c;
  }
}

function codePointLength(s: string, i: number): number {
  const c = s.codePointAt(i)!;
  return c > 0xffff ? 2 : 1;
}
