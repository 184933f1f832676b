// The openssl `req` arguments for a new unencrypted ECDSA P-256 key, the key every test certificate uses
// (Istio's own test certificates are P-256 too: security/pkg/pki/util/generate_cert.go, ecdsa.P256()).
// P-256 is the curve openssl also calls prime256v1.

/** `-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes`, to spread into an `openssl req` argument list. */
export const EC_P256_KEY: readonly string[] = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** `x509 -req -in <csr> -CA <caCert> -CAkey <caKey> -CAcreateserial`: sign a request with a CA; add -days, -out, extensions. */
export function signWith(csr: string, caCert: string, caKey: string): string[] {
  return ['x509', '-req', '-in', csr, '-CA', caCert, '-CAkey', caKey, '-CAcreateserial'];
}
