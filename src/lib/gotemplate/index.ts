// Go's text/template for templates written for Go programs (Istio's injection templates, bootstrap
// templates, Helm-style charts). One engine; callers add their own functions on top of the builtins.
import { BUILTINS } from './builtins';
import { execute, type FuncMap } from './exec';
import { parse, type TemplateSet } from './parse';

export { TemplateParseError } from './parse';
export { TemplateError, type FuncMap, type TemplateFunc } from './exec';
export { GoMap, GoStruct, GO_STRING, GO_TRUTH, goSprint, truth, TemplateExecError } from './values';
export { SPRIG, sprigEmpty, strval, goJsonMarshal } from './sprig';
export { sprintf } from './builtins';

export class GoTemplate {
  private constructor(
    readonly name: string,
    private readonly set: TemplateSet,
    private readonly funcs: FuncMap,
  ) {}

  /** Parses `src`; every function the template names must be in `funcs` or Go's builtins, as Go checks. */
  static parse(name: string, src: string, funcs: FuncMap = {}): GoTemplate {
    const all: FuncMap = { ...BUILTINS, ...funcs };
    return new GoTemplate(name, parse(name, src, new Set(Object.keys(all))), all);
  }

  execute(data: unknown): string {
    return execute(this.set, this.name, data, this.funcs);
  }
}
