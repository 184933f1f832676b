// Analysis messages in resource status, as istiod writes them with PILOT_ENABLE_ANALYSIS
// (pilot/pkg/status IstioGenerationProvider.SetValidationMessages, diag.Message.AnalysisMessageBase):
//
// - `status.validationMessages` is replaced wholesale by the messages about the resource, each
//   `{documentationUrl, level, type: {code}}` (level upper-cased: ERROR, WARNING, INFO; the URL has no
//   `?ref=` because istiod sets no DocRef); no messages means no `validationMessages` field (protojson
//   omits an empty list);
// - `status.observedGeneration` is the generation the messages were computed for, written as a string
//   (the status is marshalled with protojson, which writes int64 as a JSON string; the CRDs declare the
//   field int-or-string for that reason);
// - every other status field (conditions of other writers) is kept. Pure.
import { CONFIG_ANALYSIS_DOCS } from './messages';
import type { Message } from './model';

export interface AnalysisMessageBase {
  documentationUrl: string;
  level: 'ERROR' | 'WARNING' | 'INFO';
  type: { code: string };
}

export function analysisMessageBase(m: Pick<Message, 'type'>): AnalysisMessageBase {
  return {
    documentationUrl: `${CONFIG_ANALYSIS_DOCS}/${m.type.code.toLowerCase()}/`,
    level: m.type.level.toUpperCase() as AnalysisMessageBase['level'],
    type: { code: m.type.code },
  };
}

type Status = Record<string, unknown>;

/** The status to write: `live` with observedGeneration and validationMessages set as istiod sets them. */
export function statusWithMessages(live: unknown, generation: number, messages: readonly AnalysisMessageBase[]): Status {
  const out: Status = live && typeof live === 'object' && !Array.isArray(live) ? { ...(live as Status) } : {};
  out.observedGeneration = String(generation);
  if (messages.length > 0)
    out.validationMessages = messages.map((m) => ({ documentationUrl: m.documentationUrl, level: m.level, type: { code: m.type.code } }));
  else delete out.validationMessages;
  return out;
}

function canonical(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, canonical((v as Status)[k])]),
    );
  }
  return v;
}

/** Same status (key order aside; observedGeneration 3 and "3" are the same value). */
export function sameStatus(a: unknown, b: unknown): boolean {
  const norm = (s: unknown): unknown => {
    if (!s || typeof s !== 'object' || Array.isArray(s)) return s ?? {};
    const o = { ...(s as Status) };
    if (typeof o.observedGeneration === 'number') o.observedGeneration = String(o.observedGeneration);
    return o;
  };
  return JSON.stringify(canonical(norm(a))) === JSON.stringify(canonical(norm(b)));
}
