// The downstream connection a proxy test hands to routing, RBAC or stream info: plaintext (no TLS, so no
// peer certificate, SANs or subject), with the addresses the test gives. Follows Envoy's
// Network::ConnectionInfoProvider as src/proxy/stream-info.ts models it.
import type { DownstreamConnectionInfo } from '../../src/proxy/stream-info';

/** A plaintext downstream connection; `o` gives the addresses and anything the test is about. */
export function plainConnection(o: Partial<DownstreamConnectionInfo> = {}): DownstreamConnectionInfo {
  return {
    remoteAddress: '127.0.0.1',
    remotePort: 5555,
    localAddress: '127.0.0.1',
    localPort: 8080,
    serverName: '',
    alpn: '',
    tls: false,
    peerCertificatePresented: false,
    peerCertificateValidated: false,
    peerUriSans: [],
    peerDnsSans: [],
    peerSubject: '',
    ...o,
  };
}
