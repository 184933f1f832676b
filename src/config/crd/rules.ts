// x-kubernetes-validations: the CEL rules of a CRD schema, evaluated as apiextensions-apiserver's
// pkg/apiserver/schema/cel (Validator.validate) does on create: every rule of every node whose value is
// present and not null, `self` bound to that value typed by its schema (UnstructuredToVal: integers are CEL
// ints, numbers doubles, objects and maps map-like, so a missing field is an error unless guarded by has()).
// A false rule is `<path>: Invalid value: <the value>: <message>` (no value for an object or a list), a failing
// one `<path>: Invalid value: "<schema type>": <error> evaluating rule: <message>`, as kube-apiserver 1.36 words them (checked against it:
// test/config/crd-validation-apiserver.test.ts). Transition rules (oldSelf) never run: a file is always a create.
// Not done: the cost budget (Istio's rules are all linear in their input, which the schema bounds), and
// messageExpression, fieldPath and reason, which no Istio rule uses.
import { type CelInput, celError, isCelError, parse, plan } from '@bufbuild/cel';
import { isObject } from '../values';
import { kubernetesCelEnv } from './cel-library';
import { goValue, type Schema, type SchemaError } from './openapi';

type Program = (ctx: { self: CelInput }) => unknown;

const programs = new Map<string, Program | Error>();

function program(rule: string): Program | Error {
  let p = programs.get(rule);
  if (!p) {
    try {
      p = plan(kubernetesCelEnv(), parse(rule)) as unknown as Program;
    } catch (e) {
      p = e instanceof Error ? e : new Error(String(e));
    }
    programs.set(rule, p);
  }
  return p;
}

const usesOldSelf = (rule: string): boolean => /\boldSelf\b/.test(rule);

/** UnstructuredToVal, by schema type: what `self` is inside a rule. */
function toCel(s: Schema | undefined, v: unknown): CelInput {
  if (typeof v === 'number') {
    const integer = s?.type === 'integer' || ((s?.type === undefined || s['x-kubernetes-int-or-string']) && Number.isInteger(v));
    return integer && Number.isSafeInteger(v) ? BigInt(v) : v;
  }
  if (Array.isArray(v)) return v.map((x) => toCel(s?.items, x));
  if (isObject(v)) {
    const m = new Map<string, CelInput>();
    for (const [k, x] of Object.entries(v)) {
      // a null field reads as absent: has() is false and the schema check has already rejected nulls where not nullable
      if (x === null || x === undefined) continue;
      const fs = s?.properties?.[k] ?? (typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined);
      m.set(k, toCel(fs, x));
    }
    return m;
  }
  return v as CelInput;
}

/** cel-go's words for the runtime errors a rule can hit on a missing field (Kubernetes prints cel-go's). */
const celGoMessage = (m: string): string => m.replace(/^field not found: /, 'no such key: ');

const ruleText = (r: { rule: string; message?: string }): string => (r.message ? r.message.trim() : r.rule.trim());

function evaluate(s: Schema, v: unknown, path: string, out: SchemaError[]): void {
  const rules = s['x-kubernetes-validations'];
  if (!rules?.length) return;
  // a false rule shows the value itself for a scalar, no value for an object or a list (apimachinery's omitValue);
  // a rule that cannot be evaluated shows the schema type instead
  const bad = isObject(v) || Array.isArray(v) ? 'Invalid value' : `Invalid value: ${goValue(v)}`;
  const failed = `Invalid value: ${JSON.stringify(s.type ?? '')}`;
  let self: CelInput | undefined;
  for (const r of rules) {
    if (usesOldSelf(r.rule)) continue;
    const p = program(r.rule);
    if (p instanceof Error) {
      out.push({ field: path, type: 'Invalid', body: `${failed}: rule compile error: ${p.message}` });
      continue;
    }
    self ??= toCel(s, v);
    let result: unknown;
    try {
      result = p({ self });
    } catch (e) {
      // @bufbuild/cel returns its errors; anything thrown is still this rule's failure, not the loader's
      result = celError(e);
    }
    if (isCelError(result)) {
      out.push({ field: path, type: 'Invalid', body: `${failed}: ${celGoMessage(result.message)} evaluating rule: ${ruleText(r)}` });
      continue;
    }
    if (result === true) continue;
    out.push({ field: path, type: 'Invalid', body: `${bad}: ${r.message ? r.message.trim() : `failed rule: ${ruleText(r)}`}` });
  }
}

function walk(s: Schema, v: unknown, path: string, out: SchemaError[]): void {
  if (v === null || v === undefined) return;
  evaluate(s, v, path, out);
  for (const a of s.allOf ?? []) walk({ ...a, type: s.type }, v, path, out);
  if (Array.isArray(v)) {
    if (s.items) v.forEach((x, i) => walk(s.items!, x, `${path}[${i}]`, out));
    return;
  }
  if (!isObject(v)) return;
  const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
  if (extra) for (const [k, x] of Object.entries(v)) walk(extra, x, `${path}[${k}]`, out);
  for (const [k, ps] of Object.entries(s.properties ?? {})) if (k in v) walk(ps, v[k], path === '' ? k : `${path}.${k}`, out);
}

/** Evaluates every rule of `schema` over `value` (the object, or a part of it at `path`). */
export function validateRules(schema: Schema, value: unknown, path = ''): SchemaError[] {
  const out: SchemaError[] = [];
  walk(schema, value, path, out);
  return out;
}

/** structurallisttype.ValidateListSetsAndMaps: no two items of a `set` list equal, no two of a `map` list with the same keys. */
export function validateListTypes(s: Schema, v: unknown, path = '', out: SchemaError[] = []): SchemaError[] {
  if (Array.isArray(v)) {
    const lt = s['x-kubernetes-list-type'];
    const keys = s['x-kubernetes-list-map-keys'] ?? [];
    if (lt === 'set' || lt === 'map') {
      const seen = new Set<string>();
      v.forEach((x, i) => {
        if (lt === 'map' && x !== null && !isObject(x)) {
          out.push({
            field: `${path}[${i}]`,
            type: 'Invalid',
            body: `Invalid value: ${goValue(x)}: must be an object for an array of list-type map`,
          });
          return;
        }
        if (x === null || x === undefined) return;
        const id = lt === 'set' ? JSON.stringify(x) : JSON.stringify(keys.map((k) => (x as Record<string, unknown>)[k] ?? null));
        if (!seen.has(id)) {
          seen.add(id);
          return;
        }
        const shown = JSON.stringify(
          lt === 'set' ? x : Object.fromEntries(keys.filter((k) => k in (x as object)).map((k) => [k, (x as Record<string, unknown>)[k]])),
        );
        out.push({ field: `${path}[${i}]`, type: 'Duplicate', body: `Duplicate value: ${shown}` });
      });
    }
    if (s.items) v.forEach((x, i) => validateListTypes(s.items!, x, `${path}[${i}]`, out));
  } else if (isObject(v)) {
    const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
    for (const [k, x] of Object.entries(v)) {
      const ps = s.properties?.[k];
      if (ps) validateListTypes(ps, x, path === '' ? k : `${path}.${k}`, out);
      else if (extra) validateListTypes(extra, x, `${path}[${k}]`, out);
    }
  }
  return out;
}
