// The service model the generators translate: services, their endpoints, and the proxies asking.
// Registries (ServiceEntry/WorkloadEntry, orchestrator Service/EndpointSlice/Pod) produce it.
import type { ProxyCapabilities } from './capabilities';

export type Protocol = 'HTTP' | 'HTTPS' | 'GRPC' | 'HTTP2' | 'TCP' | 'TLS' | 'MONGO' | 'UDP' | 'UnsupportedProtocol';

export interface ServicePort {
  name: string;
  port: number;
  protocol: Protocol;
}

/** How a client finds endpoints: Istio's ClientSideLB (STATIC/EDS), DNSLB, DNSRoundRobinLB, Passthrough (NONE). */
export type Resolution = 'ClientSide' | 'DNS' | 'DNSRoundRobin' | 'Passthrough';

export interface Service {
  /** Fully qualified host: `reviews.default.svc.cluster.local` or a ServiceEntry host. */
  hostname: string;
  namespace: string;
  /** Short name of an orchestrator Service; undefined for ServiceEntry hosts. */
  name?: string;
  /** Virtual IPs; empty when none is known. */
  addresses: string[];
  ports: ServicePort[];
  resolution: Resolution;
  meshExternal: boolean;
  /** Namespaces that may see the service: `*` (all, the default), `.` (own), or names. */
  exportTo: string[];
  labels: Readonly<Record<string, string>>;
  registry: 'Orchestrator' | 'External';
  clusterId: string;
  /** Milliseconds since the epoch: Istio orders conflicting services and configs by creation time. */
  creationTime: number;
  /** Identities expected of the endpoints, for mesh TLS SAN checks. */
  serviceAccounts: string[];
  /** Workload selector of the service (orchestrator selector or ServiceEntry workloadSelector). */
  selector?: Readonly<Record<string, string>>;
  /** Orchestrator `publishNotReadyAddresses`: DNS names not-ready endpoints too. */
  publishNotReadyAddresses?: boolean;
  /** A ServiceEntry without addresses: what auto allocation gave it (./auto-allocate), for DNS-capturing proxies. */
  autoAllocatedIPv4Address?: string;
  autoAllocatedIPv6Address?: string;
}

export type HealthStatus = 'Healthy' | 'UnHealthy' | 'Draining' | 'Terminating';

export interface Endpoint {
  /** IP address, or a DNS name for DNS-resolved ServiceEntry endpoints. */
  address: string;
  /** The port traffic is sent to on the endpoint (target port). */
  port: number;
  /** Name of the service port this endpoint serves. */
  servicePortName: string;
  /** Hostname of the service the endpoint belongs to. */
  hostname: string;
  namespace: string;
  labels: Readonly<Record<string, string>>;
  serviceAccount?: string;
  network?: string;
  /** `region/zone/subzone`. */
  locality?: string;
  /** Load-balancing weight; 0 or undefined means 1. */
  weight?: number;
  healthStatus: HealthStatus;
  /** Name of the workload (pod or WorkloadEntry). */
  workloadName?: string;
  /** Cluster the endpoint was discovered in (orchestrator registries). */
  clusterId?: string;
  /**
   * The pod's DNS name parts when its spec sets a subdomain (Istio's HostName/SubDomain): headless services
   * answer `<podHostname>.<podSubdomain>.<namespace>.svc.<domain>` with the pod's address.
   */
  podHostname?: string;
  podSubdomain?: string;
}

/** Node types of Istio's node ID `type~ip~id~domain`. */
export type NodeType = 'sidecar' | 'router';

/** What a proxy said about itself in its xDS node (Istio's NodeMetadata, a subset that matters here). */
export interface NodeMetadata {
  labels: Readonly<Record<string, string>>;
  namespace?: string;
  clusterId?: string;
  /** `grpc` for proxyless gRPC clients. */
  generator?: string;
  meshVersion?: string;
  interceptionMode?: string;
  instanceIps?: string[];
  workloadName?: string;
  serviceAccount?: string;
  dnsCapture?: boolean;
  /** DNS_AUTO_ALLOCATE: the proxy consumes auto-allocated ServiceEntry addresses. */
  dnsAutoAllocate?: boolean;
  /** NETWORK: the network the proxy is on (headless DNS answers only same-network endpoints). */
  network?: string;
  /** AUTO_REGISTER_GROUP: the WorkloadGroup a workload outside the cluster registers itself from. */
  autoRegisterGroup?: string;
  /** WORKLOAD_ENTRY: the existing WorkloadEntry a health-checked workload corresponds to. */
  workloadEntry?: string;
  /** PROXY_CONFIG carries a readinessProbe (the agent health-checks the application). */
  readinessProbe?: boolean;
  /** Every field as sent, for debug output. */
  raw: Readonly<Record<string, unknown>>;
}

export interface Proxy {
  /** The node ID as sent: `router~10.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local`. */
  nodeId: string;
  type: NodeType;
  ipAddresses: string[];
  /** `podname.namespace` part of the ID. */
  id: string;
  namespace: string;
  /** DNS domain part of the ID. */
  dnsDomain: string;
  metadata: NodeMetadata;
  labels: Readonly<Record<string, string>>;
  /** True for proxyless gRPC clients (metadata GENERATOR: grpc). */
  proxyless: boolean;
  /**
   * The SPIFFE identity the xDS stream authenticated and that matches the node's claim (Istio's
   * VerifiedIdentity); undefined on the plaintext port or with the identity check off. Credentials need it.
   */
  verifiedIdentity?: { trustDomain: string; namespace: string; serviceAccount: string };
  /** What the proxy lacks of Istio's own Envoy build, from Node.extensions; undefined: Istio's build. */
  capabilities?: ProxyCapabilities;
  /** Node.cluster as sent (the agent's service cluster, e.g. `productpage.default`); the tracer's service name. */
  serviceCluster?: string;
}
