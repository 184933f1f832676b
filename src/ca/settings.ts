// The CA's tunables from the daemon's environment table (spec doc 1 §5, §8), with Istio's defaults there.
import { sharedEnv } from '../../commands/env/shared';
import { EnvTable, type EnvVars } from '../lib/env';

export interface CaSettings {
  /** ENABLE_CA_SERVER. */
  enabled: boolean;
  /** ROOT_CA_DIR: plug-in CA material. */
  rootCaDir: string;
  /** CA_SELF_SIGNED_CA_CERT_TTL, ms. */
  selfSignedCaTtlMs: number;
  /** CA_SELF_SIGNED_CA_RSA_KEY_SIZE. */
  rsaKeySize: number;
  /** CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL, ms; ≤ 0 disables rotation. */
  rootCheckIntervalMs: number;
  /** CA_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE. */
  rootGracePercentile: number;
  /** CA_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR. */
  rootRotatorJitter: boolean;
  /** DEFAULT_WORKLOAD_CERT_TTL, ms. */
  defaultWorkloadCertTtlMs: number;
  /** MAX_WORKLOAD_CERT_TTL, ms. */
  maxWorkloadCertTtlMs: number;
  /** USE_CACERTS_FOR_SELF_SIGNED_CA. */
  useCacertsForSelfSigned: boolean;
  /** MESH_MULTIROOT_MESH. */
  multiRoot: boolean;
  /** PILOT_CERT_PROVIDER. */
  certProvider: string;
  /** EXTERNAL_CA. */
  externalCa: string;
  /** ORCH_SIGNER (Istio's K8S_SIGNER): the signerName the registration authority asks for. */
  orchSigner: string;
  /** CERT_SIGNER_DOMAIN. */
  certSignerDomain: string;
  /** MESHD_CUSTOM_HOST, split. */
  customHosts: string[];
  /** PILOT_CA_CERT_CONFIGMAP. */
  rootConfigMap: string;
  /** TOKEN_AUDIENCES, split. */
  tokenAudiences: string[];
  /** TOKEN_ISSUER. */
  tokenIssuer: string;
  /** AUDIENCE. */
  audience: string;
  /** JWT_RULE. */
  jwtRule: string;
  /** TRUSTED_GATEWAY_CIDR, split. */
  trustedGatewayCidrs: string[];
  /** CA_TRUSTED_NODE_ACCOUNTS. */
  trustedNodeAccounts: string;
  /** XDS_AUTH. */
  xdsAuth: boolean;
  /** XDS_AUTH_PLAINTEXT. */
  xdsAuthPlaintext: boolean;
}

const split = (s: string) => (s === '' ? [] : s.split(','));

export function caSettingsFromEnv(vars: EnvVars): CaSettings {
  const env = new EnvTable(sharedEnv, vars);
  return {
    enabled: env.bool('ENABLE_CA_SERVER'),
    rootCaDir: env.string('ROOT_CA_DIR'),
    selfSignedCaTtlMs: env.duration('CA_SELF_SIGNED_CA_CERT_TTL'),
    rsaKeySize: env.int('CA_SELF_SIGNED_CA_RSA_KEY_SIZE'),
    rootCheckIntervalMs: env.duration('CA_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL'),
    rootGracePercentile: env.int('CA_SELF_SIGNED_ROOT_CERT_GRACE_PERIOD_PERCENTILE'),
    rootRotatorJitter: env.bool('CA_ENABLE_JITTER_FOR_ROOT_CERT_ROTATOR'),
    defaultWorkloadCertTtlMs: env.duration('DEFAULT_WORKLOAD_CERT_TTL'),
    maxWorkloadCertTtlMs: env.duration('MAX_WORKLOAD_CERT_TTL'),
    useCacertsForSelfSigned: env.bool('USE_CACERTS_FOR_SELF_SIGNED_CA'),
    multiRoot: env.bool('MESH_MULTIROOT_MESH'),
    certProvider: env.string('PILOT_CERT_PROVIDER'),
    externalCa: env.string('EXTERNAL_CA'),
    orchSigner: env.string('ORCH_SIGNER'),
    certSignerDomain: env.string('CERT_SIGNER_DOMAIN'),
    customHosts: split(env.string('MESHD_CUSTOM_HOST')),
    rootConfigMap: env.string('PILOT_CA_CERT_CONFIGMAP'),
    tokenAudiences: split(env.string('TOKEN_AUDIENCES')),
    tokenIssuer: env.string('TOKEN_ISSUER'),
    audience: env.string('AUDIENCE'),
    jwtRule: env.string('JWT_RULE'),
    trustedGatewayCidrs: split(env.string('TRUSTED_GATEWAY_CIDR')),
    trustedNodeAccounts: env.string('CA_TRUSTED_NODE_ACCOUNTS'),
    xdsAuth: env.bool('XDS_AUTH'),
    xdsAuthPlaintext: env.bool('XDS_AUTH_PLAINTEXT'),
  };
}

/** Istio's getDNSNames: the discovery host, MESHD_CUSTOM_HOST, and the daemon's well-known service names. */
export function daemonDnsNames(o: { namespace: string; discoveryHost: string; customHosts: readonly string[]; revision?: string }): string[] {
  const known = ['meshd', 'meshd-remote', 'mesh-pilot'];
  if (o.revision && o.revision !== 'default') known.push(`meshd-${o.revision}`);
  const names = new Set<string>([...o.customHosts, o.discoveryHost, ...known.map((h) => `${h}.${o.namespace}.svc`)]);
  names.delete('');
  return [...names].sort();
}
