// Names and numbers shared by the rule builder, the state checker and the executor.
// Chain names are Istio's ISTIO_* chains renamed to the MESH_ prefix.

/** Every chain we create starts with this; cleanup and drift detection key on it. */
export const CHAIN_PREFIX = 'MESH_';

export const Chain = {
  INBOUND: 'MESH_INBOUND',
  REDIRECT: 'MESH_REDIRECT',
  IN_REDIRECT: 'MESH_IN_REDIRECT',
  OUTPUT: 'MESH_OUTPUT',
  OUTPUT_DNS: 'MESH_OUTPUT_DNS',
  DIVERT: 'MESH_DIVERT',
  TPROXY: 'MESH_TPROXY',
  DROP: 'MESH_DROP',
} as const;

/** Chains the kernel provides; they are never created (-N) or deleted (-X). */
export const BUILTIN_CHAINS: ReadonlySet<string> = new Set(['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING']);

export type Table = 'filter' | 'mangle' | 'nat' | 'raw';

/** Port the agent's DNS proxy listens on; DNS capture redirects port 53 here. */
export const AGENT_DNS_PORT = '15053';

/** Mark the proxy puts on its own outbound-to-inbound loopback traffic in TPROXY mode. */
export const OUTBOUND_MARK = '1338';

/** Source address of the proxy's inbound passthrough connections to the app. */
export const INBOUND_PASSTHROUGH_SOURCE = { v4: '127.0.0.6/32', v6: '::6/128' } as const;

export const IPV6_LOOPBACK_CIDR = '::1/128';

/** Fallback proxy UID when neither --proxy-uid nor the PROXY_USER account exists. */
export const DEFAULT_PROXY_UID = '1337';
export const DEFAULT_PROXY_USER = 'mesh-proxy';

/** Included owner groups become one rule with N matches; kernels reject very long match lists. */
export const MAX_OWNER_GROUPS_INCLUDE = 64;

/** Exit code of a failed --run-validation, recognised by the CNI repair controller. */
export const VALIDATION_ERROR_EXIT_CODE = 126;
