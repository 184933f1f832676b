// The peer certificate as Envoy's connection info hands it to XFCC `Cert=`/`Chain=` and the access log's
// %DOWNSTREAM_PEER_CERT% (Ssl::ConnectionInfo::urlEncodedPemEncodedPeerCertificate).
/** Envoy's PercentEncoding::urlEncode over a PEM: everything but unreserved characters is %XX. */
export function urlEncodePem(pem: string): string {
  return pem.replace(/[^A-Za-z0-9\-._~]/g, (ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}
