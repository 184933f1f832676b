// Istio's ProxyConfig (meshconfig.ProxyConfig) as a model: the defaults (pkg/config/mesh
// DefaultProxyConfig), an overlay applied with Istio's precedence (mesh.ApplyProxyConfig: fields present
// replace the base's, lists are replaced, proxyMetadata keys merge), a mesh config file's defaultConfig,
// validation (pkg/config/validation ValidateMeshConfigProxyConfig) and protojson. Pure: callers read files
// and the environment and pass their text in. Shared by the agent, which assembles its own ProxyConfig
// (src/agent/config.ts), and the analyzers, which check `proxy.mesh.io/config` annotations.
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { parseDurationMs } from '../lib/duration';
import { splitHostPort } from '../lib/hostport';

export type AuthPolicy = 'NONE' | 'MUTUAL_TLS' | 'INHERIT';
const AUTH_POLICIES: Readonly<Record<string, AuthPolicy>> = {
  NONE: 'NONE',
  MUTUAL_TLS: 'MUTUAL_TLS',
  INHERIT: 'INHERIT',
  '0': 'NONE',
  '1': 'MUTUAL_TLS',
  '1000': 'INHERIT',
};

export type TracingServiceName = 'APP_LABEL_AND_NAMESPACE' | 'CANONICAL_NAME_ONLY' | 'CANONICAL_NAME_AND_NAMESPACE';
const TRACING_SERVICE_NAMES: Readonly<Record<string, TracingServiceName>> = {
  APP_LABEL_AND_NAMESPACE: 'APP_LABEL_AND_NAMESPACE',
  CANONICAL_NAME_ONLY: 'CANONICAL_NAME_ONLY',
  CANONICAL_NAME_AND_NAMESPACE: 'CANONICAL_NAME_AND_NAMESPACE',
  '0': 'APP_LABEL_AND_NAMESPACE',
  '1': 'CANONICAL_NAME_ONLY',
  '2': 'CANONICAL_NAME_AND_NAMESPACE',
};

export interface ProxyStatsMatcher {
  inclusionPrefixes?: string[];
  inclusionSuffixes?: string[];
  inclusionRegexps?: string[];
}

/** The ProxyConfig fields the agent acts on; others the user sets are kept in `other` and passed through. */
export interface ProxyConfig {
  configPath: string;
  binaryPath: string;
  serviceCluster: string;
  tracingServiceName?: TracingServiceName;
  /** Milliseconds. */
  drainDuration: number;
  /** Milliseconds. */
  parentShutdownDuration: number;
  /** Milliseconds. */
  terminationDrainDuration: number;
  discoveryAddress: string;
  statsdUdpAddress: string;
  proxyAdminPort: number;
  controlPlaneAuthPolicy: AuthPolicy;
  customConfigFile: string;
  statNameLength: number;
  /** Unset (undefined) means: let the proxy pick (all cores). */
  concurrency?: number;
  proxyBootstrapTemplatePath: string;
  interceptionMode: string;
  statusPort: number;
  proxyMetadata: Record<string, string>;
  runtimeValues: Record<string, string>;
  extraStatTags: string[];
  proxyStatsMatcher?: ProxyStatsMatcher;
  meshId: string;
  holdApplicationUntilProxyStarts?: boolean;
  /** Fields of Istio's ProxyConfig the agent does not interpret (tracing, readinessProbe, …), as given. */
  other: Record<string, unknown>;
}

/** Istio's mesh.DefaultProxyConfig with this mesh's names (`meshd.mesh-system.svc`, `./etc/mesh/proxy`). */
export function defaultProxyConfig(): ProxyConfig {
  return {
    configPath: './etc/mesh/proxy',
    binaryPath: '/usr/local/bin/envoy',
    serviceCluster: '',
    drainDuration: 45_000,
    parentShutdownDuration: 60_000,
    terminationDrainDuration: 5_000,
    discoveryAddress: 'meshd.mesh-system.svc:15012',
    statsdUdpAddress: '',
    proxyAdminPort: 15000,
    controlPlaneAuthPolicy: 'MUTUAL_TLS',
    customConfigFile: '',
    statNameLength: 189,
    concurrency: 2,
    proxyBootstrapTemplatePath: '',
    interceptionMode: '',
    statusPort: 15020,
    proxyMetadata: {},
    runtimeValues: {},
    extraStatTags: [],
    meshId: '',
    other: {},
  };
}

export class ProxyConfigError extends Error {}

type Kind =
  | 'string'
  | 'duration'
  | 'port'
  | 'uint32'
  | 'int32'
  | 'bool'
  | 'stringMap'
  | 'stringList'
  | 'auth'
  | 'tracingServiceName'
  | 'statsMatcher'
  | 'object';

/** Every field of Istio 1.26's ProxyConfig (JSON names). `object` fields are validated as objects only. */
const FIELDS: Readonly<Record<string, Kind>> = {
  configPath: 'string',
  binaryPath: 'string',
  serviceCluster: 'string',
  tracingServiceName: 'tracingServiceName',
  drainDuration: 'duration',
  parentShutdownDuration: 'duration',
  discoveryAddress: 'string',
  discoveryRefreshDelay: 'duration',
  zipkinAddress: 'string',
  statsdUdpAddress: 'string',
  envoyMetricsServiceAddress: 'string',
  proxyAdminPort: 'port',
  availabilityZone: 'string',
  controlPlaneAuthPolicy: 'auth',
  customConfigFile: 'string',
  statNameLength: 'int32',
  concurrency: 'int32',
  proxyBootstrapTemplatePath: 'string',
  interceptionMode: 'string',
  tracing: 'object',
  sds: 'object',
  envoyAccessLogService: 'object',
  envoyMetricsService: 'object',
  proxyMetadata: 'stringMap',
  runtimeValues: 'stringMap',
  statusPort: 'port',
  extraStatTags: 'stringList',
  gatewayTopology: 'object',
  terminationDrainDuration: 'duration',
  meshId: 'string',
  readinessProbe: 'object',
  proxyStatsMatcher: 'statsMatcher',
  holdApplicationUntilProxyStarts: 'bool',
  caCertificatesPem: 'stringList',
  image: 'object',
  privateKeyProvider: 'object',
  proxyHeaders: 'object',
  fileFlushInterval: 'duration',
  fileFlushMinSizeKb: 'uint32',
};

const INTERCEPTION_MODES = ['REDIRECT', 'TPROXY', 'NONE'];

/** protojson accepts the proto (snake_case) names as well as the JSON (camelCase) names. */
function jsonName(key: string): string {
  return key.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  return `${typeof v} ${JSON.stringify(v)}`;
}

/** One field's value, checked and normalised; throws with the field's path. */
function fieldValue(path: string, kind: Kind, v: unknown): unknown {
  const bad = (expected: string): never => {
    throw new ProxyConfigError(`${path}: expected ${expected}, got ${describe(v)}`);
  };
  switch (kind) {
    case 'string':
      return typeof v === 'string' ? v : bad('a string');
    case 'bool':
      return typeof v === 'boolean' ? v : bad('a boolean');
    case 'duration': {
      // protojson's Duration is a string like "45s" or "0.250s"; Go duration text ("1m30s") is also accepted.
      if (typeof v !== 'string') return bad('a duration string such as "45s"');
      try {
        const ms = parseDurationMs(v);
        if (ms < 0) throw new Error('negative');
        return ms;
      } catch {
        return bad('a duration string such as "45s"');
      }
    }
    case 'port': {
      const n = typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n)) return bad('a port number');
      if (n < 1 || n > 65535) throw new ProxyConfigError(`${path}: port number ${n} must be in the range 1..65535`);
      return n;
    }
    case 'uint32':
    case 'int32': {
      const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
      if (typeof n !== 'number' || !Number.isInteger(n)) return bad('an integer');
      if (kind === 'uint32' && n < 0) return bad('a non-negative integer');
      return n;
    }
    case 'stringMap': {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return bad('a map of strings');
      const out: Record<string, string> = {};
      for (const [k, x] of Object.entries(v)) {
        if (typeof x !== 'string') throw new ProxyConfigError(`${path}.${k}: expected a string, got ${describe(x)}`);
        out[k] = x;
      }
      return out;
    }
    case 'stringList': {
      if (!Array.isArray(v)) return bad('a list of strings');
      return v.map((x, i) => (typeof x === 'string' ? x : fieldValue(`${path}[${i}]`, 'string', x)));
    }
    case 'auth': {
      const p = AUTH_POLICIES[String(v)];
      return p ?? bad('one of NONE, MUTUAL_TLS, INHERIT');
    }
    case 'tracingServiceName': {
      const p = TRACING_SERVICE_NAMES[String(v)];
      return p ?? bad('one of APP_LABEL_AND_NAMESPACE, CANONICAL_NAME_ONLY, CANONICAL_NAME_AND_NAMESPACE');
    }
    case 'statsMatcher': {
      if (v === null || typeof v !== 'object' || Array.isArray(v)) return bad('an object');
      const out: ProxyStatsMatcher = {};
      for (const [rawKey, x] of Object.entries(v)) {
        const k = jsonName(rawKey);
        if (k !== 'inclusionPrefixes' && k !== 'inclusionSuffixes' && k !== 'inclusionRegexps') {
          throw new ProxyConfigError(`${path}: unknown field ${JSON.stringify(rawKey)}`);
        }
        out[k] = fieldValue(`${path}.${rawKey}`, 'stringList', x) as string[];
      }
      return out;
    }
    case 'object':
      return v !== null && typeof v === 'object' && !Array.isArray(v) ? v : bad('an object');
  }
}

/**
 * Applies one ProxyConfig overlay (an already-parsed YAML/JSON object) over `base`: fields present replace the
 * base's, proxyMetadata keys merge (Istio's applyProxyConfig). `path` prefixes field names in errors.
 */
export function applyProxyConfigOverlay(base: ProxyConfig, overlay: unknown, path: string): ProxyConfig {
  if (overlay === null || overlay === undefined) return base;
  if (typeof overlay !== 'object' || Array.isArray(overlay)) {
    throw new ProxyConfigError(`${path}: expected a ProxyConfig object, got ${describe(overlay)}`);
  }
  const out: ProxyConfig = { ...base, proxyMetadata: { ...base.proxyMetadata }, other: { ...base.other } };
  const target = out as unknown as Record<string, unknown>;
  for (const [rawKey, v] of Object.entries(overlay as Record<string, unknown>)) {
    const key = jsonName(rawKey);
    const kind = FIELDS[key];
    const fieldPath = `${path}.${rawKey}`;
    if (!kind) throw new ProxyConfigError(`${fieldPath}: unknown field ${JSON.stringify(rawKey)} in ProxyConfig`);
    if (v === null) {
      // An explicit null clears the field, as protojson does for message fields.
      if (key === 'concurrency') out.concurrency = undefined;
      continue;
    }
    const value = fieldValue(fieldPath, kind, v);
    if (key === 'proxyMetadata') out.proxyMetadata = { ...out.proxyMetadata, ...(value as Record<string, string>) };
    else if (TYPED_FIELDS.has(key)) target[key] = value;
    else out.other[key] = v;
  }
  return out;
}

/** Fields with a typed slot in ProxyConfig; the rest go to `other`. */
const TYPED_FIELDS = new Set([
  ...Object.keys(defaultProxyConfig()).filter((k) => k !== 'other'),
  'tracingServiceName',
  'concurrency',
  'proxyStatsMatcher',
  'holdApplicationUntilProxyStarts',
]);

/** Top-level MeshConfig fields of Istio 1.26; others draw a warning (not an error: the list is long and grows). */
const MESH_CONFIG_FIELDS = new Set([
  'proxyListenPort',
  'proxyInboundListenPort',
  'proxyHttpPort',
  'connectTimeout',
  'protocolDetectionTimeout',
  'tcpKeepalive',
  'ingressClass',
  'ingressService',
  'ingressControllerMode',
  'ingressSelector',
  'enableTracing',
  'accessLogFile',
  'accessLogFormat',
  'accessLogEncoding',
  'enableEnvoyAccessLogService',
  'disableEnvoyListenerLog',
  'defaultConfig',
  'outboundTrafficPolicy',
  'inboundTrafficPolicy',
  'configSources',
  'enableAutoMtls',
  'trustDomain',
  'trustDomainAliases',
  'caCertificates',
  'defaultServiceExportTo',
  'defaultVirtualServiceExportTo',
  'defaultDestinationRuleExportTo',
  'rootNamespace',
  'localityLbSetting',
  'dnsRefreshRate',
  'h2UpgradePolicy',
  'inboundClusterStatName',
  'outboundClusterStatName',
  'certificates',
  'thriftConfig',
  'serviceSettings',
  'enablePrometheusMerge',
  'verifyCertificateAtClient',
  'ca',
  'extensionProviders',
  'defaultProviders',
  'discoverySelectors',
  'pathNormalization',
  'defaultHttpRetryPolicy',
  'meshMTLS',
  'tlsDefaults',
  'serviceScopeConfigs',
  'outboundClusterStatName',
  'mixerCheckServer',
  'mixerReportServer',
  'disablePolicyChecks',
  'policyCheckFailOpen',
  'sidecarToTelemetrySessionAffinity',
  'enableSdsTokenMount',
  'sdsUdsPath',
  'authPolicy',
  'rdsRefreshDelay',
  'mixerAddress',
  'localityLbSetting',
  'trustDomainAliases',
  'meshId',
]);

export interface MeshConfigFile {
  /** Path for messages. */
  path: string;
  text: string;
}

function parseDocument(text: string, where: string): unknown {
  try {
    return parseYaml(text, { prettyErrors: true });
  } catch (e) {
    if (e instanceof YAMLParseError) throw new ProxyConfigError(`${where}: ${e.message.split('\n')[0]}`);
    throw e;
  }
}

/**
 * The mesh config file's `defaultConfig` applied over `base` (Istio's mesh.ApplyMeshConfig, for the part a
 * proxy reads); MeshConfig fields this build does not know are pushed to `warnings`.
 */
export function applyMeshConfigDefaults(base: ProxyConfig, meshConfig: MeshConfigFile, warnings: string[]): ProxyConfig {
  const where = `failed to unmarshal mesh config from file [${meshConfig.path}]`;
  try {
    const doc = parseDocument(meshConfig.text, where);
    if (doc === null || doc === undefined) return base;
    if (typeof doc !== 'object' || Array.isArray(doc)) throw new ProxyConfigError(`${where}: expected a MeshConfig object, got ${describe(doc)}`);
    for (const key of Object.keys(doc)) {
      if (!MESH_CONFIG_FIELDS.has(jsonName(key)))
        warnings.push(`mesh config file ${meshConfig.path}: unknown MeshConfig field ${JSON.stringify(key)} ignored`);
    }
    return applyProxyConfigOverlay(base, (doc as Record<string, unknown>)['defaultConfig'], 'defaultConfig');
  } catch (e) {
    if (e instanceof ProxyConfigError && !e.message.startsWith('failed to unmarshal')) throw new ProxyConfigError(`${where}: ${e.message}`);
    throw e;
  }
}

/** A ProxyConfig document (YAML or JSON text) applied over `base`; errors start with `where`, fields with `path`. */
export function applyProxyConfigText(base: ProxyConfig, text: string, where: string, path: string): ProxyConfig {
  try {
    return applyProxyConfigOverlay(base, parseDocument(text, where), path);
  } catch (e) {
    if (e instanceof ProxyConfigError && !e.message.startsWith('failed to unmarshal')) throw new ProxyConfigError(`${where}: ${e.message}`);
    throw e;
  }
}

/** `host:port` with a non-empty host and a valid port, as Istio's ValidateProxyAddress wants. */
export function proxyAddress(address: string): { host: string; port: number } | undefined {
  let hp: { host: string; port: string };
  try {
    hp = splitHostPort(address);
  } catch {
    return undefined;
  }
  const port = Number(hp.port);
  if (hp.host === '' || !/^\d+$/.test(hp.port) || port < 1 || port > 65535) return undefined;
  return { host: hp.host, port };
}

/** Istio's ValidateMeshConfigProxyConfig, for the fields the agent uses. */
export function validateProxyConfig(pc: ProxyConfig): string[] {
  const errs: string[] = [];
  if (pc.configPath === '') errs.push('configPath: config path must be set');
  if (pc.binaryPath === '') errs.push('binaryPath: binary path must be set');
  if (pc.drainDuration <= 0) errs.push('drainDuration: invalid drain duration: duration must be greater than 0');
  if (!proxyAddress(pc.discoveryAddress)) {
    errs.push(`discoveryAddress: invalid discovery address: ${JSON.stringify(pc.discoveryAddress)} is not a valid host:port`);
  }
  if (pc.statsdUdpAddress !== '' && !proxyAddress(pc.statsdUdpAddress)) {
    errs.push(`statsdUdpAddress: invalid statsd udp address: ${JSON.stringify(pc.statsdUdpAddress)} is not a valid host:port`);
  }
  if (pc.statNameLength < 0) errs.push('statNameLength: invalid stat name length: must be non-negative');
  if (pc.concurrency !== undefined && pc.concurrency < 0) errs.push('concurrency: invalid concurrency: must be non-negative');
  if (pc.interceptionMode !== '' && !INTERCEPTION_MODES.includes(pc.interceptionMode)) {
    errs.push(`interceptionMode: invalid interception mode ${JSON.stringify(pc.interceptionMode)}: must be one of ${INTERCEPTION_MODES.join(', ')}`);
  }
  return errs;
}

/** protojson text of a Duration held in milliseconds: "45s", "0.250s". */
export function protoDuration(ms: number): string {
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${(ms / 1000).toFixed(3).replace(/0+$/, '')}s`;
}

/** The ProxyConfig as protojson (camelCase names), for node metadata PROXY_CONFIG and logs. */
export function proxyConfigToJson(pc: ProxyConfig): Record<string, unknown> {
  const out: Record<string, unknown> = {
    configPath: pc.configPath,
    binaryPath: pc.binaryPath,
    serviceCluster: pc.serviceCluster,
    drainDuration: protoDuration(pc.drainDuration),
    parentShutdownDuration: protoDuration(pc.parentShutdownDuration),
    discoveryAddress: pc.discoveryAddress,
    proxyAdminPort: pc.proxyAdminPort,
    controlPlaneAuthPolicy: pc.controlPlaneAuthPolicy,
    statNameLength: pc.statNameLength,
    statusPort: pc.statusPort,
    terminationDrainDuration: protoDuration(pc.terminationDrainDuration),
  };
  if (pc.tracingServiceName) out['tracingServiceName'] = pc.tracingServiceName;
  if (pc.statsdUdpAddress) out['statsdUdpAddress'] = pc.statsdUdpAddress;
  if (pc.customConfigFile) out['customConfigFile'] = pc.customConfigFile;
  if (pc.concurrency !== undefined) out['concurrency'] = pc.concurrency;
  if (pc.proxyBootstrapTemplatePath) out['proxyBootstrapTemplatePath'] = pc.proxyBootstrapTemplatePath;
  if (pc.interceptionMode) out['interceptionMode'] = pc.interceptionMode;
  if (Object.keys(pc.proxyMetadata).length) out['proxyMetadata'] = { ...pc.proxyMetadata };
  if (Object.keys(pc.runtimeValues).length) out['runtimeValues'] = { ...pc.runtimeValues };
  if (pc.extraStatTags.length) out['extraStatTags'] = [...pc.extraStatTags];
  if (pc.proxyStatsMatcher) out['proxyStatsMatcher'] = { ...pc.proxyStatsMatcher };
  if (pc.meshId) out['meshId'] = pc.meshId;
  if (pc.holdApplicationUntilProxyStarts !== undefined) out['holdApplicationUntilProxyStarts'] = pc.holdApplicationUntilProxyStarts;
  return { ...out, ...pc.other };
}
