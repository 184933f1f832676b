// Kubernetes strategic merge patch (k8s.io/apimachinery/pkg/util/strategicpatch) applied to plain JSON with
// the struct schema of schema.gen.ts: lists with a patch merge key (containers by name, env by name, ports by
// containerPort, volumeMounts by mountPath…) merge element by element, null deletes, `$patch: replace|delete`
// and `$retainKeys`/`$deleteFromPrimitiveList` directives apply, and merged lists keep Kubernetes' ordering
// (patch order, with server-only items placed by their position in the original).
import { lookupField, type Json, type JsonObject } from './typed';

export class PatchError extends Error {}

const DIRECTIVE = '$patch';
const RETAIN_KEYS = '$retainKeys';
const DELETE_PRIMITIVE = '$deleteFromPrimitiveList/';
const SET_ORDER = '$setElementOrder/';

/** A schema position: a struct name, a map's element type, or unknown (merged as plain maps). */
type Schema = { struct: string } | { mapOf: string } | undefined;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function kindOf(v: unknown): 'map' | 'list' | 'scalar' {
  return Array.isArray(v) ? 'list' : isObject(v) ? 'map' : 'scalar';
}

function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

/** Where a field's value lives in the schema, and its patch strategy. */
function fieldMeta(schema: Schema, key: string): { sub: Schema; elem?: Schema; strategy?: string; mergeKey?: string } {
  if (!schema) return { sub: undefined };
  if ('mapOf' in schema) return { sub: typeSchema(schema.mapOf) };
  const f = lookupField(schema.struct, key);
  if (!f) return { sub: undefined };
  let t = f.type.replace(/^\*/, '');
  if (t.startsWith('[]')) {
    t = t.slice(2).replace(/^\*/, '');
    return { sub: undefined, elem: typeSchema(t), strategy: f.patchStrategy, mergeKey: f.patchMergeKey };
  }
  return { sub: typeSchema(t), strategy: f.patchStrategy };
}

function typeSchema(t: string): Schema {
  if (t.startsWith('map:')) return { mapOf: t.slice(4) };
  if (/^(string|int|float|bool|quantity|intstr|time|bytes|raw)$/.test(t)) return undefined;
  return { struct: t };
}

/** Applies `patch` to `original` (neither is modified) as a strategic merge patch for `structName`. */
export function strategicMerge(original: JsonObject, patch: JsonObject, structName: string): JsonObject {
  return mergeMap(clone(original), clone(patch), { struct: structName });
}

function discardNulls(v: Json): Json {
  if (isObject(v)) {
    const out: JsonObject = {};
    for (const [k, x] of Object.entries(v)) if (x !== null) out[k] = discardNulls(x);
    return out;
  }
  if (Array.isArray(v)) return v.map(discardNulls);
  return v;
}

function mergeMap(original: JsonObject, patch: JsonObject, schema: Schema): JsonObject {
  if (DIRECTIVE in patch) {
    const d = patch[DIRECTIVE];
    if (d === 'replace') {
      const out = { ...patch };
      delete out[DIRECTIVE];
      return out;
    }
    if (d === 'delete') return {};
    if (d !== 'merge') throw new PatchError(`unknown patch type: ${JSON.stringify(d)}`);
    delete patch[DIRECTIVE];
  }
  if (RETAIN_KEYS in patch) {
    const keep = patch[RETAIN_KEYS];
    if (!Array.isArray(keep)) throw new PatchError('$retainKeys must be a list');
    for (const k of Object.keys(original)) if (!keep.includes(k)) delete original[k];
    delete patch[RETAIN_KEYS];
  }
  for (const k of Object.keys(patch)) {
    if (k.startsWith(SET_ORDER)) delete patch[k];
  }
  for (const [k, patchV] of Object.entries(patch)) {
    if (k.startsWith(DELETE_PRIMITIVE)) {
      const field = k.slice(DELETE_PRIMITIVE.length);
      const cur = original[field];
      if (Array.isArray(cur) && Array.isArray(patchV)) {
        original[field] = cur.filter((x) => !patchV.some((p) => JSON.stringify(p) === JSON.stringify(x)));
      }
      continue;
    }
    if (patchV === null) {
      delete original[k];
      continue;
    }
    if (!(k in original)) {
      original[k] = discardNulls(patchV);
      continue;
    }
    const origV = original[k];
    if (kindOf(origV) !== kindOf(patchV)) {
      original[k] = patchV;
      continue;
    }
    const meta = fieldMeta(schema, k);
    if (isObject(origV) && isObject(patchV)) {
      original[k] = mergeMap(origV, patchV, meta.sub);
    } else if (Array.isArray(origV) && Array.isArray(patchV)) {
      original[k] = meta.strategy?.split(',').includes('merge') ? mergeSlice(origV, patchV, meta.elem, meta.mergeKey ?? '') : patchV;
    } else {
      original[k] = patchV;
    }
  }
  return original;
}

function keyOf(item: Json, mergeKey: string): string | undefined {
  if (!isObject(item)) return JSON.stringify(item);
  return mergeKey in item ? JSON.stringify(item[mergeKey]) : undefined;
}

function indexIn(list: Json[], item: Json, mergeKey: string): number {
  const k = keyOf(item, mergeKey);
  return list.findIndex((x) => keyOf(x, mergeKey) === k);
}

function mergeSlice(original: Json[], patch: Json[], elem: Schema, mergeKey: string): Json[] {
  if (original.length === 0 && patch.length === 0) return original;
  const isMaps = [...original, ...patch].some(isObject);
  let merged: Json[];
  if (!isMaps) {
    merged = [];
    for (const x of [...original, ...patch]) if (!merged.some((y) => JSON.stringify(y) === JSON.stringify(x))) merged.push(x);
  } else {
    if (!mergeKey) throw new PatchError('cannot merge lists without merge key');
    // Items carrying $patch directives.
    const plainPatch: Json[] = [];
    let work = [...original];
    for (const item of patch) {
      if (isObject(item) && DIRECTIVE in item) {
        const d = item[DIRECTIVE];
        if (d === 'replace') {
          return patch.filter((x) => !(isObject(x) && DIRECTIVE in x));
        }
        if (d === 'delete') {
          const k = keyOf(item, mergeKey);
          work = work.filter((x) => keyOf(x, mergeKey) !== k);
          continue;
        }
        throw new PatchError(`unknown patch type in list: ${JSON.stringify(d)}`);
      }
      plainPatch.push(item);
    }
    for (const item of plainPatch) {
      if (!isObject(item) || !(mergeKey in item))
        throw new PatchError(`map: ${JSON.stringify(item)} does not contain declared merge key: ${mergeKey}`);
      const at = indexIn(work, item, mergeKey);
      if (at >= 0 && isObject(work[at])) work[at] = mergeMap(work[at] as JsonObject, item, elem);
      else work.push(item);
    }
    merged = work;
    patch = plainPatch;
  }
  // Kubernetes' order: items named in the patch in patch order, server-only items interleaved by their place in
  // the original list.
  const inPatch = (x: Json) => indexIn(patch, x, mergeKey) >= 0;
  const patchItems = merged.filter(inPatch).sort((a, b) => indexIn(patch, a, mergeKey) - indexIn(patch, b, mergeKey));
  const serverOnly = merged.filter((x) => !inPatch(x)).sort((a, b) => indexIn(original, a, mergeKey) - indexIn(original, b, mergeKey));
  return mergeSorted(serverOnly, patchItems, original, mergeKey);
}

function mergeSorted(left: Json[], right: Json[], serverOrder: Json[], mergeKey: string): Json[] {
  const out: Json[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length || j < right.length) {
    if (i >= left.length) out.push(right[j++]!);
    else if (j >= right.length) out.push(left[i++]!);
    else {
      const li = indexIn(serverOrder, left[i]!, mergeKey);
      const ri = indexIn(serverOrder, right[j]!, mergeKey);
      if (li >= 0 && ri >= 0 && li < ri) out.push(left[i++]!);
      else out.push(right[j++]!);
    }
  }
  return out;
}
