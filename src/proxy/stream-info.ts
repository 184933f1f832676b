// What is known about one downstream request (or TCP connection) as it goes through the engine:
// the source of access-log fields, header substitutions and response flags.
import type { JsonObject } from '@bufbuild/protobuf';
import type { DynamicMetadata } from './matchers/string';
import type { UpstreamSource } from './upstream/source';

export interface DownstreamConnectionInfo {
  remoteAddress: string;
  remotePort: number;
  localAddress: string;
  localPort: number;
  /** SNI the client sent (TLS), else ''. */
  serverName: string;
  /** Negotiated or sniffed application protocol. */
  alpn: string;
  tls: boolean;
  /** The client presented a certificate / it was validated (mTLS). */
  peerCertificatePresented: boolean;
  peerCertificateValidated: boolean;
  /** Subject alternative names (URIs and DNS names) of the client certificate. */
  peerUriSans: readonly string[];
  peerDnsSans: readonly string[];
  /** Subject of the client certificate in RFC 2253 form (`CN=a,O=b`), as Envoy's subjectPeerCertificate. */
  peerSubject: string;
  /** TLS details of the connection for x-forwarded-client-cert (TLS connections with a peer certificate). */
  ssl?: SslDetails;
  /** Original destination when it is known (SO_ORIGINAL_DST, see native/original-dst.ts; or guessed). */
  originalDestination?: { address: string; port: number };
  /**
   * Set by the original_src listener filter (Istio's TPROXY mode): upstream connections made for this
   * connection leave from the downstream's address (upstream/source.ts).
   */
  upstreamSource?: UpstreamSource;
}

/**
 * Filter state key of Envoy's Network::ApplicationProtocols: the ALPN list a filter (Istio's istio.alpn)
 * wants upstream TLS connections to offer instead of the cluster's own.
 */
export const APPLICATION_PROTOCOLS_KEY = 'envoy.network.application_protocols';

/** The override for one upstream request, once the router knows the cluster and its HTTP protocol. */
export type ApplicationProtocolsFor = (upstreamProtocol: 'http1' | 'http2', clusterMetadata: JsonObject | undefined) => readonly string[] | undefined;

/** What Envoy's Ssl::ConnectionInfo offers about the certificates of a connection. */
export interface SslDetails {
  /** Hex SHA-256 of the peer certificate (DER), lower case. */
  readonly sha256PeerCertificateDigest: string;
  /** URI SANs of our own certificate on this connection (XFCC `By=`). */
  readonly uriSanLocalCertificate: readonly string[];
  urlEncodedPemEncodedPeerCertificate(): string;
  urlEncodedPemEncodedPeerCertificateChain(): string;
}

/**
 * Envoy's short response flags in the declaration order of its legacy bits (envoy/stream_info/stream_info.h
 * CoreResponseFlag): CEL's response.flags is their OR, an access log's response_flag_filter accepts these names.
 */
export const RESPONSE_FLAGS: readonly string[] = [
  'LH',
  'UH',
  'UT',
  'LR',
  'UR',
  'UF',
  'UC',
  'UO',
  'NR',
  'DI',
  'FI',
  'RL',
  'UAEX',
  'RLSE',
  'DC',
  'URX',
  'SI',
  'IH',
  'DPE',
  'UMSDR',
  'RFCF',
  'NFCF',
  'DT',
  'UPE',
  'NC',
  'OM',
  'DF',
  'DO',
  'DR',
];

export class StreamInfo {
  readonly startTime = Date.now();
  readonly startHr = performance.now();
  protocol = 'HTTP/1.1';
  responseCode = 0;
  /** Envoy's short response flags (UH, UF, NR, UT, UO, URX, DI, FI, RL, UAEX, DC…). */
  readonly flags: string[] = [];
  responseCodeDetails = '';
  bytesReceived = 0;
  bytesSent = 0;
  upstreamHost = '';
  /** gRPC message counts, when grpc_stats emits filter state (http/grpc-frames.ts). */
  grpcMessages: { request: { feed(b: Buffer): void }; response: { feed(b: Buffer): void } } | undefined = undefined;
  /** URI SANs of the upstream TLS connection (peer's and ours), for Istio's client-side principals. */
  upstreamTls: { readonly peer: string; readonly local: string } | undefined = undefined;
  /** The upstream endpoint's filter_metadata (Istio's `istio.workload` endpoint labels). */
  upstreamHostMetadata: JsonObject | undefined = undefined;
  upstreamCluster = '';
  upstreamLocalAddress = '';
  upstreamTransportFailureReason = '';
  routeName = '';
  attemptCount = 0;
  endHr = 0;
  connectionTerminationDetails = '';
  private md: DynamicMetadata | undefined;

  /** Created on first use: most requests never carry dynamic metadata. */
  get dynamicMetadata(): DynamicMetadata {
    return (this.md ??= new Map());
  }

  constructor(readonly downstream: DownstreamConnectionInfo) {}

  setFlag(flag: string): void {
    if (!this.flags.includes(flag)) this.flags.push(flag);
  }

  /** `-` when none, else comma-separated like Envoy's %RESPONSE_FLAGS%. */
  flagString(): string {
    return this.flags.length === 0 ? '-' : this.flags.join(',');
  }

  durationMs(): number {
    return Math.round((this.endHr || performance.now()) - this.startHr);
  }
}

/** Node reports IPv4 clients of dual-stack sockets as `::ffff:a.b.c.d`. */
export function plainIp(address: string | undefined): string {
  if (!address) return '';
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}
