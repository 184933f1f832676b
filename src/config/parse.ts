// Manifest text (multi-document YAML, JSON, `kind: List`) to Configs. Only the envelope is checked
// here (apiVersion, kind, metadata, spec/status presence and types); the spec's fields are checked by
// validate/. Unknown kinds are skipped with a warning, as Istio ignores kinds it has no schema for.
import { parseAllDocuments } from 'yaml';
import { type ConfigError, keyPath } from './errors';
import { isClusterScoped, isKind, kindOf, SCHEMAS } from './schemas';
import { type Config, configKey, type Kind, type Meta, type PodStatus } from './types';
import { isObject, stripNulls, typeName } from './values';

export interface ParseResult {
  configs: Config[];
  errors: ConfigError[];
  /** Skipped documents that are not errors (unknown kinds, unserved apiVersions). */
  warnings: ConfigError[];
  /** Each config's object as written, for the checks an API server makes on it (validateConfig's `object`). */
  objects: Map<Config, Record<string, unknown>>;
}

/** Where an object came from, for messages and `Config.source`. */
export interface Origin {
  source: string;
  /** `[2]`, `[2].items[0]`. */
  document?: string;
  line?: number;
}

/** The namespace given to namespaced resources written without one (what `kubectl apply` does). */
export const DEFAULT_NAMESPACE = 'default';

const MAX_LIST_DEPTH = 8;

/**
 * Parses every document of a manifest. `source` names it in errors and in `Config.source`
 * (`path/to/file.yaml[2]`). JSON is accepted as a single object, an array of objects, or a List;
 * a `.json` source is parsed as strict JSON for precise errors, anything else as YAML (which also
 * reads JSON).
 */
export function parseDocuments(text: string, source: string): ParseResult {
  const out: ParseResult = { configs: [], errors: [], warnings: [], objects: new Map() };
  if (/\.json$/i.test(source)) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (e) {
      out.errors.push({ source, message: `invalid JSON: ${(e as Error).message}` });
      return out;
    }
    if (Array.isArray(value)) value.forEach((v, i) => collect(v, { source, document: `[${i}]` }, out, 0));
    else collect(value, { source, document: '[0]' }, out, 0);
    return out;
  }
  const lines = lineStarts(text);
  const docs = parseAllDocuments(text, { prettyErrors: true, merge: true, uniqueKeys: true });
  if (!Array.isArray(docs)) return out; // an empty stream
  docs.forEach((doc, i) => {
    const origin: Origin = { source, document: `[${i}]`, line: lineOf(lines, contentStart(text, doc.range[0])) };
    if (doc.errors.length > 0) {
      for (const e of doc.errors) out.errors.push({ ...origin, message: `invalid YAML: ${e.message.trimEnd()}` });
      return;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 1000 });
    } catch (e) {
      out.errors.push({ ...origin, message: `invalid YAML: ${(e as Error).message}` });
      return;
    }
    if (Array.isArray(value)) value.forEach((v, j) => collect(v, { ...origin, document: `${origin.document}[${j}]` }, out, 0));
    else collect(value, origin, out, 0);
  });
  return out;
}

function collect(value: unknown, origin: Origin, out: ParseResult, depth: number): void {
  if (value === null || value === undefined) return; // empty document (a trailing `---`)
  if (!isObject(value)) {
    out.errors.push({ ...origin, message: `a document must be an object with apiVersion and kind, got ${typeName(value)}` });
    return;
  }
  if (value.kind === 'List' || (typeof value.kind === 'string' && value.kind.endsWith('List') && Array.isArray(value.items))) {
    if (depth >= MAX_LIST_DEPTH) {
      out.errors.push({ ...origin, message: 'Lists nest too deeply' });
      return;
    }
    if (!Array.isArray(value.items)) {
      out.errors.push({ ...origin, field: 'items', message: `a ${String(value.kind)} must have an items array` });
      return;
    }
    value.items.forEach((item, j) => collect(item, { ...origin, document: `${origin.document ?? ''}.items[${j}]` }, out, depth + 1));
    return;
  }
  const r = convertObject(value, origin);
  if (r.config) {
    out.configs.push(r.config);
    out.objects.set(r.config, value);
  }
  out.errors.push(...r.errors);
  out.warnings.push(...r.warnings);
}

export interface ConvertResult {
  config?: Config;
  errors: ConfigError[];
  warnings: ConfigError[];
}

/**
 * Converts one Kubernetes-style object to a Config. `expected` is for objects whose apiVersion/kind
 * are implied by where they came from (items of a typed watch): it is used when the object names
 * no kind. Typed client objects are accepted (creationTimestamp may be a Date).
 */
export function convertObject(obj: unknown, origin: Origin, expected?: Kind): ConvertResult {
  const res: ConvertResult = { errors: [], warnings: [] };
  const at = (message: string, field?: string, resource?: string): ConfigError => ({
    ...origin,
    ...(resource ? { resource } : {}),
    ...(field ? { field } : {}),
    message,
  });
  if (!isObject(obj)) {
    res.errors.push(at(`a resource must be an object, got ${typeName(obj)}`));
    return res;
  }
  let apiVersion = obj.apiVersion;
  let kindName = obj.kind;
  if (expected && (kindName === undefined || kindName === '')) {
    kindName = expected;
    if (apiVersion === undefined || apiVersion === '') apiVersion = SCHEMAS[expected].apiVersions[0];
  }
  if (typeof apiVersion !== 'string' || apiVersion === '' || typeof kindName !== 'string' || kindName === '') {
    const missing = [
      typeof apiVersion !== 'string' || apiVersion === '' ? 'apiVersion' : '',
      typeof kindName !== 'string' || kindName === '' ? 'kind' : '',
    ]
      .filter(Boolean)
      .join(' and ');
    res.errors.push(at(`${missing} must be set (a string)`, missing.split(' ')[0]));
    return res;
  }
  const kind = kindOf(apiVersion, kindName);
  if (!kind) {
    const msg = isKind(kindName)
      ? `apiVersion ${apiVersion} is not served for kind ${kindName} (accepted: ${SCHEMAS[kindName].apiVersions.join(', ')}): skipped`
      : `unknown kind ${kindName} (apiVersion ${apiVersion}): skipped`;
    res.warnings.push(at(msg));
    return res;
  }

  const metaErrors: ConfigError[] = [];
  const metadata = obj.metadata;
  if (metadata !== undefined && !isObject(metadata)) {
    res.errors.push(at(`must be an object, got ${typeName(metadata)}`, 'metadata', kind));
    return res;
  }
  const m = (metadata ?? {}) as Record<string, unknown>;
  const name = m.name;
  if (typeof name !== 'string' || name === '') {
    res.errors.push(at(name === undefined || name === '' ? 'name is required' : `must be a string, got ${typeName(name)}`, 'metadata.name', kind));
    return res;
  }
  let namespace: string;
  if (isClusterScoped(kind)) {
    namespace = ''; // cluster-scoped: a namespace written on it means nothing
  } else if (m.namespace === undefined || m.namespace === null || m.namespace === '') {
    namespace = DEFAULT_NAMESPACE;
  } else if (typeof m.namespace !== 'string') {
    res.errors.push(at(`must be a string, got ${typeName(m.namespace)}`, 'metadata.namespace', `${kind}/?/${name}`));
    return res;
  } else {
    namespace = m.namespace;
  }
  const resource = `${kind}/${namespace}/${name}`;
  const labels = stringMap(m.labels, 'metadata.labels', metaErrors, (msg, f) => at(msg, f, resource));
  const annotations = stringMap(m.annotations, 'metadata.annotations', metaErrors, (msg, f) => at(msg, f, resource));
  const meta: Meta = { name, namespace, labels, annotations };
  if (typeof m.resourceVersion === 'string' && m.resourceVersion !== '') meta.resourceVersion = m.resourceVersion;
  if (typeof m.generation === 'number') meta.generation = m.generation;
  if (typeof m.uid === 'string' && m.uid !== '') meta.uid = m.uid;
  if (m.creationTimestamp instanceof Date) meta.creationTimestamp = m.creationTimestamp.toISOString();
  else if (typeof m.creationTimestamp === 'string' && m.creationTimestamp !== '') meta.creationTimestamp = m.creationTimestamp;
  if (m.deletionTimestamp instanceof Date) meta.deletionTimestamp = m.deletionTimestamp.toISOString();
  else if (typeof m.deletionTimestamp === 'string' && m.deletionTimestamp !== '') meta.deletionTimestamp = m.deletionTimestamp;

  let spec: unknown;
  let status: PodStatus | undefined;
  switch (kind) {
    case 'Namespace':
      spec = {};
      break;
    case 'EndpointSlice': {
      // EndpointSlice keeps its fields at the top level; Config carries them as the spec.
      spec = stripNulls({ addressType: obj.addressType, endpoints: obj.endpoints ?? [], ...(obj.ports !== undefined ? { ports: obj.ports } : {}) });
      break;
    }
    case 'Secret':
      // Secret keeps its fields at the top level too.
      spec = stripNulls({
        ...(obj.type !== undefined ? { type: obj.type } : {}),
        ...(obj.data !== undefined ? { data: obj.data } : {}),
        ...(obj.stringData !== undefined ? { stringData: obj.stringData } : {}),
      });
      break;
    case 'Pod': {
      spec = objectOrEmpty(obj.spec, 'spec', metaErrors, (msg, f) => at(msg, f, resource));
      spec = slimPodSpec(spec as Record<string, unknown>);
      if (obj.status !== undefined && obj.status !== null) {
        if (!isObject(obj.status)) metaErrors.push(at(`must be an object, got ${typeName(obj.status)}`, 'status', resource));
        else status = slimPodStatus(obj.status);
      }
      break;
    }
    case 'WorkloadEntry':
      spec = stripNulls(objectOrEmpty(obj.spec, 'spec', metaErrors, (msg, f) => at(msg, f, resource)));
      // The `Healthy` condition health checks write decides whether its endpoints are served.
      if (isObject(obj.status) && Array.isArray(obj.status.conditions)) status = slimPodStatus({ conditions: obj.status.conditions });
      break;
    default:
      // Protobuf JSON reads a null member as unset: drop them so that consumers see absent fields.
      spec = stripNulls(objectOrEmpty(obj.spec, 'spec', metaErrors, (msg, f) => at(msg, f, resource)));
  }
  if (metaErrors.length > 0) {
    res.errors.push(...metaErrors);
    return res;
  }
  const config = { kind, apiVersion, meta, spec, source: origin.source + (origin.document ?? '') } as Config;
  if (status) config.status = status;
  res.config = config;
  return res;
}

function stringMap(v: unknown, field: string, errors: ConfigError[], at: (msg: string, field: string) => ConfigError): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) {
    errors.push(at(`must be a map of strings, got ${typeName(v)}`, field));
    return {};
  }
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) {
    if (typeof val !== 'string') errors.push(at(`must be a string, got ${typeName(val)}`, keyPath(field, k)));
    else out[k] = val;
  }
  return out;
}

function objectOrEmpty(v: unknown, field: string, errors: ConfigError[], at: (msg: string, field: string) => ConfigError): Record<string, unknown> {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) {
    errors.push(at(`must be an object, got ${typeName(v)}`, field));
    return {};
  }
  return v;
}

// Pods are the bulk of an orchestrator's objects: keep only what the registries read.
function slimPodSpec(s: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of ['serviceAccountName', 'nodeName', 'hostNetwork', 'hostname', 'subdomain'] as const) if (s[k] !== undefined) out[k] = s[k];
  if (Array.isArray(s.containers)) {
    out.containers = s.containers.map((c: unknown) => {
      if (!isObject(c)) return c;
      const cc: Record<string, unknown> = { name: c.name };
      if (Array.isArray(c.ports)) cc.ports = c.ports;
      return cc;
    });
  }
  return out;
}

function slimPodStatus(s: Record<string, unknown>): PodStatus {
  const out: PodStatus = {};
  if (typeof s.podIP === 'string') out.podIP = s.podIP;
  if (Array.isArray(s.podIPs)) out.podIPs = s.podIPs.filter(isObject).map((p) => ({ ip: String(p.ip) }));
  if (typeof s.phase === 'string') out.phase = s.phase;
  if (Array.isArray(s.conditions)) out.conditions = s.conditions.filter(isObject).map((c) => ({ type: String(c.type), status: String(c.status) }));
  return out;
}

/** Skips a leading `---` marker line so that a document's line is that of its first content. */
function contentStart(text: string, offset: number): number {
  if (text.startsWith('---', offset)) {
    const nl = text.indexOf('\n', offset);
    return nl < 0 ? offset : nl + 1;
  }
  return offset;
}

function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

function lineOf(starts: number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid]! <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
}

/** `Kind/namespace/name` of a parsed config (re-exported for callers that only import parse). */
export { configKey };
