// x-forwarded-client-cert as Envoy's ConnectionManagerUtility::mutateXfccRequestHeader builds it:
// forward_client_cert_details decides whether the header is dropped, kept, replaced or appended to, and
// set_current_client_cert_details which fields of the peer certificate describe this hop:
// `By=<our URI SAN>;Hash=<sha256 of the peer cert>;Cert="…";Chain="…";Subject="…";URI=…;DNS=…`.
import {
  HttpConnectionManager_ForwardClientCertDetails as Fcc,
  type HttpConnectionManager_SetCurrentClientCertDetails,
} from '../../gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import type { DownstreamConnectionInfo } from '../stream-info';

export type ForwardClientCert = 'SANITIZE' | 'FORWARD_ONLY' | 'APPEND_FORWARD' | 'SANITIZE_SET' | 'ALWAYS_FORWARD_ONLY';
export type ClientCertDetail = 'Cert' | 'Chain' | 'Subject' | 'URI' | 'DNS';

export function forwardClientCertOf(v: Fcc): ForwardClientCert {
  switch (v) {
    case Fcc.FORWARD_ONLY:
      return 'FORWARD_ONLY';
    case Fcc.APPEND_FORWARD:
      return 'APPEND_FORWARD';
    case Fcc.SANITIZE_SET:
      return 'SANITIZE_SET';
    case Fcc.ALWAYS_FORWARD_ONLY:
      return 'ALWAYS_FORWARD_ONLY';
    default:
      return 'SANITIZE';
  }
}

/** Envoy's order, whatever order the fields were set in: Cert, Chain, Subject, URI, DNS. */
export function clientCertDetailsOf(d: HttpConnectionManager_SetCurrentClientCertDetails | undefined): ClientCertDetail[] {
  if (!d) return [];
  const out: ClientCertDetail[] = [];
  if (d.cert) out.push('Cert');
  if (d.chain) out.push('Chain');
  if (d.subject) out.push('Subject');
  if (d.uri) out.push('URI');
  if (d.dns) out.push('DNS');
  return out;
}

export type XfccAction = { kind: 'keep' } | { kind: 'remove' } | { kind: 'append' | 'set'; value: string };

/** What happens to the request's XFCC header on this connection. */
export function xfccAction(mode: ForwardClientCert, details: readonly ClientCertDetail[], c: DownstreamConnectionInfo): XfccAction {
  if (mode === 'ALWAYS_FORWARD_ONLY') return { kind: 'keep' };
  // not mutual TLS (no TLS, or no client certificate): the header cannot be trusted
  if (mode === 'SANITIZE' || !c.tls || !c.peerCertificatePresented) return { kind: 'remove' };
  if (mode === 'FORWARD_ONLY') return { kind: 'keep' };
  const parts: string[] = [];
  const ssl = c.ssl;
  const by = ssl?.uriSanLocalCertificate[0];
  if (by) parts.push(`By=${by}`);
  if (ssl?.sha256PeerCertificateDigest) parts.push(`Hash=${ssl.sha256PeerCertificateDigest}`);
  for (const d of details) {
    switch (d) {
      case 'Cert': {
        const pem = ssl?.urlEncodedPemEncodedPeerCertificate() ?? '';
        if (pem) parts.push(`Cert="${pem}"`);
        break;
      }
      case 'Chain': {
        const chain = ssl?.urlEncodedPemEncodedPeerCertificateChain() ?? '';
        if (chain) parts.push(`Chain="${chain}"`);
        break;
      }
      case 'Subject':
        // the key is there even when the subject is empty (Istio workload certificates have none)
        parts.push(`Subject="${c.peerSubject}"`);
        break;
      case 'URI':
        parts.push(`URI=${c.peerUriSans[0] ?? ''}`);
        break;
      case 'DNS':
        for (const dns of c.peerDnsSans) parts.push(`DNS=${dns}`);
        break;
    }
  }
  return { kind: mode === 'APPEND_FORWARD' ? 'append' : 'set', value: parts.join(';') };
}
