// Deterministic --configDir for the xDS scale benchmark: a mesh of `services` ServiceEntries spread over
// app namespaces (50 per namespace), each with two WorkloadEntries, DestinationRules with subsets on every
// third service, VirtualServices on every fourth, and one ingress Gateway (`mesh: ingressgateway`) with a
// VirtualService bound to it. The same inputs always give the same files, so runs are comparable.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const DOMAIN = 'cluster.local';
export const SERVICES_PER_NAMESPACE = 50;
export const GATEWAY_NAMESPACE = 'mesh-system';
export const GATEWAY_LABELS = Object.freeze({ mesh: 'ingressgateway' });

const pad = (n, w) => String(n).padStart(w, '0');

export function namespaceOf(i) {
  return `app-${pad(Math.floor(i / SERVICES_PER_NAMESPACE), 2)}`;
}

export function serviceName(i) {
  return `svc-${pad(i, 4)}`;
}

export function hostOf(i) {
  return `${serviceName(i)}.${namespaceOf(i)}.svc.${DOMAIN}`;
}

/** Address of workload k (0 or 1) of service i: unique, in 10.0.0.0/8. */
export function workloadAddress(i, k) {
  const n = i * 2 + k + 1;
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** The ports a service exposes: every service HTTP 80, every 4th also gRPC 9090, every 10th also TCP 5432. */
export function servicePorts(i) {
  const ports = [{ number: 80, name: 'http', protocol: 'HTTP', targetPort: 8080 }];
  if (i % 4 === 0) ports.push({ number: 9090, name: 'grpc', protocol: 'GRPC', targetPort: 9090 });
  if (i % 10 === 3) ports.push({ number: 5432, name: 'tcp-db', protocol: 'TCP', targetPort: 5432 });
  return ports;
}

export const hasDestinationRule = (i) => i % 3 === 0;
export const hasVirtualService = (i) => i % 4 === 0;

/** The ServiceEntry of service i; edit k > 0 adds an HTTP port 8000 + k % 10 (a new cluster, listener port and route). */
export function serviceEntryDoc(i, edit = 0) {
  const name = serviceName(i);
  const ns = namespaceOf(i);
  const ports = [...servicePorts(i)];
  if (edit > 0) ports.push({ number: 8000 + (edit % 10), name: 'http-alt', protocol: 'HTTP', targetPort: 8080 });
  const vip = `240.240.${(i >> 8) & 255}.${i & 255}`;
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${ns}}
spec:
  hosts: [${hostOf(i)}]
  addresses: [${vip}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
${ports.map((p) => `  - {number: ${p.number}, name: ${p.name}, protocol: ${p.protocol}, targetPort: ${p.targetPort}}`).join('\n')}
  workloadSelector: {labels: {app: ${name}}}
`;
}

/** WorkloadEntry k of service i; edit n > 0 moves workload 1 to another address (an endpoint change only). */
export function workloadEntryDoc(i, k, edit = 0) {
  const name = serviceName(i);
  const address = k === 1 && edit > 0 ? `10.254.${(edit >> 8) & 255}.${edit & 255}` : workloadAddress(i, k);
  return `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ${name}-${k}, namespace: ${namespaceOf(i)}}
spec:
  address: ${address}
  ports: {${servicePorts(i)
    .map((p) => `${p.name}: ${p.targetPort}`)
    .join(', ')}}
  labels: {app: ${name}, version: v${k + 1}}
  serviceAccount: ${name}
`;
}

/** The DestinationRule of service i (when it has one); edit n varies its connection limit. */
export function destinationRuleDoc(i, edit = 0) {
  const name = serviceName(i);
  const ns = namespaceOf(i);
  const policy =
    i % 2 === 0
      ? `  trafficPolicy:
    connectionPool:
      tcp: {maxConnections: ${100 + edit}, connectTimeout: 3s}
      http: {http1MaxPendingRequests: 64, maxRequestsPerConnection: 10}
    outlierDetection: {consecutive5xxErrors: 5, interval: 10s, baseEjectionTime: 30s}
`
      : `  trafficPolicy:
    loadBalancer: {simple: LEAST_REQUEST}
`;
  return `apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ${name}, namespace: ${ns}}
spec:
  host: ${hostOf(i)}
${policy}  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
`;
}

function serviceFile(i) {
  const docs = [serviceEntryDoc(i), workloadEntryDoc(i, 0), workloadEntryDoc(i, 1)];
  if (hasDestinationRule(i)) docs.push(destinationRuleDoc(i));
  return docs.join('---\n');
}

/**
 * The VirtualService of service i. `edit` (0, 1, …) varies a weight and the timeout; service 0's VS is
 * the one the benchmark rewrites, bound to the mesh and the ingress gateway so every client is affected.
 */
export function virtualServiceFile(i, edit = 0) {
  const name = serviceName(i);
  const host = hostOf(i);
  const gateways = i === 0 ? `\n  gateways: [mesh, ${GATEWAY_NAMESPACE}/ingressgateway]` : '';
  const timeout = `${1 + (edit % 30)}s`;
  if (hasDestinationRule(i)) {
    const v2 = 5 + ((edit * 5) % 90);
    return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespaceOf(i)}}
spec:
  hosts: [${host}]${gateways}
  http:
  - name: canary
    match:
    - headers: {x-canary: {exact: "true"}}
    route:
    - destination: {host: ${host}, subset: v2, port: {number: 80}}
  - name: split
    timeout: ${timeout}
    retries: {attempts: 3, perTryTimeout: 2s, retryOn: "5xx,reset"}
    route:
    - {destination: {host: ${host}, subset: v1, port: {number: 80}}, weight: ${100 - v2}}
    - {destination: {host: ${host}, subset: v2, port: {number: 80}}, weight: ${v2}}
`;
  }
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${namespaceOf(i)}}
spec:
  hosts: [${host}]${gateways}
  http:
  - match:
    - uri: {prefix: /api/}
    rewrite: {uri: /}
    timeout: ${timeout}
    route:
    - destination: {host: ${host}, port: {number: 80}}
  - route:
    - destination: {host: ${host}, port: {number: 80}}
`;
}

function gatewayFile(services) {
  const routes = [1, 2, 3, 4]
    .filter((i) => i < services)
    .map(
      (i) => `  - match:
    - uri: {prefix: /${serviceName(i)}/}
    route:
    - destination: {host: ${hostOf(i)}, port: {number: 80}}
`,
    )
    .join('');
  return `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingressgateway, namespace: ${GATEWAY_NAMESPACE}}
spec:
  selector: {mesh: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*.example.com", "${namespaceOf(0)}/${hostOf(0)}"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop, namespace: ${GATEWAY_NAMESPACE}}
spec:
  hosts: [shop.example.com]
  gateways: [ingressgateway]
  http:
${routes}  - route:
    - destination: {host: ${hostOf(0)}, port: {number: 80}}
`;
}

/** Path (relative to the config dir) of the VirtualService file the benchmark rewrites. */
export const EDITED_VS = path.join(namespaceOf(0), `${serviceName(0)}-vs.yaml`);

/**
 * What the benchmark can edit, all of service 0 (svc-0000, which every unscoped proxy sees), each in a file
 * of its own so a rewrite changes that one object: `file` relative to the config dir, `text(k)` its content
 * at edit k (k = 0: as generated).
 */
export const EDITS = {
  vs: { kind: 'VirtualService', file: EDITED_VS, text: (k) => virtualServiceFile(0, k), what: 'weights and timeout' },
  dr: {
    kind: 'DestinationRule',
    file: path.join(namespaceOf(0), `${serviceName(0)}-dr.yaml`),
    text: (k) => destinationRuleDoc(0, k),
    what: 'connection limit',
  },
  se: { kind: 'ServiceEntry', file: path.join(namespaceOf(0), `${serviceName(0)}.yaml`), text: (k) => serviceEntryDoc(0, k), what: 'an added port' },
  we: {
    kind: 'WorkloadEntry',
    file: path.join(namespaceOf(0), `${serviceName(0)}-we.yaml`),
    text: (k) => workloadEntryDoc(0, 1, k),
    what: 'an address',
  },
};

/**
 * A namespace-wide Sidecar limiting egress to the namespace itself and the gateway namespace, as production
 * meshes scope sidecars (Istio's advice for large meshes).
 */
function sidecarFile(ns) {
  return `apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: ${ns}}
spec:
  egress:
  - hosts: ["./*", "${GATEWAY_NAMESPACE}/*"]
`;
}

/** Writes the whole config tree (with `scoped`, one Sidecar per app namespace); returns counts of what it wrote. */
export function writeConfigDir(dir, services, { scoped = false } = {}) {
  const counts = { files: 0, serviceEntries: 0, workloadEntries: 0, destinationRules: 0, virtualServices: 1, gateways: 1, namespaces: 0 };
  const put = (rel, text) => {
    const file = path.join(dir, rel);
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, text);
    counts.files++;
  };
  put(path.join(GATEWAY_NAMESPACE, 'ingressgateway.yaml'), gatewayFile(services));
  for (let i = 1; i < services; i++) put(path.join(namespaceOf(i), `${serviceName(i)}.yaml`), serviceFile(i));
  // service 0's objects one per file (EDITS); its first WorkloadEntry never changes
  for (const e of Object.values(EDITS)) if (e !== EDITS.vs) put(e.file, e.text(0));
  put(path.join(namespaceOf(0), `${serviceName(0)}-we0.yaml`), workloadEntryDoc(0, 0));
  for (let i = 0; i < services; i++) {
    counts.serviceEntries++;
    counts.workloadEntries += 2;
    if (hasDestinationRule(i)) counts.destinationRules++;
    if (hasVirtualService(i)) {
      put(path.join(namespaceOf(i), `${serviceName(i)}-vs.yaml`), virtualServiceFile(i));
      counts.virtualServices++;
    }
  }
  counts.namespaces = Math.ceil(services / SERVICES_PER_NAMESPACE);
  counts.sidecars = 0;
  if (scoped) {
    for (let k = 0; k < counts.namespaces; k++) {
      put(path.join(namespaceOf(k * SERVICES_PER_NAMESPACE), 'sidecar.yaml'), sidecarFile(namespaceOf(k * SERVICES_PER_NAMESPACE)));
      counts.sidecars++;
    }
  }
  return counts;
}

/**
 * Whether client c (see nodes.mjs nodeFor) has in its config the edited VirtualService (svc-0000's, bound to the mesh and the
 * gateway): every router does; with Sidecar scoping only sidecars in svc-0000's namespace do.
 */
export function seesEditedService(c, services, routerEvery, scoped) {
  if (c % routerEvery === 0 || !scoped) return true;
  return namespaceOf((c * 7919) % services) === namespaceOf(0);
}
