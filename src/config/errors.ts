// Problems found in configuration, shaped so that every message can say where: the file and
// document, the resource (`Kind/namespace/name`) and the field path inside it.

/** A problem in one field of one resource; `field` is a path like `spec.http[0].route[1].weight`. */
export interface FieldError {
  field: string;
  message: string;
  /** Set on findings `meshctl analyze` reports under their own code (Istio's AnalysisAwareError). */
  analysis?: AnalysisFinding;
}

export interface AnalysisFinding {
  type: 'VirtualServiceUnreachableRule' | 'VirtualServiceIneffectiveMatch';
  params: string[];
}

export interface ConfigError {
  /** File path (or other origin, e.g. `orchestrator`). */
  source: string;
  /** Document position in the source: `[2]` for the third document, `[2].items[0]` inside a List. */
  document?: string;
  /** 1-based line where the document starts, when known. */
  line?: number;
  /** `Kind/namespace/name` when the resource could be identified. */
  resource?: string;
  /** Field path inside the resource. */
  field?: string;
  message: string;
}

/** `cfg/vs.yaml[1] (line 12) VirtualService/default/reviews: spec.http[0].timeout: duration must be greater than 1ms` */
export function formatConfigError(e: ConfigError): string {
  let where = e.source + (e.document ?? '');
  if (e.line !== undefined) where += ` (line ${e.line})`;
  if (e.resource) where += ` ${e.resource}`;
  return e.field ? `${where}: ${e.field}: ${e.message}` : `${where}: ${e.message}`;
}

/** `file.yaml[3]`: the source and document position that configs carry in `Config.source`. */
export function documentSource(source: string, document: string): string {
  return source + document;
}

/** Path segment for a map key, Kubernetes style: `labels[app]`. */
export function keyPath(base: string, key: string): string {
  return `${base}[${key}]`;
}

export function indexPath(base: string, i: number): string {
  return `${base}[${i}]`;
}
