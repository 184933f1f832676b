// Label selector semantics shared by registries and the push context.

export type Labels = Readonly<Record<string, string>>;

/** True when every key/value of `selector` is present in `labels`; an empty selector selects all. */
export function selectorMatches(selector: Labels | undefined, labels: Labels): boolean {
  if (!selector) return true;
  for (const [k, v] of Object.entries(selector)) {
    if (labels[k] !== v) return false;
  }
  return true;
}

export function isEmptySelector(selector: Labels | undefined): boolean {
  return !selector || Object.keys(selector).length === 0;
}
