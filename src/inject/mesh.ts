// MeshConfig and its defaultConfig (ProxyConfig) as the injector reads them: Istio's built-in defaults, the
// mesh config file applied over them (top-level fields replace, defaultConfig merges), and the
// `proxy.mesh.io/config` annotation merged over defaultConfig. ProxyConfig is kept in protobuf JSON form
// (camelCase names, durations as "45s", enums by name) because the injected PROXY_CONFIG env var is exactly
// Istio's protojson of it, fields in .proto declaration order, defaults removed.
import { parseGoYaml, GoYamlParseError } from '../lib/goyaml-parse';
import { splitHostPort } from '../lib/hostport';

export class MeshConfigError extends Error {}

type FieldKind = 'string' | 'int' | 'duration' | 'boolValue' | 'int32Value' | 'stringMap' | 'stringList' | 'message' | { enum: readonly string[] };

const AUTH_POLICY = ['NONE', 'MUTUAL_TLS'] as const;
const AUTH_POLICY_VALUES: Record<number, string> = { 0: 'NONE', 1: 'MUTUAL_TLS', 1000: 'INHERIT' };
const INTERCEPTION = ['REDIRECT', 'TPROXY', 'NONE'] as const;
const TRACING_SERVICE_NAME = ['APP_LABEL_AND_NAMESPACE', 'CANONICAL_NAME_ONLY', 'CANONICAL_NAME_AND_NAMESPACE'] as const;

/** istio.mesh.v1alpha1.ProxyConfig fields in .proto declaration order (the order protojson writes them). */
const PROXY_CONFIG_FIELDS: ReadonlyArray<readonly [string, FieldKind]> = [
  ['configPath', 'string'],
  ['binaryPath', 'string'],
  ['serviceCluster', 'string'],
  ['tracingServiceName', { enum: TRACING_SERVICE_NAME }],
  ['drainDuration', 'duration'],
  ['discoveryAddress', 'string'],
  ['discoveryRefreshDelay', 'duration'],
  ['zipkinAddress', 'string'],
  ['statsdUdpAddress', 'string'],
  ['envoyMetricsServiceAddress', 'string'],
  ['proxyAdminPort', 'int'],
  ['availabilityZone', 'string'],
  ['controlPlaneAuthPolicy', { enum: ['NONE', 'MUTUAL_TLS', 'INHERIT'] }],
  ['customConfigFile', 'string'],
  ['statNameLength', 'int'],
  ['concurrency', 'int32Value'],
  ['proxyBootstrapTemplatePath', 'string'],
  ['interceptionMode', { enum: INTERCEPTION }],
  ['tracing', 'message'],
  ['sds', 'message'],
  ['envoyAccessLogService', 'message'],
  ['envoyMetricsService', 'message'],
  ['proxyMetadata', 'stringMap'],
  ['runtimeValues', 'stringMap'],
  ['statusPort', 'int'],
  ['extraStatTags', 'stringList'],
  ['gatewayTopology', 'message'],
  ['terminationDrainDuration', 'duration'],
  ['meshId', 'string'],
  ['readinessProbe', 'message'],
  ['proxyStatsMatcher', 'message'],
  ['holdApplicationUntilProxyStarts', 'boolValue'],
  ['caCertificatesPem', 'stringList'],
  ['image', 'message'],
  ['privateKeyProvider', 'message'],
  ['proxyHeaders', 'message'],
];
const FIELD_KIND = new Map(PROXY_CONFIG_FIELDS);

/** A ProxyConfig in protobuf JSON form; absent keys are unset (proto zero values). */
export type ProxyConfig = Record<string, unknown>;

/** Istio's mesh.DefaultProxyConfig, under mesh names. */
export function defaultProxyConfig(): ProxyConfig {
  return {
    configPath: './etc/mesh/proxy',
    binaryPath: '/usr/local/bin/envoy',
    serviceCluster: 'mesh-proxy',
    drainDuration: '45s',
    discoveryAddress: 'meshd.mesh-system.svc:15012',
    proxyAdminPort: 15000,
    controlPlaneAuthPolicy: 'MUTUAL_TLS',
    statNameLength: 189,
    statusPort: 15020,
    terminationDrainDuration: '5s',
  };
}

function camel(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** Canonical protojson text of a google.protobuf.Duration given as "23s", "1.5s" or a number of seconds. */
function protoDuration(v: unknown, path: string): string {
  let text: string;
  if (typeof v === 'number') text = `${v}s`;
  else if (typeof v === 'string') text = v.trim();
  else throw new MeshConfigError(`${path}: bad Duration: ${JSON.stringify(v)}`);
  const m = /^(-)?(\d+)(?:\.(\d{1,9}))?s$/.exec(text);
  if (!m) throw new MeshConfigError(`${path}: bad Duration: ${JSON.stringify(v)}`);
  const frac = (m[3] ?? '').replace(/0+$/, '');
  const pad = frac.length === 0 ? '' : frac.length <= 3 ? frac.padEnd(3, '0') : frac.length <= 6 ? frac.padEnd(6, '0') : frac.padEnd(9, '0');
  return `${m[1] ?? ''}${BigInt(m[2]!)}${pad ? '.' + pad : ''}s`;
}

/** Seconds of a protojson duration. */
export function durationSeconds(d: string): number {
  return Number(d.replace(/s$/, ''));
}

function fieldValue(key: string, kind: FieldKind, v: unknown, path: string): unknown {
  const where = `${path}.${key}`;
  if (typeof kind === 'object') {
    if (typeof v === 'number') {
      const name = key === 'controlPlaneAuthPolicy' ? AUTH_POLICY_VALUES[v] : kind.enum[v];
      if (name === undefined) throw new MeshConfigError(`${where}: invalid value for enum: ${v}`);
      return name;
    }
    if (typeof v !== 'string' || !kind.enum.includes(v)) throw new MeshConfigError(`${where}: invalid value for enum: ${JSON.stringify(v)}`);
    return v;
  }
  switch (kind) {
    case 'string':
      if (typeof v !== 'string') throw new MeshConfigError(`${where}: expected a string, got ${JSON.stringify(v)}`);
      return v;
    case 'int':
    case 'int32Value': {
      const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n)) throw new MeshConfigError(`${where}: expected an integer, got ${JSON.stringify(v)}`);
      return n;
    }
    case 'boolValue':
      if (typeof v !== 'boolean') throw new MeshConfigError(`${where}: expected a boolean, got ${JSON.stringify(v)}`);
      return v;
    case 'duration':
      return protoDuration(v, where);
    case 'stringMap': {
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new MeshConfigError(`${where}: expected a map of strings`);
      const out: Record<string, string> = {};
      for (const [k, x] of Object.entries(v)) {
        if (typeof x !== 'string') throw new MeshConfigError(`${where}.${k}: expected a string, got ${JSON.stringify(x)}`);
        out[k] = x;
      }
      return out;
    }
    case 'stringList':
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new MeshConfigError(`${where}: expected a list of strings`);
      return [...v];
    case 'message':
      if (typeof v !== 'object' || v === null || Array.isArray(v))
        throw new MeshConfigError(`${where}: expected an object, got ${JSON.stringify(v)}`);
      return v;
  }
}

/**
 * protomarshal.ApplyYAML onto a ProxyConfig, then Istio's MergeProxyConfig fix-up: fields named in `overlay`
 * replace those of `base` (messages and lists whole), proxyMetadata keys merge. Unknown fields are ignored, as
 * Istio's second, lenient decoding pass does. Returns a new object.
 */
export function mergeProxyConfig(base: ProxyConfig, overlay: unknown, path = 'defaultConfig'): ProxyConfig {
  if (overlay === null || overlay === undefined) return { ...base };
  if (typeof overlay !== 'object' || Array.isArray(overlay)) throw new MeshConfigError(`${path}: expected an object`);
  const out: ProxyConfig = { ...base };
  for (const [rawKey, v] of Object.entries(overlay as Record<string, unknown>)) {
    const key = camel(rawKey);
    const kind = FIELD_KIND.get(key);
    if (!kind) continue;
    if (v === null) {
      delete out[key];
      continue;
    }
    const value = fieldValue(key, kind, v, path);
    if (key === 'serviceCluster') delete out.tracingServiceName;
    if (key === 'tracingServiceName') delete out.serviceCluster;
    if (key === 'proxyMetadata') out[key] = { ...((base.proxyMetadata as Record<string, string>) ?? {}), ...(value as Record<string, string>) };
    else out[key] = value;
  }
  return out;
}

/** ProxyConfig from a YAML or JSON text (the `proxy.mesh.io/config` annotation) merged over `base`. */
export function applyProxyConfigText(base: ProxyConfig, text: string, where: string): ProxyConfig {
  let doc: unknown;
  try {
    doc = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new MeshConfigError(`could not parse proxy config: ${e.message}`);
    throw e;
  }
  try {
    return mergeProxyConfig(base, doc ?? {}, where);
  } catch (e) {
    if (e instanceof MeshConfigError) throw new MeshConfigError(`could not parse proxy config: ${e.message}`);
    throw e;
  }
}

const ZERO_ENUM: Record<string, string> = {
  interceptionMode: 'REDIRECT',
  controlPlaneAuthPolicy: 'NONE',
  tracingServiceName: 'APP_LABEL_AND_NAMESPACE',
};

function isZero(key: string, kind: FieldKind, v: unknown): boolean {
  if (v === undefined || v === null) return true;
  if (typeof kind === 'object') return v === ZERO_ENUM[key];
  switch (kind) {
    case 'string':
      return v === '';
    case 'int':
      return v === 0;
    case 'stringMap':
      return Object.keys(v as object).length === 0;
    case 'stringList':
      return (v as unknown[]).length === 0;
    default:
      return false; // message-typed fields (wrappers, durations, messages) count as set when present
  }
}

function sortedObject(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedObject);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortedObject((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

/** jsonpb text of a ProxyConfig: declaration order, zero values left out, map keys sorted. */
export function proxyConfigJson(pc: ProxyConfig): string {
  const out: Record<string, unknown> = {};
  for (const [key, kind] of PROXY_CONFIG_FIELDS) {
    const v = pc[key];
    if (isZero(key, kind, v)) continue;
    out[key] = kind === 'stringMap' ? sortedObject(v) : v;
  }
  return JSON.stringify(out).replace(/[<>&]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}

/** Istio's cleanProxyConfig: leave out whatever equals the built-in default, to keep the pod spec small. */
export function cleanProxyConfig(pc: ProxyConfig): ProxyConfig {
  const d = defaultProxyConfig();
  const out = { ...pc };
  for (const key of [
    'configPath',
    'binaryPath',
    'controlPlaneAuthPolicy',
    'serviceCluster',
    'drainDuration',
    'terminationDrainDuration',
    'discoveryAddress',
    'proxyAdminPort',
    'statNameLength',
    'statusPort',
  ]) {
    if (out[key] !== undefined && out[key] === d[key]) delete out[key];
  }
  for (const key of ['envoyMetricsService', 'envoyAccessLogService', 'tracing', 'concurrency']) {
    if (out[key] !== undefined && d[key] !== undefined && JSON.stringify(out[key]) === JSON.stringify(d[key])) delete out[key];
  }
  if (out.proxyMetadata && Object.keys(out.proxyMetadata as object).length === 0) delete out.proxyMetadata;
  return out;
}

// ---- validation (Istio's agent.ValidateMeshConfigProxyConfig, the checks that apply here) ----

function validPort(n: unknown): boolean {
  return typeof n === 'number' && n >= 1 && n <= 65535;
}

function validateProxyAddress(addr: string): string | undefined {
  let h: string;
  let port: string;
  try {
    ({ host: h, port } = splitHostPort(addr));
  } catch (e) {
    return `unable to split "${addr}": ${(e as Error).message}`;
  }
  if (!/^\d+$/.test(port)) return `port (${port}) is not a number`;
  if (!validPort(Number(port))) return `port number ${Number(port)} must be in the range 1..65535`;
  const fqdn = /^(?=.{1,255}$)([a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([-a-zA-Z0-9]{0,61}[a-zA-Z0-9])?)*\.?$/.test(h);
  const ip = /^\d{1,3}(\.\d{1,3}){3}$/.test(h) || (h.includes(':') && /^[0-9a-fA-F:.]+$/.test(h));
  if (!fqdn && !ip) return `"${h}" is not a valid hostname or an IP address`;
  return undefined;
}

/** Errors of a ProxyConfig (empty when valid). */
export function validateProxyConfig(pc: ProxyConfig): string[] {
  const errs: string[] = [];
  if (!pc.configPath) errs.push('config path must be set');
  if (!pc.binaryPath) errs.push('binary path must be set');
  if (pc.tracingServiceName === undefined && !pc.serviceCluster) errs.push('service cluster must be specified');
  if (typeof pc.drainDuration === 'string') {
    const s = durationSeconds(pc.drainDuration);
    if (s < 0.001) errs.push('invalid drain duration: duration must be greater than 1ms');
    else if (!Number.isInteger(s)) errs.push('drain time only supports durations to seconds precision');
  }
  if (!pc.discoveryAddress) errs.push('discovery address must be set to the proxy discovery service');
  else {
    const e = validateProxyAddress(pc.discoveryAddress as string);
    if (e) errs.push(`invalid discovery address: ${e}`);
  }
  if (pc.statsdUdpAddress) {
    const e = validateProxyAddress(pc.statsdUdpAddress as string);
    if (e) errs.push(`invalid statsd udp address "${pc.statsdUdpAddress}": ${e}`);
  }
  if (!validPort(pc.proxyAdminPort ?? 0)) errs.push(`invalid proxy admin port: port number ${pc.proxyAdminPort ?? 0} must be in the range 1..65535`);
  if (!AUTH_POLICY.includes((pc.controlPlaneAuthPolicy ?? 'NONE') as never))
    errs.push(`invalid authentication policy: unrecognized control plane auth policy "${pc.controlPlaneAuthPolicy}"`);
  if (!validPort(pc.statusPort ?? 0)) errs.push(`invalid status port: port number ${pc.statusPort ?? 0} must be in the range 1..65535`);
  return errs;
}

// ---- MeshConfig ----

/** The MeshConfig fields injection reads, plus every other field as given. */
export interface MeshConfig {
  defaultConfig: ProxyConfig;
  trustDomain: string;
  proxyListenPort: number;
  proxyInboundListenPort: number;
  /** PASSTHROUGH or LOCALHOST. */
  inboundTrafficPolicyMode: string;
  /** undefined = not set (defaults to true). */
  enablePrometheusMerge?: boolean;
  rootNamespace: string;
}

export function defaultMeshConfig(): MeshConfig {
  return {
    defaultConfig: defaultProxyConfig(),
    trustDomain: 'cluster.local',
    proxyListenPort: 15001,
    proxyInboundListenPort: 15006,
    inboundTrafficPolicyMode: 'PASSTHROUGH',
    enablePrometheusMerge: true,
    rootNamespace: 'mesh-system',
  };
}

/** Istio's mesh.ApplyMeshConfigDefaults: the YAML's top-level fields over the defaults, defaultConfig merged. */
export function readMeshConfig(text: string, where: string): MeshConfig {
  let doc: unknown;
  try {
    doc = parseGoYaml(text);
  } catch (e) {
    if (e instanceof GoYamlParseError) throw new MeshConfigError(`${where}: failed to convert to proto.: ${e.message}`);
    throw e;
  }
  const mc = defaultMeshConfig();
  if (doc === null || doc === undefined) return mc;
  if (typeof doc !== 'object' || Array.isArray(doc))
    throw new MeshConfigError(`${where}: failed to convert to proto.: mesh config must be a mapping`);
  const raw = doc as Record<string, unknown>;
  const str = (k: string): string | undefined => {
    const v = raw[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new MeshConfigError(`${where}: failed to convert to proto.: ${k}: expected a string`);
    return v;
  };
  const int = (k: string): number | undefined => {
    const v = raw[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new MeshConfigError(`${where}: failed to convert to proto.: ${k}: expected an integer`);
    return v;
  };
  mc.trustDomain = str('trustDomain') ?? mc.trustDomain;
  mc.rootNamespace = str('rootNamespace') ?? mc.rootNamespace;
  mc.proxyListenPort = int('proxyListenPort') ?? mc.proxyListenPort;
  mc.proxyInboundListenPort = int('proxyInboundListenPort') ?? mc.proxyInboundListenPort;
  if (raw.enablePrometheusMerge !== undefined && raw.enablePrometheusMerge !== null) {
    if (typeof raw.enablePrometheusMerge !== 'boolean')
      throw new MeshConfigError(`${where}: failed to convert to proto.: enablePrometheusMerge: expected a boolean`);
    mc.enablePrometheusMerge = raw.enablePrometheusMerge;
  }
  const itp = raw.inboundTrafficPolicy as { mode?: unknown } | undefined;
  if (itp && typeof itp === 'object' && itp.mode !== undefined) {
    if (itp.mode !== 'PASSTHROUGH' && itp.mode !== 'LOCALHOST')
      throw new MeshConfigError(`${where}: failed to convert to proto.: inboundTrafficPolicy.mode: invalid value ${JSON.stringify(itp.mode)}`);
    mc.inboundTrafficPolicyMode = itp.mode;
  }
  try {
    mc.defaultConfig = mergeProxyConfig(defaultProxyConfig(), raw.defaultConfig, 'defaultConfig');
  } catch (e) {
    if (e instanceof MeshConfigError) throw new MeshConfigError(`${where}: ${e.message}`);
    throw e;
  }
  const errs = validateProxyConfig(mc.defaultConfig);
  if (errs.length) throw new MeshConfigError(`${where}: invalid defaultConfig: ${errs.join('; ')}`);
  return mc;
}

/** A copy of `mc` whose defaultConfig has the `proxy.mesh.io/config` annotation applied. */
export function applyProxyConfigAnnotation(mc: MeshConfig, text: string): MeshConfig {
  return { ...mc, defaultConfig: applyProxyConfigText(mc.defaultConfig, text, 'proxy.mesh.io/config') };
}
