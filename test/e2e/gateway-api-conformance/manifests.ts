// The Gateway API v1.3.0 conformance manifests (vendored under manifests/: conformance/base/manifests.yaml and
// conformance/tests/*.yaml, Apache-2.0, manifests/LICENSE) made into a `--configDir` file for a daemon with no
// cluster, pure. What the suite's cluster would do, done here instead:
// - `{GATEWAY_CLASS_NAME}` is the class `mesh`;
// - Deployments do not run: each Service gets an EndpointSlice on loopback pointing at its echo backend (one echo
//   server per Service, pod `<service>-<hash>` as a Deployment's pod would be named, since the suite matches the
//   backend by pod name prefix);
// - each Gateway listener port is moved to a free port (so several Gateways listening on :80 share one network
//   namespace), and the Service Istio's deployment controller would create (`<gateway>-mesh`, which Programmed
//   reads) is written with those ports;
// - the TLS Secrets the suite creates at start (suite.go: certificate, tls-validity-checks-certificate,
//   tls-passthrough-checks-certificate) come from the rig.
// - Namespaces get the label kubernetes.io/metadata.name, as the API server adds it.
// Differs from the suite on purpose: Deployments, ConfigMaps and Pods are dropped (nothing schedules them).
import { parseAllDocuments } from 'yaml';

export type Doc = {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; generation?: number };
  spec?: Record<string, unknown>;
  [k: string]: unknown;
};

export interface ListenerPort {
  gateway: string; // ns/name
  port: number; // as written in the manifest
}

export interface Placement {
  /** The port of a Gateway's listener port on loopback: `${ns}/${name}:${port}` → port (undefined: no such listener). */
  listenerPort(gateway: string, port: number): number | undefined;
  /** The echo backend's port for a Service `${ns}/${name}`. */
  backendPort(service: string): number;
}

export function parseDocs(text: string): Doc[] {
  return parseAllDocuments(text.replaceAll('{GATEWAY_CLASS_NAME}', 'mesh'))
    .map((d) => d.toJSON() as Doc | null)
    .filter((d): d is Doc => d !== null && typeof d === 'object');
}

const key = (d: Doc): string => `${d.metadata?.namespace ?? 'default'}/${d.metadata?.name ?? ''}`;

export function services(docs: readonly Doc[]): string[] {
  return docs.filter((d) => d.kind === 'Service').map(key);
}

/** Every (Gateway, listener port) pair, to place. */
export function listenerPorts(docs: readonly Doc[]): ListenerPort[] {
  const out: ListenerPort[] = [];
  for (const d of docs.filter((x) => x.kind === 'Gateway')) {
    const ports = new Set(((d.spec?.['listeners'] as Array<{ port: number }> | undefined) ?? []).map((l) => l.port));
    for (const port of ports) out.push({ gateway: key(d), port });
  }
  return out;
}

/** The pod name of a Service's echo backend (a Deployment's pod name: `<name>-<replicaset hash>-<pod hash>`). */
export function podName(service: string): string {
  return `${service.split('/')[1]}-6d9f7c5b8-x2k4q`;
}

let nextIp = 10;

function endpointSlice(svc: Doc, port: number): Doc {
  const ports = (svc.spec?.['ports'] as Array<{ name?: string; protocol?: string; appProtocol?: string }> | undefined) ?? [];
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${svc.metadata!.name}-conformance`,
      namespace: svc.metadata!.namespace,
      labels: { 'kubernetes.io/service-name': svc.metadata!.name! },
    },
    addressType: 'IPv4',
    endpoints: [{ addresses: ['127.0.0.1'], conditions: { ready: true } }],
    ports: ports.map((p) => ({ name: p.name ?? '', port, protocol: p.protocol ?? 'TCP', ...(p.appProtocol ? { appProtocol: p.appProtocol } : {}) })),
  };
}

/** The docs as the daemon reads them, with ports placed and the objects the cluster would make added. */
export function configDocs(docs: readonly Doc[], place: Placement): Doc[] {
  const out: Doc[] = [];
  for (const d of docs) {
    if (d.kind === 'Deployment' || d.kind === 'ConfigMap' || d.kind === 'Pod') continue;
    if (d.kind === 'Namespace') {
      // the label the API server gives every namespace (Kubernetes ≥ 1.22), which the suite's selectors use
      out.push({ ...d, metadata: { ...d.metadata, labels: { ...d.metadata?.labels, 'kubernetes.io/metadata.name': d.metadata!.name! } } });
      continue;
    }
    if (d.kind === 'Service') {
      const spec = { ...(d.spec ?? {}) };
      if (spec['clusterIP'] === undefined && spec['type'] !== 'ExternalName')
        spec['clusterIP'] = `10.96.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;
      out.push({ ...d, spec }, endpointSlice(d, place.backendPort(key(d))));
      continue;
    }
    if (d.kind === 'Gateway') {
      const listeners = ((d.spec?.['listeners'] as Array<{ port: number }> | undefined) ?? []).map((l) => ({
        ...l,
        port: place.listenerPort(key(d), l.port)!,
      }));
      out.push({ ...d, spec: { ...d.spec, listeners } });
      const ports = [...new Set(listeners.map((l) => l.port))];
      out.push({
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: `${d.metadata!.name}-mesh`, namespace: d.metadata!.namespace },
        spec: {
          clusterIP: `10.96.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`,
          selector: { 'gateway.networking.k8s.io/gateway-name': d.metadata!.name },
          ports: ports.map((p) => ({ name: `port-${p}`, port: p })),
        },
      });
      continue;
    }
    if ((d.kind === 'HTTPRoute' || d.kind === 'GRPCRoute') && Array.isArray(d.spec?.['parentRefs'])) {
      // a parentRef's port names a listener port: the placed one
      const ns = d.metadata?.namespace ?? 'default';
      const parentRefs = (d.spec['parentRefs'] as Array<{ name: string; namespace?: string; port?: number; kind?: string }>).map((r) =>
        r.port !== undefined && (r.kind ?? 'Gateway') === 'Gateway'
          ? { ...r, port: place.listenerPort(`${r.namespace ?? ns}/${r.name}`, r.port) ?? r.port }
          : r,
      );
      out.push({ ...d, spec: { ...d.spec, parentRefs } });
      continue;
    }
    out.push(d);
  }
  return out;
}

/** Istio's GatewayClass `istio` is built in; the suite's own class is the one it is given (ours: `mesh`). */
export function gateways(docs: readonly Doc[]): Array<{ ns: string; name: string }> {
  return docs.filter((d) => d.kind === 'Gateway').map((d) => ({ ns: d.metadata!.namespace ?? 'default', name: d.metadata!.name! }));
}
