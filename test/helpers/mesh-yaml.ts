// The Istio documents gateway tests write into the daemon's --configDir, as the YAML a user writes: a Gateway
// selecting the ingress gateway's labels, ServiceEntries for loopback backends, VirtualServices bound to the
// Gateway. Shapes follow Istio's networking.istio.io/v1 API (Gateway, ServiceEntry, VirtualService); one
// builder, so a test spells out only the documents (rules, policies) it is about.

/** The gateway's namespace (Istio's istio-system). */
export const GATEWAY_NS = 'mesh-system';

/** The ServiceEntry host most gateway tests route to (namespace demo). */
export const BACKEND_HOST = 'backend.demo.svc.cluster.local';

/** Joins documents into one multi-document YAML file. */
export function yamlDocs(...docs: string[]): string {
  return docs.map((d) => (d.endsWith('\n') ? d : `${d}\n`)).join('---\n');
}

/**
 * A Gateway (default `mesh-system/gw`) for proxies labelled `selector` (default `mesh: ingressgateway`) with one
 * HTTP server on `port` for every host; `servers` appends list items (already indented under `servers:`).
 */
export function gatewayDoc(port: number, o: { name?: string; namespace?: string; selector?: string; servers?: string } = {}): string {
  return `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ${o.name ?? 'gw'}, namespace: ${o.namespace ?? GATEWAY_NS}}
spec:
  selector: {${o.selector ?? 'mesh: ingressgateway'}}
  servers:
  - port: {number: ${port}, name: http, protocol: HTTP}
    hosts: ["*"]
${o.servers ?? ''}`;
}

/**
 * A STATIC ServiceEntry `name` (default namespace demo, host `<name>.<namespace>.svc.cluster.local`) on service
 * port `port` (default 80) of protocol `protocol` (default HTTP; the port is named after it, lower case) with one
 * endpoint on 127.0.0.1, at `targetPort` when given.
 */
export function serviceEntryDoc(
  name: string,
  o: {
    namespace?: string;
    host?: string;
    port?: number;
    targetPort?: number;
    location?: 'MESH_INTERNAL' | 'MESH_EXTERNAL';
    protocol?: 'HTTP' | 'HTTP2' | 'GRPC' | 'TCP' | 'TLS' | 'HTTPS';
  } = {},
): string {
  const ns = o.namespace ?? 'demo';
  const protocol = o.protocol ?? 'HTTP';
  const portName = protocol.toLowerCase();
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${name}, namespace: ${ns}}
spec:
  hosts: [${o.host ?? `${name}.${ns}.svc.cluster.local`}]
  location: ${o.location ?? 'MESH_INTERNAL'}
  resolution: STATIC
  ports: [{number: ${o.port ?? 80}, name: ${portName}, protocol: ${protocol}}]
  endpoints: [{address: 127.0.0.1${o.targetPort ? `, ports: {${portName}: ${o.targetPort}}` : ''}}]
`;
}

/** `route: [...]` to `host` (default the backend) on port `port` (default 80), for a VirtualService's http rules. */
export function routeTo(host = BACKEND_HOST, port = 80): string {
  return `route: [{destination: {host: ${host}, port: {number: ${port}}}}]`;
}

/**
 * A VirtualService `name` in mesh-system bound to gateway `gw` (or `gateways`) for `hosts` (default every host);
 * `http` is its rule list as YAML lines (default one rule routing everything to the backend).
 */
export function virtualServiceDoc(name: string, o: { hosts?: string; gateways?: string; http?: string; namespace?: string } = {}): string {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ${name}, namespace: ${o.namespace ?? GATEWAY_NS}}
spec:
  hosts: [${o.hosts ?? '"*"'}]
  gateways: [${o.gateways ?? 'gw'}]
  http:
${o.http ?? `  - ${routeTo()}\n`}`;
}

/**
 * The config most gateway tests start from: Gateway `mesh-system/gw` serving HTTP on `ports.gw` (plus `servers`),
 * and ServiceEntry backend.demo.svc.cluster.local:80 on `ports.backend`; `more` appends documents
 * (VirtualServices naming gateway `gw`, policies).
 */
export function gatewayYaml(
  ports: { gw: number; backend?: number },
  more: string,
  o: { selector?: string; servers?: string; location?: 'MESH_INTERNAL' | 'MESH_EXTERNAL' } = {},
): string {
  return yamlDocs(
    gatewayDoc(ports.gw, { selector: o.selector, servers: o.servers }),
    serviceEntryDoc('backend', { targetPort: ports.backend, location: o.location }),
    ...(more ? [more] : []),
  );
}

/**
 * The plainest gateway config: a Gateway on the rig's port for every host, the rig's backend as the ServiceEntry
 * backend.demo.svc.cluster.local:80, and a VirtualService for `host` routing `prefix` to it.
 */
export function prefixRouteConfig(p: { gw: number; backend: number }, prefix: string, host = '*'): string {
  return gatewayYaml(p, virtualServiceDoc('route', { hosts: `"${host}"`, http: `  - match: [{uri: {prefix: ${prefix}}}]\n    ${routeTo()}\n` }));
}

/**
 * The agent tests' gateway: a Gateway in mesh-system for `mesh: ingressgateway` proxies on `port`, and a
 * VirtualService `gw` routing every host to the MESH_EXTERNAL ServiceEntry backend.example.com (127.0.0.1, on
 * `backendPort` when given, else 80).
 */
export function gatewayConfig(port: number, backendPort?: number): string {
  return yamlDocs(
    gatewayDoc(port),
    serviceEntryDoc('backend', { namespace: GATEWAY_NS, host: 'backend.example.com', location: 'MESH_EXTERNAL', targetPort: backendPort }),
    virtualServiceDoc('gw', { http: `  - route:\n    - destination: {host: backend.example.com, port: {number: 80}}\n` }),
  );
}
