// A syntax check for CEL (Common Expression Language) expressions: Telemetry access-log filters
// must parse as CEL, as Istio's celEnv.Parse insists. Only the grammar is checked (cel-spec's
// langdef: literals, operators, selection, calls, lists, maps, message construction); names and
// types are not resolved, which is also all Istio does at validation time.

export class CelSyntaxError extends Error {
  constructor(
    message: string,
    readonly line: number,
    readonly column: number,
  ) {
    super(message);
  }
}

type TokKind = 'num' | 'str' | 'ident' | 'punct' | 'eof';
interface Tok {
  kind: TokKind;
  text: string;
  pos: number;
}

const PUNCT = ['&&', '||', '<=', '>=', '==', '!=', '(', ')', '[', ']', '{', '}', '.', ',', ':', '?', '!', '-', '+', '*', '/', '%', '<', '>'];
const RESERVED = new Set(['as', 'break', 'const', 'continue', 'else', 'for', 'function', 'if', 'import', 'let', 'loop', 'package', 'namespace', 'return', 'var', 'void', 'while']);
const SIMPLE_ESCAPES = new Set(['\\', '?', '"', "'", '`', 'a', 'b', 'f', 'n', 'r', 't', 'v']);

function lex(src: string): Tok[] {
  const out: Tok[] = [];
  let i = 0;
  const fail = (msg: string, at = i): never => {
    throw syntaxError(src, at, msg);
  };
  while (i < src.length) {
    const c = src[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f') {
      i++;
      continue;
    }
    if (src.startsWith('//', i)) {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    const start = i;
    // String and bytes literals, with optional r/b prefixes in either order.
    const prefix = /^(?:[rR][bB]?|[bB][rR]?)?(?="|')/.exec(src.slice(i, i + 3));
    if (prefix) {
      const raw = /[rR]/.test(prefix[0]);
      i += prefix[0].length;
      const q = src[i]!;
      const triple = src.startsWith(q.repeat(3), i);
      const close = triple ? q.repeat(3) : q;
      i += close.length;
      for (;;) {
        if (i >= src.length) fail('unterminated string literal', start);
        if (src.startsWith(close, i)) {
          i += close.length;
          break;
        }
        const ch = src[i]!;
        if (!triple && (ch === '\n' || ch === '\r')) fail('newline in string literal', i);
        if (ch === '\\' && !raw) {
          const e = src[i + 1] ?? '';
          if (SIMPLE_ESCAPES.has(e)) i += 2;
          else if (e === 'x' || e === 'X') {
            if (!/^[0-9a-fA-F]{2}$/.test(src.slice(i + 2, i + 4))) fail('invalid \\x escape', i);
            i += 4;
          } else if (e === 'u') {
            if (!/^[0-9a-fA-F]{4}$/.test(src.slice(i + 2, i + 6))) fail('invalid \\u escape', i);
            i += 6;
          } else if (e === 'U') {
            if (!/^[0-9a-fA-F]{8}$/.test(src.slice(i + 2, i + 10))) fail('invalid \\U escape', i);
            i += 10;
          } else if (/^[0-3][0-7][0-7]$/.test(src.slice(i + 1, i + 4))) i += 4;
          else fail(`invalid escape sequence \\${e}`, i);
          continue;
        }
        i++;
      }
      out.push({ kind: 'str', text: src.slice(start, i), pos: start });
      continue;
    }
    const num = /^(?:0[xX][0-9a-fA-F]+[uU]?|[0-9]*\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?)/.exec(src.slice(i));
    if (num && !(num[0].startsWith('.') && out.length > 0 && isOperand(out[out.length - 1]!))) {
      i += num[0].length;
      if (/^[A-Za-z_]/.test(src[i] ?? '')) fail(`invalid number literal ${JSON.stringify(src.slice(start, i + 1))}`, start);
      out.push({ kind: 'num', text: num[0], pos: start });
      continue;
    }
    const id = /^[_a-zA-Z][_a-zA-Z0-9]*/.exec(src.slice(i));
    if (id) {
      i += id[0].length;
      out.push({ kind: 'ident', text: id[0], pos: start });
      continue;
    }
    const p = PUNCT.find((x) => src.startsWith(x, i));
    if (p) {
      i += p.length;
      out.push({ kind: 'punct', text: p, pos: start });
      continue;
    }
    fail(`token recognition error at: '${c}'`);
  }
  out.push({ kind: 'eof', text: '<EOF>', pos: src.length });
  return out;
}

/** Whether a `.5` after this token is a selection rather than a float (`a.5` is not CEL either way). */
function isOperand(t: Tok): boolean {
  return t.kind === 'ident' || t.kind === 'num' || t.kind === 'str' || t.text === ')' || t.text === ']' || t.text === '}';
}

function syntaxError(src: string, pos: number, msg: string): CelSyntaxError {
  const before = src.slice(0, pos);
  const line = before.split('\n').length;
  const column = pos - (before.lastIndexOf('\n') + 1) + 1;
  return new CelSyntaxError(msg, line, column);
}

class Parser {
  private i = 0;
  constructor(
    private readonly src: string,
    private readonly toks: Tok[],
  ) {}

  private get t(): Tok {
    return this.toks[this.i]!;
  }
  private is(text: string): boolean {
    const t = this.t;
    return (t.kind === 'punct' || (t.kind === 'ident' && text === 'in')) && t.text === text;
  }
  private eat(text: string): boolean {
    if (!this.is(text)) return false;
    this.i++;
    return true;
  }
  private expect(text: string): void {
    if (!this.eat(text)) this.fail(`mismatched input '${this.t.text}' expecting '${text}'`);
  }
  private fail(msg: string): never {
    throw syntaxError(this.src, this.t.pos, msg);
  }

  parse(): void {
    if (this.t.kind === 'eof') this.fail("mismatched input '<EOF>': an expression is required");
    this.expr();
    const rest = this.t;
    if (rest.kind !== 'eof') this.fail(`extraneous input '${rest.text}'`);
  }

  private expr(): void {
    this.binary(0);
    if (this.eat('?')) {
      this.binary(0);
      this.expect(':');
      this.expr();
    }
  }

  // Precedence levels, loosest first.
  private static readonly LEVELS: readonly (readonly string[])[] = [['||'], ['&&'], ['<', '<=', '>=', '>', '==', '!=', 'in'], ['+', '-'], ['*', '/', '%']];

  private binary(level: number): void {
    if (level === Parser.LEVELS.length) {
      this.unary();
      return;
    }
    this.binary(level + 1);
    while (Parser.LEVELS[level]!.some((op) => this.is(op))) {
      this.i++;
      this.binary(level + 1);
    }
  }

  private unary(): void {
    if (this.eat('!') || this.eat('-')) {
      this.unary();
      return;
    }
    this.member();
  }

  private member(): void {
    const chainable = this.primary();
    let selectorChain = chainable;
    for (;;) {
      if (this.eat('.')) {
        this.ident();
        if (this.eat('(')) {
          this.args(')');
          selectorChain = false;
        }
      } else if (this.eat('[')) {
        this.expr();
        this.expect(']');
        selectorChain = false;
      } else if (selectorChain && this.is('{')) {
        this.i++;
        this.fieldInits();
        selectorChain = false;
      } else return;
    }
  }

  /** Returns whether the primary is a (qualified) name that may start a message construction. */
  private primary(): boolean {
    const t = this.t;
    if (t.kind === 'num' || t.kind === 'str') {
      this.i++;
      return false;
    }
    if (this.eat('.')) {
      this.ident();
      if (this.eat('(')) {
        this.args(')');
        return false;
      }
      return true;
    }
    if (t.kind === 'ident' && t.text !== 'in') {
      if (t.text === 'true' || t.text === 'false' || t.text === 'null') {
        this.i++;
        return false;
      }
      this.ident();
      if (this.eat('(')) {
        this.args(')');
        return false;
      }
      return true;
    }
    if (this.eat('(')) {
      this.expr();
      this.expect(')');
      return false;
    }
    if (this.eat('[')) {
      this.args(']', true);
      return false;
    }
    if (this.eat('{')) {
      this.mapInits();
      return false;
    }
    return this.fail(`mismatched input '${t.text}': an operand is expected`);
  }

  private ident(): void {
    const t = this.t;
    if (t.kind !== 'ident' || t.text === 'in') this.fail(`mismatched input '${t.text}' expecting IDENTIFIER`);
    if (RESERVED.has(t.text)) this.fail(`reserved identifier: ${t.text}`);
    this.i++;
  }

  private args(close: string, trailingComma = false): void {
    if (this.eat(close)) return;
    for (;;) {
      this.expr();
      if (this.eat(close)) return;
      this.expect(',');
      if (trailingComma && this.eat(close)) return;
    }
  }

  private mapInits(): void {
    if (this.eat('}')) return;
    for (;;) {
      this.expr();
      this.expect(':');
      this.expr();
      if (this.eat('}')) return;
      this.expect(',');
      if (this.eat('}')) return;
    }
  }

  private fieldInits(): void {
    if (this.eat('}')) return;
    for (;;) {
      this.ident();
      this.expect(':');
      this.expr();
      if (this.eat('}')) return;
      this.expect(',');
      if (this.eat('}')) return;
    }
  }
}

/** Parses `expr` as CEL; throws CelSyntaxError at the first problem. */
export function parseCel(expr: string): void {
  new Parser(expr, lex(expr)).parse();
}

/** cel-go's report of a parse failure (`ERROR: <input>:1:1: Syntax error: …`), or undefined when it parses. */
export function celSyntaxError(expr: string): string | undefined {
  try {
    parseCel(expr);
    return undefined;
  } catch (e) {
    if (!(e instanceof CelSyntaxError)) throw e;
    return `ERROR: <input>:${e.line}:${e.column}: Syntax error: ${e.message}`;
  }
}
