// The CA server's metrics (spec doc 1 §4.5, Istio's security/pkg/server/ca/monitoring.go renamed
// citadel_server_* → ca_server_*).
import { defineCounter, defineGauge } from '../lib/metrics';
import { chainExpiry, type KeyCertBundle, rootExpiry } from './bundle';

export const csrCount = defineCounter({ name: 'ca_server_csr_count', help: 'The number of CSRs received by the CA server.' });
export const authnFailureCount = defineCounter({ name: 'ca_server_authentication_failure_count', help: 'The number of authentication failures.' });
export const csrParsingErrorCount = defineCounter({
  name: 'ca_server_csr_parsing_err_count',
  help: 'The number of errors occurred when parsing the CSR.',
});
export const idExtractionErrorCount = defineCounter({
  name: 'ca_server_id_extraction_err_count',
  help: 'The number of errors occurred when extracting the ID from CSR.',
});
export const certSignErrorCount = defineCounter({
  name: 'ca_server_csr_sign_err_count',
  help: 'The number of errors occurred when signing the CSR.',
  labelNames: ['error'] as const,
});
export const successCount = defineCounter({
  name: 'ca_server_success_cert_issuance_count',
  help: 'The number of certificates issuances that have succeeded.',
});

let rootExpiresAt: number | undefined;
let chainExpiresAt: number | undefined;

const rootExpiryTimestamp = defineGauge({
  name: 'ca_server_root_cert_expiry_timestamp',
  help: 'The unix timestamp, in seconds, when the root cert will expire.',
});
defineGauge({
  name: 'ca_server_root_cert_expiry_seconds',
  help: 'The time remaining, in seconds, before the root cert will expire. A negative value indicates the cert is expired.',
  collect() {
    if (rootExpiresAt !== undefined) this.set((rootExpiresAt - Date.now()) / 1000);
  },
});
const chainExpiryTimestamp = defineGauge({
  name: 'ca_server_cert_chain_expiry_timestamp',
  help: 'The unix timestamp, in seconds, when the generated cert chain will expire.',
});
defineGauge({
  name: 'ca_server_cert_chain_expiry_seconds',
  help: 'The time remaining, in seconds, before the generated cert chain will expire. A negative value indicates the cert is expired.',
  collect() {
    if (chainExpiresAt !== undefined) this.set((chainExpiresAt - Date.now()) / 1000);
  },
});

/** Istio's RecordCertsExpiry: the first root's expiry, and the chain's when the CA has one (plug-in). */
export function recordCertsExpiry(b: KeyCertBundle): void {
  rootExpiresAt = rootExpiry(b).getTime();
  rootExpiryTimestamp.set(Math.floor(rootExpiresAt / 1000));
  const chain = chainExpiry(b);
  if (!chain) return;
  chainExpiresAt = chain.getTime();
  chainExpiryTimestamp.set(Math.floor(chainExpiresAt / 1000));
}
