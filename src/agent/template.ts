// Bootstrap templates (--templateFile, ProxyConfig.proxyBootstrapTemplatePath) rendered as Istio's agent
// renders them (pkg/bootstrap/instance.go): Go's text/template with `toJSON` and sprig's generic functions.
// The engine is the one the injector uses (src/lib/gotemplate).
import { GoTemplate, goJsonMarshal, SPRIG, TemplateError as ExecError, TemplateExecError, TemplateParseError, type FuncMap } from '../lib/gotemplate';

export class TemplateError extends Error {}

const BOOTSTRAP_FUNCS: FuncMap = {
  ...SPRIG,
  // Istio's toJSON: "{}" for nil, else encoding/json.
  toJSON: (v) => (v === null || v === undefined ? '{}' : goJsonMarshal(v)),
};

/** The agent's parameters as Go has them: whole numbers are ints (ports, sizes), the rest as they are. */
function goValues(v: unknown): unknown {
  if (typeof v === 'number') return Number.isInteger(v) ? BigInt(v) : v;
  if (Array.isArray(v)) return v.map(goValues);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, goValues(x)]));
  return v;
}

/** Renders `src` with `data`; a parse or execution error becomes a TemplateError with Go's message. */
export function renderTemplate(src: string, data: Record<string, unknown>, name = 'bootstrap'): string {
  try {
    return GoTemplate.parse(name, src, BOOTSTRAP_FUNCS).execute(goValues(data));
  } catch (e) {
    if (e instanceof ExecError || e instanceof TemplateExecError || e instanceof TemplateParseError) throw new TemplateError(e.message);
    throw e;
  }
}
