// The configuration resources mesh understands, typed as users write them (camelCase YAML of the
// Istio and Kubernetes APIs). Validation lives in validate/, translation to xDS in ../xds: these
// types carry no behaviour.

import type { GatewayClassSpec, GRPCRouteSpec, HTTPRouteSpec, KubernetesGatewaySpec, ReferenceGrantSpec } from './gateway-api/types';
import type { TCPRouteSpec, TLSRouteSpec } from './gateway-api/tls-types';

export type Kind =
  | 'Gateway'
  | 'VirtualService'
  | 'DestinationRule'
  | 'ServiceEntry'
  | 'WorkloadEntry'
  | 'WorkloadGroup'
  | 'Sidecar'
  | 'RequestAuthentication'
  | 'AuthorizationPolicy'
  | 'PeerAuthentication'
  | 'EnvoyFilter'
  | 'ProxyConfig'
  | 'Telemetry'
  | 'WasmPlugin'
  | 'Service'
  | 'EndpointSlice'
  | 'Pod'
  | 'Namespace'
  | 'Secret'
  | 'GatewayClass'
  | 'KubernetesGateway'
  | 'HTTPRoute'
  | 'GRPCRoute'
  | 'ReferenceGrant'
  | 'TLSRoute'
  | 'TCPRoute';

export interface Meta {
  name: string;
  namespace: string;
  labels: Readonly<Record<string, string>>;
  annotations: Readonly<Record<string, string>>;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  /** Set once a graceful delete began (orchestrator objects): a Pod is then terminating. */
  deletionTimestamp?: string;
  uid?: string;
}

/** One resource: identity, where it came from, and its spec. */
export interface Config<K extends Kind = Kind> {
  kind: K;
  /** apiVersion as written (`networking.istio.io/v1beta1`); the group is accepted under our name and Istio's. */
  apiVersion: string;
  meta: Meta;
  spec: SpecOf<K>;
  /** Status of Kubernetes objects that carry meaning (Pod IPs and phase, WorkloadEntry conditions). */
  status?: PodStatus;
  /** File and document index, or the orchestrator, for error messages. */
  source?: string;
}

export type SpecOf<K extends Kind> = K extends keyof SpecMap ? SpecMap[K] : never;

export interface SpecMap {
  Gateway: GatewaySpec;
  VirtualService: VirtualServiceSpec;
  DestinationRule: DestinationRuleSpec;
  ServiceEntry: ServiceEntrySpec;
  WorkloadEntry: WorkloadEntrySpec;
  WorkloadGroup: WorkloadGroupSpec;
  Sidecar: SidecarSpec;
  RequestAuthentication: RequestAuthenticationSpec;
  AuthorizationPolicy: AuthorizationPolicySpec;
  PeerAuthentication: PeerAuthenticationSpec;
  EnvoyFilter: EnvoyFilterSpec;
  ProxyConfig: ProxyConfigSpec;
  Telemetry: TelemetrySpec;
  WasmPlugin: WasmPluginSpec;
  Service: OrchServiceSpec;
  EndpointSlice: EndpointSliceSpec;
  Pod: PodSpec;
  Namespace: Record<string, never>;
  Secret: SecretSpec;
  GatewayClass: GatewayClassSpec;
  KubernetesGateway: KubernetesGatewaySpec;
  HTTPRoute: HTTPRouteSpec;
  GRPCRoute: GRPCRouteSpec;
  ReferenceGrant: ReferenceGrantSpec;
  TLSRoute: TLSRouteSpec;
  TCPRoute: TCPRouteSpec;
}

// ---------------------------------------------------------------------------------------------
// networking: Gateway, VirtualService, DestinationRule, ServiceEntry, WorkloadEntry, WorkloadGroup, Sidecar

export interface Port {
  number: number;
  protocol: string; // HTTP|HTTPS|GRPC|HTTP2|MONGO|TCP|TLS
  name: string;
  targetPort?: number;
}

export interface ServerTLSSettings {
  httpsRedirect?: boolean;
  mode?: 'PASSTHROUGH' | 'SIMPLE' | 'MUTUAL' | 'AUTO_PASSTHROUGH' | 'ISTIO_MUTUAL' | 'OPTIONAL_MUTUAL';
  serverCertificate?: string;
  privateKey?: string;
  caCertificates?: string;
  credentialName?: string;
  subjectAltNames?: string[];
  minProtocolVersion?: string;
  maxProtocolVersion?: string;
  cipherSuites?: string[];
}

export interface Server {
  port: Port;
  bind?: string;
  hosts: string[];
  tls?: ServerTLSSettings;
  defaultEndpoint?: string;
  name?: string;
}

export interface GatewaySpec {
  servers: Server[];
  selector?: Record<string, string>;
}

export interface StringMatch {
  exact?: string;
  prefix?: string;
  regex?: string;
}

export interface HTTPMatchRequest {
  name?: string;
  uri?: StringMatch;
  scheme?: StringMatch;
  method?: StringMatch;
  authority?: StringMatch;
  /** Keys may be `@request.auth.claims.<a>.<b>` / `@request.auth.claims[<a>][<b>]` on gateways. */
  headers?: Record<string, StringMatch>;
  port?: number;
  sourceLabels?: Record<string, string>;
  gateways?: string[];
  queryParams?: Record<string, StringMatch>;
  ignoreUriCase?: boolean;
  withoutHeaders?: Record<string, StringMatch>;
  sourceNamespace?: string;
  statPrefix?: string;
}

export interface PortSelector {
  number?: number;
}

export interface Destination {
  host: string;
  subset?: string;
  port?: PortSelector;
}

export interface HeaderOperations {
  set?: Record<string, string>;
  add?: Record<string, string>;
  remove?: string[];
}

export interface Headers {
  request?: HeaderOperations;
  response?: HeaderOperations;
}

export interface HTTPRouteDestination {
  destination: Destination;
  weight?: number;
  headers?: Headers;
}

export interface HTTPRedirect {
  uri?: string;
  authority?: string;
  port?: number;
  derivePort?: 'FROM_PROTOCOL_DEFAULT' | 'FROM_REQUEST_PORT';
  scheme?: string;
  redirectCode?: number;
}

export interface HTTPDirectResponse {
  status: number;
  body?: { string?: string; bytes?: string };
}

export interface HTTPRewrite {
  uri?: string;
  authority?: string;
  uriRegexRewrite?: { match: string; rewrite: string };
}

export interface HTTPRetry {
  attempts: number;
  perTryTimeout?: string;
  backoff?: string;
  retryOn?: string;
  retryRemoteLocalities?: boolean;
}

export interface HTTPFaultInjection {
  delay?: { fixedDelay?: string; percentage?: { value: number } };
  abort?: { httpStatus?: number; grpcStatus?: string; percentage?: { value: number } };
}

export interface CorsPolicy {
  allowOrigins?: StringMatch[];
  allowMethods?: string[];
  allowHeaders?: string[];
  exposeHeaders?: string[];
  maxAge?: string;
  allowCredentials?: boolean;
}

export interface HTTPRoute {
  name?: string;
  match?: HTTPMatchRequest[];
  route?: HTTPRouteDestination[];
  redirect?: HTTPRedirect;
  directResponse?: HTTPDirectResponse;
  delegate?: { name: string; namespace?: string };
  rewrite?: HTTPRewrite;
  timeout?: string;
  retries?: HTTPRetry;
  fault?: HTTPFaultInjection;
  mirror?: Destination;
  mirrorPercentage?: { value: number };
  /** Several mirrors, each with its own percentage (Istio's HTTPMirrorPolicy), served after `mirror`. */
  mirrors?: Array<{ destination: Destination; percentage?: { value: number } }>;
  corsPolicy?: CorsPolicy;
  headers?: Headers;
}

export interface L4MatchAttributes {
  destinationSubnets?: string[];
  port?: number;
  sourceLabels?: Record<string, string>;
  gateways?: string[];
  sourceNamespace?: string;
}

export interface RouteDestination {
  destination: Destination;
  weight?: number;
}

export interface TLSMatchAttributes extends L4MatchAttributes {
  sniHosts: string[];
}

export interface TCPRoute {
  match?: L4MatchAttributes[];
  route?: RouteDestination[];
}

export interface TLSRoute {
  match: TLSMatchAttributes[];
  route?: RouteDestination[];
}

export interface VirtualServiceSpec {
  hosts: string[];
  gateways?: string[];
  http?: HTTPRoute[];
  tls?: TLSRoute[];
  tcp?: TCPRoute[];
  exportTo?: string[];
}

export interface LoadBalancerSettings {
  simple?: 'UNSPECIFIED' | 'RANDOM' | 'PASSTHROUGH' | 'ROUND_ROBIN' | 'LEAST_REQUEST' | 'LEAST_CONN';
  consistentHash?: {
    httpHeaderName?: string;
    httpCookie?: { name: string; path?: string; ttl?: string };
    useSourceIp?: boolean;
    httpQueryParameterName?: string;
    ringHash?: { minimumRingSize?: number };
    maglev?: { tableSize?: number };
    minimumRingSize?: number;
  };
  localityLbSetting?: unknown;
  warmupDurationSecs?: string;
}

export interface ConnectionPoolSettings {
  tcp?: {
    maxConnections?: number;
    connectTimeout?: string;
    tcpKeepalive?: { probes?: number; time?: string; interval?: string };
    maxConnectionDuration?: string;
    idleTimeout?: string;
  };
  http?: {
    http1MaxPendingRequests?: number;
    http2MaxRequests?: number;
    maxRequestsPerConnection?: number;
    maxRetries?: number;
    idleTimeout?: string;
    h2UpgradePolicy?: 'DEFAULT' | 'DO_NOT_UPGRADE' | 'UPGRADE';
    useClientProtocol?: boolean;
    maxConcurrentStreams?: number;
  };
}

export interface OutlierDetection {
  consecutiveErrors?: number;
  consecutive5xxErrors?: number;
  consecutiveGatewayErrors?: number;
  consecutiveLocalOriginFailures?: number;
  splitExternalLocalOriginErrors?: boolean;
  interval?: string;
  baseEjectionTime?: string;
  maxEjectionPercent?: number;
  minHealthPercent?: number;
}

export interface ClientTLSSettings {
  mode?: 'DISABLE' | 'SIMPLE' | 'MUTUAL' | 'ISTIO_MUTUAL';
  clientCertificate?: string;
  privateKey?: string;
  caCertificates?: string;
  credentialName?: string;
  subjectAltNames?: string[];
  sni?: string;
  insecureSkipVerify?: boolean;
}

export interface TrafficPolicy {
  loadBalancer?: LoadBalancerSettings;
  connectionPool?: ConnectionPoolSettings;
  outlierDetection?: OutlierDetection;
  tls?: ClientTLSSettings;
  portLevelSettings?: Array<Omit<TrafficPolicy, 'portLevelSettings'> & { port?: PortSelector }>;
}

export interface Subset {
  name: string;
  labels?: Record<string, string>;
  trafficPolicy?: TrafficPolicy;
}

export interface DestinationRuleSpec {
  host: string;
  trafficPolicy?: TrafficPolicy;
  subsets?: Subset[];
  exportTo?: string[];
  workloadSelector?: WorkloadSelector;
}

export interface WorkloadSelector {
  matchLabels?: Record<string, string>;
  /** ServiceEntry and Sidecar use Istio's networking WorkloadSelector, whose field is `labels`. */
  labels?: Record<string, string>;
}

export interface WorkloadEntrySpec {
  address?: string;
  ports?: Record<string, number>;
  labels?: Record<string, string>;
  network?: string;
  locality?: string;
  weight?: number;
  serviceAccount?: string;
}

export interface ServiceEntrySpec {
  hosts: string[];
  addresses?: string[];
  ports?: Array<Port & { targetPort?: number }>;
  location?: 'MESH_EXTERNAL' | 'MESH_INTERNAL';
  resolution?: 'NONE' | 'STATIC' | 'DNS' | 'DNS_ROUND_ROBIN';
  endpoints?: WorkloadEntrySpec[];
  workloadSelector?: WorkloadSelector;
  exportTo?: string[];
  subjectAltNames?: string[];
}

export interface WorkloadGroupSpec {
  metadata?: { labels?: Record<string, string>; annotations?: Record<string, string> };
  template: WorkloadEntrySpec;
  probe?: unknown;
}

export interface IstioEgressListener {
  port?: Port;
  bind?: string;
  captureMode?: 'DEFAULT' | 'IPTABLES' | 'NONE';
  hosts: string[];
}

export interface IstioIngressListener {
  port: Port;
  bind?: string;
  captureMode?: 'DEFAULT' | 'IPTABLES' | 'NONE';
  defaultEndpoint?: string;
  tls?: ServerTLSSettings;
}

export interface SidecarSpec {
  workloadSelector?: WorkloadSelector;
  ingress?: IstioIngressListener[];
  egress?: IstioEgressListener[];
  outboundTrafficPolicy?: { mode?: 'REGISTRY_ONLY' | 'ALLOW_ANY'; egressProxy?: Destination };
}

// ---------------------------------------------------------------------------------------------
// security: RequestAuthentication, AuthorizationPolicy, PeerAuthentication

export interface JWTHeader {
  name: string;
  prefix?: string;
}

export interface ClaimToHeader {
  header: string;
  claim: string;
}

export interface JWTRule {
  issuer: string;
  audiences?: string[];
  jwksUri?: string;
  jwks?: string;
  fromHeaders?: JWTHeader[];
  fromParams?: string[];
  fromCookies?: string[];
  outputPayloadToHeader?: string;
  forwardOriginalToken?: boolean;
  outputClaimToHeaders?: ClaimToHeader[];
  timeout?: string;
}

export interface PolicyTargetReference {
  group?: string;
  kind: string;
  name: string;
  namespace?: string;
}

export interface RequestAuthenticationSpec {
  selector?: WorkloadSelector;
  targetRef?: PolicyTargetReference;
  targetRefs?: PolicyTargetReference[];
  jwtRules?: JWTRule[];
}

export interface AuthorizationSource {
  principals?: string[];
  notPrincipals?: string[];
  requestPrincipals?: string[];
  notRequestPrincipals?: string[];
  namespaces?: string[];
  notNamespaces?: string[];
  ipBlocks?: string[];
  notIpBlocks?: string[];
  remoteIpBlocks?: string[];
  notRemoteIpBlocks?: string[];
}

export interface AuthorizationOperation {
  hosts?: string[];
  notHosts?: string[];
  ports?: string[];
  notPorts?: string[];
  methods?: string[];
  notMethods?: string[];
  paths?: string[];
  notPaths?: string[];
}

export interface AuthorizationCondition {
  key: string;
  values?: string[];
  notValues?: string[];
}

export interface AuthorizationRule {
  from?: Array<{ source: AuthorizationSource }>;
  to?: Array<{ operation: AuthorizationOperation }>;
  when?: AuthorizationCondition[];
}

export interface AuthorizationPolicySpec {
  selector?: WorkloadSelector;
  targetRef?: PolicyTargetReference;
  targetRefs?: PolicyTargetReference[];
  rules?: AuthorizationRule[];
  action?: 'ALLOW' | 'DENY' | 'AUDIT' | 'CUSTOM';
  provider?: { name: string };
}

export interface PeerAuthenticationSpec {
  selector?: WorkloadSelector;
  mtls?: { mode?: 'UNSET' | 'DISABLE' | 'PERMISSIVE' | 'STRICT' };
  portLevelMtls?: Record<string, { mode?: 'UNSET' | 'DISABLE' | 'PERMISSIVE' | 'STRICT' }>;
}

// ---------------------------------------------------------------------------------------------
// Kinds mesh validates and stores but does not act on yet: EnvoyFilter, ProxyConfig (networking),
// Telemetry (telemetry), WasmPlugin (extensions)

export type EnvoyFilterApplyTo =
  | 'INVALID'
  | 'LISTENER'
  | 'FILTER_CHAIN'
  | 'NETWORK_FILTER'
  | 'HTTP_FILTER'
  | 'ROUTE_CONFIGURATION'
  | 'VIRTUAL_HOST'
  | 'HTTP_ROUTE'
  | 'CLUSTER'
  | 'EXTENSION_CONFIG'
  | 'BOOTSTRAP'
  | 'LISTENER_FILTER';

export type EnvoyFilterOperation = 'INVALID' | 'MERGE' | 'ADD' | 'REMOVE' | 'INSERT_BEFORE' | 'INSERT_AFTER' | 'INSERT_FIRST' | 'REPLACE';

export interface EnvoyFilterListenerMatch {
  portNumber?: number;
  portName?: string;
  filterChain?: {
    name?: string;
    sni?: string;
    transportProtocol?: string;
    applicationProtocols?: string;
    filter?: { name?: string; subFilter?: { name?: string } };
    destinationPort?: number;
  };
  listenerFilter?: string;
  name?: string;
}

export interface EnvoyFilterConfigPatch {
  applyTo?: EnvoyFilterApplyTo;
  match?: {
    context?: 'ANY' | 'SIDECAR_INBOUND' | 'SIDECAR_OUTBOUND' | 'GATEWAY';
    proxy?: { proxyVersion?: string; metadata?: Record<string, string> };
    listener?: EnvoyFilterListenerMatch;
    routeConfiguration?: {
      portNumber?: number;
      portName?: string;
      gateway?: string;
      vhost?: { name?: string; domainName?: string; route?: { name?: string; action?: 'ANY' | 'ROUTE' | 'REDIRECT' | 'DIRECT_RESPONSE' } };
      name?: string;
    };
    cluster?: { portNumber?: number; service?: string; subset?: string; name?: string };
  };
  patch?: { operation?: EnvoyFilterOperation; value?: Record<string, unknown>; filterClass?: 'UNSPECIFIED' | 'AUTHN' | 'AUTHZ' | 'STATS' };
}

export interface EnvoyFilterSpec {
  workloadSelector?: { labels?: Record<string, string> };
  targetRefs?: PolicyTargetReference[];
  configPatches?: EnvoyFilterConfigPatch[];
  priority?: number;
}

export interface ProxyConfigSpec {
  selector?: WorkloadSelector;
  concurrency?: number;
  environmentVariables?: Record<string, string>;
  image?: { imageType?: string };
}

export interface TelemetryProviderRef {
  name: string;
}

export interface TelemetrySpec {
  selector?: WorkloadSelector;
  targetRef?: PolicyTargetReference;
  targetRefs?: PolicyTargetReference[];
  tracing?: Array<{
    match?: { mode?: string };
    providers?: TelemetryProviderRef[];
    customTags?: Record<
      string,
      { literal?: { value?: string }; environment?: { name?: string; defaultValue?: string }; header?: { name?: string; defaultValue?: string } }
    >;
    disableSpanReporting?: boolean;
    randomSamplingPercentage?: number;
    useRequestIdForTraceSampling?: boolean;
    enableIstioTags?: boolean;
  }>;
  metrics?: Array<{
    providers?: TelemetryProviderRef[];
    overrides?: Array<{
      match?: { metric?: string; customMetric?: string; mode?: string };
      disabled?: boolean;
      tagOverrides?: Record<string, { operation?: 'UPSERT' | 'REMOVE'; value?: string }>;
    }>;
    reportingInterval?: string;
  }>;
  accessLogging?: Array<{ match?: { mode?: string }; providers?: TelemetryProviderRef[]; disabled?: boolean; filter?: { expression?: string } }>;
}

export interface WasmPluginSpec {
  selector?: WorkloadSelector;
  targetRef?: PolicyTargetReference;
  targetRefs?: PolicyTargetReference[];
  url?: string;
  sha256?: string;
  imagePullPolicy?: 'UNSPECIFIED_POLICY' | 'IfNotPresent' | 'Always';
  imagePullSecret?: string;
  verificationKey?: string;
  pluginConfig?: Record<string, unknown>;
  pluginName?: string;
  phase?: 'UNSPECIFIED_PHASE' | 'AUTHN' | 'AUTHZ' | 'STATS';
  priority?: number;
  failStrategy?: 'FAIL_CLOSE' | 'FAIL_OPEN';
  vmConfig?: { env?: Array<{ name?: string; value?: string; valueFrom?: 'INLINE' | 'HOST' }> };
  match?: Array<{ mode?: 'UNDEFINED' | 'CLIENT' | 'SERVER' | 'CLIENT_AND_SERVER'; ports?: Array<{ number?: number }> }>;
  type?: 'UNSPECIFIED_PLUGIN_TYPE' | 'HTTP' | 'NETWORK';
}

// ---------------------------------------------------------------------------------------------
// Kubernetes core and discovery objects the registries read

export interface OrchServicePort {
  name?: string;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  appProtocol?: string;
  port: number;
  targetPort?: number | string;
  nodePort?: number;
}

export interface OrchServiceSpec {
  selector?: Record<string, string>;
  ports?: OrchServicePort[];
  clusterIP?: string;
  clusterIPs?: string[];
  type?: 'ClusterIP' | 'NodePort' | 'LoadBalancer' | 'ExternalName';
  externalName?: string;
  externalIPs?: string[];
  publishNotReadyAddresses?: boolean;
}

export interface EndpointSliceSpec {
  addressType: 'IPv4' | 'IPv6' | 'FQDN';
  endpoints: Array<{
    addresses: string[];
    conditions?: { ready?: boolean; serving?: boolean; terminating?: boolean };
    hostname?: string;
    nodeName?: string;
    zone?: string;
    targetRef?: { kind?: string; name?: string; namespace?: string; uid?: string };
  }>;
  ports?: Array<{ name?: string; port?: number; protocol?: string; appProtocol?: string }>;
  /** `kubernetes.io/service-name` label names the Service; kept in meta.labels. */
}

export interface PodSpec {
  serviceAccountName?: string;
  /** With `subdomain`, the pod's DNS name `<hostname>.<subdomain>.<namespace>.svc.<domain>` (default hostname: the pod name). */
  hostname?: string;
  subdomain?: string;
  nodeName?: string;
  hostNetwork?: boolean;
  containers?: Array<{ name: string; ports?: Array<{ name?: string; containerPort: number; protocol?: string }> }>;
}

/**
 * A Kubernetes Secret as the credentials controller reads it (gateway and DestinationRule credentialName):
 * its top-level `type`, `data` (base64) and `stringData` (plain text, merged over data as the API server
 * does on write), carried as the spec.
 */
export interface SecretSpec {
  type?: string;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

export interface PodStatus {
  podIP?: string;
  podIPs?: Array<{ ip: string }>;
  phase?: string;
  conditions?: Array<{ type: string; status: string }>;
}

/** `kind/namespace/name`: the identity of a resource in stores, events and error messages. */
export function configKey(c: Pick<Config, 'kind' | 'meta'>): string {
  return `${c.kind}/${c.meta.namespace}/${c.meta.name}`;
}
