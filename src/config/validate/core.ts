// Kubernetes objects the registries read (Service, EndpointSlice, Pod, Namespace): the structural
// rules the API server would enforce on the fields we use, in its message style, so that files
// describing a mesh without a cluster are held to the same standard.
import type { Config } from '../types';
import { isValidIP, k8sLabelErrors, k8sSubdomainErrors } from './names';
import { at, dot, key, type Report } from './report';
import { ipFamily } from '../../lib/ip';

const PORT_RANGE = 'must be between 1 and 65535, inclusive';
const q = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : String(v));

function invalid(r: Report, field: string, value: unknown, detail: string): void {
  r.error(field, `Invalid value: ${q(value)}: ${detail}`);
}

/** IANA_SVC_NAME (a named targetPort): at most 15 lower-case letters, digits and inner single dashes, with a letter. */
function ianaSvcNameErrors(v: string): string[] {
  const out: string[] = [];
  if (v.length > 15) out.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(v)) out.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (v.includes('--')) out.push('must not contain consecutive hyphens');
  if (!/[a-z]/.test(v)) out.push('must contain at least one letter (a-z)');
  if (v.startsWith('-') || v.endsWith('-')) out.push('must not begin or end with a hyphen');
  return out;
}

const PROTOCOLS = ['SCTP', 'TCP', 'UDP'];

export function validateService(c: Config<'Service'>, r: Report): void {
  const s = c.spec;
  const ports = s.ports ?? [];
  const type = s.type ?? 'ClusterIP';
  const headless = s.clusterIP === 'None';
  if (ports.length === 0 && !headless && type !== 'ExternalName') r.error('spec.ports', 'Required value');
  const names = new Set<string>();
  ports.forEach((p, i) => {
    const pp = at('spec.ports', i);
    if (ports.length > 1 && !p.name) r.error(dot(pp, 'name'), 'Required value');
    if (p.name) {
      for (const e of k8sLabelErrors(p.name)) invalid(r, dot(pp, 'name'), p.name, e);
      if (names.has(p.name)) r.error(dot(pp, 'name'), `Duplicate value: ${q(p.name)}`);
      names.add(p.name);
    }
    if (!(Number.isInteger(p.port) && p.port >= 1 && p.port <= 65535)) invalid(r, dot(pp, 'port'), p.port, PORT_RANGE);
    if (p.protocol !== undefined && !PROTOCOLS.includes(p.protocol))
      r.error(dot(pp, 'protocol'), `Unsupported value: ${q(p.protocol)}: supported values: "SCTP", "TCP", "UDP"`);
    const tp = p.targetPort;
    if (typeof tp === 'number') {
      if (!(tp >= 1 && tp <= 65535)) invalid(r, dot(pp, 'targetPort'), tp, PORT_RANGE);
    } else if (typeof tp === 'string' && !/^[0-9]+$/.test(tp)) {
      for (const e of ianaSvcNameErrors(tp)) invalid(r, dot(pp, 'targetPort'), tp, e);
    } else if (typeof tp === 'string' && !(Number(tp) >= 1 && Number(tp) <= 65535)) {
      invalid(r, dot(pp, 'targetPort'), tp, PORT_RANGE);
    }
  });
  const badIP = 'must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)';
  if (s.clusterIP && s.clusterIP !== 'None' && !isValidIP(s.clusterIP)) invalid(r, 'spec.clusterIP', s.clusterIP, badIP);
  (s.clusterIPs ?? []).forEach((ip, i) => {
    if (ip !== 'None' && !isValidIP(ip)) invalid(r, at('spec.clusterIPs', i), ip, badIP);
  });
  (s.externalIPs ?? []).forEach((ip, i) => {
    if (!isValidIP(ip)) invalid(r, at('spec.externalIPs', i), ip, badIP);
  });
  if (type === 'ExternalName') {
    if (!s.externalName) r.error('spec.externalName', 'Required value');
    else for (const e of k8sSubdomainErrors(s.externalName.replace(/\.$/, ''))) invalid(r, 'spec.externalName', s.externalName, e);
  }
}

export function validateEndpointSlice(c: Config<'EndpointSlice'>, r: Report): void {
  const s = c.spec;
  const types = ['IPv4', 'IPv6', 'FQDN'];
  if (s.addressType === undefined || (s.addressType as string) === '') r.error('addressType', 'Required value');
  else if (!types.includes(s.addressType)) r.error('addressType', `Unsupported value: ${q(s.addressType)}: supported values: "FQDN", "IPv4", "IPv6"`);
  (s.endpoints ?? []).forEach((ep, i) => {
    const p = at('endpoints', i);
    const addrs = ep.addresses ?? [];
    if (addrs.length === 0) r.error(dot(p, 'addresses'), 'Required value: must contain at least 1 address');
    if (addrs.length > 100) r.error(dot(p, 'addresses'), `Too many: ${addrs.length}: must have at most 100 items`);
    addrs.forEach((a, j) => {
      const ap = at(dot(p, 'addresses'), j);
      if (s.addressType === 'IPv4' && ipFamily(a) !== 4) invalid(r, ap, a, 'must be a valid IPv4 address');
      else if (s.addressType === 'IPv6' && ipFamily(a) !== 6) invalid(r, ap, a, 'must be a valid IPv6 address');
      else if (s.addressType === 'FQDN') for (const e of k8sSubdomainErrors(a)) invalid(r, ap, a, e);
    });
    if (ep.hostname) for (const e of k8sLabelErrors(ep.hostname)) invalid(r, dot(p, 'hostname'), ep.hostname, e);
  });
  (s.ports ?? []).forEach((port, i) => {
    const p = at('ports', i);
    if (port.name) for (const e of k8sLabelErrors(port.name)) invalid(r, dot(p, 'name'), port.name, e);
    if (port.port !== undefined && !(port.port >= 1 && port.port <= 65535)) invalid(r, dot(p, 'port'), port.port, PORT_RANGE);
    if (port.protocol !== undefined && !PROTOCOLS.includes(port.protocol))
      r.error(dot(p, 'protocol'), `Unsupported value: ${q(port.protocol)}: supported values: "SCTP", "TCP", "UDP"`);
  });
  // The registry finds a slice's Service through this label; without it the slice feeds nothing.
  if (!c.meta.labels['kubernetes.io/service-name'])
    r.warn(key('metadata.labels', 'kubernetes.io/service-name'), 'EndpointSlice has no kubernetes.io/service-name label: it belongs to no Service');
}

export function validatePod(c: Config<'Pod'>, r: Report): void {
  (c.spec.containers ?? []).forEach((ct, i) => {
    (ct.ports ?? []).forEach((p, j) => {
      const pp = at(dot(at('spec.containers', i), 'ports'), j);
      if (!(p.containerPort >= 1 && p.containerPort <= 65535)) invalid(r, dot(pp, 'containerPort'), p.containerPort, PORT_RANGE);
    });
  });
  const st = c.status;
  if (st?.podIP && !isValidIP(st.podIP)) invalid(r, 'status.podIP', st.podIP, 'must be a valid IP address');
  (st?.podIPs ?? []).forEach((p, i) => {
    if (!isValidIP(p.ip)) invalid(r, at('status.podIPs', i) + '.ip', p.ip, 'must be a valid IP address');
  });
}
