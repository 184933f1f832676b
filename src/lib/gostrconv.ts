// Go's strconv.ParseBool, with its exact error text: what pflag's bool flags, Istio's pkg/env Bool variables,
// annotations, labels and --set values accept (`1 t T TRUE true True`, `0 f F FALSE false False`; not "yes",
// not "on"), so a value means the same here as in Go.
import { goQuote } from './duration';

/** strconv.ParseBool's `invalid syntax`: callers wrap it with what was being parsed. */
export class BoolSyntaxError extends Error {}

const BOOL_TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const BOOL_FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** The boolean Go would parse `s` as, or undefined where strconv.ParseBool fails. */
export function goBool(s: string): boolean | undefined {
  if (BOOL_TRUE.has(s)) return true;
  if (BOOL_FALSE.has(s)) return false;
  return undefined;
}

/** strconv.ParseBool's error text for `s`. */
export function goBoolError(s: string): string {
  return `strconv.ParseBool: parsing ${goQuote(s)}: invalid syntax`;
}

export function parseGoBool(s: string): boolean {
  const b = goBool(s);
  if (b === undefined) throw new BoolSyntaxError(goBoolError(s));
  return b;
}
