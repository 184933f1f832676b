// The validation an API server applies to an Istio custom resource before any webhook sees it, for resources
// that reach mesh without one (--configDir, `meshctl validate -f`, `meshctl analyze` on files): Istio 1.26.8's
// CRD schemas (schemas.gen.ts) checked as apiextensions-apiserver's customResourceStrategy.Validate does: the
// OpenAPI schema, the list-type invariants, then the CEL rules, which it skips when the object is already
// structurally invalid (hasBlockingErr) and says so; nulls it would drop are dropped first. Status is not validated:
// the CRDs have the status subresource, so the API server drops a status given on create. Unknown fields are left to the spec shapes
// (validate/shape.ts), which report them as the daemon and `meshctl validate` always have.
import { searcher } from '../../lib/re2';
import type { Kind } from '../types';
import { isObject } from '../values';
import { NO_FIELD, type Schema, type SchemaError, validateSchema } from './openapi';
import { validateListTypes, validateRules } from './rules';
import { CRD_SCHEMAS_JSON } from './schemas.gen';

export type { SchemaError } from './openapi';

let schemas: Record<string, Schema> | undefined;

/** The schema of a kind Istio defines as a CRD; undefined for the Kubernetes kinds (Service, Pod...). */
export function crdSchema(kind: Kind): Schema | undefined {
  schemas ??= JSON.parse(CRD_SCHEMAS_JSON) as Record<string, Schema>;
  return schemas[kind];
}

const patterns = new Map<string, (s: string) => boolean>();

function pattern(p: string): (s: string) => boolean {
  let m = patterns.get(p);
  if (!m) {
    try {
      m = searcher(p);
    } catch {
      m = () => false;
    }
    patterns.set(p, m);
  }
  return m;
}

/**
 * PruneNonNullableNullsWithoutDefaults: the API server drops a field set to null unless its schema is nullable (Istio's
 * CRDs have no defaults), so `url: null` reads as no url at all. List items and map values stay, null or not.
 */
function pruneNulls(s: Schema | undefined, v: unknown): unknown {
  if (Array.isArray(v)) return v.map((x) => pruneNulls(s?.items, x));
  if (!isObject(v)) return v;
  const out: Record<string, unknown> = {};
  const extra = typeof s?.additionalProperties === 'object' ? s.additionalProperties : undefined;
  for (const [k, x] of Object.entries(v)) {
    const ps = s?.properties?.[k];
    if (x === null && ps && !ps.nullable) continue;
    out[k] = pruneNulls(ps ?? extra, x);
  }
  return out;
}

// hasBlockingErr: these mean the value does not have the shape the rules were written (and type-checked) for.
const BLOCKING = new Set<SchemaError['type']>(['NotSupported', 'Required', 'TooLong', 'TooMany', 'TypeInvalid']);

/**
 * The API server's verdict on creating `obj` (a decoded manifest: apiVersion, kind, metadata, spec...) of `kind`:
 * its field errors in the API server's words, empty when it would be accepted. Metadata is not checked here
 * (validateMetadata does it for every kind).
 */
export function validateCustomResource(kind: Kind, obj: Record<string, unknown>): SchemaError[] {
  const schema = crdSchema(kind);
  if (!schema) return [];
  const { status: _status, ...rest } = obj;
  const value = pruneNulls(schema, rest) as Record<string, unknown>;
  const errors = [...validateSchema(schema, value, pattern), ...validateListTypes(schema, value)];
  if (errors.some((e) => BLOCKING.has(e.type)))
    errors.push({
      field: NO_FIELD,
      type: 'Invalid',
      body: 'Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation',
    });
  else errors.push(...validateRules(schema, value));
  // field.ErrorList.ToAggregate drops repeated messages
  const seen = new Set<string>();
  return errors.filter((e) => {
    const key = `${e.field}: ${e.body}`;
    return seen.has(key) ? false : (seen.add(key), true);
  });
}
