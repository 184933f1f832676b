// COMPLIANCE_POLICY for the TLS the mesh programs speak themselves (not the proxy's, which xDS configures):
// Istio's EnforceGoCompliance. `fips-140-2` pins TLS 1.2, the four ECDHE AES-GCM suites and the P-256 curve;
// empty means Node's defaults. Applied last, over any other setting, as Istio does.
import type tls from 'node:tls';

export const FIPS_140_2 = 'fips-140-2';
export type CompliancePolicy = '' | typeof FIPS_140_2;

/** Istio's fipsCiphers, in OpenSSL names. */
export const FIPS_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
];

export class CompliancePolicyError extends Error {}

/** Reads COMPLIANCE_POLICY; an unknown value is an error naming the variable (Istio only warns). */
export function parseCompliancePolicy(value: string): CompliancePolicy {
  if (value === '' || value === FIPS_140_2) return value;
  throw new CompliancePolicyError(
    `COMPLIANCE_POLICY=${JSON.stringify(value)}: unknown compliance policy (the known one is ${FIPS_140_2}, or leave it empty)`,
  );
}

/** The policy's overrides for tls.createSecureContext / tls.createServer options. */
export function complianceTlsOptions(
  policy: CompliancePolicy,
): Pick<tls.SecureContextOptions, 'minVersion' | 'maxVersion' | 'ciphers' | 'ecdhCurve'> {
  if (policy !== FIPS_140_2) return {};
  return { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2', ciphers: FIPS_CIPHERS.join(':'), ecdhCurve: 'P-256' };
}

/** `options` with the policy applied on top. */
export function withCompliance<T extends tls.SecureContextOptions>(options: T, policy: CompliancePolicy): T {
  return { ...options, ...complianceTlsOptions(policy) };
}
