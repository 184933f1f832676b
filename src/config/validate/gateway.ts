// Gateway (Istio's ValidateGateway / validateServer).
import type { Config, Port, Server } from '../types';
import { checkLabels } from './common';
import { parseProtocol } from './protocol';
import { isDNS1123Label, isValidIP, namespaceSlashHostErrors, UNIX_ADDRESS_PREFIX, validatePort, validateUnixAddress } from './names';
import { at, dot, type Report } from './report';
import { checkServerTLS } from './tls';

/** Go's text form of a Port message, as `%v` prints it in Istio's messages. */
export function portText(p: Port): string {
  const parts: string[] = [];
  if (p.number) parts.push(`number:${p.number}`);
  if (p.protocol) parts.push(`protocol:${JSON.stringify(p.protocol)}`);
  if (p.name) parts.push(`name:${JSON.stringify(p.name)}`);
  if (p.targetPort) parts.push(`target_port:${p.targetPort}`);
  return parts.join(' ');
}

export function validateGateway(c: Config<'Gateway'>, r: Report): void {
  const spec = c.spec;
  if (!isDNS1123Label(c.meta.name)) r.error('metadata.name', `invalid gateway name: ${JSON.stringify(c.meta.name)}`);
  const servers = spec.servers ?? [];
  if (servers.length === 0) r.error('spec.servers', 'gateway must have at least one server');
  servers.forEach((s, i) => validateServer(s, at('spec.servers', i), r));

  const names = new Set<string>();
  servers.forEach((s, i) => {
    if (!s.port) return;
    const name = s.port.name ?? '';
    if (names.has(name)) r.error(dot(at('spec.servers', i), 'port.name'), `port names in servers must be unique: duplicate name ${name}`);
    names.add(name);
    if (!parseProtocol(s.port.protocol).isHTTP && s.tls?.httpsRedirect)
      r.warn(dot(at('spec.servers', i), 'tls.httpsRedirect'), 'tls.httpsRedirect should only be used with http servers');
  });
  // A selector label that is not a valid label can never match a workload (Istio does not check it).
  checkLabels(spec.selector, 'spec.selector', r, true);
}

function validateServer(server: Server, path: string, r: Report): void {
  const hosts = server.hosts ?? [];
  if (hosts.length === 0) r.error(dot(path, 'hosts'), 'server config must contain at least one host');
  hosts.forEach((h, j) => {
    for (const m of namespaceSlashHostErrors(h, true)) r.error(at(dot(path, 'hosts'), j), m);
  });

  const portErrs = r.errors.length;
  validateServerPort(server.port, server.bind ?? '', dot(path, 'port'), r);
  const portOk = r.errors.length === portErrs;
  validateServerBind(server.port, server.bind ?? '', path, r);
  checkServerTLS(server.tls, dot(path, 'tls'), r);

  if (portOk && server.port) {
    const p = parseProtocol(server.port.protocol);
    if (p.isTLS && !server.tls) {
      r.error(dot(path, 'tls'), 'server must have TLS settings for HTTPS/TLS protocols');
    } else if (!p.isTLS && server.tls) {
      if (p.isHTTP) {
        // Plain HTTP servers may only carry httpsRedirect (a passthrough-mode TLS block with no files).
        const mode = server.tls.mode ?? 'PASSTHROUGH';
        const passthrough = mode === 'PASSTHROUGH' || mode === 'AUTO_PASSTHROUGH';
        if (!passthrough || server.tls.caCertificates || server.tls.privateKey || server.tls.serverCertificate)
          r.error(dot(path, 'tls'), 'server cannot have TLS settings for plain text HTTP ports');
      } else {
        r.error(dot(path, 'tls'), 'server cannot have TLS settings for non HTTPS/TLS ports');
      }
    }
  }
}

function validateServerPort(port: Port | undefined, bind: string, path: string, r: Report): void {
  if (!port) {
    r.error(path, 'port is required');
    return;
  }
  if (parseProtocol(port.protocol).unsupported)
    r.error(
      dot(path, 'protocol'),
      `invalid protocol ${JSON.stringify(port.protocol ?? '')}, supported protocols are HTTP, HTTP2, GRPC, GRPC-WEB, MONGO, REDIS, MYSQL, TCP`,
    );
  const number = port.number ?? 0;
  if (number > 0 || !bind.startsWith(UNIX_ADDRESS_PREFIX)) r.error(dot(path, 'number'), validatePort(number));
  if ((port.targetPort ?? 0) > 0) r.error(dot(path, 'targetPort'), 'targetPort has no impact on Gateways');
  if (!port.name) r.error(dot(path, 'name'), `port name must be set: ${portText(port)}`);
}

function validateServerBind(port: Port | undefined, bind: string, path: string, r: Report): void {
  if (bind.startsWith(UNIX_ADDRESS_PREFIX)) {
    r.error(dot(path, 'bind'), validateUnixAddress(bind.slice(UNIX_ADDRESS_PREFIX.length)));
    if (port && (port.number ?? 0) !== 0) r.error(dot(path, 'port.number'), `port number must be 0 for unix domain socket: ${portText(port)}`);
  } else if (bind !== '' && !isValidIP(bind)) {
    r.error(dot(path, 'bind'), `${bind} is not a valid IP`);
  }
}
