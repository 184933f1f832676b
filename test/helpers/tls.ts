// TLS values a test expects of mesh mTLS, written out here rather than read from the code under test.

/** The cipher suites Istio allows on inbound mesh mTLS, in order (pilot/pkg/security/authn/utils SupportedCiphers). */
export const MESH_MTLS_CIPHERS: readonly string[] = [
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'AES256-GCM-SHA384',
  'AES128-GCM-SHA256',
];
