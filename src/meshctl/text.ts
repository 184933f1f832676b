// Text shapes meshctl shares with istioctl's Go libraries: hashicorp/go-multierror lists, Go's %q of
// a string map, and the documentation links messages point at.
import { CONFIG_ANALYSIS_DOCS } from '../analysis/messages';
import { goQuote } from '../lib/duration';

/** Where messages send readers (istioctl's pkg/url, under mesh.io for release 1.26). */
export const DOCS = {
  configAnalysis: CONFIG_ANALYSIS_DOCS,
  deploymentRequirements: 'https://mesh.io/v1.26/docs/ops/deployment/application-requirements/',
  protocolSelection: 'https://mesh.io/v1.26/docs/ops/configuration/traffic-management/protocol-selection/',
} as const;

/** go-multierror's default format: `1 error occurred:\n\t* a\n\n` / `2 errors occurred:\n\t* a\n\t* b\n\n`. */
export function multiError(errs: readonly string[]): string {
  if (errs.length === 1) return `1 error occurred:\n\t* ${errs[0]}\n\n`;
  return `${errs.length} errors occurred:\n\t${errs.map((e) => `* ${e}`).join('\n\t')}\n\n`;
}

/** fmt's %v (or %q with `quote`) of a map[string]string: keys sorted, `map[k:v k2:v2]`. */
export function goMap(m: Readonly<Record<string, unknown>>, quote = false): string {
  const q = (s: string): string => (quote ? goQuote(s) : s);
  return `map[${Object.keys(m)
    .sort()
    .map((k) => `${q(k)}:${q(String(m[k]))}`)
    .join(' ')}]`;
}
