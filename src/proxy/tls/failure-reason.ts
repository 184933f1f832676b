// The transport failure reason Envoy reports when an upstream TLS handshake fails its certificate checks: the
// text of BoringSSL's error queue as Envoy's SslSocket drains it (source/common/tls/ssl_socket.cc drainErrorQueue:
// `TLS_error:|<packed code>:<lib>:<func>:<reason>:TLS_error_end`). Envoy checks the chain and the SAN/hash matchers
// inside BoringSSL's verify callback (cert_validator/default_validator.cc), so both fail the handshake with
// SSL_R_CERTIFICATE_VERIFY_FAILED: ERR_PACK(ERR_LIB_SSL 16, reason 125) = 268435581. Node's TLS stack reports the
// same failures as X.509 verify codes (node/src/crypto/crypto_common.cc) or, for the checks the engine makes after
// the handshake (upstream/pool.ts), ETLSVERIFY; other errors keep Node's own text.

/** BoringSSL's text for a failed certificate verification, as Envoy 1.36 prints it. */
export const BORINGSSL_CERTIFICATE_VERIFY_FAILED = 'TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end';

/** Node's X.509 verification error codes (what `tls.connect` fails with when the peer's chain does not verify). */
const VERIFY_CODES = new Set([
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_CRL',
  'UNABLE_TO_DECRYPT_CERT_SIGNATURE',
  'UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_NOT_YET_VALID',
  'CERT_HAS_EXPIRED',
  'ERROR_IN_CERT_NOT_BEFORE_FIELD',
  'ERROR_IN_CERT_NOT_AFTER_FIELD',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'CERT_CHAIN_TOO_LONG',
  'CERT_REVOKED',
  'INVALID_CA',
  'PATH_LENGTH_EXCEEDED',
  'INVALID_PURPOSE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'HOSTNAME_MISMATCH',
  'ETLSVERIFY',
]);

/**
 * Envoy's transport failure reason for an upstream connect failure described as `<code>: <message>`
 * (upstream/pool.ts), when it is a certificate verification failure; undefined otherwise.
 */
export function tlsVerifyFailure(detail: string): string | undefined {
  const code = /^([A-Z_]+):/.exec(detail)?.[1];
  return code && VERIFY_CODES.has(code) ? BORINGSSL_CERTIFICATE_VERIFY_FAILED : undefined;
}
