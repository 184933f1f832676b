// ServiceEntry, WorkloadEntry and WorkloadGroup.
import type { Config, WorkloadEntrySpec } from '../types';
import { checkAlphaWorkloadSelector, checkExportTo, checkLabels, httpHeaderNameError } from './common';
import {
  isValidIP,
  UNIX_ADDRESS_PREFIX,
  validateFQDN,
  validateIPSubnet,
  validatePartialWildCard,
  validatePort,
  validatePortName,
  validateUnixAddress,
  validateWildcardDomain,
} from './names';
import { parseProtocol, protocolError } from './protocol';
import { at, dot, key, type Report } from './report';

/** validateWorkloadEntry; `servicePorts` are the port names of the enclosing ServiceEntry, if any. */
function checkWorkloadEntry(we: WorkloadEntrySpec, servicePorts: Set<string> | undefined, allowFQDN: boolean, path: string, r: Report): void {
  const addr = we.address ?? '';
  if (addr === '') {
    if (!we.network) {
      r.error(dot(path, 'address'), 'address is required');
      return;
    }
    r.warn(dot(path, 'address'), `address is unset with network ${JSON.stringify(we.network)}`);
  }
  let unix = false;
  if (addr.startsWith(UNIX_ADDRESS_PREFIX)) {
    unix = true;
    r.error(dot(path, 'address'), validateUnixAddress(addr.slice(UNIX_ADDRESS_PREFIX.length)));
    if (Object.keys(we.ports ?? {}).length !== 0) r.error(dot(path, 'ports'), `unix endpoint ${addr} must not include ports`);
  } else if (addr !== '' && !isValidIP(addr)) {
    // An IP for STATIC resolution, a host name for DNS.
    if (!allowFQDN) r.error(dot(path, 'address'), `endpoint address ${JSON.stringify(addr)} is not a valid IP address`);
    else if (validateFQDN(addr)) r.error(dot(path, 'address'), `endpoint address ${JSON.stringify(addr)} is not a valid FQDN or an IP address`);
  }
  for (const [name, port] of Object.entries(we.ports ?? {})) {
    const p = key(dot(path, 'ports'), name);
    if (servicePorts && !servicePorts.has(name)) r.error(p, `endpoint port ${port} is not defined by the service entry`);
    r.error(p, validatePortName(name));
    r.error(p, validatePort(port));
  }
  checkLabels(we.labels, dot(path, 'labels'), r);
  if (unix && servicePorts && servicePorts.size !== 1) r.error(path, 'exactly 1 service port required for unix endpoints');
}

export function validateWorkloadEntry(c: Config<'WorkloadEntry'>, r: Report): void {
  checkWorkloadEntry(c.spec, undefined, true, 'spec', r);
}

interface Probe {
  initialDelaySeconds?: number;
  timeoutSeconds?: number;
  periodSeconds?: number;
  successThreshold?: number;
  failureThreshold?: number;
  httpGet?: { port?: number; scheme?: string; httpHeaders?: Array<{ name?: string }> };
  tcpSocket?: { port?: number };
  exec?: { command?: string[] };
}

export function validateWorkloadGroup(c: Config<'WorkloadGroup'>, r: Report): void {
  const wg = c.spec;
  if (!wg.template) {
    r.error('spec.template', 'template is required');
    return;
  }
  // The template is not a WorkloadEntry check: address and the like are filled in at registration.
  checkLabels(wg.metadata?.labels, 'spec.metadata.labels', r);
  const probe = wg.probe as Probe | undefined;
  if (!probe) return;
  const p = 'spec.probe';
  for (const f of ['periodSeconds', 'initialDelaySeconds', 'timeoutSeconds', 'successThreshold', 'failureThreshold'] as const)
    if ((probe[f] ?? 0) < 0) r.error(dot(p, f), `${f} must be non-negative`);
  if (probe.httpGet) {
    const h = probe.httpGet;
    r.error(dot(p, 'httpGet.port'), validatePort(h.port ?? 0));
    if (h.scheme && h.scheme !== 'HTTPS' && h.scheme !== 'HTTP') r.error(dot(p, 'httpGet.scheme'), 'httpGet.scheme must be one of "HTTPS", "HTTP"');
    (h.httpHeaders ?? []).forEach((hd, i) => r.error(at(dot(p, 'httpGet.httpHeaders'), i), httpHeaderNameError(hd.name ?? '')));
  } else if (probe.tcpSocket) {
    r.error(dot(p, 'tcpSocket.port'), validatePort(probe.tcpSocket.port ?? 0));
  } else if (probe.exec) {
    if ((probe.exec.command ?? []).length === 0) r.error(dot(p, 'exec.command'), 'exec.command is required');
  } else {
    r.error(p, 'unknown health check method <nil>');
  }
}

export function validateServiceEntry(c: Config<'ServiceEntry'>, r: Report): void {
  const se = c.spec;
  const resolution = se.resolution ?? 'NONE';
  const sel = checkAlphaWorkloadSelector(se.workloadSelector, 'spec.workloadSelector', r);
  if (sel.empty)
    r.warn('spec.workloadSelector', 'service entry: workload selector specified without labels, will be applied to all services in namespace');
  if (se.workloadSelector && se.endpoints) r.error('spec', 'only one of WorkloadSelector or Endpoints is allowed in Service Entry');

  const hosts = se.hosts ?? [];
  if (hosts.length === 0) r.error('spec.hosts', 'service entry must have at least one host');
  hosts.forEach((h, i) => {
    const p = at('spec.hosts', i);
    if (h === '*') r.error(p, `invalid host ${h}`);
    else {
      r.error(p, validateWildcardDomain(h));
      r.warn(p, validatePartialWildCard(h));
    }
  });

  let cidr = false;
  (se.addresses ?? []).forEach((a, i) => {
    cidr = cidr || a.includes('/');
    r.error(at('spec.addresses', i), validateIPSubnet(a));
  });
  if (cidr && resolution !== 'NONE' && resolution !== 'STATIC')
    r.error('spec.addresses', 'CIDR addresses are allowed only for NONE/STATIC resolution types');

  const portNumbers = new Set<number>();
  const portNames = new Set<string>();
  (se.ports ?? []).forEach((port, i) => {
    const p = at('spec.ports', i);
    const name = port.name ?? '';
    if (portNames.has(name)) r.error(dot(p, 'name'), `service entry port name ${JSON.stringify(name)} already defined`);
    portNames.add(name);
    const number = port.number ?? 0;
    if (portNumbers.has(number)) r.error(dot(p, 'number'), `service entry port ${number} already defined`);
    portNumbers.add(number);
    if ((port.targetPort ?? 0) !== 0) {
      r.error(dot(p, 'targetPort'), validatePort(port.targetPort!));
      if (resolution === 'NONE') r.warn(dot(p, 'targetPort'), 'targetPort has no effect when resolution mode is NONE');
    }
    if ((se.addresses ?? []).length === 0 && (!port.protocol || port.protocol === 'TCP'))
      r.warn(p, 'addresses are required for ports serving TCP (or unset) protocol when MESH_META_DNS_AUTO_ALLOCATE is not set on a proxy');
    r.error(dot(p, 'name'), validatePortName(name));
    r.error(dot(p, 'protocol'), protocolError(port.protocol));
    r.error(dot(p, 'number'), validatePort(number));
  });

  const endpoints = se.endpoints ?? [];
  switch (resolution) {
    case 'NONE':
      if (endpoints.length !== 0) r.error('spec.endpoints', 'no endpoints should be provided for resolution type none');
      if (se.workloadSelector) r.warn('spec.workloadSelector', 'workloadSelector should not be set when resolution mode is NONE');
      break;
    case 'STATIC':
      endpoints.forEach((ep, i) => checkWorkloadEntry(ep, portNames, false, at('spec.endpoints', i), r));
      break;
    case 'DNS':
    case 'DNS_ROUND_ROBIN':
      if (endpoints.length === 0) {
        hosts.forEach((h, i) => {
          if (validateFQDN(h)) r.error(at('spec.hosts', i), `hosts must be FQDN if no endpoints are provided for resolution mode ${resolution}`);
        });
      }
      if (resolution === 'DNS_ROUND_ROBIN' && endpoints.length > 1)
        r.error('spec.endpoints', `there must only be 0 or 1 endpoint for resolution mode ${resolution}`);
      endpoints.forEach((ep, i) => {
        const p = at('spec.endpoints', i);
        const addr = ep.address ?? '';
        if (!isValidIP(addr) && validateFQDN(addr))
          r.error(dot(p, 'address'), `endpoint address ${JSON.stringify(addr)} is not a valid FQDN or an IP address`);
        checkLabels(ep.labels, dot(p, 'labels'), r);
        for (const [name, port] of Object.entries(ep.ports ?? {})) {
          const pp = key(dot(p, 'ports'), name);
          if (!portNames.has(name)) r.error(pp, `endpoint port ${port} is not defined by the service entry`);
          r.error(pp, validatePortName(name));
          r.error(pp, validatePort(port));
        }
      });
      if (se.workloadSelector) r.warn('spec.workloadSelector', `workloadSelector should not be set when resolution mode is ${resolution}`);
      if ((se.addresses ?? []).length > 0 && hosts.length > 1 && (se.ports ?? []).some((p) => parseProtocol(p.protocol).isTCP))
        r.warn('spec.hosts', 'service entry can not have more than one host specified simultaneously with address and tcp port');
      break;
  }

  // Several hosts can share plain TCP ports only when the hosts are ignored (NONE): HTTP and TLS
  // can tell them apart by authority or SNI, raw TCP cannot.
  if (resolution !== 'NONE' && hosts.length > 1) {
    const i = (se.ports ?? []).findIndex((p) => {
      const proto = parseProtocol(p.protocol);
      return !proto.isHTTP && !proto.isTLS;
    });
    if (i >= 0) r.error(at('spec.ports', i), 'multiple hosts provided with non-HTTP, non-TLS ports');
  }
  checkExportTo(c.meta.namespace, se.exportTo, true, false, 'spec.exportTo', r);
}
