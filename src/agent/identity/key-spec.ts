// The workload key's type from the agent's environment (WORKLOAD_RSA_KEY_SIZE, ECC_SIGNATURE_ALGORITHM,
// ECC_CURVE), on its own so that `pilot-agent proxy` can start making the key before it loads anything else.
import { keySpecFromEnv, type KeySpec } from '../../ca/pkix/keys';

/** Throws KeySpecError for a key Istio refuses. */
export function workloadKeySpec(env: { int(name: string): number; string(name: string): string }): KeySpec {
  return keySpecFromEnv({
    rsaKeySize: env.int('WORKLOAD_RSA_KEY_SIZE'),
    eccSignatureAlgorithm: env.string('ECC_SIGNATURE_ALGORITHM'),
    eccCurve: env.string('ECC_CURVE'),
  });
}
