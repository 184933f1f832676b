// validateConfig: the daemon's admission check for one resource. Metadata first (the names the
// API server would insist on), then, for a file, what the API server would check (the CRD schema and
// its CEL rules, config/crd), then the spec's structure, then Istio 1.26's semantic rules for the kind.
// Errors reject the resource; warnings are reported and the resource is accepted.
import type { FieldError } from '../errors';
import { isClusterScoped } from '../schemas';
import type { Config, Kind } from '../types';
import { checkLabels } from './common';
import { validateCustomResource } from '../crd';
import { validateEndpointSlice, validatePod, validateService } from './core';
import { validateDestinationRule } from './destinationrule';
import { validateEnvoyFilter } from './envoyfilter';
import { validateGateway } from './gateway';
import {
  validateGatewayClass,
  validateGRPCRoute,
  validateHTTPRoute,
  validateKubernetesGateway,
  validateReferenceGrant,
  validateStreamRoute,
} from './gateway-api';
import { k8sDNS1035Errors, k8sLabelErrors, k8sSubdomainErrors } from './names';
import { Report } from './report';
import { checkDryRunAnnotation, validateAuthorizationPolicy, validatePeerAuthentication, validateRequestAuthentication } from './security';
import { validateServiceEntry, validateWorkloadEntry, validateWorkloadGroup } from './serviceentry';
import { checkShape } from './shape';
import { SPEC_SHAPES } from './shapes';
import { validateSidecar } from './sidecar';
import { validateTelemetry, validateProxyConfig } from './telemetry';
import { validateVirtualService } from './virtualservice';
import { validateWasmPlugin } from './wasmplugin';

export type { FieldError } from '../errors';
export type { ValidationResult } from './report';
export { toRoutingClaim, type RoutingClaim, HEADER_JWT_CLAIM } from './claims';
export { re2SyntaxError } from '../../lib/re2';
export { hostMatches, hostSubsetOf } from './hosts';
export { loadEnvoyFilterTypes } from './envoyfilter';

type Validator = (c: Config, r: Report) => void;

/** Istio's test hook: a resource carrying this annotation is always rejected (ours and Istio's name). */
const ALWAYS_REJECT_ANNOTATIONS = ['mesh.io/alwaysReject', 'istio.io/alwaysReject'];

const VALIDATORS: Readonly<Record<Kind, Validator | undefined>> = {
  Gateway: validateGateway as Validator,
  VirtualService: validateVirtualService as Validator,
  DestinationRule: validateDestinationRule as Validator,
  ServiceEntry: validateServiceEntry as Validator,
  WorkloadEntry: validateWorkloadEntry as Validator,
  WorkloadGroup: validateWorkloadGroup as Validator,
  Sidecar: validateSidecar as Validator,
  RequestAuthentication: validateRequestAuthentication as Validator,
  AuthorizationPolicy: validateAuthorizationPolicy as Validator,
  PeerAuthentication: validatePeerAuthentication as Validator,
  EnvoyFilter: validateEnvoyFilter as Validator,
  ProxyConfig: validateProxyConfig as Validator,
  Telemetry: validateTelemetry as Validator,
  WasmPlugin: validateWasmPlugin as Validator,
  Service: validateService as Validator,
  EndpointSlice: validateEndpointSlice as Validator,
  Pod: validatePod as Validator,
  Namespace: undefined,
  Secret: undefined,
  GatewayClass: validateGatewayClass as Validator,
  KubernetesGateway: validateKubernetesGateway as Validator,
  HTTPRoute: validateHTTPRoute as Validator,
  GRPCRoute: validateGRPCRoute as Validator,
  ReferenceGrant: validateReferenceGrant as Validator,
  TLSRoute: validateStreamRoute as Validator,
  TCPRoute: validateStreamRoute as Validator,
};

export interface ValidateOptions {
  /** Unknown fields are errors (meshctl validate) instead of warnings (the daemon, the webhook). */
  strictFields?: boolean;
  /**
   * The resource as written, when no API server has validated it (files): its kind's CRD schema and CEL
   * rules are applied first, and a resource they reject gets only their errors, as the API server rejects it
   * before Istio's webhook runs.
   */
  object?: Record<string, unknown>;
}

/** Validates one resource; `errors` non-empty means it must not be served. */
export function validateConfig(c: Config, opts: ValidateOptions = {}): { errors: FieldError[]; warnings: FieldError[] } {
  const r = new Report(opts.strictFields);
  validateMetadata(c, r);
  const before = r.errors.length;
  if (opts.object) {
    for (const e of validateCustomResource(c.kind, opts.object)) r.error(e.field, e.body);
    if (r.errors.length > before) return r.result();
  }
  // EndpointSlice and Secret fields live at the top level of the object, not under spec.
  checkShape(c.spec, SPEC_SHAPES[c.kind], c.kind === 'EndpointSlice' || c.kind === 'Secret' ? '' : 'spec', r);
  // Semantic rules assume well-typed fields: skip them when the structure is wrong.
  if (r.errors.length === before) VALIDATORS[c.kind]?.(c, r);
  return r.result();
}

/** Names and namespaces: DNS-1123 subdomain names (Service: DNS-1035 label, Namespace: label), DNS-1123 label namespaces. */
export function validateMetadata(c: Config, r: Report): void {
  const name = c.meta.name;
  const nameErrors = c.kind === 'Service' ? k8sDNS1035Errors(name) : c.kind === 'Namespace' ? k8sLabelErrors(name) : k8sSubdomainErrors(name);
  for (const e of nameErrors) r.error('metadata.name', `Invalid value: ${JSON.stringify(name)}: ${e}`);
  if (!isClusterScoped(c.kind)) {
    const ns = c.meta.namespace;
    if (ns === '') r.error('metadata.namespace', 'Required value');
    else for (const e of k8sLabelErrors(ns)) r.error('metadata.namespace', `Invalid value: ${JSON.stringify(ns)}: ${e}`);
  }
  checkLabels(c.meta.labels, 'metadata.labels', r);
  checkDryRunAnnotation(c, r);
  for (const a of ALWAYS_REJECT_ANNOTATIONS)
    if (c.meta.annotations[a] !== undefined) r.error(`metadata.annotations[${a}]`, `${JSON.stringify(a)} annotation found, rejecting`);
}
