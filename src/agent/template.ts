// Bootstrap templates (--templateFile, ProxyConfig.proxyBootstrapTemplatePath) rendered as Istio's agent
// renders them (pkg/bootstrap/instance.go): Go's text/template with `toJSON` and sprig's generic functions.
// The engine is the one the injector uses (src/lib/gotemplate).
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { BootstrapError } from './bootstrap';
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

/** Renders a user bootstrap template; the result must be JSON (Envoy reads the file as JSON). */
export function renderBootstrapTemplate(template: string, params: Record<string, unknown>, file: string): JsonObject {
  let text: string;
  try {
    text = renderTemplate(template, params, file);
  } catch (e) {
    if (e instanceof TemplateError) throw new BootstrapError(`failed to render bootstrap template ${file}: ${e.message}`);
    throw e;
  }
  try {
    const v = JSON.parse(text) as JsonValue;
    if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('the rendered document is not a JSON object');
    return v as JsonObject;
  } catch (e) {
    const msg = (e as Error).message;
    const at = /position (\d+)/.exec(msg);
    let where = '';
    if (at) {
      const before = text.slice(0, Number(at[1]));
      where = ` (rendered line ${before.split('\n').length})`;
    }
    throw new BootstrapError(`bootstrap template ${file} did not render to JSON${where}: ${msg}`);
  }
}
