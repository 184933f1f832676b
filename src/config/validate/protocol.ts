// Port protocols as Istio parses them (case-insensitive names; anything else is unsupported).

export interface Protocol {
  name: string;
  isHTTP: boolean;
  isHTTP2: boolean;
  isTLS: boolean;
  isTCP: boolean;
  unsupported: boolean;
}

const KNOWN: Record<string, string> = {
  tcp: 'TCP',
  udp: 'UDP',
  grpc: 'GRPC',
  'grpc-web': 'GRPC-Web',
  http: 'HTTP',
  http_proxy: 'HTTP_PROXY',
  http2: 'HTTP2',
  https: 'HTTPS',
  tls: 'TLS',
  mongo: 'Mongo',
  redis: 'Redis',
  mysql: 'MySQL',
};

export function parseProtocol(s: string | undefined): Protocol {
  const name = KNOWN[(s ?? '').toLowerCase()] ?? 'UnsupportedProtocol';
  return {
    name,
    isHTTP: ['HTTP', 'HTTP2', 'HTTP_PROXY', 'GRPC', 'GRPC-Web'].includes(name),
    isHTTP2: ['HTTP2', 'GRPC', 'GRPC-Web'].includes(name),
    isTLS: name === 'HTTPS' || name === 'TLS',
    isTCP: ['TCP', 'HTTPS', 'TLS', 'Mongo', 'Redis', 'MySQL'].includes(name),
    unsupported: name === 'UnsupportedProtocol',
  };
}

/** ValidateProtocol: empty is allowed (protocol sniffing). */
export function protocolError(s: string | undefined): string | undefined {
  if (s && parseProtocol(s).unsupported) return `unsupported protocol: ${s}`;
  return undefined;
}
