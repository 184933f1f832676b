// The proxy asking for config, from its xDS Node: Istio's node ID `type~ip~id~domain`
// (model.ParseServiceNodeWithMetadata, same error texts) and its metadata Struct (NodeMetadata).
import type { JsonObject } from '@bufbuild/protobuf';
import type { Node } from '../gen/envoy/config/core/v3/base_pb';
import { isIp } from './host';
import type { NodeMetadata, NodeType, Proxy } from './model';

/** Node types Istio accepts (it also knows waypoint and ztunnel, which this mesh does not serve). */
export const NODE_TYPES: readonly NodeType[] = ['sidecar', 'router'];

export class ProxyParseError extends Error {}

/** The node metadata Struct as plain JSON (protobuf-es already decodes google.protobuf.Struct so). */
export function metadataToObject(metadata: JsonObject | undefined): Record<string, unknown> {
  return metadata ? { ...metadata } : {};
}

function str(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  return undefined;
}

function strMap(v: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) {
      const s = str(x);
      if (s !== undefined) out[k] = s;
    }
  }
  return out;
}

/** Istio's StringBool: `"true"`, `true`, `"1"`… */
function bool(v: unknown): boolean | undefined {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v === 'boolean') return v;
  const s = String(v).toLowerCase();
  return s === 'true' || s === '1' || s === 't';
}

/** NodeMetadata from the metadata object: the fields Istio's generators consult. */
export function parseNodeMetadata(raw: Record<string, unknown>): NodeMetadata {
  const ips = str(raw['INSTANCE_IPS']);
  const md: NodeMetadata = {
    labels: strMap(raw['LABELS']),
    raw,
  };
  const set = <K extends keyof NodeMetadata>(k: K, v: NodeMetadata[K] | undefined) => {
    if (v !== undefined && v !== '') md[k] = v;
  };
  set('namespace', str(raw['NAMESPACE']));
  set('clusterId', str(raw['CLUSTER_ID']));
  set('generator', str(raw['GENERATOR']));
  // ISTIO_VERSION is what Istio's agent sends; MESH_VERSION is this mesh's spelling.
  set('meshVersion', str(raw['MESH_VERSION']) ?? str(raw['ISTIO_VERSION']));
  set('interceptionMode', str(raw['INTERCEPTION_MODE']));
  if (ips)
    md.instanceIps = ips
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  set('workloadName', str(raw['WORKLOAD_NAME']));
  set('serviceAccount', str(raw['SERVICE_ACCOUNT']));
  set('dnsCapture', bool(raw['DNS_CAPTURE']));
  set('dnsAutoAllocate', bool(raw['DNS_AUTO_ALLOCATE']));
  set('network', str(raw['NETWORK']));
  set('autoRegisterGroup', str(raw['AUTO_REGISTER_GROUP']));
  set('workloadEntry', str(raw['WORKLOAD_ENTRY']));
  const pc = raw['PROXY_CONFIG'];
  if (pc && typeof pc === 'object' && (pc as Record<string, unknown>)['readinessProbe'] != null) md.readinessProbe = true;
  return md;
}

/**
 * Parses a node ID with its metadata. Errors read like Istio's so users recognise them:
 * `missing parts in the service node "…"`, `invalid node type (valid types: [sidecar router]) in the
 * service node "…"`, `no valid IP address in the service node id or metadata`.
 */
export function parseServiceNode(nodeId: string, metadata: NodeMetadata): Proxy {
  const parts = nodeId.split('~');
  if (parts.length !== 4) throw new ProxyParseError(`missing parts in the service node ${JSON.stringify(nodeId)}`);
  const [type, ip, id, domain] = parts as [string, string, string, string];
  if (!(NODE_TYPES as readonly string[]).includes(type)) {
    throw new ProxyParseError(`invalid node type (valid types: [${NODE_TYPES.join(' ')}]) in the service node ${JSON.stringify(nodeId)}`);
  }
  let ipAddresses: string[] = [];
  const metaIps = metadata.instanceIps ?? [];
  if (metaIps.length > 0 && metaIps.every(isIp)) ipAddresses = [...metaIps];
  else if (isIp(ip)) ipAddresses = [ip];
  if (ipAddresses.length === 0) throw new ProxyParseError('no valid IP address in the service node id or metadata');

  // Istio's GetProxyConfigNamespace: metadata NAMESPACE, else the first label of the DNS domain.
  const domainParts = domain.split('.');
  const namespace = metadata.namespace ?? (domainParts.length > 1 ? domainParts[0]! : '');
  return {
    nodeId,
    type: type as NodeType,
    ipAddresses,
    id,
    namespace,
    dnsDomain: domain,
    metadata,
    labels: metadata.labels,
    proxyless: metadata.generator === 'grpc',
  };
}

/** The Proxy behind an xDS Node (the first request of a stream). */
export function proxyFromNode(node: Node | undefined): Proxy {
  if (!node) throw new ProxyParseError('node is required in the first request of a stream');
  if (node.id === '') throw new ProxyParseError('missing node ID');
  return parseServiceNode(node.id, parseNodeMetadata(metadataToObject(node.metadata)));
}

/** Locality of the node as `region/zone/subzone`, when it sent one. */
export function nodeLocality(node: Node | undefined): string | undefined {
  const l = node?.locality;
  if (!l || (!l.region && !l.zone && !l.subZone)) return undefined;
  return `${l.region}/${l.zone}/${l.subZone}`;
}
