// Sidecar (Istio's ValidateSidecar).
import type { Config, Destination, Port } from '../types';
import { checkAlphaWorkloadSelector } from './common';
import { checkConnectionPool } from './destinationrule';
import { isValidIP, namespaceSlashHostErrors, UNIX_ADDRESS_PREFIX, validateFQDN, validatePort, validatePortName, validateUnixAddress } from './names';
import { parseProtocol, protocolError } from './protocol';
import { at, dot, type Report } from './report';
import { splitHostPort } from '../../lib/hostport';
import { checkServerTLS } from './tls';
import { checkDestination } from './virtualservice';

function checkPortAndBind(port: Port, bind: string, path: string, r: Report): void {
  if (port.name) r.error(dot(path, 'port.name'), validatePortName(port.name));
  r.error(dot(path, 'port.protocol'), protocolError(port.protocol));
  r.error(dot(path, 'port.number'), validatePort(port.number ?? 0));
  if (bind !== '' && !isValidIP(bind)) r.error(dot(path, 'bind'), `${bind} is not a valid IP`);
}

export function validateSidecar(c: Config<'Sidecar'>, r: Report): void {
  const sc = c.spec as Config<'Sidecar'>['spec'] & { inboundConnectionPool?: Parameters<typeof checkConnectionPool>[0] };
  const sel = checkAlphaWorkloadSelector(sc.workloadSelector, 'spec.workloadSelector', r);
  if (sel.empty) r.warn('spec.workloadSelector', 'sidecar: workload selector specified without labels, will be applied to all services in namespace');
  const ingress = sc.ingress ?? [];
  const egress = sc.egress ?? [];
  if (egress.length === 0 && ingress.length === 0 && !sc.outboundTrafficPolicy && !sc.inboundConnectionPool) {
    r.error('spec', 'sidecar: empty configuration provided');
    return;
  }

  const ports = new Set<number>();
  ingress.forEach((inRaw, i) => {
    const p = at('spec.ingress', i);
    const ing = inRaw as typeof inRaw & { connectionPool?: Parameters<typeof checkConnectionPool>[0] };
    if (!ing.port) {
      r.error(dot(p, 'port'), 'sidecar: port is required for ingress listeners');
      return;
    }
    if ((ing.port.targetPort ?? 0) > 0) r.error(dot(p, 'port.targetPort'), 'targetPort has no impact on Sidecars');
    checkPortAndBind(ing.port, ing.bind ?? '', p, r);
    const number = ing.port.number ?? 0;
    if (ports.has(number)) r.error(dot(p, 'port.number'), 'sidecar: ports on IP bound listeners must be unique');
    ports.add(number);

    const de = ing.defaultEndpoint ?? '';
    if (de !== '') {
      const dp = dot(p, 'defaultEndpoint');
      if (de.startsWith(UNIX_ADDRESS_PREFIX)) r.error(dp, validateUnixAddress(de.slice(UNIX_ADDRESS_PREFIX.length)));
      else {
        let host = '';
        let portStr = '';
        try {
          ({ host, port: portStr } = splitHostPort(de));
        } catch (e) {
          r.error(dp, (e as Error).message);
        }
        if (host !== '' && !['127.0.0.1', '0.0.0.0', '::1', '::'].includes(host))
          r.error(dp, 'sidecar: defaultEndpoint must be of form 127.0.0.1:<port>,0.0.0.0:<port>,[::1]:port,[::]:port,unix://filepath or unset');
        if (!/^[+-]?[0-9]+$/.test(portStr))
          r.error(dp, `sidecar: defaultEndpoint port (${portStr}) is not a number: strconv.Atoi: parsing ${JSON.stringify(portStr)}: invalid syntax`);
        else r.error(dp, validatePort(Number(portStr)));
      }
    }
    if (ing.tls) {
      const tp = dot(p, 'tls');
      if ((ing.tls.subjectAltNames ?? []).length > 0) r.error(dot(tp, 'subjectAltNames'), 'sidecar: subjectAltNames is not supported in ingress tls');
      if (ing.tls.httpsRedirect) r.error(dot(tp, 'httpsRedirect'), 'sidecar: httpsRedirect is not supported');
      if (ing.tls.credentialName) r.error(dot(tp, 'credentialName'), 'sidecar: credentialName is not currently supported');
      if (ing.tls.mode === 'ISTIO_MUTUAL' || ing.tls.mode === 'AUTO_PASSTHROUGH')
        r.error(dot(tp, 'mode'), `configuration is invalid: cannot set mode to ${ing.tls.mode} in sidecar ingress tls`);
      checkServerTLS(ing.tls, tp, r);
    }
    checkConnectionPool(ing.connectionPool, dot(p, 'connectionPool'), r);
    if (ing.connectionPool?.http && !parseProtocol(ing.port.protocol).isHTTP)
      r.warn(
        dot(p, 'connectionPool.http'),
        `sidecar: HTTP connection pool settings are configured for port ${number} (${JSON.stringify(ing.port.name ?? '')}) but its protocol is not HTTP (${ing.port.protocol ?? ''}); only TCP settings will apply`,
      );
  });
  checkConnectionPool(sc.inboundConnectionPool, 'spec.inboundConnectionPool', r);

  const egressPorts = new Set<number>();
  const uds = new Set<string>();
  let catchAll = false;
  egress.forEach((eg, i) => {
    const p = at('spec.egress', i);
    if (!eg.port) {
      // One catch-all listener without a port is allowed, and it must come last.
      if (!catchAll) {
        if (i === egress.length - 1) catchAll = true;
        else r.error(dot(p, 'port'), 'sidecar: the egress listener with empty port should be the last listener in the list');
      } else {
        r.error(dot(p, 'port'), 'sidecar: egress can have only one listener with empty port');
        return;
      }
    } else {
      if ((eg.port.targetPort ?? 0) > 0) r.error(dot(p, 'port.targetPort'), 'targetPort has no impact on Sidecars');
      const bind = eg.bind ?? '';
      const number = eg.port.number ?? 0;
      if (number === 0) {
        // Port 0 means a Unix domain socket listener.
        if (eg.port.name) r.error(dot(p, 'port.name'), validatePortName(eg.port.name));
        r.error(dot(p, 'port.protocol'), protocolError(eg.port.protocol));
        if (!bind.startsWith(UNIX_ADDRESS_PREFIX)) r.error(dot(p, 'bind'), 'sidecar: ports with 0 value must have a unix domain socket bind address');
        else r.error(dot(p, 'bind'), validateUnixAddress(bind.slice(UNIX_ADDRESS_PREFIX.length)));
        const mode = eg.captureMode ?? 'DEFAULT';
        if (mode !== 'DEFAULT' && mode !== 'NONE')
          r.error(dot(p, 'captureMode'), 'sidecar: captureMode must be DEFAULT/NONE for unix domain socket listeners');
        if (uds.has(bind)) r.error(dot(p, 'bind'), 'sidecar: unix domain socket values for listeners must be unique');
        uds.add(bind);
      } else {
        checkPortAndBind(eg.port, bind, p, r);
        if (egressPorts.has(number)) r.error(dot(p, 'port.number'), 'sidecar: ports on IP bound listeners must be unique');
        egressPorts.add(number);
      }
    }
    const hosts = eg.hosts ?? [];
    if (hosts.length === 0) {
      r.error(dot(p, 'hosts'), 'sidecar: egress listener must contain at least one host');
      return;
    }
    const byNs = new Map<string, Set<string>>();
    hosts.forEach((h, j) => {
      const hp = at(dot(p, 'hosts'), j);
      const slash = h.indexOf('/');
      if (slash >= 0) {
        let ns = h.slice(0, slash);
        const svc = h.slice(slash + 1);
        if (ns === '.') ns = c.meta.namespace;
        const svcs = byNs.get(ns) ?? new Set<string>();
        byNs.set(ns, svcs);
        if (svc !== '*' ? svcs.has(svc) || svcs.has('*') : svcs.size !== 0) r.warn(hp, `duplicated egress host: ${h}`);
        svcs.add(svc);
      }
      for (const m of new Set(namespaceSlashHostErrors(h, false))) r.error(hp, m);
    });
    if (byNs.get('*')?.has('*') && byNs.size !== 1) r.warn(dot(p, 'hosts'), '`*/*` host select all resources, no other hosts can be added');
  });

  const otp = sc.outboundTrafficPolicy;
  if (otp?.egressProxy) {
    const p = 'spec.outboundTrafficPolicy';
    if ((otp.mode ?? 'REGISTRY_ONLY') !== 'ALLOW_ANY') {
      r.error(dot(p, 'egressProxy'), 'sidecar: egress_proxy must be set only with ALLOW_ANY outbound_traffic_policy mode');
      return;
    }
    const ep: Destination = otp.egressProxy;
    r.error(dot(p, 'egressProxy.host'), validateFQDN(ep.host ?? ''));
    if (!ep.port) {
      r.error(dot(p, 'egressProxy.port'), 'sidecar: egress_proxy port must be non-nil');
      return;
    }
    checkDestination(ep, dot(p, 'egressProxy'), r);
  }
}
