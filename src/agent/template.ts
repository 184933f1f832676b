// A subset of Go's text/template, enough to render Istio-style bootstrap templates (--templateFile)
// without Go. Supported:
//   {{ .a.b }}  {{ $ }}  {{ $x.a }}  {{ "lit" }} {{ 12 }} {{ true }}   values (a missing map key prints
//                                                                     "<no value>", as Go does for maps)
//   {{- … -}}                          whitespace trimming
//   {{/* … */}}                        comments
//   {{ if P }} … {{ else if P }} … {{ else }} … {{ end }}
//   {{ range P }} … {{ else }} … {{ end }},  {{ range $v := P }},  {{ range $i, $v := P }}
//   {{ with P }} … {{ else }} … {{ end }}
//   {{ $x := P }}                      variable declaration
//   P | fn                             pipelines
//   functions: and or not eq ne lt le gt ge len index print printf (%s %d %v %q %%) js toJson
// Not supported (an error names the construct): define/template/block, break/continue, method calls.
// Truthiness, `and`/`or` short-circuit values and %v printing follow Go.

export class TemplateError extends Error {}

type Value = unknown;

interface Pos {
  line: number;
  col: number;
}

type Node =
  | { kind: 'text'; text: string }
  | { kind: 'output'; pipe: Pipeline; pos: Pos }
  | { kind: 'if' | 'with'; branches: Array<{ pipe: Pipeline; body: Node[] }>; otherwise?: Node[]; pos: Pos }
  | { kind: 'range'; pipe: Pipeline; keyVar?: string; valueVar?: string; body: Node[]; otherwise?: Node[]; pos: Pos }
  | { kind: 'assign'; pipe: Pipeline; pos: Pos };

interface Pipeline {
  decl: string[];
  commands: Command[];
}

type Operand =
  | { kind: 'field'; path: string[] } // .a.b (empty path = dot)
  | { kind: 'var'; name: string; path: string[] } // $x.a
  | { kind: 'literal'; value: Value }
  | { kind: 'ident'; name: string }
  | { kind: 'paren'; pipe: Pipeline; path: string[] };

type Command = Operand[];

// ---- lexing of the template into text and actions ----

interface RawAction {
  body: string;
  pos: Pos;
}

function position(src: string, index: number): Pos {
  const before = src.slice(0, index);
  const line = before.split('\n').length;
  return { line, col: index - before.lastIndexOf('\n') };
}

function splitTemplate(src: string, name: string): Array<string | RawAction> {
  const out: Array<string | RawAction> = [];
  let i = 0;
  let trimNextText = false;
  while (i < src.length) {
    const open = src.indexOf('{{', i);
    let text = open < 0 ? src.slice(i) : src.slice(i, open);
    if (trimNextText) text = text.replace(/^\s+/, '');
    if (open < 0) {
      out.push(text);
      break;
    }
    let bodyStart = open + 2;
    if (/^-[ \t\r\n]/.test(src.slice(bodyStart, bodyStart + 2))) {
      text = text.replace(/\s+$/, '');
      bodyStart += 1;
    }
    out.push(text);
    const close = findClose(src, bodyStart, name);
    let body = src.slice(bodyStart, close);
    trimNextText = false;
    if (/[ \t\r\n]-$/.test(body)) {
      body = body.slice(0, -1);
      trimNextText = true;
    }
    out.push({ body: body.trim(), pos: position(src, open) });
    i = close + 2;
  }
  return out;
}

/** The index of the `}}` closing an action, skipping quoted strings and comments. */
function findClose(src: string, from: number, name: string): number {
  let i = from;
  while (i < src.length) {
    const c = src[i];
    if (src.startsWith('/*', i)) {
      const end = src.indexOf('*/', i + 2);
      if (end < 0) break;
      i = end + 2;
      continue;
    }
    if (c === '"' || c === '`' || c === "'") {
      const quote = c;
      i++;
      while (i < src.length && src[i] !== quote) i += src[i] === '\\' && quote !== '`' ? 2 : 1;
      i++;
      continue;
    }
    if (src.startsWith('}}', i)) return i;
    i++;
  }
  const p = position(src, from);
  throw new TemplateError(`template: ${name}:${p.line}: unclosed action`);
}

// ---- lexing of one action ----

type Token =
  | { t: 'field'; path: string[] }
  | { t: 'var'; name: string; path: string[] }
  | { t: 'string'; value: string }
  | { t: 'number'; value: number }
  | { t: 'ident'; name: string }
  | { t: '(' | ')' | '|' | ':=' | '=' | ',' };

function lexAction(body: string, where: string): Token[] {
  const toks: Token[] = [];
  let i = 0;
  const fieldPath = (): string[] => {
    const path: string[] = [];
    while (body[i] === '.' && /[A-Za-z_]/.test(body[i + 1] ?? '')) {
      i++;
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(body.slice(i))!;
      path.push(m[0]);
      i += m[0].length;
    }
    return path;
  };
  while (i < body.length) {
    const c = body[i]!;
    if (/\s/.test(c)) {
      i++;
    } else if (c === '(' || c === ')' || c === '|' || c === ',') {
      toks.push({ t: c });
      i++;
    } else if (body.startsWith(':=', i)) {
      toks.push({ t: ':=' });
      i += 2;
    } else if (c === '=') {
      toks.push({ t: '=' });
      i++;
    } else if (c === '.') {
      if (/[A-Za-z_]/.test(body[i + 1] ?? '')) toks.push({ t: 'field', path: fieldPath() });
      else {
        toks.push({ t: 'field', path: [] });
        i++;
      }
    } else if (c === '$') {
      const m = /^\$[A-Za-z0-9_]*/.exec(body.slice(i))!;
      i += m[0].length;
      toks.push({ t: 'var', name: m[0], path: fieldPath() });
    } else if (c === '"') {
      let j = i + 1;
      while (j < body.length && body[j] !== '"') j += body[j] === '\\' ? 2 : 1;
      const lit = body.slice(i, j + 1);
      try {
        toks.push({ t: 'string', value: JSON.parse(lit) as string });
      } catch {
        throw new TemplateError(`${where}: bad string literal ${lit}`);
      }
      i = j + 1;
    } else if (c === '`') {
      const j = body.indexOf('`', i + 1);
      if (j < 0) throw new TemplateError(`${where}: unterminated raw string`);
      toks.push({ t: 'string', value: body.slice(i + 1, j) });
      i = j + 1;
    } else if (/[-+0-9]/.test(c)) {
      const m = /^[-+]?(0x[0-9a-fA-F]+|[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?)/.exec(body.slice(i));
      if (!m) throw new TemplateError(`${where}: bad number syntax: ${JSON.stringify(body.slice(i, i + 8))}`);
      toks.push({ t: 'number', value: Number(m[0]) });
      i += m[0].length;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(body.slice(i))!;
      toks.push({ t: 'ident', name: m[0] });
      i += m[0].length;
    } else {
      throw new TemplateError(`${where}: unexpected ${JSON.stringify(c)} in action`);
    }
  }
  return toks;
}

// ---- parsing ----

const FUNCTIONS = new Set(['and', 'or', 'not', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'len', 'index', 'print', 'printf', 'js', 'toJson']);
const UNSUPPORTED = new Set(['define', 'template', 'block', 'break', 'continue']);

class ActionParser {
  private i = 0;
  constructor(
    private readonly toks: Token[],
    private readonly where: string,
  ) {}

  done(): boolean {
    return this.i >= this.toks.length;
  }

  pipeline(): Pipeline {
    const decl: string[] = [];
    // `$a, $b :=` or `$a :=` / `$a =`
    const save = this.i;
    const vars: string[] = [];
    while (this.toks[this.i]?.t === 'var' && (this.toks[this.i] as { path: string[] }).path.length === 0) {
      vars.push((this.toks[this.i] as { name: string }).name);
      this.i++;
      if (this.toks[this.i]?.t === ',') {
        this.i++;
        continue;
      }
      break;
    }
    const op = this.toks[this.i]?.t;
    if (vars.length && (op === ':=' || op === '=')) {
      this.i++;
      decl.push(...vars);
    } else this.i = save;

    const commands: Command[] = [this.command()];
    while (this.toks[this.i]?.t === '|') {
      this.i++;
      commands.push(this.command());
    }
    return { decl, commands };
  }

  private command(): Command {
    const ops: Operand[] = [];
    for (;;) {
      const tok = this.toks[this.i];
      if (!tok || tok.t === '|' || tok.t === ')') break;
      ops.push(this.operand());
    }
    if (!ops.length) throw new TemplateError(`${this.where}: missing value for command`);
    return ops;
  }

  private operand(): Operand {
    const tok = this.toks[this.i++]!;
    switch (tok.t) {
      case 'field':
        return { kind: 'field', path: tok.path };
      case 'var':
        return { kind: 'var', name: tok.name, path: tok.path };
      case 'string':
        return { kind: 'literal', value: tok.value };
      case 'number':
        return { kind: 'literal', value: tok.value };
      case 'ident':
        if (tok.name === 'true' || tok.name === 'false') return { kind: 'literal', value: tok.name === 'true' };
        if (tok.name === 'nil') return { kind: 'literal', value: null };
        if (!FUNCTIONS.has(tok.name)) throw new TemplateError(`${this.where}: function ${JSON.stringify(tok.name)} not defined`);
        return { kind: 'ident', name: tok.name };
      case '(': {
        const pipe = this.pipeline();
        if (this.toks[this.i]?.t !== ')') throw new TemplateError(`${this.where}: unclosed left paren`);
        this.i++;
        let path: string[] = [];
        const next = this.toks[this.i];
        if (next?.t === 'field' && next.path.length) {
          path = next.path;
          this.i++;
        }
        return { kind: 'paren', pipe, path };
      }
      default:
        throw new TemplateError(`${this.where}: unexpected ${JSON.stringify(tok.t)} in operand`);
    }
  }
}

interface Frame {
  kind: 'if' | 'with' | 'range' | 'root';
  node?: Node;
  nodes: Node[];
}

export function parseTemplate(src: string, name = 'bootstrap'): Node[] {
  const root: Node[] = [];
  const stack: Frame[] = [{ kind: 'root', nodes: root }];
  const top = () => stack[stack.length - 1]!;
  for (const piece of splitTemplate(src, name)) {
    if (typeof piece === 'string') {
      if (piece) top().nodes.push({ kind: 'text', text: piece });
      continue;
    }
    const where = `template: ${name}:${piece.pos.line}:${piece.pos.col}`;
    const body = piece.body;
    if (body.startsWith('/*')) {
      if (!body.endsWith('*/')) throw new TemplateError(`${where}: unclosed comment`);
      continue;
    }
    const word = /^[A-Za-z]+/.exec(body)?.[0] ?? '';
    const rest = body.slice(word.length);
    const pipeOf = (text: string): Pipeline => {
      const p = new ActionParser(lexAction(text, where), where);
      const pipe = p.pipeline();
      if (!p.done()) throw new TemplateError(`${where}: unexpected tokens after pipeline`);
      return pipe;
    };
    if (UNSUPPORTED.has(word)) throw new TemplateError(`${where}: {{${word}}} is not supported by this template renderer`);
    if (word === 'if' || word === 'with') {
      const node: Node = { kind: word, branches: [{ pipe: pipeOf(rest), body: [] }], pos: piece.pos };
      top().nodes.push(node);
      stack.push({ kind: word, node, nodes: node.branches[0]!.body });
    } else if (word === 'range') {
      const p = new ActionParser(lexAction(rest, where), where);
      const pipe = p.pipeline();
      if (!p.done()) throw new TemplateError(`${where}: unexpected tokens after range pipeline`);
      if (pipe.decl.length > 2) throw new TemplateError(`${where}: too many declarations in range`);
      const [keyVar, valueVar] = pipe.decl.length === 2 ? pipe.decl : [undefined, pipe.decl[0]];
      const node: Node = { kind: 'range', pipe: { decl: [], commands: pipe.commands }, keyVar, valueVar, body: [], pos: piece.pos };
      top().nodes.push(node);
      stack.push({ kind: 'range', node, nodes: node.body });
    } else if (word === 'else') {
      const frame = top();
      const node = frame.node;
      if (!node || frame.kind === 'root') throw new TemplateError(`${where}: unexpected {{else}}`);
      const elseIf = /^\s*if\b/.exec(rest);
      if (elseIf && (node.kind === 'if' || node.kind === 'with') && node.otherwise === undefined) {
        const branch = { pipe: pipeOf(rest.slice(elseIf[0].length)), body: [] as Node[] };
        node.branches.push(branch);
        frame.nodes = branch.body;
      } else if (rest.trim() === '') {
        if ((node.kind === 'if' || node.kind === 'with' || node.kind === 'range') && node.otherwise === undefined) {
          node.otherwise = [];
          frame.nodes = node.otherwise;
        } else throw new TemplateError(`${where}: expected end; found {{else}}`);
      } else throw new TemplateError(`${where}: unexpected ${JSON.stringify(rest.trim())} after else`);
    } else if (word === 'end') {
      if (rest.trim() !== '') throw new TemplateError(`${where}: unexpected ${JSON.stringify(rest.trim())} in end`);
      if (stack.length === 1) throw new TemplateError(`${where}: unexpected {{end}}`);
      stack.pop();
    } else {
      const pipe = pipeOf(body);
      top().nodes.push(pipe.decl.length ? { kind: 'assign', pipe, pos: piece.pos } : { kind: 'output', pipe, pos: piece.pos });
    }
  }
  if (stack.length > 1) {
    const open = stack[stack.length - 1]!;
    const pos = (open.node as { pos: Pos }).pos;
    throw new TemplateError(`template: ${name}:${pos.line}: unexpected EOF: {{${open.kind}}} has no matching {{end}}`);
  }
  return root;
}

// ---- execution ----

const NO_VALUE = Symbol('no value');

function truthy(v: Value): boolean {
  if (v === NO_VALUE || v === null || v === undefined || v === false || v === 0 || v === '') return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof Map) return v.size > 0;
  if (typeof v === 'object') return Object.keys(v).length > 0;
  return true;
}

/** Go's %v of a value. */
function goText(v: Value): string {
  if (v === NO_VALUE) return '<no value>';
  if (v === null || v === undefined) return '<nil>';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (Array.isArray(v)) return `[${v.map(goText).join(' ')}]`;
  if (typeof v === 'object') {
    const keys = Object.keys(v).sort();
    return `map[${keys.map((k) => `${k}:${goText((v as Record<string, Value>)[k])}`).join(' ')}]`;
  }
  return String(v);
}

/** Go's template.JSEscapeString. */
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

function printf(format: string, args: Value[]): string {
  let n = 0;
  return format.replace(/%([%sdvqt])/g, (_, verb: string) => {
    if (verb === '%') return '%';
    const a = args[n++];
    if (verb === 'q') return JSON.stringify(goText(a));
    return goText(a);
  });
}

function compare(a: Value, b: Value, where: string): number {
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  if (typeof a === 'string' && typeof b === 'string') return a < b ? -1 : a > b ? 1 : 0;
  throw new TemplateError(`${where}: incompatible types for comparison`);
}

class Executor {
  private out = '';
  constructor(
    private readonly root: Value,
    private readonly name: string,
  ) {}

  run(nodes: Node[]): string {
    this.walk(nodes, this.root, new Map([['$', this.root]]));
    return this.out;
  }

  private where(pos: Pos): string {
    return `template: ${this.name}:${pos.line}:${pos.col}`;
  }

  private walk(nodes: Node[], dot: Value, vars: Map<string, Value>): void {
    // Variables declared in a block live until its end.
    const scope = new Map(vars);
    for (const node of nodes) {
      switch (node.kind) {
        case 'text':
          this.out += node.text;
          break;
        case 'output':
          this.out += goText(this.pipeline(node.pipe, dot, scope, this.where(node.pos)));
          break;
        case 'assign': {
          const v = this.pipeline(node.pipe, dot, scope, this.where(node.pos));
          for (const d of node.pipe.decl) scope.set(d, v);
          break;
        }
        case 'if':
        case 'with': {
          let done = false;
          for (const b of node.branches) {
            const v = this.pipeline(b.pipe, dot, scope, this.where(node.pos));
            if (truthy(v)) {
              this.walk(b.body, node.kind === 'with' ? v : dot, scope);
              done = true;
              break;
            }
          }
          if (!done && node.otherwise) this.walk(node.otherwise, dot, scope);
          break;
        }
        case 'range': {
          const v = this.pipeline(node.pipe, dot, scope, this.where(node.pos));
          const entries: Array<[Value, Value]> = Array.isArray(v)
            ? v.map((x, i) => [i, x])
            : v && typeof v === 'object'
              ? Object.keys(v)
                  .sort()
                  .map((k) => [k, (v as Record<string, Value>)[k]])
              : typeof v === 'number'
                ? Array.from({ length: v }, (_, i) => [i, i])
                : v === null || v === undefined || v === NO_VALUE
                  ? []
                  : (() => {
                      throw new TemplateError(`${this.where(node.pos)}: range can't iterate over ${goText(v)}`);
                    })();
          if (!entries.length) {
            if (node.otherwise) this.walk(node.otherwise, dot, scope);
            break;
          }
          for (const [k, x] of entries) {
            const inner = new Map(scope);
            if (node.keyVar) inner.set(node.keyVar, k);
            if (node.valueVar) inner.set(node.valueVar, x);
            this.walk(node.body, x, inner);
          }
          break;
        }
      }
    }
  }

  private pipeline(pipe: Pipeline, dot: Value, vars: Map<string, Value>, where: string): Value {
    let last: Value = undefined;
    pipe.commands.forEach((cmd, i) => {
      last = this.command(cmd, dot, vars, where, i > 0 ? [last] : []);
    });
    return last;
  }

  private command(cmd: Command, dot: Value, vars: Map<string, Value>, where: string, piped: Value[]): Value {
    const first = cmd[0]!;
    const rest = cmd.slice(1);
    if (first.kind === 'ident') {
      const fn = first.name;
      // and/or evaluate lazily and yield the deciding argument, as Go does.
      if ((fn === 'and' || fn === 'or') && piped.length === 0) {
        if (!rest.length) throw new TemplateError(`${where}: wrong number of args for ${fn}: want at least 1 got 0`);
        let v: Value = undefined;
        for (const op of rest) {
          v = this.operand(op, dot, vars, where);
          if (fn === 'and' ? !truthy(v) : truthy(v)) return v;
        }
        return v;
      }
      const args = [...rest.map((op) => this.operand(op, dot, vars, where)), ...piped];
      return this.call(fn, args, where);
    }
    if (rest.length || piped.length) throw new TemplateError(`${where}: can't give argument to non-function ${describeOperand(first)}`);
    return this.operand(first, dot, vars, where);
  }

  private call(fn: string, args: Value[], where: string): Value {
    const need = (n: number) => {
      if (args.length !== n) throw new TemplateError(`${where}: wrong number of args for ${fn}: want ${n} got ${args.length}`);
    };
    switch (fn) {
      case 'and':
      case 'or': {
        let v: Value = undefined;
        for (const a of args) {
          v = a;
          if (fn === 'and' ? !truthy(a) : truthy(a)) return a;
        }
        return v;
      }
      case 'not':
        need(1);
        return !truthy(args[0]);
      case 'eq': {
        if (args.length < 2) throw new TemplateError(`${where}: missing argument for comparison`);
        const [a, ...bs] = args;
        return bs.some((b) => norm(a) === norm(b));
      }
      case 'ne':
        need(2);
        return norm(args[0]) !== norm(args[1]);
      case 'lt':
        need(2);
        return compare(args[0], args[1], where) < 0;
      case 'le':
        need(2);
        return compare(args[0], args[1], where) <= 0;
      case 'gt':
        need(2);
        return compare(args[0], args[1], where) > 0;
      case 'ge':
        need(2);
        return compare(args[0], args[1], where) >= 0;
      case 'len': {
        need(1);
        const v = args[0];
        if (typeof v === 'string' || Array.isArray(v)) return v.length;
        if (v && typeof v === 'object') return Object.keys(v).length;
        throw new TemplateError(`${where}: len of ${goText(v)}`);
      }
      case 'index': {
        let v = args[0];
        for (const k of args.slice(1)) {
          if (Array.isArray(v) && typeof k === 'number') v = v[k];
          else if (v && typeof v === 'object') v = (v as Record<string, Value>)[String(k)] ?? NO_VALUE;
          else throw new TemplateError(`${where}: can't index item of type ${typeof v}`);
        }
        return v;
      }
      case 'print':
        return args.map(goText).join('');
      case 'printf':
        if (typeof args[0] !== 'string') throw new TemplateError(`${where}: printf needs a format string`);
        return printf(args[0], args.slice(1));
      case 'js':
        return jsEscape(args.map(goText).join(''));
      case 'toJson':
        need(1);
        return JSON.stringify(args[0] === NO_VALUE ? null : args[0]);
    }
    throw new TemplateError(`${where}: function ${JSON.stringify(fn)} not defined`);
  }

  private operand(op: Operand, dot: Value, vars: Map<string, Value>, where: string): Value {
    switch (op.kind) {
      case 'literal':
        return op.value;
      case 'field':
        return follow(dot, op.path, where);
      case 'var': {
        if (!vars.has(op.name)) throw new TemplateError(`${where}: undefined variable: ${op.name}`);
        return follow(vars.get(op.name), op.path, where);
      }
      case 'paren':
        return follow(this.pipeline(op.pipe, dot, vars, where), op.path, where);
      case 'ident':
        return this.call(op.name, [], where);
    }
  }
}

function norm(v: Value): Value {
  return v === NO_VALUE ? undefined : v;
}

function describeOperand(op: Operand): string {
  if (op.kind === 'field') return `.${op.path.join('.')}`;
  if (op.kind === 'var') return op.name;
  return goText((op as { value?: Value }).value);
}

function follow(v: Value, path: readonly string[], where: string): Value {
  let cur = v;
  for (const key of path) {
    if (cur === NO_VALUE || cur === null || cur === undefined) return NO_VALUE;
    if (typeof cur !== 'object' || Array.isArray(cur)) {
      throw new TemplateError(`${where}: can't evaluate field ${key} in type ${Array.isArray(cur) ? 'slice' : typeof cur}`);
    }
    cur = key in (cur as object) ? (cur as Record<string, Value>)[key] : NO_VALUE;
  }
  return cur;
}

/** Renders `src` with `data` as the dot. Errors carry Go's `template: name:line:col:` prefix. */
export function renderTemplate(src: string, data: Record<string, unknown>, name = 'bootstrap'): string {
  return new Executor(data, name).run(parseTemplate(src, name));
}
