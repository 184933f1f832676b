// One Kubernetes-style object in, the verdict out: the check the validating webhook runs on an
// admission request and `meshctl validate` runs on each document of a file. Both go through the
// same conversion and the same rules as the daemon's config sources.
import { convertObject, type Origin } from '../parse';
import { MESH_KINDS } from '../schemas';
import type { Config } from '../types';
import { isObject } from '../values';
import { validateConfig } from './index';

export interface ObjectValidation {
  /** The resource as mesh reads it, when its apiVersion/kind is one mesh knows. */
  config?: Config;
  /** `field: message` for each problem that makes the object invalid; empty when valid. */
  errors: string[];
  /** The same problems as bare messages, as Istio's admission webhook reports them (no field path). */
  messages: string[];
  warnings: string[];
  /** apiVersion/kind names no type mesh validates (Istio: `unrecognized type`). */
  unknownType?: boolean;
}

export interface ObjectValidationOptions {
  /** Where the object came from, for the resource's `source`. */
  origin?: Origin;
  /**
   * Unknown fields of mesh (Istio CRD) kinds, at the top level and inside the spec, are errors: Istio's
   * strict decoding in `istioctl validate`. Kubernetes kinds keep the daemon's view (a warning).
   */
  strict?: boolean;
  /**
   * Apply the kind's CRD schema and CEL rules first (`meshctl validate` on files: no API server has seen the
   * object). The webhook leaves them out: the API server ran them before calling it.
   */
  crd?: boolean;
}

/** The top-level fields of a resource; Istio rejects any other in `istioctl validate`. */
export const RESOURCE_FIELDS: ReadonlySet<string> = new Set(['apiVersion', 'kind', 'metadata', 'spec', 'status']);

const joined = (e: { field?: string; message: string }): string => (e.field ? `${e.field}: ${e.message}` : e.message);

export function validateObject(obj: unknown, opts: ObjectValidationOptions = {}): ObjectValidation {
  const converted = convertObject(obj, opts.origin ?? { source: 'object' });
  if (!converted.config) {
    if (converted.errors.length === 0) return { errors: [], messages: [], warnings: converted.warnings.map(joined), unknownType: true };
    return { errors: converted.errors.map(joined), messages: converted.errors.map((e) => e.message), warnings: converted.warnings.map(joined) };
  }
  const errors: string[] = [];
  const strict = opts.strict === true && MESH_KINDS.includes(converted.config.kind);
  if (strict && isObject(obj)) {
    for (const k of Object.keys(obj)) if (!RESOURCE_FIELDS.has(k)) errors.push(`unknown field ${JSON.stringify(k)}`);
  }
  const v = validateConfig(converted.config, { strictFields: strict, ...(opts.crd && isObject(obj) ? { object: obj } : {}) });
  return {
    config: converted.config,
    errors: [...errors, ...v.errors.map(joined)],
    messages: [...errors, ...v.errors.map((e) => e.message)],
    warnings: [...converted.warnings.map(joined), ...v.warnings.map(joined)],
  };
}
