// The URI SANs of an upstream TLS connection, as Istio's stats filter reads them on the client side
// (istio_stats.cc populatePeerInfo, ClientSidecar: upstreamSslConnection()->uriSanPeerCertificate()[0] and
// uriSanLocalCertificate()[0]): computed once per connection, as soon as it is connected (the pool calls it
// then: later Node may no longer show the certificates). A resumed TLS session shows no peer certificate
// in Node; it resumes a session made with the same upstream host, whose identities are kept by host.
import type net from 'node:net';
import tls from 'node:tls';

export interface TlsIdentities {
  peer: string;
  local: string;
}

const NONE: TlsIdentities = { peer: '', local: '' };
const cache = new WeakMap<net.Socket, TlsIdentities>();
const byHost = new Map<string, TlsIdentities>();
const MAX_HOSTS = 10_000;

/** The first `URI:` entry of an OpenSSL subjectaltname string. */
export function firstUriSan(subjectAltName: string | undefined): string {
  if (!subjectAltName) return '';
  for (const part of subjectAltName.split(', ')) if (part.startsWith('URI:')) return part.slice(4);
  return '';
}

/** `host`: the upstream host's key (cluster and address), for resumed sessions. */
export function upstreamIdentities(socket: net.Socket | undefined, host: string): TlsIdentities {
  if (!(socket instanceof tls.TLSSocket)) return NONE;
  let ids = cache.get(socket);
  if (!ids) {
    const local = socket.getCertificate();
    ids = {
      peer: firstUriSan(socket.getPeerCertificate()?.subjectaltname),
      local: firstUriSan(local && 'subjectaltname' in local ? local.subjectaltname : undefined),
    };
    if (ids.peer) {
      if (byHost.size >= MAX_HOSTS) byHost.clear();
      byHost.set(host, ids);
    } else if (socket.isSessionReused()) ids = byHost.get(host) ?? ids;
    cache.set(socket, ids);
  }
  return ids;
}
