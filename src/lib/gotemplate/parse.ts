// Go's text/template syntax: lexing and parsing into a tree, following text/template/parse. Supports the
// whole action language: text with {{- -}} trimming, comments, pipelines with declarations and assignments,
// parenthesized pipelines and field chains, if/else if/else, range (over slices, maps, ints; break/continue),
// with/else with, define, template, block.

export class TemplateParseError extends Error {}

export interface Pos {
  line: number;
  col: number;
}

export type Node =
  | { type: 'text'; text: string }
  | { type: 'action'; pipe: Pipe; pos: Pos }
  | { type: 'if' | 'with'; pipe: Pipe; list: Node[]; elseList?: Node[]; pos: Pos }
  | { type: 'range'; pipe: Pipe; list: Node[]; elseList?: Node[]; pos: Pos }
  | { type: 'template'; name: string; pipe?: Pipe; pos: Pos }
  | { type: 'break' | 'continue'; pos: Pos };

export interface Pipe {
  /** Variables declared (`:=`) or assigned (`=`). */
  decl: string[];
  isAssign: boolean;
  cmds: Cmd[];
  pos: Pos;
}

export interface Cmd {
  args: Arg[];
  pos: Pos;
}

export type Arg =
  | { kind: 'dot' }
  | { kind: 'nil' }
  | { kind: 'bool'; value: boolean }
  | { kind: 'number'; value: bigint | number; text: string }
  | { kind: 'string'; value: string }
  | { kind: 'field'; ident: string[] }
  | { kind: 'variable'; ident: string[] } // ident[0] is the $name
  | { kind: 'identifier'; name: string }
  | { kind: 'pipe'; pipe: Pipe }
  | { kind: 'chain'; node: Arg; field: string[] };

export interface ParsedTemplate {
  name: string;
  root: Node[];
}

/** All templates of a set: the main one and those it `define`s. */
export type TemplateSet = Map<string, Node[]>;

// ---- lexer ----

type ItemType =
  | 'text'
  | 'leftDelim'
  | 'rightDelim'
  | 'comment'
  | 'space'
  | 'field'
  | 'variable'
  | 'identifier'
  | 'keyword'
  | 'string'
  | 'rawString'
  | 'char'
  | 'number'
  | 'bool'
  | 'nil'
  | 'dot'
  | 'pipe'
  | 'leftParen'
  | 'rightParen'
  | 'declare'
  | 'assign'
  | 'char,'
  | 'eof';

interface Item {
  type: ItemType;
  val: string;
  pos: number;
}

const KEYWORDS = new Set(['block', 'break', 'continue', 'define', 'else', 'end', 'if', 'range', 'nil', 'template', 'with']);

function isSpace(c: string | undefined): boolean {
  return c === ' ' || c === '\t' || c === '\r' || c === '\n';
}

const ALNUM = /[\p{L}\p{N}_]/u;
function isAlnum(c: string | undefined): boolean {
  if (c === undefined) return false;
  const code = c.charCodeAt(0);
  if (code < 128) return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95;
  return ALNUM.test(c);
}

class Lexer {
  items: Item[] = [];
  private pos = 0;
  private parenDepth = 0;

  constructor(
    private readonly input: string,
    private readonly fail: (msg: string, at: number) => never,
  ) {}

  run(): Item[] {
    const src = this.input;
    while (this.pos < src.length) {
      const open = src.indexOf('{{', this.pos);
      if (open < 0) {
        this.items.push({ type: 'text', val: src.slice(this.pos), pos: this.pos });
        this.pos = src.length;
        break;
      }
      let text = src.slice(this.pos, open);
      const trimLeft = src[open + 2] === '-' && isSpace(src[open + 3]);
      if (trimLeft) text = text.replace(/[ \t\r\n]+$/, '');
      if (text) this.items.push({ type: 'text', val: text, pos: this.pos });
      this.pos = open + 2 + (trimLeft ? 2 : 0);
      this.items.push({ type: 'leftDelim', val: '{{', pos: open });
      // A comment must follow the delimiter immediately.
      if (src.startsWith('/*', this.pos)) {
        const end = src.indexOf('*/', this.pos + 2);
        if (end < 0) this.fail('unclosed comment', this.pos);
        this.pos = end + 2;
        const close = this.atRightDelim();
        if (!close) this.fail('comment ends before closing delimiter', this.pos);
        this.items.push({ type: 'comment', val: '', pos: this.pos });
        this.closeAction(close);
        continue;
      }
      this.lexInsideAction();
    }
    this.items.push({ type: 'eof', val: '', pos: this.pos });
    return this.items;
  }

  /** `}}` or ` -}}` at pos: returns its length, or 0. */
  private atRightDelim(): number {
    const src = this.input;
    if (isSpace(src[this.pos]) && src[this.pos + 1] === '-' && src.startsWith('}}', this.pos + 2)) return 4;
    if (src.startsWith('}}', this.pos)) return 2;
    return 0;
  }

  private closeAction(len: number): void {
    const trimRight = len === 4;
    this.items.push({ type: 'rightDelim', val: '}}', pos: this.pos });
    this.pos += len;
    if (trimRight) {
      while (isSpace(this.input[this.pos])) this.pos++;
    }
  }

  private lexInsideAction(): void {
    const src = this.input;
    for (;;) {
      const close = this.atRightDelim();
      if (close && this.parenDepth === 0) {
        this.closeAction(close);
        return;
      }
      if (close && this.parenDepth > 0) this.fail('unclosed left paren', this.pos);
      const c = src[this.pos];
      if (c === undefined) this.fail('unclosed action', this.pos);
      const start = this.pos;
      if (c === '\n' || c === '\r') {
        // Newlines are allowed inside actions (Go 1.16+); treat as space.
        this.pos++;
        this.emitSpace(start);
      } else if (isSpace(c)) {
        while (isSpace(src[this.pos]) && !(src[this.pos + 1] === '-' && src.startsWith('}}', this.pos + 2))) this.pos++;
        if (this.pos === start) this.pos++;
        this.emitSpace(start);
      } else if (c === '=') {
        this.pos++;
        this.items.push({ type: 'assign', val: '=', pos: start });
      } else if (c === ':') {
        if (src[this.pos + 1] !== '=') this.fail('expected :=', start);
        this.pos += 2;
        this.items.push({ type: 'declare', val: ':=', pos: start });
      } else if (c === '|') {
        this.pos++;
        this.items.push({ type: 'pipe', val: '|', pos: start });
      } else if (c === '"') {
        this.pos++;
        while (src[this.pos] !== '"') {
          if (src[this.pos] === '\\') this.pos++;
          if (this.pos >= src.length || src[this.pos] === '\n') this.fail('unterminated quoted string', start);
          this.pos++;
        }
        this.pos++;
        this.items.push({ type: 'string', val: src.slice(start, this.pos), pos: start });
      } else if (c === '`') {
        const end = src.indexOf('`', this.pos + 1);
        if (end < 0) this.fail('unterminated raw quoted string', start);
        this.pos = end + 1;
        this.items.push({ type: 'rawString', val: src.slice(start, this.pos), pos: start });
      } else if (c === "'") {
        this.pos++;
        while (src[this.pos] !== "'") {
          if (src[this.pos] === '\\') this.pos++;
          if (this.pos >= src.length || src[this.pos] === '\n') this.fail('unterminated character constant', start);
          this.pos++;
        }
        this.pos++;
        this.items.push({ type: 'char', val: src.slice(start, this.pos), pos: start });
      } else if (c === '$') {
        this.pos++;
        while (isAlnum(src[this.pos])) this.pos++;
        this.items.push({ type: 'variable', val: src.slice(start, this.pos), pos: start });
      } else if (c === '.') {
        const next = src[this.pos + 1];
        if (next !== undefined && /[0-9]/.test(next)) {
          this.lexNumber();
        } else if (isAlnum(next)) {
          this.pos++;
          while (isAlnum(src[this.pos])) this.pos++;
          this.items.push({ type: 'field', val: src.slice(start, this.pos), pos: start });
        } else {
          this.pos++;
          this.items.push({ type: 'dot', val: '.', pos: start });
        }
      } else if (c === '+' || c === '-' || /[0-9]/.test(c)) {
        this.lexNumber();
      } else if (isAlnum(c)) {
        while (isAlnum(src[this.pos])) this.pos++;
        const word = src.slice(start, this.pos);
        const type: ItemType = KEYWORDS.has(word)
          ? word === 'nil'
            ? 'nil'
            : 'keyword'
          : word === 'true' || word === 'false'
            ? 'bool'
            : 'identifier';
        this.items.push({ type, val: word, pos: start });
      } else if (c === '(') {
        this.pos++;
        this.parenDepth++;
        this.items.push({ type: 'leftParen', val: '(', pos: start });
      } else if (c === ')') {
        this.pos++;
        this.parenDepth--;
        if (this.parenDepth < 0) this.fail('unexpected right paren', start);
        this.items.push({ type: 'rightParen', val: ')', pos: start });
      } else if (c === ',') {
        this.pos++;
        this.items.push({ type: 'char,', val: ',', pos: start });
      } else {
        this.fail(`unrecognized character in action: ${JSON.stringify(c)}`, start);
      }
    }
  }

  private emitSpace(start: number): void {
    const last = this.items[this.items.length - 1];
    if (last?.type === 'space') return;
    this.items.push({ type: 'space', val: ' ', pos: start });
  }

  private lexNumber(): void {
    const src = this.input;
    const start = this.pos;
    const m =
      /^[+-]?(0[xX][0-9a-fA-F_]+(\.[0-9a-fA-F_]*)?([pP][+-]?[0-9_]+)?|0[bB][01_]+|0[oO]?[0-7_]+|([0-9][0-9_]*)?(\.[0-9_]*)?([eE][+-]?[0-9_]+)?)i?/.exec(
        src.slice(start),
      );
    if (!m || m[0] === '' || m[0] === '+' || m[0] === '-') this.fail(`bad number syntax: ${JSON.stringify(src.slice(start, start + 8))}`, start);
    this.pos += m[0].length;
    if (isAlnum(src[this.pos])) this.fail(`bad number syntax: ${JSON.stringify(src.slice(start, this.pos + 1))}`, start);
    this.items.push({ type: 'number', val: m[0], pos: start });
  }
}

// ---- parser ----

function unquote(s: string): string {
  if (s.startsWith('`')) return s.slice(1, -1);
  const body = s.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const e = body[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'a':
        out += '\x07';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'v':
        out += '\v';
        break;
      case '\\':
      case '"':
      case "'":
        out += e;
        break;
      case 'x':
        out += String.fromCharCode(parseInt(body.slice(i + 1, i + 3), 16));
        i += 2;
        break;
      case 'u':
        out += String.fromCodePoint(parseInt(body.slice(i + 1, i + 5), 16));
        i += 4;
        break;
      case 'U':
        out += String.fromCodePoint(parseInt(body.slice(i + 1, i + 9), 16));
        i += 8;
        break;
      default:
        if (e !== undefined && /[0-7]/.test(e)) {
          out += String.fromCharCode(parseInt(body.slice(i, i + 3), 8));
          i += 2;
        } else throw new TemplateParseError(`invalid syntax: ${s}`);
    }
  }
  return out;
}

function parseNumber(text: string): bigint | number {
  const t = text.replace(/_/g, '');
  if (t.endsWith('i')) throw new TemplateParseError(`complex numbers are not supported: ${text}`);
  if (/^[+-]?(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO]?[0-7]+|[0-9]+)$/.test(t)) {
    const neg = t.startsWith('-');
    const body = t.replace(/^[+-]/, '');
    const v = /^0[0-7]+$/.test(body) ? BigInt('0o' + body.slice(1)) : /^0[oO]/.test(body) ? BigInt('0o' + body.slice(2)) : BigInt(body);
    return neg ? -v : v;
  }
  const n = Number(t);
  if (Number.isNaN(n)) throw new TemplateParseError(`illegal number syntax: ${JSON.stringify(text)}`);
  return n;
}

/** Parses `src` into its template set: the main template under `name`, plus every `define`d one. */
export function parse(name: string, src: string, funcs: ReadonlySet<string>): TemplateSet {
  const lineStarts = [0];
  for (let k = src.indexOf('\n'); k >= 0; k = src.indexOf('\n', k + 1)) lineStarts.push(k + 1);
  const lineOf = (at: number): Pos => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid]! <= at) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, col: at - lineStarts[lo]! + 1 };
  };
  let current = name;
  const fail = (msg: string, at: number): never => {
    const p = lineOf(at);
    throw new TemplateParseError(`template: ${current}:${p.line}: ${msg}`);
  };
  const items = new Lexer(src, fail).run();
  const set: TemplateSet = new Map();
  let i = 0;
  const peek = () => items[i]!;
  const next = () => items[i++]!;
  const peekNonSpace = () => {
    let j = i;
    while (items[j]!.type === 'space') j++;
    return items[j]!;
  };
  const nextNonSpace = () => {
    let it = next();
    while (it.type === 'space') it = next();
    return it;
  };
  // Variables in scope, for "undefined variable" checks at parse time, as Go does.
  let vars: string[] = ['$'];
  let rangeDepth = 0;

  const expectRight = (context: string): void => {
    const it = nextNonSpace();
    if (it.type !== 'rightDelim') fail(`unexpected ${describe(it)} in ${context}`, it.pos);
  };

  function describe(it: Item): string {
    if (it.type === 'eof') return 'EOF';
    if (it.type === 'rightDelim') return '"}}"';
    return JSON.stringify(it.val) === `"${it.val}"` ? `"${it.val}"` : it.val;
  }

  /** Parses a list up to {{end}} or {{else}}; returns the list and which ended it. */
  function itemList(context: string): { list: Node[]; end: 'end' | 'else' | 'eof' } {
    const list: Node[] = [];
    for (;;) {
      const it = peek();
      if (it.type === 'eof') return { list, end: 'eof' };
      if (it.type === 'text') {
        next();
        list.push({ type: 'text', text: it.val });
        continue;
      }
      if (it.type !== 'leftDelim') fail(`unexpected ${describe(it)}`, it.pos);
      next();
      const kw = peekNonSpace();
      if (kw.type === 'keyword' && (kw.val === 'end' || kw.val === 'else')) {
        nextNonSpace();
        if (kw.val === 'end') {
          if (context === 'root') fail('unexpected {{end}}', kw.pos);
          expectRight('end');
          return { list, end: 'end' };
        }
        if (context === 'root') fail('unexpected {{else}}', kw.pos);
        return { list, end: 'else' };
      }
      const node = action();
      if (node) list.push(node);
    }
  }

  /** After `{{`: one action. Returns undefined for comments and defines. */
  function action(): Node | undefined {
    const it = peekNonSpace();
    if (it.type === 'comment') {
      nextNonSpace();
      expectRight('comment');
      return undefined;
    }
    if (it.type === 'keyword') {
      nextNonSpace();
      switch (it.val) {
        case 'if':
        case 'with':
        case 'range':
          return control(it.val, it.pos);
        case 'template':
          return templateCall(it.pos);
        case 'block': {
          const call = templateCall(it.pos, true);
          return call;
        }
        case 'define':
          define(it.pos);
          return undefined;
        case 'break':
        case 'continue':
          if (rangeDepth === 0) fail(`{{${it.val}}} outside {{range}}`, it.pos);
          expectRight(it.val);
          return { type: it.val, pos: lineOf(it.pos) };
        default:
          fail(`unexpected ${it.val}`, it.pos);
      }
    }
    const pipe = pipeline('command', it.pos);
    return { type: 'action', pipe, pos: lineOf(it.pos) };
  }

  function control(kind: 'if' | 'with' | 'range', at: number): Node {
    const saved = vars.length;
    const pipe = pipeline(kind, at);
    if (kind === 'range') rangeDepth++;
    const body = itemList(kind);
    if (kind === 'range') rangeDepth--;
    let elseList: Node[] | undefined;
    if (body.end === 'eof') fail(`unexpected EOF`, at);
    if (body.end === 'else') {
      // `else if` / `else with` chain: parse as a nested control in the else list.
      const nxt = peekNonSpace();
      if ((kind === 'if' && nxt.type === 'keyword' && nxt.val === 'if') || (kind === 'with' && nxt.type === 'keyword' && nxt.val === 'with')) {
        nextNonSpace();
        vars = vars.slice(0, saved);
        const nested = control(kind, nxt.pos);
        elseList = [nested];
        vars = vars.slice(0, saved);
        return { type: kind, pipe, list: body.list, elseList, pos: lineOf(at) };
      }
      expectRight('else');
      vars = vars.slice(0, saved);
      const rest = itemList(kind);
      if (rest.end !== 'end') fail(rest.end === 'eof' ? 'unexpected EOF' : 'expected end; found {{else}}', at);
      elseList = rest.list;
    }
    vars = vars.slice(0, saved);
    return { type: kind, pipe, list: body.list, elseList, pos: lineOf(at) };
  }

  function templateCall(at: number, isBlock = false): Node {
    const nameItem = nextNonSpace();
    if (nameItem.type !== 'string' && nameItem.type !== 'rawString') fail(`unexpected ${describe(nameItem)} in template clause`, nameItem.pos);
    const tname = unquote(nameItem.val);
    let pipe: Pipe | undefined;
    if (peekNonSpace().type !== 'rightDelim') pipe = pipeline('template clause', at);
    else expectRight('template clause');
    if (isBlock) {
      const saveName = current;
      const saveVars = vars;
      current = tname;
      vars = ['$'];
      const body = itemList('define');
      if (body.end !== 'end') fail('unexpected EOF', at);
      set.set(tname, body.list);
      current = saveName;
      vars = saveVars;
    }
    return { type: 'template', name: tname, pipe, pos: lineOf(at) };
  }

  function define(at: number): void {
    const nameItem = nextNonSpace();
    if (nameItem.type !== 'string' && nameItem.type !== 'rawString') fail(`unexpected ${describe(nameItem)} in define clause`, nameItem.pos);
    expectRight('define clause');
    const tname = unquote(nameItem.val);
    const saveName = current;
    const saveVars = vars;
    current = tname;
    vars = ['$'];
    const body = itemList('define');
    if (body.end !== 'end') fail(body.end === 'eof' ? 'unexpected EOF' : 'unexpected {{else}}', at);
    set.set(tname, body.list);
    current = saveName;
    vars = saveVars;
  }

  function pipeline(context: string, at: number): Pipe {
    const pipe: Pipe = { decl: [], isAssign: false, cmds: [], pos: lineOf(at) };
    // Declarations: $x := / $x = / $i, $x :=
    const save = i;
    const declared: string[] = [];
    for (;;) {
      const v = peekNonSpace();
      if (v.type !== 'variable') break;
      nextNonSpace();
      const op = peekNonSpace();
      if (op.type === 'declare' || op.type === 'assign') {
        nextNonSpace();
        declared.push(v.val);
        pipe.isAssign = op.type === 'assign';
        break;
      }
      if (op.type === 'char,' && context === 'range' && declared.length === 0) {
        nextNonSpace();
        declared.push(v.val);
        continue;
      }
      i = save;
      declared.length = 0;
      break;
    }
    pipe.decl = declared;
    if (!pipe.isAssign) for (const d of declared) vars.push(d);
    else for (const d of declared) if (!vars.includes(d)) fail(`undefined variable "${d}"`, at);
    for (;;) {
      const it = peekNonSpace();
      if (it.type === 'rightDelim') {
        nextNonSpace();
        if (!pipe.cmds.length) fail(`missing value for ${context}`, it.pos);
        return pipe;
      }
      if (it.type === 'rightParen' && context === 'parenthesized pipeline') {
        nextNonSpace();
        if (!pipe.cmds.length) fail('missing value for parenthesized pipeline', it.pos);
        return pipe;
      }
      pipe.cmds.push(command());
    }
  }

  function command(): Cmd {
    const start = peekNonSpace();
    const cmd: Cmd = { args: [], pos: lineOf(start.pos) };
    for (;;) {
      while (peek().type === 'space') next();
      const it = peek();
      if (it.type === 'rightDelim' || it.type === 'rightParen') break;
      if (it.type === 'pipe') {
        next();
        if (!cmd.args.length) fail('missing command', it.pos);
        return cmd;
      }
      const operand = operandOf() ?? fail(`unexpected ${describe(it)} in operand`, it.pos);
      cmd.args.push(operand);
      const after = peek();
      if (after.type !== 'space' && after.type !== 'rightDelim' && after.type !== 'rightParen' && after.type !== 'pipe') {
        fail(`unexpected ${describe(after)} in operand`, after.pos);
      }
    }
    if (!cmd.args.length) fail('empty command', start.pos);
    return cmd;
  }

  function operandOf(): Arg | undefined {
    const t = term();
    if (!t) return undefined;
    if (peek().type === 'field') {
      const fields: string[] = [];
      while (peek().type === 'field') fields.push(next().val.slice(1));
      if (t.kind === 'field') return { kind: 'field', ident: [...t.ident, ...fields] };
      if (t.kind === 'variable') return { kind: 'variable', ident: [...t.ident, ...fields] };
      if (t.kind === 'bool' || t.kind === 'string' || t.kind === 'number' || t.kind === 'nil' || t.kind === 'dot') {
        fail(`unexpected . after term ${JSON.stringify(fields[0])}`, peek().pos);
      }
      return { kind: 'chain', node: t, field: fields };
    }
    return t;
  }

  function term(): Arg | undefined {
    const it = next();
    switch (it.type) {
      case 'identifier':
        if (!funcs.has(it.val)) fail(`function "${it.val}" not defined`, it.pos);
        return { kind: 'identifier', name: it.val };
      case 'dot':
        return { kind: 'dot' };
      case 'nil':
        return { kind: 'nil' };
      case 'variable': {
        if (!vars.includes(it.val)) fail(`undefined variable "${it.val}"`, it.pos);
        return { kind: 'variable', ident: [it.val] };
      }
      case 'field':
        return { kind: 'field', ident: [it.val.slice(1)] };
      case 'bool':
        return { kind: 'bool', value: it.val === 'true' };
      case 'char': {
        const s = unquote(`"${it.val.slice(1, -1).replace(/"/g, '\\"')}"`);
        return { kind: 'number', value: BigInt(s.codePointAt(0) ?? 0), text: it.val };
      }
      case 'number':
        try {
          return { kind: 'number', value: parseNumber(it.val), text: it.val };
        } catch (e) {
          return fail((e as Error).message, it.pos);
        }
      case 'string':
      case 'rawString':
        try {
          return { kind: 'string', value: unquote(it.val) };
        } catch (e) {
          return fail((e as Error).message, it.pos);
        }
      case 'leftParen':
        return { kind: 'pipe', pipe: pipeline('parenthesized pipeline', it.pos) };
      default:
        i--;
        return undefined;
    }
  }

  const root = itemList('root');
  if (root.end !== 'eof') fail('unexpected {{end}}', items[i - 1]!.pos);
  // Like Go, a template made of nothing but whitespace and defines does not replace an existing body.
  set.set(name, root.list);
  return set;
}
