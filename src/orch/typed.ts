// Orchestrator (Kubernetes) objects as Go's typed clients see them. Decoding JSON into a Go struct and
// encoding it again drops unknown fields, fills in fields that are not `omitempty` (`creationTimestamp: null`,
// `status: {}`, `resources: {}`, `divisor: "0"`), canonicalizes quantities and orders fields as declared.
// `normalize` does that round trip on plain JSON, so our output equals what kubectl/istioctl print.
import { canonicalQuantity, QuantityError } from './quantity';
import { STRUCTS } from './schema.gen';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export interface FieldSpec {
  json: string;
  type: string;
  omitempty: boolean;
  inline: boolean;
  patchStrategy?: string;
  patchMergeKey?: string;
  /** The Go struct field name (templates reach fields by it: `.Spec.Containers`, `.HTTPGet`). */
  goName: string;
}

const EXTRA: Record<string, ReadonlyArray<readonly string[]>> = {
  // core/v1 List is metav1.List: items are raw objects.
  'core.List': [
    ['', 'meta.TypeMeta', 'i'],
    ['metadata', 'meta.ListMeta', 'o'],
    ['items', '[]raw'],
  ],
};

const cache = new Map<string, FieldSpec[]>();

export function structFields(name: string): FieldSpec[] {
  let fields = cache.get(name);
  if (fields) return fields;
  const rows = STRUCTS[name] ?? EXTRA[name];
  if (!rows) throw new Error(`no schema for ${name}`);
  fields = rows.map(([json, type, flags = '', patchStrategy, patchMergeKey, goName]) => ({
    json: json!,
    type: type!,
    omitempty: flags.includes('o'),
    inline: flags.includes('i'),
    patchStrategy: patchStrategy || undefined,
    patchMergeKey: patchMergeKey || undefined,
    goName: goName || json!.charAt(0).toUpperCase() + json!.slice(1),
  }));
  cache.set(name, fields);
  return fields;
}

/** Field of a struct by JSON name, looking through inline (embedded) structs. */
export function lookupField(structName: string, json: string): FieldSpec | undefined {
  for (const f of structFields(structName)) {
    if (f.inline) {
      const inner = lookupField(f.type, json);
      if (inner) return inner;
    } else if (f.json === json) return f;
  }
  return undefined;
}

export class DecodeError extends Error {}

const OMIT = Symbol('omit');

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describeJson(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'object') return 'object';
  return typeof v;
}

export interface NormalizeOptions {
  /**
   * The value came from YAML through sigs.k8s.io/yaml, which turns numbers and booleans into strings where the
   * Go field is a string (`value: 8080` in an env var, `prometheus.io/scrape: true` in annotations).
   */
  fromYaml?: boolean;
}

/** Go json.Unmarshal followed by json.Marshal of `value` as struct `structName`. */
export function normalize(value: unknown, structName: string, opts: NormalizeOptions = {}): JsonObject {
  return normalizeStruct(value, structName, '', opts);
}

function normalizeStruct(value: unknown, structName: string, path: string, opts: NormalizeOptions): JsonObject {
  if (value !== undefined && value !== null && !isObject(value)) {
    throw new DecodeError(
      `json: cannot unmarshal ${describeJson(value)} into Go struct field ${path || structName} of type ${structName.replace(/^\w+\./, '')}`,
    );
  }
  const input = (value ?? {}) as JsonObject;
  const out: JsonObject = {};
  for (const f of structFields(structName)) {
    if (f.inline) {
      Object.assign(out, normalizeStruct(input, f.type, path, opts));
      continue;
    }
    const v = normalizeValue(input[f.json], f.type, f.omitempty, path ? `${path}.${f.json}` : f.json, opts);
    if (v !== OMIT) out[f.json] = v;
  }
  return out;
}

function normalizeValue(v: unknown, type: string, omitempty: boolean, path: string, opts: NormalizeOptions): Json | typeof OMIT {
  if (type.startsWith('*')) {
    if (v === undefined || v === null) return omitempty ? OMIT : null;
    const inner = normalizeValue(v, type.slice(1), false, path, opts);
    return inner === OMIT ? null : inner;
  }
  if (type.startsWith('[]')) {
    if (v === undefined || v === null) return omitempty ? OMIT : null;
    if (!Array.isArray(v)) throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type []${type.slice(2)}`);
    if (omitempty && v.length === 0) return OMIT;
    return v.map((x) => {
      const n = normalizeValue(x, type.slice(2), false, path, opts);
      return n === OMIT ? null : n;
    });
  }
  if (type.startsWith('map:')) {
    if (v === undefined || v === null) return omitempty ? OMIT : null;
    if (!isObject(v)) throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type map`);
    const keys = Object.keys(v).sort();
    if (omitempty && keys.length === 0) return OMIT;
    const out: JsonObject = {};
    for (const k of keys) {
      const n = normalizeValue(v[k], type.slice(4), false, `${path}.${k}`, opts);
      out[k] = n === OMIT ? null : n;
    }
    return out;
  }
  switch (type) {
    case 'string': {
      if (v === undefined || v === null) return omitempty ? OMIT : '';
      if (opts.fromYaml && (typeof v === 'number' || typeof v === 'boolean')) v = String(v);
      if (typeof v !== 'string') throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type string`);
      return omitempty && v === '' ? OMIT : v;
    }
    case 'int':
    case 'float': {
      if (v === undefined || v === null) return omitempty ? OMIT : 0;
      if (typeof v !== 'number')
        throw new DecodeError(
          `json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type ${type === 'int' ? 'int32' : 'float64'}`,
        );
      if (type === 'int' && !Number.isInteger(v))
        throw new DecodeError(`json: cannot unmarshal number ${v} into Go struct field ${path} of type int32`);
      return omitempty && v === 0 ? OMIT : v;
    }
    case 'bool': {
      if (v === undefined || v === null) return omitempty ? OMIT : false;
      if (typeof v !== 'boolean') throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type bool`);
      return omitempty && !v ? OMIT : v;
    }
    case 'quantity': {
      // A struct: never omitted; the zero quantity prints "0".
      if (v === undefined || v === null) return '0';
      if (typeof v !== 'string' && typeof v !== 'number')
        throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type resource.Quantity`);
      try {
        return canonicalQuantity(v);
      } catch (e) {
        if (e instanceof QuantityError) throw new DecodeError(`${path}: ${e.message}`);
        throw e;
      }
    }
    case 'intstr':
      if (v === undefined || v === null) return 0;
      if (typeof v !== 'string' && typeof v !== 'number')
        throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type intstr.IntOrString`);
      return v;
    case 'time':
      if (v === undefined || v === null || v === '') return null;
      if (typeof v !== 'string') throw new DecodeError(`json: cannot unmarshal ${describeJson(v)} into Go struct field ${path} of type metav1.Time`);
      return v;
    case 'bytes':
      if (v === undefined || v === null) return omitempty ? OMIT : null;
      return v as Json;
    case 'raw':
      if (v === undefined || (v === null && omitempty)) return OMIT;
      return v as Json;
  }
  return normalizeStruct(v, type, path, opts);
}

// ---- the kinds that carry a pod template ----

export interface KindInfo {
  struct: string;
}

/** Kinds decoded by type (by kind name, as Istio registers them unversioned), and their Go structs. */
export const WORKLOAD_KINDS: Readonly<Record<string, string>> = {
  Pod: 'core.Pod',
  ReplicationController: 'core.ReplicationController',
  Deployment: 'apps.Deployment',
  DaemonSet: 'apps.DaemonSet',
  ReplicaSet: 'apps.ReplicaSet',
  StatefulSet: 'apps.StatefulSet',
  Job: 'batch.Job',
  CronJob: 'batch.CronJob',
  List: 'core.List',
  DeploymentConfig: 'oapps.DeploymentConfig',
};

/** encoding/json's Marshal text of normalized JSON: HTML-safe escapes as Go writes them. */
export function goJsonText(v: Json): string {
  return JSON.stringify(v).replace(/[<>&\u2028\u2029]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
