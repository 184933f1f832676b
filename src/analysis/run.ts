// Running analyzers and shaping their messages as istioctl does: every analyzer over the whole
// input, then messages outside the analyzed namespace dropped, suppressions applied (flags and the
// `galley.mesh.io/analyze-suppress` annotation), sorted by level, code and resource, de-duplicated.
import { isObject } from '../config/values';
import { parse as parseYaml } from 'yaml';
import { type AnalysisMeshConfig, AnalysisContext, type Analyzer, fullName, type Message, type Resource } from './model';
import { goSprintf, LEVEL_ORDER } from './messages';

export const SUPPRESS_ANNOTATION = 'galley.mesh.io/analyze-suppress';

export interface Suppression {
  code: string;
  /** `Kind name.namespace` or `Kind namespace/name`, with `*` globbing. */
  resource: string;
}

export interface AnalyzeOptions {
  analyzers: readonly Analyzer[];
  /** Only messages about resources in this namespace (and cluster-scoped ones); undefined: all namespaces. */
  namespace?: string;
  suppressions: readonly Suppression[];
  mesh: AnalysisMeshConfig;
  meshNamespace: string;
  /** performance.now() deadline, checked between analyzers: past it, analysis stops with an error. */
  deadline?: number;
}

export interface AnalysisResult {
  /** Each with the analyzer that reported it. */
  messages: Array<Message & { analyzer: string }>;
  executed: string[];
}

export class AnalysisTimeout extends Error {}

/** Istio's mesh config defaults for the fields analysis reads (mesh naming). */
export function defaultMeshConfig(): AnalysisMeshConfig {
  return {
    rootNamespace: 'mesh-system',
    ingressControllerMode: 'STRICT',
    ingressService: 'mesh-ingressgateway',
    proxyMetadata: {},
    defaultImageType: '',
    defaultAccessLogProviders: [],
    extensionProviders: [],
  };
}

/** mesh.ApplyMeshConfigDefaults for the fields analysis reads; throws on YAML that is not a mapping. */
export function parseMeshConfig(text: string): AnalysisMeshConfig {
  const v: unknown = parseYaml(text) ?? {};
  if (!isObject(v)) throw new Error('mesh config must be a YAML mapping');
  const out = defaultMeshConfig();
  const str = (x: unknown, d: string): string => (typeof x === 'string' && x !== '' ? x : d);
  const dc = isObject(v.defaultConfig) ? v.defaultConfig : {};
  const dp = isObject(v.defaultProviders) ? v.defaultProviders : {};
  return {
    rootNamespace: str(v.rootNamespace, out.rootNamespace),
    ingressControllerMode: str(v.ingressControllerMode, out.ingressControllerMode),
    ingressService: str(v.ingressService, out.ingressService),
    proxyMetadata: isObject(dc.proxyMetadata)
      ? (Object.fromEntries(Object.entries(dc.proxyMetadata).map(([k, x]) => [k, String(x)])) as Record<string, string>)
      : {},
    defaultImageType: isObject(dc.image) && typeof dc.image.imageType === 'string' ? dc.image.imageType : '',
    defaultAccessLogProviders: Array.isArray(dp.accessLogging) ? dp.accessLogging.map(String) : [],
    extensionProviders: (Array.isArray(v.extensionProviders) ? v.extensionProviders : []).filter(isObject).map((p) => ({
      name: String(p.name ?? ''),
      type: Object.keys(p).find((k) => k !== 'name') ?? '',
    })),
  };
}

/** go-glob: `*` matches any run of characters. */
function glob(pattern: string, s: string): boolean {
  if (pattern === '*') return true;
  const re = new RegExp(
    '^' +
      pattern
        .split('*')
        .map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*') +
      '$',
  );
  return re.test(s);
}

/** The names a suppression may use for a resource: Istio's `Kind ns/name`, and its help's `Kind name.ns`. */
function suppressionNames(r: Resource): string[] {
  return r.namespace ? [`${r.kind} ${r.namespace}/${r.name}`, `${r.kind} ${r.name}.${r.namespace}`] : [`${r.kind} ${r.name}`];
}

function keep(m: Message, opts: AnalyzeOptions): boolean {
  const r = m.resource;
  if (opts.namespace !== undefined && r) {
    const ns = r.kind === 'Namespace' ? r.name : r.namespace;
    if (ns !== '' && ns !== opts.namespace) return false;
  }
  const annotated = r?.annotations[SUPPRESS_ANNOTATION];
  if (annotated && annotated.split(',').some((c) => c === '*' || c === m.type.code)) return false;
  for (const s of opts.suppressions) {
    if (!r || s.code !== m.type.code) continue;
    if (suppressionNames(r).some((n) => glob(s.resource, n))) return false;
  }
  return true;
}

/** Where a message points: `file:line` (no line for JSON files), the field's line when known. */
export function reference(m: Message): string | undefined {
  const o = m.resource?.origin;
  if (!o) return undefined;
  if (o.file.toLowerCase().endsWith('.json')) return o.file;
  const line = m.line || o.line;
  return line > 0 && o.file ? `${o.file}:${line}` : o.file;
}

export function originText(m: Message): string {
  if (!m.resource) return '';
  const ref = reference(m);
  return ` (${m.resource.kind} ${fullName(m.resource)}${ref ? ` ${ref}` : ''})`;
}

/** The message's text: its template filled with its parameters. */
export function messageText(m: Message): string {
  return goSprintf(m.type.template, m.params);
}

/** diag.Message.String: `Level [CODE] (origin) text`. */
export function messageString(m: Message): string {
  return `${m.type.level} [${m.type.code}]${originText(m)} ${messageText(m)}`;
}

function comparator(r: Resource): string {
  return `${r.kind}/${r.name}/${r.namespace}`;
}

/** diag.Messages.Sort then de-duplication by String(). */
export function sortAndDedupe<M extends Message>(ms: readonly M[]): M[] {
  const sorted = [...ms].sort((a, b) => {
    if (a.type.level !== b.type.level) return LEVEL_ORDER[a.type.level] - LEVEL_ORDER[b.type.level];
    if (a.type.code !== b.type.code) return a.type.code < b.type.code ? -1 : 1;
    if (!a.resource && b.resource) return -1;
    if (a.resource && !b.resource) return 1;
    if (a.resource && b.resource) {
      const ca = comparator(a.resource);
      const cb = comparator(b.resource);
      if (ca !== cb) return ca < cb ? -1 : 1;
    }
    const sa = messageString(a);
    const sb = messageString(b);
    return sa < sb ? -1 : sa > sb ? 1 : 0;
  });
  const out: M[] = [];
  for (const m of sorted) if (out.length === 0 || messageString(out[out.length - 1]!) !== messageString(m)) out.push(m);
  return out;
}

/**
 * The analysis one analyzer at a time: each step runs the next analyzer, the return value is the result.
 * A caller that must not hold its thread for the whole run (the daemon) yields between steps.
 */
export function* analysisSteps(resources: readonly Resource[], opts: AnalyzeOptions): Generator<string, AnalysisResult, void> {
  const ctx = new AnalysisContext(resources, opts.mesh, opts.meshNamespace);
  for (const a of opts.analyzers) {
    if (opts.deadline !== undefined && performance.now() > opts.deadline)
      throw new AnalysisTimeout(`analysis did not finish: stopped before ${a.name}`);
    ctx.current = a.name;
    a.analyze(ctx);
    yield a.name;
  }
  return { messages: sortAndDedupe(ctx.messages.filter((m) => keep(m, opts))), executed: opts.analyzers.map((a) => a.name) };
}

/** Runs the analyzers over `resources`. */
export function analyze(resources: readonly Resource[], opts: AnalyzeOptions): AnalysisResult {
  const steps = analysisSteps(resources, opts);
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}
