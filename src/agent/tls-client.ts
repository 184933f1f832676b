// TLS for the agent's own gRPC clients (the discovery daemon's xDS and the certificate service): a secure
// context from the trusted roots and, when there is one, the client certificate, with COMPLIANCE_POLICY
// applied last; the expected server name checked in place of the dialled host (Istio's ServerName/SAN).
// Also turns the handshake errors of a protocol mismatch into a sentence that names the setting to change.
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { withCompliance, type CompliancePolicy } from '../lib/compliance';

export interface ClientTls {
  /** PEM roots; undefined trusts Node's bundled public roots (Istio's SYSTEM). */
  rootCerts?: Buffer;
  /** Name the server certificate must carry. */
  serverName: string;
  certChain?: Buffer;
  privateKey?: Buffer;
  compliance: CompliancePolicy;
}

export function grpcChannelCredentials(c: ClientTls | undefined): { credentials: grpc.ChannelCredentials; options: grpc.ChannelOptions } {
  if (!c) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const context = tls.createSecureContext(
    withCompliance(
      {
        ...(c.rootCerts ? { ca: c.rootCerts } : {}),
        ...(c.certChain && c.privateKey ? { cert: c.certChain, key: c.privateKey } : {}),
        minVersion: 'TLSv1.2',
      },
      c.compliance,
    ),
  );
  return {
    credentials: grpc.credentials.createFromSecureContext(context),
    options: { 'grpc.ssl_target_name_override': c.serverName, 'grpc.default_authority': c.serverName },
  };
}

// OpenSSL's words when the peer does not answer a ClientHello with TLS (a plaintext HTTP/2 server).
const PLAINTEXT_PEER = /wrong version number|packet length too long|unknown protocol|record layer failure|http request/i;
// What a plaintext HTTP/2 client sees from a TLS server: the connection closes before any frame.
const TLS_PEER =
  /Last error: Failed to connect|Protocol error|Connection dropped|ECONNRESET|socket hang up|Received HTTP status code 400|unexpected end|premature close/i;

/**
 * A clearer account of a failed connection when the cause is TLS spoken to a plaintext port or the reverse;
 * undefined when the details say something else. `setting` names what the user sets to fix it.
 */
export function protocolMismatchHint(details: string, o: { address: string; tls: boolean; setting: string }): string | undefined {
  if (o.tls && PLAINTEXT_PEER.test(details)) {
    return `${o.address} answered the TLS handshake in plaintext: it is a plaintext port (such as the daemon's --grpcAddr :15010), not a TLS one (--secureGRPCAddr :15012). Point ${o.setting} at the TLS port, or set controlPlaneAuthPolicy: NONE to speak plaintext`;
  }
  if (!o.tls && TLS_PEER.test(details)) {
    return `${o.address} dropped a plaintext HTTP/2 connection: it may be a TLS port (such as the daemon's --secureGRPCAddr :15012). With controlPlaneAuthPolicy: NONE, point ${o.setting} at the plaintext port (--grpcAddr :15010), or use MUTUAL_TLS`;
  }
  return undefined;
}

/** gRPC error details on one log line (OpenSSL's end with a newline). */
export function oneLine(details: string): string {
  return details.replace(/\s*\n\s*/g, ' ').trim();
}
