// The field shapes of every spec, after Istio's API protos (networking v1alpha3/v1, security v1,
// type v1beta1) and the Kubernetes objects the registries read. Field names are the JSON names.
import { GATEWAY_API_SHAPES } from './gateway-api';
import type { Kind } from '../types';
import { any, bool, dur, en, i32, intOrString, list, map, matchObj, num, obj, type Shape, str, strMap, strs, u32, u64 } from './shape';

const percent = obj({ value: num });
const uint32Value = u32; // google.protobuf.UInt32Value in JSON is the bare number
const boolValue = bool;

const port = obj({ number: u32, protocol: str, name: str, targetPort: u32 });
const portSelector = obj({ number: u32 });
const workloadSelectorNet = obj({ labels: strMap }); // networking WorkloadSelector (ServiceEntry, Sidecar)
const workloadSelector = obj({ matchLabels: strMap }); // type.v1beta1 WorkloadSelector
const policyTargetRef = obj({ group: str, kind: str, name: str, namespace: str });

const tlsProtocol = en('TLS_AUTO', 'TLSV1_0', 'TLSV1_1', 'TLSV1_2', 'TLSV1_3');
const serverTLS = obj({
  httpsRedirect: bool,
  mode: en('PASSTHROUGH', 'SIMPLE', 'MUTUAL', 'AUTO_PASSTHROUGH', 'ISTIO_MUTUAL', 'OPTIONAL_MUTUAL'),
  serverCertificate: str,
  privateKey: str,
  caCertificates: str,
  caCrl: str,
  credentialName: str,
  credentialNames: strs,
  tlsCertificates: list(obj({ serverCertificate: str, privateKey: str, caCertificates: str })),
  subjectAltNames: strs,
  verifyCertificateSpki: strs,
  verifyCertificateHash: strs,
  minProtocolVersion: tlsProtocol,
  maxProtocolVersion: tlsProtocol,
  cipherSuites: strs,
});

const gateway = obj({
  servers: list(obj({ port, bind: str, hosts: strs, tls: serverTLS, defaultEndpoint: str, name: str })),
  selector: strMap,
});

const stringMatch = matchObj('StringMatch', { exact: str, prefix: str, regex: str }, [['exact', 'prefix', 'regex']]);
const destination = obj({ host: str, subset: str, port: portSelector });
const headerOps = obj({ set: strMap, add: strMap, remove: strs });
const headers = obj({ request: headerOps, response: headerOps });

const httpMatch = matchObj('HTTPMatchRequest', {
  name: str,
  uri: stringMatch,
  scheme: stringMatch,
  method: stringMatch,
  authority: stringMatch,
  headers: map(stringMatch),
  port: u32,
  sourceLabels: strMap,
  gateways: strs,
  queryParams: map(stringMatch),
  ignoreUriCase: bool,
  withoutHeaders: map(stringMatch),
  sourceNamespace: str,
  statPrefix: str,
});

const httpRoute = obj({
  name: str,
  match: list(httpMatch),
  route: list(obj({ destination, weight: i32, headers })),
  redirect: obj(
    {
      uri: str,
      authority: str,
      port: u32,
      derivePort: en('FROM_PROTOCOL_DEFAULT', 'FROM_REQUEST_PORT'),
      scheme: str,
      redirectCode: u32,
    },
    [['port', 'derivePort']],
  ),
  directResponse: obj({ status: u32, body: obj({ string: str, bytes: str }, [['string', 'bytes']]) }),
  delegate: obj({ name: str, namespace: str }),
  rewrite: obj({ uri: str, authority: str, uriRegexRewrite: obj({ match: str, rewrite: str }) }),
  timeout: dur,
  retries: obj({
    attempts: i32,
    perTryTimeout: dur,
    retryOn: str,
    retryRemoteLocalities: boolValue,
    retryIgnorePreviousHosts: boolValue,
    backoff: dur,
  }),
  fault: obj({
    delay: obj({ fixedDelay: dur, exponentialDelay: dur, percent: i32, percentage: percent }, [['fixedDelay', 'exponentialDelay']]),
    abort: obj({ httpStatus: i32, grpcStatus: str, http2Error: str, percentage: percent }, [['httpStatus', 'grpcStatus', 'http2Error']]),
  }),
  mirror: destination,
  mirrors: list(obj({ destination, percentage: percent })),
  mirrorPercent: uint32Value,
  mirrorPercentage: percent,
  corsPolicy: obj({
    allowOrigins: list(stringMatch),
    allowOrigin: strs,
    allowMethods: strs,
    allowHeaders: strs,
    exposeHeaders: strs,
    maxAge: dur,
    allowCredentials: boolValue,
    unmatchedPreflights: en('UNSPECIFIED', 'FORWARD', 'IGNORE'),
  }),
  headers,
});

const l4Match = {
  destinationSubnets: strs,
  port: u32,
  sourceLabels: strMap,
  gateways: strs,
  sourceNamespace: str,
};
const routeDestination = obj({ destination, weight: i32 });

const virtualService = obj({
  hosts: strs,
  gateways: strs,
  http: list(httpRoute),
  tls: list(obj({ match: list(matchObj('TLSMatchAttributes', { ...l4Match, sniHosts: strs })), route: list(routeDestination) })),
  tcp: list(obj({ match: list(matchObj('L4MatchAttributes', { ...l4Match, sourceSubnet: str })), route: list(routeDestination) })),
  exportTo: strs,
});

const loadBalancer = obj(
  {
    simple: en('UNSPECIFIED', 'LEAST_CONN', 'RANDOM', 'PASSTHROUGH', 'ROUND_ROBIN', 'LEAST_REQUEST'),
    consistentHash: obj(
      {
        httpHeaderName: str,
        httpCookie: obj({ name: str, path: str, ttl: dur, attributes: list(obj({ name: str, value: str })) }),
        useSourceIp: bool,
        httpQueryParameterName: str,
        ringHash: obj({ minimumRingSize: u64 }),
        maglev: obj({ tableSize: u64 }),
        minimumRingSize: u64,
      },
      [
        ['httpHeaderName', 'httpCookie', 'useSourceIp', 'httpQueryParameterName'],
        ['ringHash', 'maglev'],
      ],
    ),
    localityLbSetting: obj({
      distribute: list(obj({ from: str, to: map(u32) })),
      failover: list(obj({ from: str, to: str })),
      failoverPriority: strs,
      enabled: boolValue,
    }),
    warmupDurationSecs: dur,
    warmup: obj({ duration: dur, minimumPercent: num, aggression: num }),
  },
  [['simple', 'consistentHash']],
);

const connectionPool = obj({
  tcp: obj({
    maxConnections: i32,
    connectTimeout: dur,
    tcpKeepalive: obj({ probes: u32, time: dur, interval: dur }),
    maxConnectionDuration: dur,
    idleTimeout: dur,
  }),
  http: obj({
    http1MaxPendingRequests: i32,
    http2MaxRequests: i32,
    maxRequestsPerConnection: i32,
    maxRetries: i32,
    idleTimeout: dur,
    h2UpgradePolicy: en('DEFAULT', 'DO_NOT_UPGRADE', 'UPGRADE'),
    useClientProtocol: bool,
    maxConcurrentStreams: i32,
  }),
});

const outlierDetection = obj({
  splitExternalLocalOriginErrors: bool,
  consecutiveLocalOriginFailures: uint32Value,
  consecutiveGatewayErrors: uint32Value,
  consecutive5xxErrors: uint32Value,
  interval: dur,
  baseEjectionTime: dur,
  maxEjectionPercent: i32,
  minHealthPercent: i32,
  consecutiveErrors: i32,
});

const clientTLS = obj({
  mode: en('DISABLE', 'SIMPLE', 'MUTUAL', 'ISTIO_MUTUAL'),
  clientCertificate: str,
  privateKey: str,
  caCertificates: str,
  credentialName: str,
  subjectAltNames: strs,
  sni: str,
  insecureSkipVerify: boolValue,
  caCrl: str,
});

const portTrafficPolicyFields = { port: portSelector, loadBalancer, connectionPool, outlierDetection, tls: clientTLS };
const trafficPolicy = obj({
  loadBalancer,
  connectionPool,
  outlierDetection,
  tls: clientTLS,
  portLevelSettings: list(obj(portTrafficPolicyFields)),
  tunnel: obj({ protocol: str, targetHost: str, targetPort: u32 }),
  proxyProtocol: obj({ version: en('V1', 'V2') }),
});

const destinationRule = obj({
  host: str,
  trafficPolicy,
  subsets: list(obj({ name: str, labels: strMap, trafficPolicy })),
  exportTo: strs,
  workloadSelector,
});

const workloadEntry = obj({
  address: str,
  ports: map(u32),
  labels: strMap,
  network: str,
  locality: str,
  weight: u32,
  serviceAccount: str,
});

const serviceEntry = obj({
  hosts: strs,
  addresses: strs,
  ports: list(port),
  location: en('MESH_EXTERNAL', 'MESH_INTERNAL'),
  resolution: en('NONE', 'STATIC', 'DNS', 'DNS_ROUND_ROBIN'),
  endpoints: list(workloadEntry),
  workloadSelector: workloadSelectorNet,
  exportTo: strs,
  subjectAltNames: strs,
});

const workloadGroup = obj({
  metadata: obj({ labels: strMap, annotations: strMap }),
  template: workloadEntry,
  probe: obj(
    {
      initialDelaySeconds: i32,
      timeoutSeconds: i32,
      periodSeconds: i32,
      successThreshold: i32,
      failureThreshold: i32,
      httpGet: obj({ path: str, port: u32, host: str, scheme: str, httpHeaders: list(obj({ name: str, value: str })) }),
      tcpSocket: obj({ host: str, port: u32 }),
      exec: obj({ command: strs }),
    },
    [['httpGet', 'tcpSocket', 'exec']],
  ),
});

const captureMode = en('DEFAULT', 'IPTABLES', 'NONE');
const sidecar = obj({
  workloadSelector: workloadSelectorNet,
  ingress: list(obj({ port, bind: str, captureMode, defaultEndpoint: str, tls: serverTLS, connectionPool })),
  egress: list(obj({ port, bind: str, captureMode, hosts: strs })),
  inboundConnectionPool: connectionPool,
  outboundTrafficPolicy: obj({ mode: en('REGISTRY_ONLY', 'ALLOW_ANY'), egressProxy: destination }),
});

const requestAuthentication = obj({
  selector: workloadSelector,
  targetRef: policyTargetRef,
  targetRefs: list(policyTargetRef),
  jwtRules: list(
    obj({
      issuer: str,
      audiences: strs,
      jwksUri: str,
      jwks: str,
      fromHeaders: list(obj({ name: str, prefix: str })),
      fromParams: strs,
      fromCookies: strs,
      outputPayloadToHeader: str,
      forwardOriginalToken: bool,
      outputClaimToHeaders: list(obj({ header: str, claim: str })),
      timeout: dur,
      spaceDelimitedClaims: strs,
    }),
  ),
});

const authorizationPolicy = obj({
  selector: workloadSelector,
  targetRef: policyTargetRef,
  targetRefs: list(policyTargetRef),
  rules: list(
    matchObj('Rule', {
      from: list(
        matchObj('Rule.From', {
          source: matchObj('Source', {
            principals: strs,
            notPrincipals: strs,
            requestPrincipals: strs,
            notRequestPrincipals: strs,
            namespaces: strs,
            notNamespaces: strs,
            serviceAccounts: strs,
            notServiceAccounts: strs,
            ipBlocks: strs,
            notIpBlocks: strs,
            remoteIpBlocks: strs,
            notRemoteIpBlocks: strs,
          }),
        }),
      ),
      to: list(
        matchObj('Rule.To', {
          operation: matchObj('Operation', {
            hosts: strs,
            notHosts: strs,
            ports: strs,
            notPorts: strs,
            methods: strs,
            notMethods: strs,
            paths: strs,
            notPaths: strs,
          }),
        }),
      ),
      when: list(matchObj('Condition', { key: str, values: strs, notValues: strs })),
    }),
  ),
  action: en('ALLOW', 'DENY', 'AUDIT', 'CUSTOM'),
  provider: obj({ name: str }),
});

const mtlsMode = obj({ mode: en('UNSET', 'DISABLE', 'PERMISSIVE', 'STRICT') });
const peerAuthentication = obj({ selector: workloadSelector, mtls: mtlsMode, portLevelMtls: map(mtlsMode, 'uint32') });

// EnvoyFilter, ProxyConfig, Telemetry, WasmPlugin (networking v1alpha3/v1beta1, telemetry v1,
// extensions v1alpha1). A patch value is an Envoy message checked by the EnvoyFilter validator.
const u32Port = u32;
const envoyFilter = obj({
  workloadSelector: workloadSelectorNet,
  targetRefs: list(policyTargetRef),
  configPatches: list(
    obj({
      applyTo: en(
        'INVALID',
        'LISTENER',
        'FILTER_CHAIN',
        'NETWORK_FILTER',
        'HTTP_FILTER',
        'ROUTE_CONFIGURATION',
        'VIRTUAL_HOST',
        'HTTP_ROUTE',
        'CLUSTER',
        'EXTENSION_CONFIG',
        'BOOTSTRAP',
        'LISTENER_FILTER',
      ),
      match: matchObj(
        'EnvoyConfigObjectMatch',
        {
          context: en('ANY', 'SIDECAR_INBOUND', 'SIDECAR_OUTBOUND', 'GATEWAY'),
          proxy: matchObj('ProxyMatch', { proxyVersion: str, metadata: strMap }),
          listener: matchObj('ListenerMatch', {
            portNumber: u32Port,
            portName: str,
            filterChain: matchObj('FilterChainMatch', {
              name: str,
              sni: str,
              transportProtocol: str,
              applicationProtocols: str,
              filter: matchObj('FilterMatch', { name: str, subFilter: matchObj('SubFilterMatch', { name: str }) }),
              destinationPort: u32Port,
            }),
            listenerFilter: str,
            name: str,
          }),
          routeConfiguration: matchObj('RouteConfigurationMatch', {
            portNumber: u32Port,
            portName: str,
            gateway: str,
            vhost: matchObj('VirtualHostMatch', {
              name: str,
              domainName: str,
              route: matchObj('RouteMatch', { name: str, action: en('ANY', 'ROUTE', 'REDIRECT', 'DIRECT_RESPONSE') }),
            }),
            name: str,
          }),
          cluster: matchObj('ClusterMatch', { portNumber: u32Port, service: str, subset: str, name: str }),
        },
        [['listener', 'routeConfiguration', 'cluster']],
      ),
      patch: obj({
        operation: en('INVALID', 'MERGE', 'ADD', 'REMOVE', 'INSERT_BEFORE', 'INSERT_AFTER', 'INSERT_FIRST', 'REPLACE'),
        value: map(any),
        filterClass: en('UNSPECIFIED', 'AUTHN', 'AUTHZ', 'STATS'),
      }),
    }),
  ),
  priority: i32,
});

const proxyConfig = obj({ selector: workloadSelector, concurrency: i32, environmentVariables: strMap, image: obj({ imageType: str }) });

const workloadMode = en('CLIENT_AND_SERVER', 'CLIENT', 'SERVER');
const providerRefs = list(obj({ name: str }));
const telemetry = obj({
  selector: workloadSelector,
  targetRef: policyTargetRef,
  targetRefs: list(policyTargetRef),
  tracing: list(
    obj({
      match: obj({ mode: workloadMode }),
      providers: providerRefs,
      customTags: map(
        obj(
          {
            literal: obj({ value: str }),
            environment: obj({ name: str, defaultValue: str }),
            header: obj({ name: str, defaultValue: str }),
          },
          [['literal', 'environment', 'header']],
        ),
      ),
      disableSpanReporting: boolValue,
      randomSamplingPercentage: num,
      useRequestIdForTraceSampling: boolValue,
      enableIstioTags: boolValue,
    }),
  ),
  metrics: list(
    obj({
      providers: providerRefs,
      overrides: list(
        obj({
          match: matchObj(
            'MetricSelector',
            {
              metric: en(
                'ALL_METRICS',
                'REQUEST_COUNT',
                'REQUEST_DURATION',
                'REQUEST_SIZE',
                'RESPONSE_SIZE',
                'TCP_OPENED_CONNECTIONS',
                'TCP_CLOSED_CONNECTIONS',
                'TCP_SENT_BYTES',
                'TCP_RECEIVED_BYTES',
                'GRPC_REQUEST_MESSAGES',
                'GRPC_RESPONSE_MESSAGES',
              ),
              customMetric: str,
              mode: workloadMode,
            },
            [['metric', 'customMetric']],
          ),
          disabled: boolValue,
          tagOverrides: map(obj({ operation: en('UPSERT', 'REMOVE'), value: str })),
        }),
      ),
      reportingInterval: dur,
    }),
  ),
  accessLogging: list(obj({ match: obj({ mode: workloadMode }), providers: providerRefs, disabled: boolValue, filter: obj({ expression: str }) })),
});

const wasmPlugin = obj({
  selector: workloadSelector,
  targetRef: policyTargetRef,
  targetRefs: list(policyTargetRef),
  url: str,
  sha256: str,
  imagePullPolicy: en('UNSPECIFIED_POLICY', 'IfNotPresent', 'Always'),
  imagePullSecret: str,
  verificationKey: str,
  pluginConfig: map(any),
  pluginName: str,
  phase: en('UNSPECIFIED_PHASE', 'AUTHN', 'AUTHZ', 'STATS'),
  priority: i32,
  failStrategy: en('FAIL_CLOSE', 'FAIL_OPEN'),
  vmConfig: obj({ env: list(obj({ name: str, value: str, valueFrom: en('INLINE', 'HOST') })) }),
  match: list(obj({ mode: en('UNDEFINED', 'CLIENT', 'SERVER', 'CLIENT_AND_SERVER'), ports: list(portSelector) })),
  type: en('UNSPECIFIED_PLUGIN_TYPE', 'HTTP', 'NETWORK'),
});

// Kubernetes objects: the fields the registries read are typed; the rest of these large APIs is
// accepted as-is (`any`) rather than warned about.
const k8sService = obj({
  selector: strMap,
  ports: list(obj({ name: str, protocol: str, appProtocol: str, port: i32, targetPort: intOrString, nodePort: i32 })),
  clusterIP: str,
  clusterIPs: strs,
  type: en('ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'),
  externalName: str,
  externalIPs: strs,
  sessionAffinity: any,
  sessionAffinityConfig: any,
  loadBalancerIP: str,
  loadBalancerSourceRanges: strs,
  loadBalancerClass: str,
  externalTrafficPolicy: str,
  internalTrafficPolicy: str,
  healthCheckNodePort: i32,
  publishNotReadyAddresses: bool,
  ipFamilies: strs,
  ipFamilyPolicy: str,
  allocateLoadBalancerNodePorts: bool,
  trafficDistribution: str,
});

const endpointSlice = obj({
  addressType: str,
  endpoints: list(
    obj({
      addresses: strs,
      conditions: obj({ ready: bool, serving: bool, terminating: bool }),
      hostname: str,
      nodeName: str,
      zone: str,
      targetRef: obj({ kind: str, name: str, namespace: str, uid: str, apiVersion: str, resourceVersion: str, fieldPath: str }),
      deprecatedTopology: strMap,
      hints: any,
    }),
  ),
  ports: list(obj({ name: str, port: i32, protocol: str, appProtocol: str })),
});

const pod = obj({
  serviceAccountName: str,
  nodeName: str,
  hostNetwork: bool,
  hostname: str,
  subdomain: str,
  containers: list(obj({ name: str, ports: list(obj({ name: str, containerPort: i32, protocol: str, hostPort: i32, hostIP: str })) })),
});

export const SPEC_SHAPES: Readonly<Record<Kind, Shape>> = {
  Gateway: gateway,
  VirtualService: virtualService,
  DestinationRule: destinationRule,
  ServiceEntry: serviceEntry,
  WorkloadEntry: workloadEntry,
  WorkloadGroup: workloadGroup,
  Sidecar: sidecar,
  RequestAuthentication: requestAuthentication,
  AuthorizationPolicy: authorizationPolicy,
  PeerAuthentication: peerAuthentication,
  EnvoyFilter: envoyFilter,
  ProxyConfig: proxyConfig,
  Telemetry: telemetry,
  WasmPlugin: wasmPlugin,
  Service: k8sService,
  EndpointSlice: endpointSlice,
  Pod: pod,
  Namespace: obj({}),
  Secret: obj({ type: str, data: strMap, stringData: strMap }),
  ...GATEWAY_API_SHAPES,
};
