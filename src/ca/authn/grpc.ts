// What an authenticator sees of a gRPC call: the transport (TLS or not), the peer address, the client
// certificate when the handshake verified one, and the metadata.
import type * as grpc from '@grpc/grpc-js';
import type { AuthRequest } from './types';

type AnyServerCall = Pick<grpc.ServerUnaryCall<unknown, unknown>, 'getPeer' | 'getAuthContext' | 'metadata'>;

export function grpcAuthRequest(call: AnyServerCall, secure: boolean): AuthRequest {
  // grpc-js reports the peer certificate only when the TLS socket verified it against the mesh roots.
  const cert = secure ? call.getAuthContext().sslPeerCertificate : undefined;
  return {
    secure,
    remoteAddress: call.getPeer(),
    peerCertificate: cert?.raw,
    header: (name) => call.metadata.get(name).map((v) => (typeof v === 'string' ? v : v.toString('utf8'))),
  };
}
