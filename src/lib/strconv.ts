// Go's strconv.ParseBool, which Istio uses for every boolean it reads from text (annotations, labels, env
// vars, flags, --set values): exactly these twelve spellings, nothing else (not "yes", not "on").
const TRUE = new Set(['1', 't', 'T', 'TRUE', 'true', 'True']);
const FALSE = new Set(['0', 'f', 'F', 'FALSE', 'false', 'False']);

/** The boolean Go would parse `s` as, or undefined where strconv.ParseBool fails. */
export function goBool(s: string): boolean | undefined {
  if (TRUE.has(s)) return true;
  if (FALSE.has(s)) return false;
  return undefined;
}

/** strconv.ParseBool's error text for `s` (Go quotes with %q; JSON quoting agrees for printable text). */
export function goBoolError(s: string): string {
  return `strconv.ParseBool: parsing ${JSON.stringify(s)}: invalid syntax`;
}
