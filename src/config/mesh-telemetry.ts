// The telemetry fields of MeshConfig the daemon acts on: accessLogFile/Format/Encoding, enableTracing,
// defaultConfig.tracing, extensionProviders and defaultProviders. Follows Istio 1.26 pkg/config/mesh/mesh.go
// (DefaultMeshConfig: tracing on, TEXT encoding, the built-in `prometheus`, `stackdriver` and `envoy`
// providers; ApplyMeshConfig: a user's provider replaces a built-in one of the same name, others are appended)
// and the MeshConfig.ExtensionProvider messages of istio.io/api mesh/v1alpha1. Providers of kinds the daemon
// does not generate (skywalking, datadog, lightstep, stackdriver, ext-authz, the gRPC ALS) are kept with their
// kind so Telemetry resolution can name them when it skips them.
import { MeshConfigError } from './meshconfig-error';

/** A Telemetry/ProxyConfig custom tag (Istio Tracing.CustomTag): one of literal, environment, header. */
export type CustomTag =
  { literal: { value: string } } | { environment: { name: string; defaultValue?: string } } | { header: { name: string; defaultValue?: string } };

export interface HttpHeader {
  name: string;
  value: string;
}

export type ExtensionProvider =
  | { name: string; kind: 'prometheus' }
  | {
      name: string;
      kind: 'envoyFileAccessLog';
      path: string;
      /** logFormat.text; undefined with labels or no logFormat. */
      text?: string;
      /** logFormat.labels (JSON encoding), string values. */
      labels?: Record<string, string>;
      omitEmptyValues: boolean;
    }
  | { name: string; kind: 'envoyOtelAls'; service: string; port: number; logName: string; text?: string; labels?: Record<string, string> }
  | { name: string; kind: 'zipkin'; service: string; port: number; maxTagLength: number; enable64bitTraceId: boolean; path: string }
  | {
      name: string;
      kind: 'opentelemetry';
      service: string;
      port: number;
      maxTagLength: number;
      /** OTLP/HTTP when set, else OTLP/gRPC. */
      http?: { path: string; timeoutMs?: number; headers: HttpHeader[] };
      grpc?: { timeoutMs?: number; initialMetadata: HttpHeader[] };
    }
  | { name: string; kind: 'unsupported'; type: string };

/** meshConfig.defaultConfig.tracing (Istio ProxyConfig.Tracing): what HCM tracing reads of it. */
export interface ProxyTracing {
  /** Percent; 0 or unset: PILOT_TRACE_SAMPLING. */
  sampling?: number;
  customTags: Record<string, CustomTag>;
  maxPathTagLength?: number;
  enableIstioTags?: boolean;
  /** tracing.zipkin.address: the agent's bootstrap tracer, not xDS. */
  zipkinAddress?: string;
}

export interface MeshTelemetry {
  accessLogFile: string;
  accessLogFormat: string;
  accessLogEncoding: 'TEXT' | 'JSON';
  enableTracing: boolean;
  tracing: ProxyTracing;
  extensionProviders: ExtensionProvider[];
  defaultProviders: { metrics: string[]; accessLogging: string[]; tracing: string[] };
}

/** Istio's DefaultMeshConfig extension providers. */
export const BUILTIN_PROVIDERS: readonly ExtensionProvider[] = [
  { name: 'prometheus', kind: 'prometheus' },
  { name: 'stackdriver', kind: 'unsupported', type: 'stackdriver' },
  { name: 'envoy', kind: 'envoyFileAccessLog', path: '/dev/stdout', omitEmptyValues: false },
];

export const DEFAULT_MESH_TELEMETRY: MeshTelemetry = {
  accessLogFile: '',
  accessLogFormat: '',
  accessLogEncoding: 'TEXT',
  enableTracing: true,
  tracing: { customTags: {} },
  extensionProviders: [...BUILTIN_PROVIDERS],
  defaultProviders: { metrics: [], accessLogging: [], tracing: [] },
};

type Obj = Record<string, unknown>;

/** `where` is `mesh config <file>: ` at the top level, a dotted path below it. */
const field = (where: string, k: string): string => (where.endsWith(': ') ? `${where}${k}` : `${where}.${k}`);

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function str(o: Obj, k: string, where: string): string | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new MeshConfigError(`${field(where, k)}: must be a string`);
  return v;
}

function num(o: Obj, k: string, where: string): number | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new MeshConfigError(`${field(where, k)}: must be a number`);
  return v;
}

function bool(o: Obj, k: string, where: string): boolean | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new MeshConfigError(`${field(where, k)}: must be true or false`);
  return v;
}

function obj(o: Obj, k: string, where: string): Obj | undefined {
  const v = o[k];
  if (v === undefined || v === null) return undefined;
  if (!isObj(v)) throw new MeshConfigError(`${field(where, k)}: must be an object`);
  return v;
}

function strings(o: Obj, k: string, where: string): string[] {
  const v = o[k];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((s) => typeof s !== 'string')) throw new MeshConfigError(`${field(where, k)}: must be a list of strings`);
  return v as string[];
}

/** A protobuf Duration as YAML writes it ("5s", "100ms", "1.5s"), in milliseconds. */
function durationMs(o: Obj, k: string, where: string): number | undefined {
  const s = str(o, k, where);
  if (s === undefined) return undefined;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(s);
  if (!m) throw new MeshConfigError(`${field(where, k)}: ${JSON.stringify(s)} is not a duration`);
  return Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
}

function headers(v: unknown, where: string): HttpHeader[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new MeshConfigError(`${where}: must be a list`);
  return v.map((h: unknown, i) => {
    const at = `${where}[${i}]`;
    if (!isObj(h)) throw new MeshConfigError(`${at}: must be an object`);
    // envName reads the daemon's environment (Istio getHeaderValue)
    const envName = str(h, 'envName', at);
    return { name: str(h, 'name', at) ?? '', value: envName ? (process.env[envName] ?? '') : (str(h, 'value', at) ?? '') };
  });
}

function labelsOf(o: Obj | undefined, where: string): Record<string, string> | undefined {
  const l = o?.['labels'];
  if (l === undefined || l === null) return undefined;
  if (!isObj(l)) throw new MeshConfigError(`${where}.labels: must be a map`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(l)) out[k] = typeof v === 'string' ? v : JSON.stringify(v);
  return out;
}

const PROVIDER_KINDS = [
  'prometheus',
  'envoyFileAccessLog',
  'envoyOtelAls',
  'zipkin',
  'opentelemetry',
  'stackdriver',
  'skywalking',
  'datadog',
  'lightstep',
  'opencensus',
  'envoyExtAuthzHttp',
  'envoyExtAuthzGrpc',
  'envoyHttpAls',
  'envoyTcpAls',
] as const;

function provider(v: unknown, where: string): ExtensionProvider {
  if (!isObj(v)) throw new MeshConfigError(`${where}: must be an object`);
  const name = str(v, 'name', where);
  if (!name) throw new MeshConfigError(`${where}.name: required`);
  const kinds = PROVIDER_KINDS.filter((k) => v[k] !== undefined && v[k] !== null);
  if (kinds.length !== 1) throw new MeshConfigError(`${where}: exactly one provider kind must be set (${PROVIDER_KINDS.join(', ')})`);
  const kind = kinds[0]!;
  const at = `${where}.${kind}`;
  const p = obj(v, kind, where) ?? {};
  const service = () => str(p, 'service', at) ?? '';
  const port = () => num(p, 'port', at) ?? 0;
  switch (kind) {
    case 'prometheus':
      return { name, kind };
    case 'envoyFileAccessLog': {
      const lf = obj(p, 'logFormat', at);
      const text = lf ? str(lf, 'text', `${at}.logFormat`) : undefined;
      const labels = labelsOf(lf, `${at}.logFormat`);
      return {
        name,
        kind,
        path: str(p, 'path', at) ?? '',
        ...(text !== undefined ? { text } : {}),
        ...(labels ? { labels } : {}),
        omitEmptyValues: bool(p, 'omitEmptyValues', at) ?? false,
      };
    }
    case 'envoyOtelAls': {
      const lf = obj(p, 'logFormat', at);
      const text = lf ? str(lf, 'text', `${at}.logFormat`) : undefined;
      const labels = labelsOf(lf, `${at}.logFormat`);
      return {
        name,
        kind,
        service: service(),
        port: port(),
        logName: str(p, 'logName', at) ?? '',
        ...(text !== undefined ? { text } : {}),
        ...(labels ? { labels } : {}),
      };
    }
    case 'zipkin':
      return {
        name,
        kind,
        service: service(),
        port: port(),
        maxTagLength: num(p, 'maxTagLength', at) ?? 0,
        enable64bitTraceId: bool(p, 'enable64bitTraceId', at) ?? false,
        path: str(p, 'path', at) ?? '',
      };
    case 'opentelemetry': {
      const http = obj(p, 'http', at);
      const grpc = obj(p, 'grpc', at);
      const out: ExtensionProvider = { name, kind, service: service(), port: port(), maxTagLength: num(p, 'maxTagLength', at) ?? 0 };
      if (http) {
        const timeoutMs = durationMs(http, 'timeout', `${at}.http`);
        out.http = {
          path: str(http, 'path', `${at}.http`) ?? '',
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
          headers: headers(http['headers'], `${at}.http.headers`),
        };
      }
      if (grpc) {
        const timeoutMs = durationMs(grpc, 'timeout', `${at}.grpc`);
        out.grpc = {
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
          initialMetadata: headers(grpc['initialMetadata'], `${at}.grpc.initialMetadata`),
        };
      }
      return out;
    }
    default:
      return { name, kind: 'unsupported', type: kind };
  }
}

function customTags(v: unknown, where: string): Record<string, CustomTag> {
  if (v === undefined || v === null) return {};
  if (!isObj(v)) throw new MeshConfigError(`${where}: must be a map`);
  const out: Record<string, CustomTag> = {};
  for (const [k, t] of Object.entries(v)) {
    const at = `${where}.${k}`;
    if (!isObj(t)) throw new MeshConfigError(`${at}: must be an object`);
    const lit = obj(t, 'literal', at);
    const env = obj(t, 'environment', at);
    const hdr = obj(t, 'header', at);
    if (lit) out[k] = { literal: { value: str(lit, 'value', `${at}.literal`) ?? '' } };
    else if (env) out[k] = { environment: { name: str(env, 'name', `${at}.environment`) ?? '', ...withDefault(env, `${at}.environment`) } };
    else if (hdr) out[k] = { header: { name: str(hdr, 'name', `${at}.header`) ?? '', ...withDefault(hdr, `${at}.header`) } };
  }
  return out;
}

function withDefault(o: Obj, where: string): { defaultValue?: string } {
  const d = str(o, 'defaultValue', where);
  return d === undefined ? {} : { defaultValue: d };
}

function proxyTracing(doc: Obj, where: string): ProxyTracing {
  const dc = obj(doc, 'defaultConfig', where);
  const t = dc ? obj(dc, 'tracing', field(where, 'defaultConfig')) : undefined;
  return t ? parseProxyTracing(t, `${field(where, 'defaultConfig')}.tracing`) : { customTags: {} };
}

/** A ProxyConfig's `tracing` object (the mesh's defaultConfig, or a proxy's own PROXY_CONFIG); throws MeshConfigError. */
export function parseProxyTracing(t: Obj, at: string): ProxyTracing {
  const out: ProxyTracing = { customTags: customTags(t['customTags'] ?? t['custom_tags'], `${at}.customTags`) };
  const sampling = num(t, 'sampling', at);
  if (sampling !== undefined) out.sampling = sampling;
  const max = num(t, 'maxPathTagLength', at);
  if (max !== undefined) out.maxPathTagLength = max;
  const tags = bool(t, 'enableIstioTags', at);
  if (tags !== undefined) out.enableIstioTags = tags;
  const zipkin = obj(t, 'zipkin', at);
  const address = zipkin ? str(zipkin, 'address', `${at}.zipkin`) : undefined;
  if (address) out.zipkinAddress = address;
  return out;
}

/**
 * The tracing settings of one proxy (Istio ProxyConfigOrDefault): those of the ProxyConfig its agent sent as
 * node metadata PROXY_CONFIG (the agent's merge of the mesh's defaultConfig, PROXY_CONFIG and annotations),
 * else the mesh's defaultConfig.tracing. A PROXY_CONFIG whose tracing cannot be read counts as absent.
 */
export function proxyTracingOf(raw: Readonly<Record<string, unknown>>, mesh: MeshTelemetry): ProxyTracing {
  const pc = raw['PROXY_CONFIG'];
  if (!isObj(pc)) return mesh.tracing;
  const t = pc['tracing'];
  if (!isObj(t)) return { customTags: {} };
  try {
    return parseProxyTracing(t, 'PROXY_CONFIG.tracing');
  } catch {
    return mesh.tracing;
  }
}

/** The telemetry part of a parsed MeshConfig document; errors name the file and field. */
export function parseMeshTelemetry(doc: Obj, file: string): MeshTelemetry {
  const w = `mesh config ${file}: `;
  const encoding = str(doc, 'accessLogEncoding', w) ?? 'TEXT';
  if (encoding !== 'TEXT' && encoding !== 'JSON')
    throw new MeshConfigError(`${field(w, 'accessLogEncoding')}: must be TEXT or JSON, not ${JSON.stringify(encoding)}`);
  const raw = doc['extensionProviders'];
  if (raw !== undefined && raw !== null && !Array.isArray(raw)) throw new MeshConfigError(`${field(w, 'extensionProviders')}: must be a list`);
  // ApplyMeshConfig: a user's provider replaces the built-in one of its name, the others are appended
  const providers = [...BUILTIN_PROVIDERS];
  ((raw ?? []) as unknown[]).forEach((v, i) => {
    const p = provider(v, `${field(w, 'extensionProviders')}[${i}]`);
    const j = providers.findIndex((e) => e.name === p.name);
    if (j >= 0) providers[j] = p;
    else providers.push(p);
  });
  const dp = obj(doc, 'defaultProviders', w) ?? {};
  return {
    accessLogFile: str(doc, 'accessLogFile', w) ?? '',
    accessLogFormat: str(doc, 'accessLogFormat', w) ?? '',
    accessLogEncoding: encoding,
    enableTracing: bool(doc, 'enableTracing', w) ?? true,
    tracing: proxyTracing(doc, w),
    extensionProviders: providers,
    defaultProviders: {
      metrics: strings(dp, 'metrics', `${field(w, 'defaultProviders')}`),
      accessLogging: strings(dp, 'accessLogging', `${field(w, 'defaultProviders')}`),
      tracing: strings(dp, 'tracing', `${field(w, 'defaultProviders')}`),
    },
  };
}
