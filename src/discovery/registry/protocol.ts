// Port protocols as Istio reads them (pkg/config/protocol.Parse and kube.ConvertProtocol): from a
// declared protocol name, from a Kubernetes `appProtocol`, or from the port-name prefix `http-`, `grpc-`…
import type { Protocol } from '../model';

/** Istio's protocol.Parse, folded onto the model's protocols (case-insensitive). */
export function parseProtocol(s: string | undefined): Protocol {
  switch ((s ?? '').toLowerCase()) {
    case 'tcp':
      return 'TCP';
    case 'udp':
      return 'UDP';
    case 'grpc':
      return 'GRPC';
    // gRPC-Web, HTTP_PROXY are HTTP-family protocols for routing purposes.
    case 'grpc-web':
    case 'http':
    case 'http_proxy':
      return 'HTTP';
    case 'http2':
      return 'HTTP2';
    case 'https':
      return 'HTTPS';
    case 'tls':
      return 'TLS';
    case 'mongo':
      return 'MONGO';
    // Redis and MySQL get protocol filters in Istio only behind feature flags; otherwise plain TCP.
    case 'redis':
    case 'mysql':
      return 'TCP';
    default:
      return 'UnsupportedProtocol';
  }
}

// Istio infers a few well-known ports when neither appProtocol nor the port name say anything.
const WELL_KNOWN_PORTS: Readonly<Record<number, Protocol>> = { 3306: 'TCP', 27017: 'MONGO', 6379: 'TCP' };

/**
 * kube.ConvertProtocol: UDP transport wins; then `appProtocol` (with Kubernetes' `kubernetes.io/h2c`,
 * `kubernetes.io/ws`, `kubernetes.io/wss`); then the port name's prefix before the first `-`.
 */
export function orchPortProtocol(port: number, name: string | undefined, transport: string | undefined, appProtocol: string | undefined): Protocol {
  if ((transport ?? 'TCP').toUpperCase() === 'UDP') return 'UDP';
  if (appProtocol) {
    switch (appProtocol) {
      case 'kubernetes.io/h2c':
        return 'HTTP2';
      case 'kubernetes.io/ws':
      case 'kubernetes.io/wss':
        return 'HTTP';
    }
    const p = parseProtocol(appProtocol);
    if (p !== 'UnsupportedProtocol') return p;
  }
  const n = name ?? '';
  const prefix = n.includes('-') ? n.slice(0, n.indexOf('-')) : n;
  const p = parseProtocol(prefix);
  if (p !== 'UnsupportedProtocol') return p;
  return WELL_KNOWN_PORTS[port] ?? 'UnsupportedProtocol';
}

export function isHttpProtocol(p: Protocol): boolean {
  return p === 'HTTP' || p === 'HTTP2' || p === 'GRPC';
}

/** HTTP-family or sniffed: Istio builds HTTP routes for both (IsHTTPOrSniffed). */
export function isHttpOrSniffed(p: Protocol): boolean {
  return isHttpProtocol(p) || p === 'UnsupportedProtocol';
}

/** Upstreams that must speak HTTP/2 (cluster http2_protocol_options). */
export function isHttp2(p: Protocol): boolean {
  return p === 'HTTP2' || p === 'GRPC';
}
