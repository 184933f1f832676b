// CEL expressions over Envoy's attributes, as source/extensions/filters/common/expr/evaluator.cc builds and runs
// them: compiled once per config (compileCel), evaluated per request against a lazy activation (attributes.ts).
// The builder's options are Envoy's defaults: no comprehensions (all/exists/map/filter macros), no string()
// conversion, no string or list concatenation (`+`), RE2 for matches(). Envoy refuses the first two when it builds
// the expression, so compileCel throws for them; `+` on strings or lists fails when evaluated.
// Printing (printCelValue) follows Expr::print, which Istio's stats plugin uses for tag values and the CEL
// formatter for log fields. Evaluation errors give undefined: Envoy treats them as "no value" (filters false,
// Istio's stats tag "unknown").
import {
  celEnv,
  celFunc,
  isCelError,
  isCelList,
  isCelMap,
  isCelUint,
  parse,
  plan,
  CelScalar,
  listType,
  type CelEnv,
  type CelValue,
} from '@bufbuild/cel';
import type { Expr } from '@bufbuild/cel-spec/cel/expr/syntax_pb.js';
import { isReflectMessage, type ReflectMessage } from '@bufbuild/protobuf/reflect';
import { ConfigError } from '../common/config-error';
import { searcher } from '../../lib/re2';
import { activation, type CelContext } from './attributes';

export type { CelContext, XdsAttributes } from './attributes';

/** A compiled expression. */
export interface CelProgram {
  readonly source: string;
  /** The value, or undefined when evaluation fails (missing attribute, type error). */
  evaluate(c: CelContext): CelValue | undefined;
  /** Expr::print of the value (Istio's tag values); undefined when evaluation fails. */
  evaluateString(c: CelContext): string | undefined;
  /** Expr::matches: true only for the boolean true (ExpressionFilter, RBAC conditions). */
  matches(c: CelContext): boolean;
}

const noConcat = (): never => {
  throw new Error('No matching overloads found : _+_(string, string)');
};

let env: CelEnv | undefined;

function envoyEnv(): CelEnv {
  env ??= celEnv({
    funcs: [
      celFunc('_+_', [CelScalar.STRING, CelScalar.STRING], CelScalar.STRING, noConcat),
      celFunc('_+_', [listType(CelScalar.DYN), listType(CelScalar.DYN)], listType(CelScalar.DYN), () => {
        throw new Error('No matching overloads found : _+_(list, list)');
      }),
    ],
    re2: { compile: (pattern) => ({ test: searcher(pattern) }) },
  });
  return env;
}

/** What Envoy's builder refuses: comprehensions and string(). */
function refused(e: Expr | undefined): string | undefined {
  if (!e) return undefined;
  const k = e.exprKind;
  switch (k.case) {
    case 'comprehensionExpr':
      return 'Comprehension support is disabled';
    case 'selectExpr':
      return refused(k.value.operand);
    case 'callExpr': {
      if (k.value.function === 'string') return "No overloads provided for FunctionStep creation: 'string'";
      for (const a of [k.value.target, ...k.value.args]) {
        const r = refused(a);
        if (r) return r;
      }
      return undefined;
    }
    case 'listExpr':
      for (const a of k.value.elements) {
        const r = refused(a);
        if (r) return r;
      }
      return undefined;
    case 'structExpr':
      for (const en of k.value.entries) {
        const r = refused(en.keyKind.case === 'mapKey' ? en.keyKind.value : undefined) ?? refused(en.value);
        if (r) return r;
      }
      return undefined;
    default:
      return undefined;
  }
}

/** Compiles `expr` once; `where` names the config field in errors (ConfigError, as Envoy's EnvoyException). */
export function compileCel(expr: string, where: string): CelProgram {
  let parsed;
  try {
    parsed = parse(expr);
  } catch (e) {
    throw new ConfigError(`${where}: Not able to parse filter expression: ${e instanceof Error ? e.message : String(e)}`);
  }
  const why = refused(parsed.expr);
  if (why) throw new ConfigError(`${where}: failed to create an expression: ${why}`);
  const run = plan(envoyEnv(), parsed) as (ctx: Record<string, unknown>) => unknown;
  const evaluate = (c: CelContext): CelValue | undefined => {
    let r: unknown;
    // a missing attribute is an error value: without stack traces it costs a tenth
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    try {
      r = run(activation(c));
    } catch {
      return undefined;
    } finally {
      Error.stackTraceLimit = limit;
    }
    return isCelError(r) ? undefined : (r as CelValue);
  };
  return {
    source: expr,
    evaluate,
    evaluateString(c) {
      const v = evaluate(c);
      return v === undefined ? undefined : printCelValue(v);
    },
    matches(c) {
      return evaluate(c) === true;
    },
  };
}

/** absl::StrCat(double): six significant digits, %g style. */
export function formatDouble(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0' : '0';
  const exp = Math.floor(Math.log10(Math.abs(Number(x.toPrecision(6)))));
  if (exp < -4 || exp >= 6) {
    const [m, e] = x.toExponential(5).split('e') as [string, string];
    const mant = m.includes('.') ? m.replace(/\.?0+$/, '') : m;
    const n = Number(e);
    return `${mant}e${n < 0 ? '-' : '+'}${String(Math.abs(n)).padStart(2, '0')}`;
  }
  const s = x.toFixed(Math.max(0, 5 - exp));
  return s.includes('.') ? s.replace(/\.?0+$/, '') : s;
}

/** absl::FormatDuration: `1h2m3.5s`, `150ms`, `2.5us`, `7ns`, `0`. */
export function formatDurationNs(ns: bigint): string {
  if (ns === 0n) return '0';
  const neg = ns < 0n;
  let n = neg ? -ns : ns;
  const unit = (v: bigint, per: bigint, suffix: string): string => {
    const whole = v / per;
    const frac = v % per;
    if (frac === 0n) return `${whole}${suffix}`;
    const digits = String(per).length - 1;
    return `${whole}.${String(frac).padStart(digits, '0').replace(/0+$/, '')}${suffix}`;
  };
  let out = '';
  if (n < 1_000_000_000n) {
    if (n < 1_000n) out = `${n}ns`;
    else if (n < 1_000_000n) out = unit(n, 1_000n, 'us');
    else out = unit(n, 1_000_000n, 'ms');
  } else {
    const h = n / 3_600_000_000_000n;
    n %= 3_600_000_000_000n;
    const m = n / 60_000_000_000n;
    n %= 60_000_000_000n;
    if (h > 0n) out += `${h}h`;
    if (m > 0n) out += `${m}m`;
    if (n > 0n) out += unit(n, 1_000_000_000n, 's');
  }
  return neg ? `-${out}` : out;
}

/** absl::FormatTime(t, UTC): RFC 3339 with the fraction only as long as needed, `+00:00`. */
export function formatTimestamp(seconds: bigint, nanos: number): string {
  const d = new Date(Number(seconds) * 1000);
  const base = d.toISOString().slice(0, 19);
  const frac = nanos > 0 ? `.${String(nanos).padStart(9, '0').replace(/0+$/, '')}` : '';
  return `${base}${frac}+00:00`;
}

/** Expr::print. */
export function printCelValue(v: CelValue): string {
  switch (typeof v) {
    case 'boolean':
      return v ? 'true' : 'false';
    case 'bigint':
      return String(v);
    case 'number':
      return formatDouble(v);
    case 'string':
      return v;
  }
  if (v === null) return 'NULL';
  if (v instanceof Uint8Array) return Buffer.from(v).toString('latin1');
  const o = v as object;
  if (isCelUint(o)) return String(o.value);
  if (isReflectMessage(o)) return printMessage(o);
  if (isCelMap(o)) return 'CelMap value';
  if (isCelList(o)) return 'CelList value';
  return 'CelType value';
}

function printMessage(m: ReflectMessage): string {
  const name = m.desc.typeName;
  if (name === 'google.protobuf.Timestamp' || name === 'google.protobuf.Duration') {
    const seconds = m.get(m.desc.field.seconds!) as bigint;
    const nanos = m.get(m.desc.field.nanos!) as number;
    if (name === 'google.protobuf.Timestamp') return formatTimestamp(seconds, nanos);
    return formatDurationNs(seconds * 1_000_000_000n + BigInt(nanos));
  }
  return name;
}
