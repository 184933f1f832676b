// RFC 6902 JSON Patch between two JSON documents, as an admission webhook answers a mutation: objects
// are compared key by key (add, remove, replace of members), any other value that differs — arrays
// included — is replaced whole, which keeps the patch valid whatever the array changes were.
export type JsonPatchOp = { op: 'add' | 'replace'; path: string; value: unknown } | { op: 'remove'; path: string };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** RFC 6901 escaping of one reference token. */
export function pointerToken(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => k in b && equal(a[k], b[k]));
  }
  return false;
}

/** The operations that turn `from` into `to`. */
export function createJsonPatch(from: unknown, to: unknown, path = ''): JsonPatchOp[] {
  if (equal(from, to)) return [];
  if (!isObject(from) || !isObject(to)) return [{ op: 'replace', path, value: to }];
  const ops: JsonPatchOp[] = [];
  for (const k of Object.keys(from)) if (!(k in to)) ops.push({ op: 'remove', path: `${path}/${pointerToken(k)}` });
  for (const [k, v] of Object.entries(to)) {
    const p = `${path}/${pointerToken(k)}`;
    if (!(k in from)) ops.push({ op: 'add', path: p, value: v });
    else ops.push(...createJsonPatch(from[k], v, p));
  }
  return ops;
}
