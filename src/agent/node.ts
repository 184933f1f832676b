// Who the proxy is, as the discovery daemon sees it: Istio's service node ID `type~ip~pod.ns~domain`, the
// node metadata (bootstrap.GetNodeMetaData) built from the environment, the ProxyConfig and the downward-API
// files, the locality and the cluster name. Pure: the caller supplies env, file contents and interfaces.
import { ipFamily } from '../lib/ip';
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import { proxyAddress, proxyConfigToJson, type ProxyConfig } from '../config/proxyconfig';
import type { NodeType } from './config';

/** Env prefixes whose variables become node metadata (ours first; Istio's spelling is accepted too). */
export const META_PREFIXES = ['MESH_META_', 'ISTIO_META_'] as const;
export const METAJSON_PREFIXES = ['MESH_METAJSON_', 'ISTIO_METAJSON_'] as const;

/** The downward-API files Istio reads from ./etc/istio/pod, under this mesh's ./etc/mesh/pod. */
export const POD_LABELS_PATH = './etc/mesh/pod/labels';
export const POD_ANNOTATIONS_PATH = './etc/mesh/pod/annotations';

/** Label carrying the locality as `region.zone.subzone` (or with slashes), Istio's `istio-locality`. */
export const LOCALITY_LABEL = 'istio-locality';
/** Deployment's per-revision label, not part of a workload's identity. */
const POD_TEMPLATE_HASH = 'pod-template-hash';
/** The default service cluster name: Istio's `istio-proxy`, this mesh's `mesh-proxy`. */
export const DEFAULT_SERVICE_CLUSTER = 'mesh-proxy';

export interface NetworkInterfaceAddress {
  address: string;
  family: 'IPv4' | 'IPv6' | string;
  internal: boolean;
}

function isLinkLocal(ip: string): boolean {
  return /^169\.254\./.test(ip) || /^fe[89ab][0-9a-f]:/i.test(ip);
}

/** Istio's network.GetPrivateIPs: the machine's non-loopback, non-link-local unicast addresses. */
export function privateIps(interfaces: Readonly<Record<string, readonly NetworkInterfaceAddress[] | undefined>>): string[] {
  const out: string[] = [];
  for (const addrs of Object.values(interfaces)) {
    for (const a of addrs ?? []) {
      const ip = a.address.replace(/%.*$/, '');
      if (a.internal || !ipFamily(ip) || isLinkLocal(ip) || ip === '0.0.0.0' || ip === '::') continue;
      if (!out.includes(ip)) out.push(ip);
    }
  }
  return out;
}

export interface ProxyIdentity {
  type: NodeType;
  /** INSTANCE_IP first (the daemon takes the first as the pod IP), then the machine's other addresses. */
  ipAddresses: string[];
  /** `pod.namespace` */
  id: string;
  dnsDomain: string;
  /** `type~ip~id~domain` */
  nodeId: string;
}

export class NodeTypeError extends Error {}

/** The proxy type argument, checked as Istio does (`Invalid proxy Type: …`). */
export function parseNodeType(arg: string | undefined): NodeType {
  if (arg === undefined) return 'sidecar';
  if (arg === 'sidecar' || arg === 'router') return arg;
  throw new NodeTypeError(`Invalid proxy Type: ${arg}`);
}

/** Istio's initProxy + ServiceNode. */
export function proxyIdentity(o: {
  type: NodeType;
  podName: string;
  podNamespace: string;
  instanceIp: string;
  /** --domain; empty means `${POD_NAMESPACE}.svc.cluster.local`. */
  domain: string;
  machineIps: readonly string[];
}): ProxyIdentity {
  const ips: string[] = [];
  if (ipFamily(o.instanceIp)) ips.push(o.instanceIp);
  const machine = o.machineIps.length ? [...o.machineIps] : ['127.0.0.1', '::1'];
  for (const ip of machine) if (!ips.includes(ip)) ips.push(ip);
  const id = `${o.podName}.${o.podNamespace}`;
  const dnsDomain = o.domain || `${o.podNamespace}.svc.cluster.local`;
  return { type: o.type, ipAddresses: ips, id, dnsDomain, nodeId: [o.type, ips[0] ?? '', id, dnsDomain].join('~') };
}

/** Whether every address is IPv6 (the proxy then uses ::1 and v6 local addresses). */
export function allIpv6(ips: readonly string[]): boolean {
  return ips.length > 0 && ips.every((ip) => ipFamily(ip) === 6);
}

export class DownwardApiError extends Error {}

/** Go's strconv.Unquote for a double-quoted string, enough for the downward API's `%q` values. */
function goUnquote(s: string): string {
  if (s.length < 2 || s[0] !== '"' || s[s.length - 1] !== '"') throw new Error('invalid syntax');
  const body = s.slice(1, -1);
  let out = '';
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c === '"') throw new Error('invalid syntax');
    if (c !== '\\') {
      out += c;
      continue;
    }
    const n = body[++i];
    const simple: Record<string, string> = { n: '\n', t: '\t', r: '\r', '\\': '\\', '"': '"', "'": "'", a: '\x07', b: '\b', f: '\f', v: '\v' };
    if (n !== undefined && n in simple) out += simple[n];
    else if (n === 'x' || n === 'u' || n === 'U') {
      const len = n === 'x' ? 2 : n === 'u' ? 4 : 8;
      const hex = body.slice(i + 1, i + 1 + len);
      if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(hex)) throw new Error('invalid syntax');
      out += n === 'x' ? String.fromCharCode(parseInt(hex, 16)) : String.fromCodePoint(parseInt(hex, 16));
      i += len;
    } else if (n !== undefined && /[0-7]/.test(n)) {
      const oct = body.slice(i, i + 3);
      if (!/^[0-7]{3}$/.test(oct)) throw new Error('invalid syntax');
      out += String.fromCharCode(parseInt(oct, 8));
      i += 2;
    } else throw new Error('invalid syntax');
  }
  return out;
}

/** Istio's ParseDownwardAPI: `key="value"` lines (Go %q quoting); lines without `=` are skipped. */
export function parseDownwardApi(text: string, path: string): Record<string, string> {
  const out: Record<string, string> = {};
  text.split('\n').forEach((line, i) => {
    const eq = line.indexOf('=');
    if (eq < 0) return;
    const raw = line.slice(eq + 1);
    try {
      out[line.slice(0, eq)] = goUnquote(raw);
    } catch {
      throw new DownwardApiError(`${path}:${i + 1}: failed to unquote ${raw}: invalid syntax`);
    }
  });
  return out;
}

/** `region.zone.subzone` (or `region/zone/subzone`) as Envoy's Locality. */
export interface Locality {
  region: string;
  zone: string;
  subZone: string;
}

export function localityFromLabel(label: string | undefined): { label: string; locality?: Locality } {
  if (!label) return { label: '' };
  const normalized = label.replace(/\./g, '/');
  const [region = '', zone = '', subZone = ''] = normalized.split('/');
  return { label: normalized, locality: { region, zone, subZone } };
}

export interface NodeMetadataInputs {
  /** The process environment. */
  env: Readonly<Record<string, string | undefined>>;
  proxyConfig: ProxyConfig;
  identity: ProxyIdentity;
  meshVersion: string;
  /** Contents of ./etc/mesh/pod/labels when present. */
  podLabels?: Record<string, string>;
  /** Contents of ./etc/mesh/pod/annotations when present. */
  podAnnotations?: Record<string, string>;
  envoyStatusPort: number;
  envoyPrometheusPort: number;
  exitOnZeroActiveConnections: boolean;
  stsPort: number;
  outlierLogPath: string;
  /** Expected SAN of the discovery daemon's certificate (set when the control plane uses mTLS). */
  pilotSan?: string[];
}

export interface NodeInfo {
  id: string;
  cluster: string;
  locality?: Locality;
  /** The metadata Struct as JSON. */
  metadata: JsonObject;
  labels: Record<string, string>;
  warnings: string[];
  /** What the operator should know but need not fix (e.g. which spelling of a variable was read). */
  info: string[];
}

/**
 * The env variables with a prefix, by the rest of their name, in a stable (sorted) order. The first
 * prefix (ours) wins over Istio's spelling; `from` records which variable each value came from.
 */
function withPrefix(
  env: NodeMetadataInputs['env'],
  prefixes: readonly string[],
): { values: Array<[string, string]>; from: Map<string, string>; shadowed: string[] } {
  const out = new Map<string, string>();
  const from = new Map<string, string>();
  const shadowed: string[] = [];
  for (const prefix of [...prefixes].reverse()) {
    for (const [k, v] of Object.entries(env)) {
      if (v === undefined || !k.startsWith(prefix) || k.length === prefix.length) continue;
      const key = k.slice(prefix.length);
      if (from.has(key)) shadowed.push(from.get(key)!);
      out.set(key, v);
      from.set(key, k);
    }
  }
  const values = [...out.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { values, from, shadowed: shadowed.sort() };
}

/**
 * One line saying which of Istio's metadata variable names were read (and which were ignored because
 * ours were set too), so an Istio user sees that `ISTIO_META_*` took effect; undefined when none is used.
 */
function istioSpellingsNote(sets: ReadonlyArray<ReturnType<typeof withPrefix>>): string | undefined {
  const used: string[] = [];
  const ignored: string[] = [];
  for (const set of sets) {
    for (const name of set.from.values()) if (name.startsWith('ISTIO_')) used.push(name);
    ignored.push(...set.shadowed);
  }
  if (!used.length && !ignored.length) return undefined;
  const parts: string[] = [];
  if (used.length)
    parts.push(
      `node metadata read from Istio's variable names ${used.sort().join(', ')} (mesh's own: ${used.map((n) => n.replace(/^ISTIO_/, 'MESH_')).join(', ')})`,
    );
  if (ignored.length) parts.push(`${ignored.join(', ')} ignored: the MESH_ variable of the same name is set and wins`);
  return parts.join('; ');
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** Istio's GetPilotSan: the discovery host, with `localhost` standing for the daemon's in-cluster name. */
export function pilotSan(discoveryAddress: string): string {
  const host = proxyAddress(discoveryAddress)?.host ?? discoveryAddress.split(':')[0] ?? '';
  return host === 'localhost' ? 'meshd.mesh-system.svc' : host;
}

/**
 * Istio's GetNodeMetaData + ConvertNodeToXDSNode. Metadata comes from (later wins): proxyMetadata entries
 * with a META prefix, MESH_META_* env (value as string), MESH_METAJSON_* env (value parsed as JSON, key
 * without the prefix, e.g. MESH_METAJSON_LABELS → LABELS), then the agent's own keys.
 */
export function nodeMetadata(i: NodeMetadataInputs): NodeInfo {
  const warnings: string[] = [];
  const md: Record<string, JsonValue> = {};
  for (const [k, v] of Object.entries(i.proxyConfig.proxyMetadata).sort(([a], [b]) => (a < b ? -1 : 1))) {
    const prefix = META_PREFIXES.find((p) => k.startsWith(p));
    if (prefix && k.length > prefix.length) md[k.slice(prefix.length)] = v;
  }
  const meta = withPrefix(i.env, META_PREFIXES);
  const metaJson = withPrefix(i.env, METAJSON_PREFIXES);
  for (const [k, v] of meta.values) md[k] = v;
  for (const [k, v] of metaJson.values) {
    try {
      md[k] = JSON.parse(v) as JsonValue;
    } catch (e) {
      warnings.push(`Env variable ${metaJson.from.get(k)} [${v}] failed json unmarshal: ${(e as Error).message}`);
    }
  }
  const note = istioSpellingsNote([meta, metaJson]);

  // Labels: the static ones from MESH_METAJSON_LABELS, overlaid by the downward-API file.
  const labels: Record<string, string> = { ...(stringMap(md['LABELS']) ?? {}) };
  if (i.podLabels) {
    for (const [k, v] of Object.entries(i.podLabels)) if (k !== POD_TEMPLATE_HASH) labels[k] = v;
  }
  const loc = localityFromLabel(labels[LOCALITY_LABEL]);
  if (loc.label) labels[LOCALITY_LABEL] = loc.label;
  if (Object.keys(labels).length || md['LABELS'] !== undefined) md['LABELS'] = labels;

  if (i.podAnnotations && Object.keys(i.podAnnotations).length) {
    md['ANNOTATIONS'] = { ...(stringMap(md['ANNOTATIONS']) ?? {}), ...i.podAnnotations };
  }
  const set = (k: string, v: JsonValue | undefined) => {
    if (v !== undefined && v !== '') md[k] = v;
  };
  if (md['MESH_VERSION'] === undefined) set('MESH_VERSION', i.meshVersion);
  if (md['ISTIO_VERSION'] === undefined) set('ISTIO_VERSION', i.meshVersion);
  set('INSTANCE_IPS', [...new Set(i.identity.ipAddresses)].join(','));
  if (i.stsPort) set('STS_PORT', String(i.stsPort));
  set('ENVOY_STATUS_PORT', i.envoyStatusPort);
  set('ENVOY_PROMETHEUS_PORT', i.envoyPrometheusPort);
  if (i.exitOnZeroActiveConnections) set('EXIT_ON_ZERO_ACTIVE_CONNECTIONS', 'true');
  md['PROXY_CONFIG'] = proxyConfigToJson(i.proxyConfig) as JsonObject;
  set('NAME', i.env['POD_NAME']);
  set('NAMESPACE', i.env['POD_NAMESPACE']);
  set('SERVICE_ACCOUNT', i.env['SERVICE_ACCOUNT']);
  if (i.pilotSan?.length) md['PILOT_SAN'] = [...i.pilotSan];
  set('OUTLIER_LOG_PATH', i.outlierLogPath);

  return {
    id: i.identity.nodeId,
    cluster: serviceCluster(i.proxyConfig, labels, String(md['WORKLOAD_NAME'] ?? ''), String(md['NAMESPACE'] ?? '')),
    locality: loc.locality,
    metadata: md,
    labels,
    warnings,
    info: note ? [note] : [],
  };
}

function clusterOrDefault(name: string, labels: Record<string, string>, workloadName: string, namespace: string): string {
  if (name !== '' && name !== DEFAULT_SERVICE_CLUSTER && name !== 'istio-proxy') return name;
  if (labels['app'] !== undefined) return `${labels['app']}.${namespace}`;
  if (workloadName !== '') return `${workloadName}.${namespace}`;
  if (namespace !== '') return `${DEFAULT_SERVICE_CLUSTER}.${namespace}`;
  return DEFAULT_SERVICE_CLUSTER;
}

/** The canonical service of a workload (Istio's labels.CanonicalService name part). */
function canonicalName(labels: Record<string, string>, workloadName: string): string {
  return (
    labels['service.istio.io/canonical-name'] ??
    labels['service.mesh.io/canonical-name'] ??
    labels['app.kubernetes.io/name'] ??
    labels['app'] ??
    workloadName
  );
}

/** Istio's getServiceCluster: the node's `cluster`, from serviceCluster or tracingServiceName. */
export function serviceCluster(pc: ProxyConfig, labels: Record<string, string>, workloadName: string, namespace: string): string {
  const wn = workloadName || DEFAULT_SERVICE_CLUSTER;
  switch (pc.tracingServiceName) {
    case undefined:
      return clusterOrDefault(pc.serviceCluster, labels, workloadName, namespace);
    case 'CANONICAL_NAME_ONLY':
      return clusterOrDefault(canonicalName(labels, wn), labels, workloadName, namespace);
    case 'CANONICAL_NAME_AND_NAMESPACE': {
      const cs = canonicalName(labels, wn);
      return namespace !== '' ? `${cs}.${namespace}` : clusterOrDefault(cs, labels, workloadName, namespace);
    }
    default:
      return clusterOrDefault(DEFAULT_SERVICE_CLUSTER, labels, workloadName, namespace);
  }
}
