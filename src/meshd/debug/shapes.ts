// Pure translations from the daemon's model to the JSON Istio's debug endpoints answer with
// (pilot/pkg/xds/debug.go and the model types it marshals), so that tools written against istiod's
// `/debug/*` read ours unchanged. Go field names are kept where Istio marshals untagged struct fields.
import { objectKindOf } from '../../config/schemas';
import type { Config } from '../../config/types';
import type { Endpoint, HealthStatus, Resolution, Service } from '../../discovery/model';
import { TYPE_URL } from '../../lib/xds/type-urls';
import type { WatchedTypeStatus, XdsConnectionInfo } from '../providers';

/** Go's time.Time JSON (RFC 3339 with nanoseconds, trailing zeros trimmed); the zero time when unknown. */
export function goTime(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '0001-01-01T00:00:00Z';
  return new Date(ms)
    .toISOString()
    .replace(/\.?0+Z$/, 'Z')
    .replace(/\.Z$/, 'Z');
}

// Istio's model.Resolution enum values.
const RESOLUTION: Readonly<Record<Resolution, number>> = { ClientSide: 0, DNS: 1, Passthrough: 2, DNSRoundRobin: 3 };
// Istio's model.HealthStatus enum values.
const HEALTH: Readonly<Record<HealthStatus, number>> = { Healthy: 1, UnHealthy: 2, Draining: 3, Terminating: 4 };

const setOf = (items: readonly string[]): Record<string, Record<string, never>> => Object.fromEntries([...items].sort().map((i) => [i, {}]));

/** One model.Service as `/debug/registryz` marshals it. */
export function serviceJson(s: Service): Record<string, unknown> {
  const out: Record<string, unknown> = {
    Attributes: {
      ServiceRegistry: s.registry,
      // Istio names ServiceEntry services by their host.
      Name: s.name ?? s.hostname,
      Namespace: s.namespace,
      Labels: Object.keys(s.labels).length ? { ...s.labels } : null,
      ExportTo: s.exportTo.length ? setOf(s.exportTo) : null,
      LabelSelectors: s.selector && Object.keys(s.selector).length ? { ...s.selector } : null,
    },
    hostname: s.hostname,
  };
  if (s.ports.length) out.ports = s.ports.map((p) => ({ name: p.name, port: p.port, protocol: p.protocol }));
  if (s.serviceAccounts.length) out.serviceAccounts = [...s.serviceAccounts];
  out.clusterVIPs = { Addresses: s.addresses.length ? { [s.clusterId]: [...s.addresses] } : null };
  out.creationTime = goTime(s.creationTime);
  // Istio's default address for a service without a VIP is the unspecified IP.
  out.defaultAddress = s.addresses[0] ?? '0.0.0.0';
  out.Resolution = RESOLUTION[s.resolution];
  out.MeshExternal = s.meshExternal;
  return out;
}

export function registryzJson(services: readonly Service[]): Record<string, unknown>[] {
  return [...services].sort((a, b) => cmp(a.hostname, b.hostname) || cmp(a.namespace, b.namespace)).map(serviceJson);
}

const TLS_MODE_LABELS = ['security.istio.io/tlsMode', 'security.mesh.io/tlsMode'];

/** One model.IstioEndpoint as `/debug/endpointShardz` marshals it. */
export function endpointJson(e: Endpoint, clusterId: string): Record<string, unknown> {
  const tlsMode = TLS_MODE_LABELS.map((l) => e.labels[l]).find((v) => v !== undefined) ?? 'disabled';
  return {
    Labels: Object.keys(e.labels).length ? { ...e.labels } : null,
    Addresses: [e.address],
    ServicePortName: e.servicePortName,
    ServiceAccount: e.serviceAccount ?? '',
    Network: e.network ?? '',
    Locality: { Label: e.locality ?? '', ClusterID: clusterId },
    EndpointPort: e.port,
    LbWeight: e.weight ?? 0,
    TLSMode: tlsMode,
    Namespace: e.namespace,
    WorkloadName: e.workloadName ?? '',
    HealthStatus: HEALTH[e.healthStatus],
  };
}

/**
 * `/debug/endpointShardz` (and the obsolete `/debug/endpointz`, which Istio now answers the same way):
 * hostname → namespace → { Shards: { "<registry>/<cluster>": [endpoints] }, ServiceAccounts: set }.
 */
export function endpointShardzJson(services: readonly Service[], endpoints: readonly Endpoint[]): Record<string, unknown> {
  const owner = new Map(services.map((s) => [`${s.hostname}\u0000${s.namespace}`, s]));
  const out: Record<string, Record<string, { Shards: Record<string, unknown[]>; ServiceAccounts: Record<string, object> }>> = {};
  const sorted = [...endpoints].sort(
    (a, b) => cmp(a.hostname, b.hostname) || cmp(a.namespace, b.namespace) || cmp(a.address, b.address) || a.port - b.port,
  );
  for (const e of sorted) {
    const svc = owner.get(`${e.hostname}\u0000${e.namespace}`);
    const shardKey = svc ? `${svc.registry}/${e.clusterId ?? svc.clusterId}` : '/';
    const byNs = (out[e.hostname] ??= {});
    const shards = (byNs[e.namespace] ??= { Shards: {}, ServiceAccounts: {} });
    (shards.Shards[shardKey] ??= []).push(endpointJson(e, e.clusterId ?? svc?.clusterId ?? ''));
    if (e.serviceAccount) shards.ServiceAccounts[e.serviceAccount] = {};
  }
  return out;
}

/** One config as a Kubernetes object (Istio's crd.ConvertConfig), for `/debug/configz`. */
export function configJson(c: Config): Record<string, unknown> {
  const m = c.meta;
  const metadata: Record<string, unknown> = { name: m.name, namespace: m.namespace };
  if (m.uid) metadata.uid = m.uid;
  if (m.resourceVersion) metadata.resourceVersion = m.resourceVersion;
  if (m.generation) metadata.generation = m.generation;
  metadata.creationTimestamp = m.creationTimestamp ?? null;
  if (Object.keys(m.labels).length) metadata.labels = { ...m.labels };
  if (Object.keys(m.annotations).length) metadata.annotations = { ...m.annotations };
  const out: Record<string, unknown> = { kind: objectKindOf(c.kind), apiVersion: c.apiVersion, metadata, spec: c.spec };
  if (c.status !== undefined) out.status = c.status;
  return out;
}

export function configzJson(configs: readonly Config[]): Record<string, unknown>[] {
  return [...configs].sort((a, b) => cmp(a.kind, b.kind) || cmp(a.meta.namespace, b.meta.namespace) || cmp(a.meta.name, b.meta.name)).map(configJson);
}

const SYNC_PAIRS: ReadonlyArray<[string, string]> = [
  ['cluster', TYPE_URL.cluster],
  ['listener', TYPE_URL.listener],
  ['route', TYPE_URL.route],
  ['endpoint', TYPE_URL.endpoint],
  ['extensionconfig', TYPE_URL.extensionConfig],
];

export function sortedConnections(conns: readonly XdsConnectionInfo[]): XdsConnectionInfo[] {
  return [...conns].sort((a, b) => cmp(a.id, b.id));
}

/** `/debug/syncz`: Istio's SyncStatus per connection (empty strings omitted, as Go's omitempty does). */
export function synczJson(conns: readonly XdsConnectionInfo[], namespace = ''): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const c of sortedConnections(conns)) {
    if (namespace && c.proxy.namespace !== namespace) continue;
    const byType = new Map<string, WatchedTypeStatus>(c.watched.map((w) => [w.typeUrl, w]));
    const s: Record<string, unknown> = {};
    put(s, 'cluster_id', c.proxy.metadata.clusterId);
    put(s, 'proxy', c.proxy.id);
    put(s, 'proxy_type', c.proxy.type);
    put(s, 'istio_version', c.proxy.metadata.meshVersion);
    for (const [short, url] of SYNC_PAIRS) {
      put(s, `${short}_sent`, byType.get(url)?.nonceSent);
      put(s, `${short}_acked`, byType.get(url)?.nonceAcked);
    }
    if (c.watched.length) {
      const resources: Record<string, Record<string, unknown>> = {};
      for (const w of [...c.watched].sort((a, b) => cmp(a.typeUrl, b.typeUrl))) {
        const r: Record<string, unknown> = {};
        put(r, 'sent', w.nonceSent);
        put(r, 'acked', w.nonceAcked);
        r.sentTime = goTime(w.lastSendTime);
        put(r, 'lastError', w.lastError);
        resources[w.typeUrl] = r;
      }
      s.resources = resources;
    }
    out.push(s);
  }
  return out;
}

/** `/debug/adsz`: AdsClients with each connection's labels, node metadata and watches. */
export function adszJson(conns: readonly XdsConnectionInfo[]): Record<string, unknown> {
  const sorted = sortedConnections(conns);
  const clients = sorted.map((c) => {
    const client: Record<string, unknown> = {
      connectionId: c.id,
      connectedAt: goTime(c.connectedAt),
      address: c.peerAddress,
    };
    if (Object.keys(c.proxy.labels).length) client.labels = { ...c.proxy.labels };
    if (Object.keys(c.proxy.metadata.raw).length) client.metadata = c.proxy.metadata.raw;
    if (c.watched.length) {
      client.watches = Object.fromEntries(
        [...c.watched].sort((a, b) => cmp(a.typeUrl, b.typeUrl)).map((w) => [w.typeUrl, [...w.resourceNames].sort()]),
      );
    }
    return client;
  });
  return withClients(sorted.length, clients);
}

/** `/debug/connections`: AdsClients with only ID, time and peer. */
export function connectionsJson(conns: readonly XdsConnectionInfo[]): Record<string, unknown> {
  const sorted = sortedConnections(conns);
  return withClients(
    sorted.length,
    sorted.map((c) => ({ connectionId: c.id, connectedAt: goTime(c.connectedAt), address: c.peerAddress })),
  );
}

/** Istio's getProxyConnection: the first connection whose ID contains the proxyID query value. */
export function findConnection(conns: readonly XdsConnectionInfo[], proxyID: string): XdsConnectionInfo | undefined {
  return sortedConnections(conns).find((c) => c.id.includes(proxyID));
}

function withClients(total: number, clients: unknown[]): Record<string, unknown> {
  // `clients` is omitempty in Istio's AdsClients.
  return clients.length ? { totalClients: total, clients } : { totalClients: total };
}

function put(o: Record<string, unknown>, key: string, value: string | undefined): void {
  if (value) o[key] = value;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
