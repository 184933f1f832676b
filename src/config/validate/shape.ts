// Structural check of a spec against the shape of its API message: the types Istio's protobuf
// decoding would insist on (lists are lists, ports are integers, enums are known names, one field
// of a oneof). Semantic rules run only on specs that pass, so they can trust the types.
// Unknown fields are warnings: Istio decodes with unknown fields allowed, but a typo deserves a word.
// Match conditions are the exception: there a misspelt field silently widens what matches (`{exac: x}`
// would become "header present"), so unknown fields in them are errors, as the API server's strict field
// validation makes them on Kubernetes.
import { DurationError, parseDurationNs } from '../../lib/duration';
import { isObject, typeName } from '../values';
import { at, dot, key, type Report } from './report';

export type Shape =
  | { t: 'string' }
  | { t: 'bool' }
  | { t: 'int'; min: number; max: number; name: string }
  | { t: 'number' }
  | { t: 'duration' }
  | { t: 'enum'; values: readonly string[] }
  | { t: 'list'; of: Shape }
  | { t: 'map'; of: Shape; keys?: 'uint32' }
  | { t: 'object'; fields: Readonly<Record<string, Shape>>; oneofs?: readonly (readonly string[])[]; strict?: string }
  | { t: 'intOrString' }
  | { t: 'any' };

export const str: Shape = { t: 'string' };
export const bool: Shape = { t: 'bool' };
export const num: Shape = { t: 'number' };
export const dur: Shape = { t: 'duration' };
export const any: Shape = { t: 'any' };
export const intOrString: Shape = { t: 'intOrString' };
export const u32: Shape = { t: 'int', min: 0, max: 4294967295, name: 'uint32' };
export const i32: Shape = { t: 'int', min: -2147483648, max: 2147483647, name: 'int32' };
export const u64: Shape = { t: 'int', min: 0, max: Number.MAX_SAFE_INTEGER, name: 'uint64' };
export const i64: Shape = { t: 'int', min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER, name: 'int64' };
export const en = (...values: string[]): Shape => ({ t: 'enum', values });
export const list = (of: Shape): Shape => ({ t: 'list', of });
export const map = (of: Shape, keys?: 'uint32'): Shape => (keys ? { t: 'map', of, keys } : { t: 'map', of });
export const obj = (fields: Record<string, Shape>, oneofs?: string[][]): Shape =>
  oneofs ? { t: 'object', fields, oneofs } : { t: 'object', fields };
/** An object whose unknown fields are errors: a match condition (`what` names it in the message). */
export const matchObj = (what: string, fields: Record<string, Shape>, oneofs?: string[][]): Shape => ({
  ...(obj(fields, oneofs) as Extract<Shape, { t: 'object' }>),
  strict: what,
});
export const strs = list(str);
export const strMap = map(str);

/** Checks `value` at `path` against `shape`; problems go to the report. */
export function checkShape(value: unknown, shape: Shape, path: string, r: Report): void {
  if (value === undefined) return;
  const wrongType = (want: string): void => r.error(path, `must be of type ${want}, got ${typeName(value)}`);
  switch (shape.t) {
    case 'any':
      return;
    case 'string':
      if (typeof value !== 'string') wrongType('string');
      return;
    case 'bool':
      if (typeof value !== 'boolean') wrongType('boolean');
      return;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) wrongType('number');
      return;
    case 'int':
      if (typeof value !== 'number' || !Number.isInteger(value)) wrongType('integer');
      else if (value < shape.min || value > shape.max) r.error(path, `value ${value} out of range for ${shape.name} (${shape.min}..${shape.max})`);
      return;
    case 'intOrString':
      if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) wrongType('integer or string');
      return;
    case 'duration':
      if (typeof value !== 'string') {
        wrongType('duration string (e.g. 1s, 100ms)');
        return;
      }
      try {
        parseDurationNs(value);
      } catch (e) {
        if (e instanceof DurationError) r.error(path, e.message);
        else throw e;
      }
      return;
    case 'enum':
      if (typeof value !== 'string') wrongType('string');
      else if (!shape.values.includes(value)) r.error(path, `invalid value ${JSON.stringify(value)}, must be one of ${shape.values.join(', ')}`);
      return;
    case 'list':
      if (!Array.isArray(value)) {
        wrongType('array');
        return;
      }
      value.forEach((v, i) => {
        if (v === null) r.error(at(path, i), 'must not be null');
        else checkShape(v, shape.of, at(path, i), r);
      });
      return;
    case 'map':
      if (!isObject(value)) {
        wrongType('object (a map)');
        return;
      }
      for (const [k, v] of Object.entries(value)) {
        if (shape.keys === 'uint32' && !(/^(0|[1-9][0-9]*)$/.test(k) && Number(k) <= 4294967295))
          r.error(key(path, k), `invalid map key ${JSON.stringify(k)}: must be an unsigned integer`);
        if (v === null) r.error(key(path, k), 'must not be null');
        else checkShape(v, shape.of, key(path, k), r);
      }
      return;
    case 'object': {
      if (!isObject(value)) {
        wrongType('object');
        return;
      }
      for (const [k, v] of Object.entries(value)) {
        const fs = shape.fields[k];
        if (!fs) {
          if (shape.strict !== undefined) {
            const known = Object.keys(shape.fields).join(', ');
            r.error(
              dot(path, k),
              `unknown field ${JSON.stringify(k)} in ${shape.strict} (known fields: ${known}): a misspelt match condition would match more than intended`,
            );
          } else (r.strictFields ? r.error : r.warn).call(r, dot(path, k), `unknown field ${JSON.stringify(k)}`);
          continue;
        }
        checkShape(v, fs, dot(path, k), r);
      }
      for (const group of shape.oneofs ?? []) {
        const set = group.filter((f) => value[f] !== undefined);
        if (set.length > 1) r.error(path, `only one of ${group.join(', ')} may be set, found ${set.join(' and ')}`);
      }
      return;
    }
  }
}
