// Executes a parsed Go template with Go's evaluation rules (text/template/exec.go): field chains over maps,
// structs and methods, variables with block scope and `=` assignment, pipelines passing the previous value
// as the last argument, short-circuit and/or, range over slices/maps/ints with break/continue, template calls.
import type { Arg, Cmd, Node, Pipe, Pos, TemplateSet } from './parse';
import { GoMap, goSprint, isGoMap, isPlainMap, isStruct, TemplateExecError, truth } from './values';

/** A template function. Arguments are Go values (see values.ts); `undefined` only reaches RAW_ARG functions. */
export type TemplateFunc = (...args: unknown[]) => unknown;
export type FuncMap = Readonly<Record<string, TemplateFunc>>;

/** Builtins that take reflect.Value in Go and so see invalid (missing) values as such. */
export const RAW_ARG_FUNCS = new Set(['and', 'or', 'not', 'eq', 'ne', 'lt', 'le', 'gt', 'ge', 'len', 'index', 'slice', 'call']);

const MISSING = Symbol('missing');
type Final = unknown | typeof MISSING;

class BreakSignal {}
class ContinueSignal {}

export class TemplateError extends Error {}

interface Variable {
  name: string;
  value: unknown;
}

export function execute(set: TemplateSet, name: string, data: unknown, funcs: FuncMap): string {
  const root = set.get(name);
  if (!root) throw new TemplateError(`template: no template ${JSON.stringify(name)} associated with template ${JSON.stringify(name)}`);
  const st = new State(set, name, funcs, [{ name: '$', value: data }]);
  st.walk(data, root);
  return st.out;
}

function typeName(v: unknown): string {
  if (v === null) return 'interface {}';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'bigint') return 'int';
  if (typeof v === 'number') return 'float64';
  if (Array.isArray(v)) return '[]interface {}';
  if (isGoMap(v)) return v.typeName;
  if (isStruct(v)) return v.goType();
  if (typeof v === 'object') return 'map[string]interface {}';
  return typeof v;
}

class State {
  out = '';
  private node: { pos?: Pos; text?: string } = {};
  private depth = 0;

  constructor(
    private readonly set: TemplateSet,
    private readonly name: string,
    private readonly funcs: FuncMap,
    private vars: Variable[],
  ) {}

  private fail(msg: string): never {
    const p = this.node.pos;
    const where = p ? `${this.name}:${p.line}:${p.col}` : this.name;
    throw new TemplateError(`template: ${where}: executing ${JSON.stringify(this.name)}${this.node.text ? ` at <${this.node.text}>` : ''}: ${msg}`);
  }

  private mark(): number {
    return this.vars.length;
  }

  private pop(mark: number): void {
    this.vars.length = mark;
  }

  private setVar(name: string, value: unknown): void {
    for (let i = this.vars.length - 1; i >= 0; i--) {
      if (this.vars[i]!.name === name) {
        this.vars[i]!.value = value;
        return;
      }
    }
    this.fail(`undefined variable: ${name}`);
  }

  private varValue(name: string): unknown {
    for (let i = this.vars.length - 1; i >= 0; i--) if (this.vars[i]!.name === name) return this.vars[i]!.value;
    return this.fail(`undefined variable: ${name}`);
  }

  walk(dot: unknown, list: readonly Node[]): void {
    for (const node of list) {
      switch (node.type) {
        case 'text':
          this.out += node.text;
          break;
        case 'action': {
          this.node = { pos: node.pos };
          const v = this.evalPipeline(dot, node.pipe);
          if (node.pipe.decl.length === 0) this.out += goSprint(v);
          break;
        }
        case 'if':
        case 'with': {
          const mark = this.mark();
          this.node = { pos: node.pos };
          const v = this.evalPipeline(dot, node.pipe);
          if (truth(v)) this.walk(node.type === 'with' ? v : dot, node.list);
          else if (node.elseList) this.walk(dot, node.elseList);
          this.pop(mark);
          break;
        }
        case 'range':
          this.walkRange(dot, node);
          break;
        case 'template': {
          const tmpl = this.set.get(node.name);
          this.node = { pos: node.pos };
          if (!tmpl) this.fail(`template: no template ${JSON.stringify(node.name)} associated with template ${JSON.stringify(this.name)}`);
          const newDot = node.pipe ? this.evalPipeline(dot, node.pipe) : null;
          if (++this.depth > 100000) this.fail('exceeded maximum template depth (100000)');
          const saved = this.vars;
          this.vars = [{ name: '$', value: newDot }];
          try {
            this.walk(newDot, tmpl);
          } finally {
            this.vars = saved;
            this.depth--;
          }
          break;
        }
        case 'break':
          throw new BreakSignal();
        case 'continue':
          throw new ContinueSignal();
      }
    }
  }

  private walkRange(dot: unknown, node: Extract<Node, { type: 'range' }>): void {
    const mark = this.mark();
    this.node = { pos: node.pos };
    const pipe = node.pipe;
    const val = this.evalPipeline(dot, { ...pipe, decl: [] });
    const decl = pipe.decl;
    if (!pipe.isAssign) for (const d of decl) this.vars.push({ name: d, value: val });
    const one = (index: unknown, elem: unknown): boolean => {
      if (decl.length === 1) this.assignRangeVar(decl[0]!, elem, pipe.isAssign);
      if (decl.length === 2) {
        this.assignRangeVar(decl[0]!, index, pipe.isAssign);
        this.assignRangeVar(decl[1]!, elem, pipe.isAssign);
      }
      const inner = this.mark();
      try {
        this.walk(elem, node.list);
      } catch (e) {
        if (e instanceof BreakSignal) return false;
        if (!(e instanceof ContinueSignal)) throw e;
      } finally {
        this.pop(inner);
      }
      return true;
    };
    let ran = false;
    if (Array.isArray(val)) {
      for (let i = 0; i < val.length; i++) {
        ran = true;
        if (!one(BigInt(i), val[i])) break;
      }
    } else if (val instanceof Map) {
      for (const k of [...val.keys()].sort(goStringCompare)) {
        ran = true;
        if (!one(k, val.get(k))) break;
      }
    } else if (typeof val === 'bigint') {
      for (let i = 0n; i < val; i++) {
        ran = true;
        if (!one(i, i)) break;
      }
    } else if (isPlainMap(val)) {
      for (const k of Object.keys(val).sort(goStringCompare)) {
        ran = true;
        if (!one(k, val[k])) break;
      }
    } else if (val !== undefined && val !== null) {
      this.fail(`range can't iterate over ${goSprint(val)}`);
    }
    if (!ran && node.elseList) this.walk(dot, node.elseList);
    this.pop(mark);
  }

  private assignRangeVar(name: string, value: unknown, isAssign: boolean): void {
    if (isAssign) this.setVar(name, value);
    else {
      for (let i = this.vars.length - 1; i >= 0; i--) {
        if (this.vars[i]!.name === name) {
          this.vars[i]!.value = value;
          return;
        }
      }
    }
  }

  private evalPipeline(dot: unknown, pipe: Pipe): unknown {
    let value: Final = MISSING;
    for (const cmd of pipe.cmds) value = this.evalCommand(dot, cmd, value);
    const v = value === MISSING ? undefined : value;
    for (const d of pipe.decl) {
      if (pipe.isAssign) this.setVar(d, v);
      else this.vars.push({ name: d, value: v });
    }
    return v;
  }

  private notAFunction(args: readonly Arg[], final: Final): void {
    if (args.length > 1 || final !== MISSING) this.fail(`can't give argument to non-function ${describeArg(args[0]!)}`);
  }

  private evalCommand(dot: unknown, cmd: Cmd, final: Final): unknown {
    const first = cmd.args[0]!;
    this.node = { pos: cmd.pos, text: describeArg(first) };
    switch (first.kind) {
      case 'field':
        return this.evalFieldChain(dot, dot, first.ident, cmd.args, final);
      case 'chain':
        return this.evalChain(dot, first, cmd.args, final);
      case 'identifier':
        return this.evalFunction(dot, first.name, cmd.args, final);
      case 'pipe':
        this.notAFunction(cmd.args, final);
        return this.evalPipeline(dot, first.pipe);
      case 'variable':
        return this.evalVariable(dot, first, cmd.args, final);
    }
    this.notAFunction(cmd.args, final);
    switch (first.kind) {
      case 'bool':
      case 'number':
      case 'string':
        return first.value;
      case 'dot':
        return dot;
      case 'nil':
        return this.fail('nil is not a command');
    }
  }

  private evalVariable(dot: unknown, node: Extract<Arg, { kind: 'variable' }>, args: readonly Arg[], final: Final): unknown {
    const value = this.varValue(node.ident[0]!);
    if (node.ident.length === 1) {
      this.notAFunction(args, final);
      return value;
    }
    return this.evalFieldChain(dot, value, node.ident.slice(1), args, final);
  }

  private evalChain(dot: unknown, chain: Extract<Arg, { kind: 'chain' }>, args: readonly Arg[], final: Final): unknown {
    if (chain.field.length === 0) this.fail('internal error: no fields in evalChainNode');
    if (chain.node.kind === 'nil') this.fail(`indirection through explicit nil in ${describeArg(chain)}`);
    const pipe = this.evalArg(dot, chain.node);
    return this.evalFieldChain(dot, pipe, chain.field, args, final);
  }

  private evalFieldChain(dot: unknown, receiver: unknown, ident: readonly string[], args: readonly Arg[], final: Final): unknown {
    const n = ident.length;
    let r = receiver;
    for (let i = 0; i < n - 1; i++) r = this.evalField(dot, ident[i]!, [], MISSING, r);
    return this.evalField(dot, ident[n - 1]!, args, final, r);
  }

  private evalField(dot: unknown, name: string, args: readonly Arg[], final: Final, receiver: unknown): unknown {
    if (receiver === undefined) return undefined;
    if (receiver === null) this.fail(`nil pointer evaluating interface {}.${name}`);
    const hasArgs = args.length > 1 || final !== MISSING;
    if (typeof receiver === 'object' && !Array.isArray(receiver) && !(receiver instanceof Map)) {
      const m = (receiver as Record<string, unknown>)[name];
      if (typeof m === 'function') {
        const argv = args.slice(1).map((a) => toInterface(this.evalArg(dot, a)));
        if (final !== MISSING) argv.push(toInterface(final));
        try {
          return (m as TemplateFunc).apply(receiver, argv);
        } catch (e) {
          if (e instanceof TemplateError) throw e;
          return this.fail(`error calling ${name}: ${(e as Error).message}`);
        }
      }
    }
    if (isGoMap(receiver)) {
      if (hasArgs) this.fail(`${name} is not a method but has arguments`);
      return receiver.has(name) ? receiver.get(name) : undefined;
    }
    if (isStruct(receiver)) {
      if (!Object.prototype.hasOwnProperty.call(receiver, name)) this.fail(`can't evaluate field ${name} in type ${receiver.goType()}`);
      if (hasArgs) this.fail(`${name} has arguments but cannot be invoked as function`);
      return (receiver as unknown as Record<string, unknown>)[name];
    }
    if (isPlainMap(receiver)) {
      if (hasArgs) this.fail(`${name} is not a method but has arguments`);
      return Object.prototype.hasOwnProperty.call(receiver, name) ? receiver[name] : undefined;
    }
    return this.fail(`can't evaluate field ${name} in type ${typeName(receiver)}`);
  }

  private evalFunction(dot: unknown, name: string, args: readonly Arg[], final: Final): unknown {
    const rest = args.slice(1);
    if (name === 'and' || name === 'or') {
      const total = rest.length + (final !== MISSING ? 1 : 0);
      if (total === 0) this.fail(`wrong number of args for ${name}: want at least 1 got 0`);
      let v: unknown;
      for (let i = 0; i < total; i++) {
        v = i < rest.length ? this.evalArg(dot, rest[i]!) : final;
        if (name === 'and' ? !truth(v) : truth(v)) return v;
      }
      return v;
    }
    const fn = this.funcs[name];
    if (!fn) this.fail(`${JSON.stringify(name)} is not a defined function`);
    const raw = RAW_ARG_FUNCS.has(name);
    const argv = rest.map((a) => {
      const v = this.evalArg(dot, a);
      return raw ? v : toInterface(v);
    });
    if (final !== MISSING) argv.push(raw ? final : toInterface(final));
    try {
      return fn(...argv);
    } catch (e) {
      if (e instanceof TemplateError) throw e;
      return this.fail(`error calling ${name}: ${(e as Error).message}`);
    }
  }

  private evalArg(dot: unknown, arg: Arg): unknown {
    switch (arg.kind) {
      case 'dot':
        return dot;
      case 'nil':
        return null;
      case 'field':
        return this.evalFieldChain(dot, dot, arg.ident, [arg], MISSING);
      case 'variable':
        return this.evalVariable(dot, arg, [arg], MISSING);
      case 'pipe':
        return this.evalPipeline(dot, arg.pipe);
      case 'identifier':
        return this.evalFunction(dot, arg.name, [arg], MISSING);
      case 'chain':
        return this.evalChain(dot, arg, [arg], MISSING);
      case 'bool':
      case 'number':
      case 'string':
        return arg.value;
    }
  }
}

/** A missing value passed to a function parameter of interface type arrives as nil. */
function toInterface(v: unknown): unknown {
  return v === undefined ? null : v;
}

/** Go sorts map keys by byte order. */
export function goStringCompare(a: string, b: string): number {
  const ba = Buffer.from(a);
  const bb = Buffer.from(b);
  return Buffer.compare(ba, bb);
}

function describeArg(a: Arg): string {
  switch (a.kind) {
    case 'dot':
      return '.';
    case 'nil':
      return 'nil';
    case 'bool':
      return String(a.value);
    case 'number':
      return a.text;
    case 'string':
      return JSON.stringify(a.value);
    case 'field':
      return '.' + a.ident.join('.');
    case 'variable':
      return a.ident.join('.');
    case 'identifier':
      return a.name;
    case 'pipe':
      return '(pipeline)';
    case 'chain':
      return `(${describeArg(a.node)}).${a.field.join('.')}`;
  }
}

export { TemplateExecError, GoMap };
