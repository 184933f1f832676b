// The Gateway API v1.3.0 conformance manifests (vendored under manifests/: conformance/base/manifests.yaml and
// conformance/tests/*.yaml, Apache-2.0, manifests/LICENSE) made into a `--configDir` file for a daemon with no
// cluster, pure. What the suite's cluster would do, done here instead:
// - `{GATEWAY_CLASS_NAME}` is the class `mesh`;
// - Deployments do not run: each Deployment is one echo server on loopback (pod `<deployment>-<hash>`, as a
//   Deployment's pod is named, since the suite matches the backend by pod name prefix), its container ports moved to
//   the echo server's port; a Service with a selector gets the EndpointSlice the endpoint-slice controller would
//   write for the pods it selects; a Service without one gets none (its EndpointSlices are the manifests', whose
//   endpoints the test fills in, as setupEndpointSlices does: withPodEndpoints);
// - each Gateway listener port is moved to a free port (so several Gateways listening on :80 share one network
//   namespace), and the Service Istio's deployment controller would create (`<gateway>-mesh`, which Programmed
//   reads) is written with those ports;
// - the TLS Secrets the suite creates at start (suite.go: certificate, tls-validity-checks-certificate,
//   tls-passthrough-checks-certificate) come from the rig.
// - Namespaces get the label kubernetes.io/metadata.name, as the API server adds it;
// - a route's parentRefs get the group and kind the CRD schema defaults (the API server writes them on create, and
//   Istio's route status repeats the stored reference, which the suite compares).
// Differs from the suite on purpose: Deployments and ConfigMaps are dropped (nothing schedules them); a test that
// lists a Deployment's pods gets them as Pod objects (podDoc).
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
  /** The echo backend's port for a Service `${ns}/${name}` (undefined: the Service selects no pods). */
  backendPort(service: string): number | undefined;
  /** The echo backend's port for a pod `${ns}/${pod}` (an EndpointSlice endpoint's targetRef). */
  podPort?(pod: string): number | undefined;
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

/** The Deployment (`ns/name`) whose pods a Service selects, or undefined (no selector, or no such pods). */
export function deploymentOf(docs: readonly Doc[], service: string): string | undefined {
  const svc = docs.find((d) => d.kind === 'Service' && key(d) === service);
  const sel = svc?.spec?.['selector'] as Record<string, string> | undefined;
  if (!svc || !sel) return undefined;
  const ns = svc.metadata?.namespace ?? 'default';
  const dep = docs.find((d) => {
    const labels = (d.spec?.['template'] as { metadata?: { labels?: Record<string, string> } } | undefined)?.metadata?.labels ?? {};
    return d.kind === 'Deployment' && (d.metadata?.namespace ?? 'default') === ns && Object.entries(sel).every(([k, v]) => labels[k] === v);
  });
  return dep ? key(dep) : undefined;
}

/** The running pod of a Deployment (`ns/name`) as the API server lists it: its template's labels, ready, at `ip`. */
export function podDoc(docs: readonly Doc[], deployment: string, ip: string): Doc {
  const dep = docs.find((d) => d.kind === 'Deployment' && key(d) === deployment);
  if (!dep) throw new Error(`no Deployment ${deployment}`);
  const tpl = dep.spec?.['template'] as { metadata?: { labels?: Record<string, string> } } | undefined;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: podName(deployment), namespace: dep.metadata!.namespace, labels: { ...tpl?.metadata?.labels } },
    spec: { nodeName: 'conformance-node' },
    status: { phase: 'Running', podIP: ip, podIPs: [{ ip }], conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

/**
 * setupEndpointSlices (tests/httproute-service-types.go): each `<prefix>-ip4` / `<prefix>-ip6` EndpointSlice of `ns`
 * gets an endpoint per pod address of its family (ready, serving, not terminating, targetRef the pod); a family
 * with no such address is left as it is. Throws when a slice is missing, as the suite's require does.
 */
export function withPodEndpoints(
  docs: readonly Doc[],
  prefixes: readonly string[],
  ns: string,
  pods: ReadonlyArray<{ name: string; namespace: string; ip: string }>,
): Doc[] {
  const out = [...docs];
  for (const [suffix, isMember] of [
    ['ip4', (ip: string) => !ip.includes(':')],
    ['ip6', (ip: string) => ip.includes(':')],
  ] as const) {
    for (const prefix of prefixes) {
      const name = `${prefix}-${suffix}`;
      const i = out.findIndex((d) => d.kind === 'EndpointSlice' && d.metadata?.name === name && d.metadata?.namespace === ns);
      if (i < 0) throw new Error(`Unable to fetch EndpointSlice "${name}"`);
      const endpoints = pods
        .filter((p) => isMember(p.ip))
        .map((p) => ({
          addresses: [p.ip],
          conditions: { ready: true, serving: true, terminating: false },
          targetRef: { kind: 'Pod', name: p.name, namespace: p.namespace },
        }));
      if (endpoints.length === 0) continue;
      out[i] = { ...out[i]!, endpoints };
    }
  }
  return out;
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
    if (d.kind === 'Deployment' || d.kind === 'ConfigMap') continue;
    if (d.kind === 'Namespace') {
      // the label the API server gives every namespace (Kubernetes ≥ 1.22), which the suite's selectors use
      out.push({ ...d, metadata: { ...d.metadata, labels: { ...d.metadata?.labels, 'kubernetes.io/metadata.name': d.metadata!.name! } } });
      continue;
    }
    if (d.kind === 'Service') {
      const spec = { ...(d.spec ?? {}) };
      if (spec['clusterIP'] === undefined && spec['type'] !== 'ExternalName')
        spec['clusterIP'] = `10.96.${Math.floor(nextIp / 250)}.${(nextIp++ % 250) + 1}`;
      const port = place.backendPort(key(d));
      out.push({ ...d, spec }, ...(port === undefined ? [] : [endpointSlice(d, port)]));
      continue;
    }
    if (d.kind === 'EndpointSlice' && Array.isArray(d['endpoints'])) {
      // the pods' container ports are their echo servers' ports
      const pod = (d['endpoints'] as Array<{ targetRef?: { kind?: string; name?: string; namespace?: string } }>).find(
        (e) => e.targetRef?.kind === 'Pod',
      )?.targetRef;
      const port = pod && place.podPort?.(`${pod.namespace ?? d.metadata?.namespace}/${pod.name}`);
      out.push(port ? { ...d, ports: ((d['ports'] as Array<Record<string, unknown>> | undefined) ?? []).map((p) => ({ ...p, port })) } : d);
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
      const parentRefs = (d.spec['parentRefs'] as Array<{ name: string; namespace?: string; port?: number; kind?: string; group?: string }>)
        .map((r) => ({ group: 'gateway.networking.k8s.io', kind: 'Gateway', ...r }))
        .map((r) =>
          r.port !== undefined && r.kind === 'Gateway' ? { ...r, port: place.listenerPort(`${r.namespace ?? ns}/${r.name}`, r.port) ?? r.port } : r,
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
