// From a pod's annotations and proxy container to the mesh-iptables settings of its capture
// (Istio's cni/pkg/plugin sidecar_redirect.go): the same inputs the injected mesh-init container would
// have passed as flags, so the one rule builder of src/iptables produces the rules.
import { goBool } from '../../lib/gostrconv';
import type { IptablesFlags } from '../../iptables/config';
import { IPTABLES_FLAG_DEFAULTS } from '../../iptables/config';
import { parseCidr } from '../../iptables/ip';
import { ANNOTATION, type PodInfo } from './pod';

export interface Redirect {
  targetPort: string;
  redirectMode: 'REDIRECT' | 'TPROXY';
  noRedirectUID: string;
  noRedirectGID: string;
  includeIPCidrs: string;
  excludeIPCidrs: string;
  excludeInboundPorts: string;
  excludeOutboundPorts: string;
  includeInboundPorts: string;
  includeOutboundPorts: string;
  rerouteVirtualInterfaces: string;
  excludeInterfaces: string;
  dnsRedirect: boolean;
  dualStack: boolean;
  invalidDrop: boolean;
  /** Proxy environment values that were not booleans (ignored, as Istio does, but worth a log line). */
  warnings: string[];
}

/** A pod annotation the plugin cannot use; the pod cannot be started with it. */
export class AnnotationError extends Error {
  override name = 'AnnotationError';
}

const PROXY_STATUS_PORT = '15020';
const DEFAULT_UID = '1337';

type Validator = (value: string) => string | undefined;

function portList(value: string): string | undefined {
  const t = value.trim();
  if (t === '') return undefined;
  for (const p of t.split(',')) {
    const s = p.trim();
    if (!/^[0-9]+$/.test(s) || Number(s) > 65535) return `"${p}" is not a port number (0-65535)`;
  }
  return undefined;
}
const portListWithWildcard: Validator = (v) => (v === '*' ? undefined : portList(v));

function cidrList(value: string): string | undefined {
  if (value === '') return undefined;
  for (const c of value.split(',')) if (!parseCidr(c)) return `"${c}" is not a CIDR such as 10.0.0.0/8`;
  return undefined;
}
const cidrListWithWildcard: Validator = (v) => (v === '*' ? undefined : cidrList(v));

const mode: Validator = (v) => (v === 'REDIRECT' || v === 'TPROXY' ? undefined : `interception mode must be REDIRECT or TPROXY`);
const any: Validator = () => undefined;

/** Annotation value, validated, or the default when the pod does not set it. */
function annotationOr(pi: PodInfo, key: string, def: string, validate: Validator): { found: boolean; value: string } {
  if (!(key in pi.annotations)) return { found: false, value: def };
  const value = pi.annotations[key]!;
  const why = validate(value);
  if (why) throw new AnnotationError(`pod annotation ${key}=${JSON.stringify(value)} is invalid: ${why}`);
  return { found: true, value };
}

export function newRedirect(pi: PodInfo): Redirect {
  const warnings: string[] = [];
  const envBool = (name: string): boolean => {
    const v = pi.proxyEnv[name];
    if (v === undefined) return false;
    const b = goBool(v);
    if (b === undefined) warnings.push(`cannot parse ${name}=${JSON.stringify(v)} of the ${'mesh-proxy'} container as a boolean; using false`);
    return b ?? false;
  };

  // Istio appends the proxy's status, health and metrics ports (kept in sync with the injection template).
  let excludeInbound = annotationOr(pi, ANNOTATION.excludeInboundPorts, PROXY_STATUS_PORT, portListWithWildcard).value.trim();
  if (excludeInbound.length > 0 && !excludeInbound.endsWith(',')) excludeInbound += ',';
  excludeInbound += '15020,15021,15090';
  excludeInbound = [...new Set(excludeInbound.split(','))].join(',');

  // The deprecated kubevirtInterfaces is read only when reroute-virtual-interfaces is absent.
  const reroute = annotationOr(pi, ANNOTATION.rerouteVirtualInterfaces, '', any);
  const rerouteValue = reroute.found ? reroute.value : annotationOr(pi, ANNOTATION.kubevirtInterfaces, '', any).value;

  return {
    targetPort: '15001',
    redirectMode: annotationOr(pi, ANNOTATION.interceptionMode, 'REDIRECT', mode).value as Redirect['redirectMode'],
    noRedirectUID: pi.proxyUID ? String(pi.proxyUID) : DEFAULT_UID,
    noRedirectGID: pi.proxyGID ? String(pi.proxyGID) : DEFAULT_UID,
    includeIPCidrs: annotationOr(pi, ANNOTATION.includeOutboundIPRanges, '*', cidrListWithWildcard).value,
    excludeIPCidrs: annotationOr(pi, ANNOTATION.excludeOutboundIPRanges, '', cidrList).value,
    excludeInboundPorts: excludeInbound,
    includeInboundPorts: annotationOr(pi, ANNOTATION.includeInboundPorts, '*', portListWithWildcard).value,
    excludeOutboundPorts: annotationOr(pi, ANNOTATION.excludeOutboundPorts, PROXY_STATUS_PORT, portListWithWildcard).value,
    includeOutboundPorts: annotationOr(pi, ANNOTATION.includeOutboundPorts, '', portListWithWildcard).value,
    excludeInterfaces: annotationOr(pi, ANNOTATION.excludeInterfaces, '', any).value,
    rerouteVirtualInterfaces: rerouteValue,
    dnsRedirect: envBool('MESH_META_DNS_CAPTURE'),
    dualStack: envBool('MESH_DUAL_STACK'),
    invalidDrop: envBool('INVALID_DROP'),
    warnings,
  };
}

/**
 * The mesh-iptables flags for a redirect in a pod's namespace. Every flag is given, so none falls back
 * to the plugin's own environment; the environment-only settings (owner groups, loopback range) still
 * come from it, as they do for Istio's plugin.
 */
export function iptablesFlags(r: Redirect, netns: string, dryRun: boolean): IptablesFlags {
  return {
    ...IPTABLES_FLAG_DEFAULTS,
    'proxy-port': r.targetPort,
    'proxy-uid': r.noRedirectUID,
    'proxy-gid': r.noRedirectGID,
    'mesh-inbound-interception-mode': r.redirectMode,
    'mesh-service-cidr': r.includeIPCidrs,
    'mesh-service-exclude-cidr': r.excludeIPCidrs,
    'mesh-local-exclude-ports': r.excludeInboundPorts,
    'mesh-inbound-ports': r.includeInboundPorts,
    'mesh-local-outbound-ports-exclude': r.excludeOutboundPorts,
    'mesh-outbound-ports': r.includeOutboundPorts,
    'mesh-exclude-interfaces': r.excludeInterfaces,
    'orch-virt-interfaces': r.rerouteVirtualInterfaces,
    'redirect-dns': r.dnsRedirect,
    // In a pod started through CNI the agent has no resolv.conf of the pod to read: all of port 53 is captured.
    'capture-all-dns': r.dnsRedirect,
    'drop-invalid': r.invalidDrop,
    'dual-stack': r.dualStack,
    'network-namespace': netns,
    'cni-mode': true,
    'dry-run': dryRun,
  };
}
