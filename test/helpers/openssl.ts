// The openssl `req` arguments for a new unencrypted ECDSA P-256 key, the key every test certificate uses
// (Istio's own test certificates are P-256 too: security/pkg/pki/util/generate_cert.go, ecdsa.P256()).
// P-256 is the curve openssl also calls prime256v1.

/** `-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes`, to spread into an `openssl req` argument list. */
export const EC_P256_KEY: readonly string[] = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
