// Renders a Helm-style chart (templates/*.yaml plus shared `_*.tpl` helpers) with the Go template engine and
// the functions Helm adds on top of sprig: include, tpl, toYaml, fromYaml, toJson, required. Helm parses all
// of a chart's templates into one set so a `define` in any file is visible to every other file; Helm renders
// a missing value as "" (not Go's "<no value>"). No network, no cluster lookups: `lookup` is not offered.
import { jsonToGoYaml } from '../goyaml';
import { parseGoYaml } from '../goyaml-parse';
import { BUILTINS } from './builtins';
import { execute, TemplateError, type FuncMap } from './exec';
import { parse, TemplateParseError, type TemplateSet } from './parse';
import { SPRIG, goJsonMarshal, strval } from './sprig';

export interface HelmRelease {
  name: string;
  namespace: string;
}

export interface ChartRender {
  /** Template path (`templates/deployment.yaml`) → rendered text, for every non-helper template. */
  files: Map<string, string>;
}

export class ChartRenderError extends Error {}

/** JSON-model values (what sigs.k8s.io/yaml gives Helm): integral numbers stay numbers. */
function jsonModel(v: unknown): unknown {
  if (typeof v === 'bigint') return Number(v);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), jsonModel(x)]));
  if (Array.isArray(v)) return v.map(jsonModel);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, jsonModel(x)]));
  return v;
}

function toYaml(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  return jsonToGoYaml(JSON.parse(goJsonMarshal(v))).replace(/\n$/, '');
}

/**
 * Renders every template of a chart. `files` maps chart-relative paths (`templates/x.yaml`, `files/y`) to
 * their text; `extra` adds functions the chart may call (e.g. the built-in CRD list).
 */
export function renderChart(
  chart: string,
  files: ReadonlyMap<string, string>,
  values: unknown,
  release: HelmRelease,
  extra: FuncMap = {},
): ChartRender {
  const templates = [...files.keys()].filter((p) => p.startsWith('templates/') && /\.(ya?ml|tpl|txt)$/.test(p)).sort();
  let set: TemplateSet = new Map();
  // Late-bound so include/tpl can run templates of the very set they belong to.
  const holder: { funcs?: FuncMap } = {};
  const helmFuncs: FuncMap = {
    toYaml,
    fromYaml: (s) => {
      try {
        return jsonModel(parseGoYaml(strval(s)) ?? {});
      } catch (e) {
        return { Error: (e as Error).message };
      }
    },
    toJson: (v) => goJsonMarshal(v),
    include: (name, data) => execute(set, strval(name), data, holder.funcs!),
    tpl: (text, data) => {
      const t = parse('tpl', strval(text), new Set(Object.keys(holder.funcs!)));
      return execute(new Map([...set, ...t]), 'tpl', data, holder.funcs!);
    },
    required: (msg, v) => {
      if (v === undefined || v === null || v === '') throw new TemplateError(strval(msg));
      return v;
    },
  };
  const funcs: FuncMap = { ...BUILTINS, ...SPRIG, ...helmFuncs, ...extra };
  holder.funcs = funcs;
  const names = new Set(Object.keys(funcs));
  for (const p of templates) {
    try {
      set = new Map([...set, ...parse(`${chart}/${p}`, files.get(p)!, names)]);
    } catch (e) {
      // Parse failures (TemplateParseError or the parser's own errors) name the file already.
      if (e instanceof TemplateParseError || e instanceof Error) throw new ChartRenderError(e.message);
      throw e;
    }
  }
  const filesApi = {
    Get: (name: unknown) => files.get(strval(name)) ?? '',
  };
  const data = {
    Values: jsonModel(values),
    Release: { Name: release.name, Namespace: release.namespace, Service: 'Helm', IsInstall: true, IsUpgrade: false },
    Chart: { Name: chart.split('/').pop() },
    Files: filesApi,
    Capabilities: { KubeVersion: { Version: 'v1.36.0', Major: '1', Minor: '36' } },
  };
  const out = new Map<string, string>();
  for (const p of templates) {
    if (p.split('/').pop()!.startsWith('_')) continue;
    try {
      out.set(p, execute(set, `${chart}/${p}`, data, funcs).replaceAll('<no value>', ''));
    } catch (e) {
      if (e instanceof TemplateError || e instanceof Error)
        throw new ChartRenderError(e.message.includes(`${chart}/${p}`) ? e.message : `${chart}/${p}: ${e.message}`);
      throw e;
    }
  }
  return { files: out };
}
