// Envoy's transport failure reason for an upstream certificate that fails verification (src/proxy/tls/failure-reason.ts):
// BoringSSL's drained error text, the value Envoy 1.36.2 prints in its 503 body for an untrusted CA and for a
// subjectAltName mismatch alike (seen through the gateway in test/e2e/differential/gateway-tls.test.ts).
import t from 'tap';
import { tlsVerifyFailure } from '../../src/proxy/tls/failure-reason';

const ENVOY = 'TLS_error:|268435581:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED:TLS_error_end';

t.test('verification failures read as BoringSSL CERTIFICATE_VERIFY_FAILED; other failures keep their text', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate', ENVOY],
    ['SELF_SIGNED_CERT_IN_CHAIN: self-signed certificate in certificate chain', ENVOY],
    ['DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate', ENVOY],
    ['CERT_HAS_EXPIRED: certificate has expired', ENVOY],
    ['ETLSVERIFY: TLS error: certificate verify failed: SAN mismatch', ENVOY],
    ['ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:1', undefined],
    ['ECONNRESET: socket hang up', undefined],
    ['connect timeout', undefined],
  ];
  for (const [detail, want] of cases) t.equal(tlsVerifyFailure(detail), want, detail);
});
