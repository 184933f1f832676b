// Schema validation as analyzers (Istio's analyzers/schema): one per mesh kind, reporting the
// config model's errors as IST0106 and its warnings as IST0133, with VirtualService rules that are
// never reached under their own codes (IST0130, IST0131). The message names the field's line.
import { MESH_KINDS } from '../../config/schemas';
import type { Kind } from '../../config/types';
import { validateConfig } from '../../config/validate';
import type { FieldError } from '../../config/errors';
import type { FieldPath } from '../model';
import { MESSAGES } from '../messages';
import type { Analyzer, AnalysisContext, Resource } from '../model';
import { lineOf } from '../util';

/** `spec.http[0].match[1].headers[x-user]` → ['spec', 'http', 0, 'match', 1, 'headers', 'x-user']. */
export function fieldPath(field: string): FieldPath {
  const out: Array<string | number> = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[([^\]]*)\]/g)) {
    if (m[1] !== undefined) out.push(m[1]);
    else out.push(/^\d+$/.test(m[2]!) ? Number(m[2]) : m[2]!);
  }
  return out;
}

function report(ctx: AnalysisContext, r: Resource, e: FieldError, isError: boolean): void {
  const line = lineOf(r, fieldPath(e.field));
  if (e.analysis?.type === 'VirtualServiceUnreachableRule') ctx.report(MESSAGES.VirtualServiceUnreachableRule, r, e.analysis.params, line);
  else if (e.analysis?.type === 'VirtualServiceIneffectiveMatch') ctx.report(MESSAGES.VirtualServiceIneffectiveMatch, r, e.analysis.params, line);
  else ctx.report(isError ? MESSAGES.SchemaValidationError : MESSAGES.SchemaWarning, r, [e.message], line);
}

function schemaAnalyzer(kind: Kind): Analyzer {
  return {
    name: `schema.ValidationAnalyzer.${kind}`,
    description: `Runs schema validation as an analyzer on '${kind}' resources`,
    inputs: [kind],
    analyze(ctx) {
      for (const r of ctx.list(kind)) {
        if (!r.config) continue;
        // a file has met no API server: its CRD schema and rules apply here (cluster objects passed them)
        const v = validateConfig(r.config, r.origin ? { object: r.object } : {});
        for (const e of v.errors) report(ctx, r, e, true);
        for (const w of v.warnings) report(ctx, r, w, false);
      }
    },
  };
}

export const schemaAnalyzers: readonly Analyzer[] = MESH_KINDS.map(schemaAnalyzer);
