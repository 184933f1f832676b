// The message catalog of `meshctl analyze`: Istio 1.26's analysis messages (pkg/config/analysis/msg/
// messages.yaml: same names, codes, levels and templates, product words renamed), then mesh's own
// MESH01xx codes for claim routing and DENY host matching, and the printf subset the templates use.

/** Where each message code is documented (Istio's url.ConfigAnalysis, under mesh.io for release 1.26). */
export const CONFIG_ANALYSIS_DOCS = 'https://mesh.io/v1.26/docs/reference/config/analysis';

export type Level = 'Error' | 'Warning' | 'Info';

/** Severity order: lower is worse (diag.Level.sortOrder). */
export const LEVEL_ORDER: Readonly<Record<Level, number>> = { Error: 0, Warning: 1, Info: 2 };

export interface MessageType {
  code: string;
  level: Level;
  template: string;
  description: string;
}

const IST = {
  InternalError: {
    code: 'IST0001',
    level: 'Error',
    template: 'Internal error: %v',
    description: 'There was an internal error in the toolchain. This is almost always a bug in the implementation.',
  },
  Deprecated: {
    code: 'IST0002',
    level: 'Warning',
    template: 'Deprecated: %s',
    description: 'A feature that the configuration is depending on is now deprecated.',
  },
  ReferencedResourceNotFound: {
    code: 'IST0101',
    level: 'Error',
    template: 'Referenced %s not found: %q',
    description: 'A resource being referenced does not exist.',
  },
  NamespaceNotInjected: {
    code: 'IST0102',
    level: 'Info',
    template:
      "The namespace is not enabled for Mesh injection. Run 'orchctl label namespace %s mesh-injection=enabled' to enable it, or 'orchctl label namespace %s mesh-injection=disabled' to explicitly mark it as not needing injection.",
    description: 'A namespace is not enabled for Mesh injection.',
  },
  PodMissingProxy: {
    code: 'IST0103',
    level: 'Warning',
    template: 'The pod %s is missing the Mesh proxy. This can often be resolved by restarting or redeploying the workload.',
    description: 'A pod is missing the Mesh proxy.',
  },
  SchemaValidationError: {
    code: 'IST0106',
    level: 'Error',
    template: 'Schema validation error: %v',
    description: 'The resource has a schema validation error.',
  },
  MisplacedAnnotation: {
    code: 'IST0107',
    level: 'Warning',
    template: 'Misplaced annotation: %s can only be applied to %s',
    description: 'A Mesh annotation is applied to the wrong kind of resource.',
  },
  UnknownAnnotation: {
    code: 'IST0108',
    level: 'Warning',
    template: 'Unknown annotation: %s',
    description: 'A Mesh annotation is not recognized for any kind of resource',
  },
  ConflictingMeshGatewayVirtualServiceHosts: {
    code: 'IST0109',
    level: 'Error',
    template:
      'The VirtualServices %s associated with mesh gateway define the same host %s which can lead to undefined behavior. This can be fixed by merging the conflicting VirtualServices into a single resource.',
    description: 'Conflicting hosts on VirtualServices associated with mesh gateway',
  },
  ConflictingSidecarWorkloadSelectors: {
    code: 'IST0110',
    level: 'Error',
    template: 'The Sidecars %v in namespace %q select the same workload pod %q, which can lead to undefined behavior.',
    description: 'A Sidecar resource selects the same workloads as another Sidecar resource',
  },
  MultipleSidecarsWithoutWorkloadSelectors: {
    code: 'IST0111',
    level: 'Error',
    template: 'The Sidecars %v in namespace %q have no workload selector, which can lead to undefined behavior.',
    description: 'More than one sidecar resource in a namespace has no workload selector',
  },
  VirtualServiceDestinationPortSelectorRequired: {
    code: 'IST0112',
    level: 'Error',
    template:
      'This VirtualService routes to a service %q that exposes multiple ports %v. Specifying a port in the destination is required to disambiguate.',
    description: 'A VirtualService routes to a service with more than one port exposed, but does not specify which to use.',
  },
  DeploymentAssociatedToMultipleServices: {
    code: 'IST0116',
    level: 'Warning',
    template: 'This deployment %s is associated with multiple services using port %d but different protocols: %v',
    description:
      "The resulting pods of a service mesh deployment can't be associated with multiple services using the same port but different protocols.",
  },
  PortNameIsNotUnderNamingConvention: {
    code: 'IST0118',
    level: 'Info',
    template: "Port name %s (port: %d, targetPort: %s) doesn't follow the naming convention of Mesh port.",
    description: 'Port name is not under naming convention. Protocol detection is applied to the port.',
  },
  NamespaceMultipleInjectionLabels: {
    code: 'IST0123',
    level: 'Warning',
    template:
      'The namespace has more than one type of injection labels %v, which may lead to undefined behavior. Make sure only one injection label exists.',
    description: 'A namespace has more than one type of injection labels',
  },
  InvalidAnnotation: { code: 'IST0125', level: 'Warning', template: 'Invalid annotation %s: %s', description: 'A Mesh annotation that is not valid' },
  UnknownMeshNetworksServiceRegistry: {
    code: 'IST0126',
    level: 'Error',
    template: 'Unknown service registry %s in network %s',
    description: 'A service registry in Mesh Networks is unknown',
  },
  NoMatchingWorkloadsFound: {
    code: 'IST0127',
    level: 'Warning',
    template: 'No matching workloads for this resource with the following labels: %s',
    description: "There aren't workloads matching the resource labels",
  },
  NoServerCertificateVerificationDestinationLevel: {
    code: 'IST0128',
    level: 'Warning',
    template: 'DestinationRule %s in namespace %s has TLS mode set to %s but no caCertificates are set to validate server identity for host: %s',
    description: 'No caCertificates are set in DestinationRule, this results in no verification of presented server certificate.',
  },
  NoServerCertificateVerificationPortLevel: {
    code: 'IST0129',
    level: 'Warning',
    template:
      'DestinationRule %s in namespace %s has TLS mode set to %s but no caCertificates are set to validate server identity for host: %s at port %s',
    description:
      'No caCertificates are set in DestinationRule, this results in no verification of presented server certificate for traffic to a given port.',
  },
  VirtualServiceUnreachableRule: {
    code: 'IST0130',
    level: 'Warning',
    template: 'VirtualService rule %v not used (%s).',
    description: 'A VirtualService rule will never be used because a previous rule uses the same match.',
  },
  VirtualServiceIneffectiveMatch: {
    code: 'IST0131',
    level: 'Info',
    template: 'VirtualService rule %v match %v is not used (duplicate/overlapping match in rule %v).',
    description: 'A VirtualService rule match duplicates a match in a previous rule.',
  },
  VirtualServiceHostNotFoundInGateway: {
    code: 'IST0132',
    level: 'Warning',
    template: 'one or more host %v defined in VirtualService %s not found in Gateway %s.',
    description: 'Host defined in VirtualService not found in Gateway.',
  },
  SchemaWarning: {
    code: 'IST0133',
    level: 'Warning',
    template: 'Schema validation warning: %v',
    description: 'The resource has a schema validation warning.',
  },
  ServiceEntryAddressesRequired: {
    code: 'IST0134',
    level: 'Warning',
    template: 'ServiceEntry addresses are required for this protocol.',
    description:
      'Virtual IP addresses are required for ports serving TCP (or unset) protocol when PILOT_ENABLE_IP_AUTOALLOCATE is not set on a proxy',
  },
  DeprecatedAnnotation: {
    code: 'IST0135',
    level: 'Info',
    template: 'Annotation %q has been deprecated%s and may not work in future Mesh versions.',
    description: 'A resource is using a deprecated Mesh annotation.',
  },
  AlphaAnnotation: {
    code: 'IST0136',
    level: 'Info',
    template: 'Annotation %q is part of an alpha-phase feature and may be incompletely supported.',
    description: 'A Mesh annotation may not be suitable for production.',
  },
  DeploymentConflictingPorts: {
    code: 'IST0137',
    level: 'Warning',
    template: 'This deployment %s is associated with multiple services %v using targetPort %q but different ports: %v.',
    description: 'Two services selecting the same workload with the same targetPort MUST refer to the same port.',
  },
  GatewayDuplicateCertificate: {
    code: 'IST0138',
    level: 'Warning',
    template: 'Duplicate certificate in multiple gateways %v may cause 404s if clients re-use HTTP2 connections.',
    description: 'Duplicate certificate in multiple gateways may cause 404s if clients re-use HTTP2 connections.',
  },
  InvalidWebhook: {
    code: 'IST0139',
    level: 'Error',
    template: '%v',
    description: 'Webhook is invalid or references a control plane service that does not exist.',
  },
  IngressRouteRulesNotAffected: {
    code: 'IST0140',
    level: 'Warning',
    template: 'Subset in virtual service %s has no effect on ingress gateway %s requests',
    description: 'Route rules have no effect on ingress gateway requests',
  },
  InsufficientPermissions: {
    code: 'IST0141',
    level: 'Error',
    template: 'Missing required permission to create resource %v (%v)',
    description: 'Required permissions to install Mesh are missing.',
  },
  UnsupportedKubernetesVersion: {
    code: 'IST0142',
    level: 'Error',
    template: 'The Kubernetes Version %q is lower than the minimum version: %v',
    description: 'The Kubernetes version is not supported',
  },
  LocalhostListener: {
    code: 'IST0143',
    level: 'Error',
    template: 'Port %v is exposed in a Service but listens on localhost. It will not be exposed to other pods.',
    description: 'A port exposed in a Service is bound to a localhost address',
  },
  InvalidApplicationUID: {
    code: 'IST0144',
    level: 'Warning',
    template: 'User ID (UID) 1337 is reserved for the sidecar proxy.',
    description: 'Application pods should not run as user ID (UID) 1337',
  },
  ConflictingGateways: {
    code: 'IST0145',
    level: 'Error',
    template: 'Conflict with gateways %s (workload selector %s, port %s, hosts %v).',
    description: 'Gateway should not have the same selector, port and matched hosts of server',
  },
  ImageAutoWithoutInjectionWarning: {
    code: 'IST0146',
    level: 'Warning',
    template: '%s %s contains `image: auto` but does not match any Mesh injection webhook selectors.',
    description: 'Deployments with `image: auto` should be targeted for injection.',
  },
  ImageAutoWithoutInjectionError: {
    code: 'IST0147',
    level: 'Error',
    template: '%s %s contains `image: auto` but does not match any Mesh injection webhook selectors.',
    description: 'Pods with `image: auto` should be targeted for injection.',
  },
  NamespaceInjectionEnabledByDefault: {
    code: 'IST0148',
    level: 'Info',
    template: 'is enabled for Mesh injection, as Mesh is installed with enableNamespacesByDefault as true.',
    description:
      'user namespace should be injectable if Mesh is installed with enableNamespacesByDefault enabled and neither injection label is set.',
  },
  JwtClaimBasedRoutingWithoutRequestAuthN: {
    code: 'IST0149',
    level: 'Error',
    template:
      'The virtual service uses the JWT claim based routing (key: %s) but found no request authentication for the gateway (%s) pod (%s). The request authentication must first be applied for the gateway pods to validate the JWT token and make the claims available for routing.',
    description: 'Virtual service using JWT claim based routing without request authentication.',
  },
  ExternalNameServiceTypeInvalidPortName: {
    code: 'IST0150',
    level: 'Warning',
    template:
      'Port name for ExternalName service is invalid. Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly',
    description:
      'Proxy may prevent tcp named ports and unmatched traffic for ports serving TCP protocol from being forwarded correctly for ExternalName services.',
  },
  EnvoyFilterUsesRelativeOperation: {
    code: 'IST0151',
    level: 'Warning',
    template:
      'This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST of ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.',
    description:
      'This EnvoyFilter does not have a priority and has a relative patch operation set which can cause the EnvoyFilter not to be applied. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.',
  },
  EnvoyFilterUsesReplaceOperationIncorrectly: {
    code: 'IST0152',
    level: 'Error',
    template: 'The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.',
    description: 'The REPLACE operation is only valid for HTTP_FILTER and NETWORK_FILTER.',
  },
  EnvoyFilterUsesAddOperationIncorrectly: {
    code: 'IST0153',
    level: 'Error',
    template: 'The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
    description: 'The ADD operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
  },
  EnvoyFilterUsesRemoveOperationIncorrectly: {
    code: 'IST0154',
    level: 'Error',
    template: 'The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
    description: 'The REMOVE operation will be ignored when applyTo is set to ROUTE_CONFIGURATION, or HTTP_ROUTE.',
  },
  EnvoyFilterUsesRelativeOperationWithProxyVersion: {
    code: 'IST0155',
    level: 'Warning',
    template:
      'This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.',
    description:
      'This EnvoyFilter does not have a priority and has a relative patch operation (NSTERT_BEFORE/AFTER, REPLACE, MERGE, DELETE) and proxyVersion set which can cause the EnvoyFilter not to be applied during an upgrade. Using the INSERT_FIRST or ADD option or setting the priority may help in ensuring the EnvoyFilter is applied correctly.',
  },
  UnsupportedGatewayAPIVersion: {
    code: 'IST0156',
    level: 'Error',
    template: 'The Gateway API CRD version %v is lower than the minimum version: %v',
    description: 'The Gateway API CRD version is not supported',
  },
  FutureUnsupportedGatewayAPIVersion: {
    code: 'IST0172',
    level: 'Warning',
    template: 'The Gateway API CRD version %v is lower than the minimum version: %v',
    description: 'The Gateway API CRD version will not be supported in the future',
  },
  InvalidTelemetryProvider: {
    code: 'IST0157',
    level: 'Warning',
    template: 'The Telemetry %v in namespace %q with empty providers will be ignored.',
    description: 'The Telemetry with empty providers will be ignored',
  },
  PodsIstioProxyImageMismatchInNamespace: {
    code: 'IST0158',
    level: 'Warning',
    template:
      'The Mesh proxy images of the pods running in the namespace do not match the image defined in the injection configuration (pod names: %v). This often happens after upgrading the Mesh control-plane and can be fixed by redeploying the pods.',
    description: 'The Mesh proxy image of the pods running in the namespace do not match the image defined in the injection configuration.',
  },
  ConflictingTelemetryWorkloadSelectors: {
    code: 'IST0159',
    level: 'Error',
    template: 'The Telemetries %v in namespace %q select the same workload pod %q, which can lead to undefined behavior.',
    description: 'A Telemetry resource selects the same workloads as another Telemetry resource',
  },
  MultipleTelemetriesWithoutWorkloadSelectors: {
    code: 'IST0160',
    level: 'Error',
    template: 'The Telemetries %v in namespace %q have no workload selector, which can lead to undefined behavior.',
    description: 'More than one telemetry resource in a namespace has no workload selector',
  },
  InvalidGatewayCredential: {
    code: 'IST0161',
    level: 'Error',
    template: 'The credential referenced by the Gateway %s in namespace %s is invalid, which can cause the traffic not to work as expected.',
    description: 'The credential provided for the Gateway resource is invalid',
  },
  GatewayPortNotDefinedOnService: {
    code: 'IST0162',
    level: 'Warning',
    template:
      'The gateway is listening on a target port (port %d) that is not defined in the Service associated with its workload instances (Pod selector %s). If you need to access the gateway port through the gateway Service, it will not be available.',
    description: 'Gateway port not exposed by service',
  },
  InvalidExternalControlPlaneConfig: {
    code: 'IST0163',
    level: 'Warning',
    template:
      'The hostname (%s) that was provided for the webhook (%s) to reach the ingress gateway on the external control plane cluster %s. Traffic may not flow properly.',
    description: 'Address for the ingress gateway on the external control plane is not valid',
  },
  ExternalControlPlaneAddressIsNotAHostname: {
    code: 'IST0164',
    level: 'Info',
    template:
      'The address (%s) that was provided for the webhook (%s) to reach the ingress gateway on the external control plane cluster is an IP address. This is not recommended for a production environment.',
    description: 'Address for the ingress gateway on the external control plane is an IP address and not a hostname',
  },
  ReferencedInternalGateway: {
    code: 'IST0165',
    level: 'Warning',
    template: 'Gateway reference in VirtualService %s is to an implementation-generated internal Gateway: %s.',
    description: 'VirtualServices should not reference internal Gateways.',
  },
  IneffectiveSelector: {
    code: 'IST0166',
    level: 'Warning',
    template: 'Ineffective selector on Kubernetes Gateway %s. Use the TargetRef field instead.',
    description: 'Selector has no effect when applied to Kubernetes Gateways.',
  },
  IneffectivePolicy: {
    code: 'IST0167',
    level: 'Warning',
    template: 'The policy has no impact: %s.',
    description: 'The policy applied has no impact.',
  },
  UnknownUpgradeCompatibility: {
    code: 'IST0168',
    level: 'Warning',
    template:
      'The configuration %q changed in release %s, but compatibility cannot be automatically detected: %s. Or, install with `--set compatibilityVersion=%s` to retain the old default.',
    description: 'We cannot automatically detect whether a change is fully compatible or not',
  },
  UpdateIncompatibility: {
    code: 'IST0169',
    level: 'Warning',
    template: 'The configuration %q changed in release %s: %s. Or, install with `--set compatibilityVersion=%s` to retain the old default.',
    description: 'The provided configuration object may be incompatible due to an upgrade',
  },
  MultiClusterInconsistentService: {
    code: 'IST0170',
    level: 'Warning',
    template:
      'The service %v in namespace %q is inconsistent across clusters %q, which can lead to undefined behaviors. The inconsistent behaviors are: %v.',
    description: 'The services live in different clusters under multi-cluster deployment model are inconsistent',
  },
  NegativeConditionStatus: {
    code: 'IST0171',
    level: 'Warning',
    template: 'A condition with a negative status is present: type=%s, reason=%s, message=%s.',
    description: 'A condition with a negative status is present',
  },
  DestinationRuleSubsetNotSelectPods: {
    code: 'IST0173',
    level: 'Error',
    template: 'The Subset %s defined in the DestinationRule does not select any pods. Which may lead to 503 UH (NoHealthyUpstream).',
    description: 'Subsets defined in destination does not select any pods.',
  },
  UnknownDestinationRuleHost: {
    code: 'IST0174',
    level: 'Warning',
    template: 'The host %s defined in the DestinationRule does not match any services in the mesh.',
    description: 'Host defined in destination rule does not match any services in the mesh.',
  },
} satisfies Record<string, MessageType>;

/** mesh's own analysis messages (documented in README.md, "meshctl validate and analyze"). */
const MESH = {
  ClaimRouteWithoutGateway: {
    code: 'MESH0101',
    level: 'Error',
    template:
      'The route matches JWT claim %s but the VirtualService is bound to no gateway: only gateways validate tokens, so sidecars never see claims and the match can never succeed. Bind it to the gateway that validates the token.',
    description: 'A VirtualService matching JWT claims is not bound to a gateway.',
  },
  ClaimRouteGatewayWithoutRequestAuthN: {
    code: 'MESH0102',
    level: 'Error',
    template:
      'The route matches JWT claim %s at gateway %s, but no RequestAuthentication selects that gateway (selector %s): without token validation there are no claims and the route never matches.',
    description: 'A gateway with JWT claim routes has no RequestAuthentication selecting it.',
  },
  ClaimRouteUnknownIssuer: {
    code: 'MESH0103',
    level: 'Error',
    template:
      'The route matches issuer %q at gateway %s, but no RequestAuthentication selecting that gateway lists it (issuers: %v): tokens from it are never validated there.',
    description: 'A JWT claim route names an issuer no RequestAuthentication for its gateway lists.',
  },
  DenyHostWithoutPortVariant: {
    code: 'MESH0104',
    level: 'Warning',
    template:
      'The DENY rule matches host %q but not %q: a request whose Host header carries a port (%s:8080) is not denied. List both forms, or use a wildcard port.',
    description: 'A DENY AuthorizationPolicy lists a host without its host:* variant.',
  },
} satisfies Record<string, MessageType>;

export const MESSAGES = { ...IST, ...MESH } as const satisfies Record<string, MessageType>;
export type MessageName = keyof typeof MESSAGES;

/** Every message type, for code checks (`--suppress`) and documentation. */
export const ALL_MESSAGE_TYPES: readonly MessageType[] = Object.values(MESSAGES);

export type Arg = string | number | readonly string[] | readonly number[];

function goValue(a: Arg): string {
  return Array.isArray(a) ? `[${a.join(' ')}]` : String(a);
}

function goQuoted(a: Arg): string {
  return Array.isArray(a) ? `[${a.map((x) => JSON.stringify(String(x))).join(' ')}]` : JSON.stringify(String(a));
}

/** fmt.Sprintf for the verbs the templates use: %s, %v, %d, %q (and %%). */
export function goSprintf(template: string, args: readonly Arg[]): string {
  let i = 0;
  return template.replace(/%([svdq%])/g, (_, verb: string) => {
    if (verb === '%') return '%';
    if (i >= args.length) return `%!${verb}(MISSING)`;
    const a = args[i++]!;
    return verb === 'q' ? goQuoted(a) : goValue(a);
  });
}
