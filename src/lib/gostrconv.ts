// Go's strconv.ParseBool, with its exact error text: what pflag's bool flags and Istio's pkg/env Bool variables
// accept (`1 t T TRUE true True`, `0 f F FALSE false False`), so a value means the same here as in Go.
import { goQuote } from './duration';

/** strconv.ParseBool's `invalid syntax`: callers wrap it with what was being parsed. */
export class BoolSyntaxError extends Error {}

const BOOL_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const BOOL_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

export function parseGoBool(s: string): boolean {
  if (BOOL_TRUE.has(s)) return true;
  if (BOOL_FALSE.has(s)) return false;
  throw new BoolSyntaxError(`strconv.ParseBool: parsing ${goQuote(s)}: invalid syntax`);
}
