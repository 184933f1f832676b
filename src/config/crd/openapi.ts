// OpenAPI v3 schema validation of a custom resource as the API server does it: kube-openapi's
// pkg/validation/validate (the go-openapi validator Kubernetes forked), its errors turned into field errors by
// apiextensions-apiserver's validation.ValidateCustomResource, so messages read as kubectl shows them
// (`spec.portLevelMtls: Invalid value: 0: spec.portLevelMtls in body should have at least 1 properties`); the
// messages are checked against kube-apiserver 1.36 on Istio's CRD test cases (test/config/crd-validation-apiserver.test.ts).
// Differences on purpose: properties are checked in schema order (Go walks a map, in random order); string
// `format`s are not checked (the only one Istio's spec schemas declare on strings is `binary`, which the API
// server's format registry does not know either); of several failing anyOf/oneOf alternatives the one with the
// fewest errors is reported (kube-openapi picks the one that passed most checks).
import { isObject } from '../values';

export interface Schema {
  type?: string;
  format?: string;
  nullable?: boolean;
  enum?: unknown[];
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: Schema | boolean;
  items?: Schema;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  not?: Schema;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  'x-kubernetes-list-map-keys'?: string[];
  'x-kubernetes-validations'?: { rule: string; message?: string; messageExpression?: string; reason?: string; fieldPath?: string }[];
}

/** A field error as apimachinery's field.Error prints it: `field: body`. */
export interface SchemaError {
  field: string;
  /** Required, Invalid, NotSupported, TooLong, TooMany: the kinds that stop CEL rules from running. */
  type: 'Required' | 'Invalid' | 'TypeInvalid' | 'NotSupported' | 'TooLong' | 'TooMany' | 'Duplicate';
  body: string;
}

/** field.Error's rendering of a bad value: strings quoted as Go's %q, numbers, booleans and null bare, the rest as JSON. */
export function goValue(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return JSON.stringify(v);
}

/** How apimachinery prints the nil field path of the errors that are not about one field. */
export const NO_FIELD = '<nil>';

const invalid = (field: string, value: unknown, detail: string): SchemaError => ({
  field,
  type: 'Invalid',
  body: `Invalid value: ${goValue(value)}: ${detail}`,
});

/** The JSON type kube-openapi infers for a decoded value. */
function jsonType(v: unknown): string {
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number' || typeof v === 'bigint') return typeof v === 'bigint' || Number.isInteger(v) ? 'integer' : 'number';
  if (Array.isArray(v)) return 'array';
  return 'object';
}

const child = (path: string, name: string): string => (path === '' ? name : `${path}.${name}`);

interface Result {
  errors: SchemaError[];
}

function typeErrors(s: Schema, v: unknown, path: string): SchemaError[] {
  if (!s.type && !s.format) return [];
  if (v === null) {
    if (s.type && !s.nullable)
      return [{ field: path, type: 'TypeInvalid', body: `Invalid value: "null": ${path} in body must be of type ${s.type}: "null"` }];
    return [];
  }
  const t = jsonType(v);
  const intAsNumber = t === 'integer' && s.type === 'number';
  if (t !== 'string' && t !== 'array' && s.format && !(s.type === t || intAsNumber || (s.format === 'int64' && t === 'integer'))) {
    const format = t === 'integer' ? 'int64' : t === 'number' ? 'float64' : '';
    return [
      {
        field: path,
        type: 'TypeInvalid',
        body: `Invalid value: ${goValue(format)}: ${path} in body must be of type ${s.format}: ${goValue(format)}`,
      },
    ];
  }
  if (s.type !== 'number' && s.type !== 'integer' && s.format && (t === 'string' || t === 'array')) return [];
  if (!s.type || !(s.type === t || intAsNumber))
    return [
      { field: path, type: 'TypeInvalid', body: `Invalid value: ${goValue(t)}: ${path} in body must be of type ${s.type ?? ''}: ${goValue(t)}` },
    ];
  return [];
}

function enumErrors(s: Schema, v: unknown, path: string): SchemaError[] {
  if (!s.enum || s.enum.length === 0) return [];
  if (v !== null && s.enum.some((e) => e === v)) return [];
  const values = s.enum.map((e) => JSON.stringify(typeof e === 'string' ? e : JSON.stringify(e))).join(', ');
  return [{ field: path, type: 'NotSupported', body: `Unsupported value: ${goValue(v)}: supported values: ${values}` }];
}

function stringErrors(s: Schema, v: string, path: string, pattern: (p: string) => (s: string) => boolean): SchemaError[] {
  const runes = [...v].length;
  if (s.maxLength !== undefined && runes > s.maxLength)
    return [{ field: path, type: 'TooLong', body: `Too long: may not be longer than ${s.maxLength}` }];
  if (s.minLength !== undefined && runes < s.minLength) return [invalid(path, v, `${path} in body should be at least ${s.minLength} chars long`)];
  if (s.pattern !== undefined && !pattern(s.pattern)(v)) return [invalid(path, v, `${path} in body should match '${s.pattern}'`)];
  return [];
}

function numberErrors(s: Schema, v: number, path: string): SchemaError[] {
  const out: SchemaError[] = [];
  if (s.type === 'integer' && s.format === 'int32' && (v < -2147483648 || v > 2147483647))
    out.push({ field: NO_FIELD, type: 'Invalid', body: `Invalid value: "": Checked value must be of type integer with format int32 in ${path}` });
  if (s.minimum !== undefined && (s.exclusiveMinimum ? v <= s.minimum : v < s.minimum))
    out.push(invalid(path, v, `${path} in body should be greater than ${s.exclusiveMinimum ? '' : 'or equal to '}${s.minimum}`));
  if (s.maximum !== undefined && (s.exclusiveMaximum ? v >= s.maximum : v > s.maximum))
    out.push(invalid(path, v, `${path} in body should be less than ${s.exclusiveMaximum ? '' : 'or equal to '}${s.maximum}`));
  return out;
}

/** allOf/oneOf/anyOf/not: the composite messages are plain errors, which the API server reports on a nil path. */
function compositeErrors(s: Schema, v: unknown, path: string, ctx: Ctx): SchemaError[] {
  const out: SchemaError[] = [];
  const composite = (detail: string): SchemaError => ({ field: NO_FIELD, type: 'Invalid', body: `Invalid value: "": ${detail}` });
  const fewest = (rs: SchemaError[][]) => rs.reduce((a, b) => (b.length < a.length ? b : a));
  if (s.anyOf?.length) {
    const results = s.anyOf.map((a) => validate(a, v, path, ctx).errors);
    if (!results.some((r) => r.length === 0))
      out.push(composite(`${JSON.stringify(path)} must validate at least one schema (anyOf)`), ...fewest(results));
  }
  if (s.oneOf?.length) {
    const results = s.oneOf.map((a) => validate(a, v, path, ctx).errors);
    const valid = results.filter((r) => r.length === 0).length;
    if (valid !== 1) {
      out.push(
        composite(
          `${JSON.stringify(path)} must validate one and only one schema (oneOf). ${valid === 0 ? 'Found none valid' : `Found ${valid} valid alternatives`}`,
        ),
      );
      if (valid === 0) out.push(...fewest(results));
    }
  }
  if (s.allOf?.length) {
    const results = s.allOf.map((a) => validate(a, v, path, ctx).errors);
    const valid = results.filter((r) => r.length === 0).length;
    for (const r of results) out.push(...r);
    if (valid !== results.length)
      out.push(composite(`${JSON.stringify(path)} must validate all the schemas (allOf)${valid === 0 ? '. None validated' : ''}`));
  }
  if (s.not && validate(s.not, v, path, ctx).errors.length === 0) out.push(composite(`${JSON.stringify(path)} must not validate the schema (not)`));
  return out;
}

function arrayErrors(s: Schema, v: unknown[], path: string, ctx: Ctx): SchemaError[] {
  const out: SchemaError[] = [];
  if (s.items) v.forEach((item, i) => out.push(...validate(s.items!, item, `${path}[${i}]`, ctx).errors));
  if (s.minItems !== undefined && v.length < s.minItems)
    out.push(invalid(path, v.length, `${path} in body should have at least ${s.minItems} items`));
  if (s.maxItems !== undefined && v.length > s.maxItems)
    out.push({ field: path, type: 'TooMany', body: `Too many: ${v.length}: must have at most ${s.maxItems} items` });
  return out;
}

function objectErrors(s: Schema, v: Record<string, unknown>, path: string, ctx: Ctx): SchemaError[] {
  const out: SchemaError[] = [];
  const n = Object.keys(v).length;
  if (s.minProperties !== undefined && n < s.minProperties)
    out.push(invalid(path, n, `${path} in body should have at least ${s.minProperties} properties`));
  if (s.maxProperties !== undefined && n > s.maxProperties)
    out.push({ field: path, type: 'TooMany', body: `Too many: ${n}: must have at most ${s.maxProperties} items` });
  const extra = typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
  if (extra) for (const [k, val] of Object.entries(v)) if (!s.properties?.[k]) out.push(...validate(extra, val, `${path}.${k}`, ctx).errors);
  for (const [name, ps] of Object.entries(s.properties ?? {})) if (name in v) out.push(...validate(ps, v[name], child(path, name), ctx).errors);
  for (const k of s.required ?? []) if (!(k in v)) out.push({ field: child(path, k), type: 'Required', body: 'Required value' });
  return out;
}

interface Ctx {
  pattern: (p: string) => (s: string) => boolean;
}

function validate(s: Schema, v: unknown, path: string, ctx: Ctx): Result {
  if (v === null || v === undefined) return { errors: [...typeErrors(s, null, path), ...enumErrors(s, null, path)] };
  const errors = [...typeErrors(s, v, path), ...compositeErrors(s, v, path, ctx)];
  const t = jsonType(v);
  if (t === 'string') errors.push(...stringErrors(s, v as string, path, ctx.pattern));
  if (t === 'integer' || t === 'number') errors.push(...numberErrors(s, Number(v), path));
  if (t === 'array') errors.push(...arrayErrors(s, v as unknown[], path, ctx));
  errors.push(...enumErrors(s, v, path));
  if (t === 'object' && isObject(v)) errors.push(...objectErrors(s, v, path, ctx));
  return { errors };
}

/**
 * Validates a decoded object against its schema. `pattern` compiles a schema pattern (Go's regexp syntax,
 * RE2) into a search; it is passed in so that compiled patterns can be cached by the caller.
 */
export function validateSchema(schema: Schema, value: unknown, pattern: (p: string) => (s: string) => boolean): SchemaError[] {
  return validate(schema, value, '', { pattern }).errors;
}
