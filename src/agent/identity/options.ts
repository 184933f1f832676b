// The agent's workload-identity settings (Istio's security.Options as pilot-agent fills them), resolved from
// the environment and the ProxyConfig. Pure apart from checking which well-known files exist.
import * as fs from 'node:fs';
import path from 'node:path';
import { KeySpecError, type KeySpec } from '../../ca/pkix/keys';
import { workloadKeySpec } from './key-spec';
import { CompliancePolicyError, parseCompliancePolicy, type CompliancePolicy } from '../../lib/compliance';
import type { ProxyConfig } from '../../config/proxyconfig';
import { pilotSan } from '../node';
import type { EnvValues } from '../../lib/env';

/** The projected service-account token of the pod (Istio's constants.ThirdPartyJwtPath, renamed)… */
export const THIRD_PARTY_JWT_PATH = './var/run/secrets/tokens/mesh-token';
/** …and Istio's own spelling, read when ours is absent (pods and VMs set up for Istio). */
export const ISTIO_THIRD_PARTY_JWT_PATH = './var/run/secrets/tokens/istio-token';
/** Where the agent's SDS server listens (Istio's WorkloadIdentityPath + socket file). */
export const WORKLOAD_IDENTITY_DIR = './var/run/secrets/workload-spiffe-uds';
export const DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE = 'socket';
/** Istio's WorkloadIdentityCredentialsPath: certificate files that, when present, replace the CA. */
export const WORKLOAD_IDENTITY_CREDENTIALS_DIR = './var/run/secrets/workload-spiffe-credentials';
/** Istio's mounted-certificate paths (./etc/certs/…), read before the CA when present. */
export const MOUNTED_CERT_CHAIN = './etc/certs/cert-chain.pem';
export const MOUNTED_KEY = './etc/certs/key.pem';
export const MOUNTED_ROOT_CERT = './etc/certs/root-cert.pem';
/** Root certificates of the mesh Istio's agent looks for when CA_ROOT_CA / XDS_ROOT_CA are unset. */
export const DEFAULT_ROOT_CERT_PATHS = ['./var/run/secrets/mesh/root-cert.pem', './var/run/secrets/istio/root-cert.pem', MOUNTED_ROOT_CERT];
/** Istio's security.SystemRootCerts: trust the system's roots. */
export const SYSTEM_ROOT_CERTS = 'SYSTEM';
/** The daemon's name in certificates when the address is `localhost` (Istio's istiod.istio-system.svc). */
export const DAEMON_SERVICE_NAME = 'meshd.mesh-system.svc';

export class IdentityOptionsError extends Error {
  override name = 'IdentityOptionsError';
}

/** Istio's GCE credential fetcher type, under its own name and ours (CREDENTIAL_IDENTITY_PROVIDER's default). */
const CLOUD_VM_FETCHERS = ['GoogleComputeEngine', 'cloud-vm-provider'];

export type Credential =
  | { kind: 'none' }
  /** A token file read at every call (Istio's KubernetesTokenPlugin): the first of `paths` that exists. */
  | { kind: 'token-file'; paths: string[] };

export interface CertificateFiles {
  certChain: string;
  key: string;
  root: string;
}

export interface CaConnection {
  /** host:port (CA_ADDR, or the discovery address). */
  address: string;
  /** Plaintext: CA_ADDR on :15010, or the control plane configured with controlPlaneAuthPolicy NONE. */
  plaintext: boolean;
  /** Name the CA's certificate must carry (MESHD_SAN, or the host; `localhost` means the daemon's service name). */
  serverName: string;
  /** CA_ROOT_CA as given ('' when unset; SYSTEM for the system roots). */
  rootCa: string;
  /** PROV_CERT: directory with key.pem / cert-chain.pem presented to the CA (VMs). */
  provCertDir: string;
  clusterId: string;
  /** CA_HEADER_<name>=<value> variables, sent as metadata. */
  headers: Record<string, string>;
  /** ISTIO_META_CERT_SIGNER / MESH_META_CERT_SIGNER: the `CertSigner` request metadata. */
  certSigner: string;
}

export interface IdentityOptions {
  trustDomain: string;
  namespace: string;
  serviceAccount: string;
  /** spiffe://<trust domain>/ns/<namespace>/sa/<service account>: the SAN the CSR asks for. */
  spiffeId: string;
  key: KeySpec;
  pkcs8: boolean;
  /** SECRET_TTL, milliseconds: the lifetime asked for. */
  secretTtlMs: number;
  /** SECRET_GRACE_PERIOD_RATIO and its jitter. */
  graceRatio: number;
  graceRatioJitter: number;
  ca: CaConnection;
  credential: Credential;
  /** The CA is not used: certificates come from files (FILE_MOUNTED_CERTS or workload-spiffe-credentials). */
  fileMountedCerts: boolean;
  /** Files read for `default` / `ROOTCA` before asking the CA (./etc/certs/…, or the workload-spiffe-credentials ones). */
  files: CertificateFiles;
  /** OUTPUT_CERTS: where key.pem, cert-chain.pem and root-cert.pem are written ('' = nowhere). */
  outputDir: string;
  /** Milliseconds to wait after a file event before reading (FILE_DEBOUNCE_DURATION). */
  fileDebounceMs: number;
  /** The SDS socket (WORKLOAD_IDENTITY_SOCKET_FILE under ./var/run/secrets/workload-spiffe-uds). */
  sdsSocketPath: string;
  /** WORKLOAD_IDENTITY_SOCKET_FILE */
  socketFile: string;
  /** True when WORKLOAD_IDENTITY_SOCKET_FILE names a socket other than the agent's own. */
  customSdsSocket: boolean;
  compliance: CompliancePolicy;
  info: string[];
  warnings: string[];
}

export interface IdentityInputs {
  /** Typed values of the program's env table. */
  env: EnvValues;
  /** The raw process environment (POD_NAMESPACE, CA_HEADER_*). */
  raw: Readonly<Record<string, string | undefined>>;
  proxyConfig: ProxyConfig;
  clusterId: string;
  /** Node metadata as the agent computed it (CERT_SIGNER, TLS_CLIENT_* for mounted certificates). */
  metadata: Readonly<Record<string, unknown>>;
  cwd: string;
}

function exists(cwd: string, p: string): boolean {
  try {
    return fs.statSync(path.resolve(cwd, p)).isFile();
  } catch {
    return false;
  }
}

export function spiffeId(trustDomain: string, namespace: string, serviceAccount: string): string {
  return `spiffe://${trustDomain}/ns/${namespace}/sa/${serviceAccount}`;
}

/** Istio's server name for a gRPC TLS target: MESHD_SAN, else the host (`localhost` → the daemon's service name). */
export function caServerName(address: string, san: string): string {
  if (san) return san;
  return pilotSan(address) === 'localhost' ? DAEMON_SERVICE_NAME : pilotSan(address);
}

export function identityOptions(i: IdentityInputs): IdentityOptions {
  const { env, raw } = i;
  const info: string[] = [];
  const warnings: string[] = [];
  const trustDomain = env.string('TRUST_DOMAIN') || 'cluster.local';
  const namespace = raw['POD_NAMESPACE'] ?? '';
  const serviceAccount = env.string('SERVICE_ACCOUNT');
  if (!namespace || !serviceAccount) {
    warnings.push(
      `workload identity: ${!namespace ? 'POD_NAMESPACE' : ''}${!namespace && !serviceAccount ? ' and ' : ''}${!serviceAccount ? 'SERVICE_ACCOUNT' : ''} not set; the certificate request names ${spiffeId(trustDomain, namespace, serviceAccount)} (the CA issues the identity it authenticates, whatever the request says)`,
    );
  }

  let key: KeySpec;
  try {
    key = workloadKeySpec(env);
  } catch (e) {
    if (e instanceof KeySpecError) throw new IdentityOptionsError(e.message);
    throw e;
  }

  const secretTtlMs = env.duration('SECRET_TTL');
  if (secretTtlMs <= 0) throw new IdentityOptionsError(`SECRET_TTL=${raw['SECRET_TTL']}: the certificate lifetime must be positive`);
  const graceRatio = env.float('SECRET_GRACE_PERIOD_RATIO');
  const graceRatioJitter = env.float('SECRET_GRACE_PERIOD_RATIO_JITTER');
  if (graceRatio < 0 || graceRatio > 1)
    throw new IdentityOptionsError(
      `SECRET_GRACE_PERIOD_RATIO=${graceRatio}: must be between 0 and 1 (the share of the lifetime left when rotation starts)`,
    );
  if (graceRatioJitter < 0 || graceRatioJitter > 1)
    throw new IdentityOptionsError(`SECRET_GRACE_PERIOD_RATIO_JITTER=${graceRatioJitter}: must be between 0 and 1`);

  let compliance: CompliancePolicy;
  try {
    compliance = parseCompliancePolicy(env.string('COMPLIANCE_POLICY'));
  } catch (e) {
    if (e instanceof CompliancePolicyError) throw new IdentityOptionsError(e.message);
    throw e;
  }

  // Istio's JWT_POLICY: third-party-jwt reads the projected token; first-party-jwt is deprecated and read the
  // same way; any other value means certificates only (the token path stays, as in Istio).
  const jwtPolicy = env.string('JWT_POLICY');
  if (jwtPolicy === 'first-party-jwt') warnings.push("Using deprecated JWT policy 'first-party-jwt'; treating as 'third-party-jwt'");
  else if (jwtPolicy !== 'third-party-jwt') info.push(`JWT_POLICY=${jwtPolicy}: using existing certs`);
  const fetcher = env.string('CREDENTIAL_FETCHER_TYPE');
  let credential: Credential;
  if (fetcher === 'JWT' || fetcher === '') credential = { kind: 'token-file', paths: [THIRD_PARTY_JWT_PATH, ISTIO_THIRD_PARTY_JWT_PATH] };
  else if (CLOUD_VM_FETCHERS.includes(fetcher)) {
    throw new IdentityOptionsError(
      `CREDENTIAL_FETCHER_TYPE=${fetcher}: fetching credentials from a cloud VM metadata server is not available in this build; use the token file (CREDENTIAL_FETCHER_TYPE=JWT, ${THIRD_PARTY_JWT_PATH} or ${ISTIO_THIRD_PARTY_JWT_PATH})`,
    );
  } else throw new IdentityOptionsError(`CREDENTIAL_FETCHER_TYPE=${fetcher}: invalid credential fetcher type (JWT is supported)`);

  const pc = i.proxyConfig;
  const caAddrEnv = env.string('CA_ADDR');
  const address = caAddrEnv || pc.discoveryAddress;
  // Istio reaches a CA on the daemon's plaintext port (:15010) without TLS; with no CA_ADDR, a control plane
  // the user declared plaintext (controlPlaneAuthPolicy NONE) is reached the same way.
  const plaintext = address.endsWith(':15010') || (!caAddrEnv && pc.controlPlaneAuthPolicy === 'NONE');
  if (plaintext)
    info.push(
      `certificate service at ${address} in plaintext (${caAddrEnv ? 'CA_ADDR on the plaintext port :15010' : 'controlPlaneAuthPolicy NONE'})`,
    );
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(raw))
    if (k.startsWith('CA_HEADER_') && k.length > 'CA_HEADER_'.length && v !== undefined) headers[k.slice('CA_HEADER_'.length)] = v;
  const provCertDir = env.isSet('PROV_CERT') ? env.string('PROV_CERT') : '';
  const ca: CaConnection = {
    address,
    plaintext,
    serverName: caServerName(address, env.string('MESHD_SAN')),
    rootCa: env.string('CA_ROOT_CA'),
    provCertDir,
    clusterId: i.clusterId,
    headers,
    certSigner: typeof i.metadata['CERT_SIGNER'] === 'string' ? (i.metadata['CERT_SIGNER'] as string) : '',
  };

  // Certificate files: the workload-spiffe-credentials set, when complete, replaces the CA (Istio's initSdsServer).
  let fileMountedCerts = env.bool('FILE_MOUNTED_CERTS');
  let files: CertificateFiles = { certChain: MOUNTED_CERT_CHAIN, key: MOUNTED_KEY, root: MOUNTED_ROOT_CERT };
  const wic = {
    certChain: `${WORKLOAD_IDENTITY_CREDENTIALS_DIR}/cert-chain.pem`,
    key: `${WORKLOAD_IDENTITY_CREDENTIALS_DIR}/key.pem`,
    root: `${WORKLOAD_IDENTITY_CREDENTIALS_DIR}/root-cert.pem`,
  };
  if (exists(i.cwd, wic.certChain) && exists(i.cwd, wic.key) && exists(i.cwd, wic.root)) {
    info.push(`workload certificate files detected in ${WORKLOAD_IDENTITY_CREDENTIALS_DIR}: serving them instead of asking the CA`);
    files = wic;
    fileMountedCerts = true;
  }
  if (provCertDir && fileMountedCerts) throw new IdentityOptionsError('invalid options: PROV_CERT and FILE_MOUNTED_CERTS are mutually exclusive');

  const socketFile = env.string('WORKLOAD_IDENTITY_SOCKET_FILE') || DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE;
  if (socketFile !== path.basename(socketFile)) {
    throw new IdentityOptionsError(
      `WORKLOAD_IDENTITY_SOCKET_FILE=${socketFile}: workload identity socket file override must be a filename, not a path`,
    );
  }

  return {
    trustDomain,
    namespace,
    serviceAccount,
    spiffeId: spiffeId(trustDomain, namespace, serviceAccount),
    key,
    pkcs8: env.bool('PKCS8_KEY'),
    secretTtlMs,
    graceRatio,
    graceRatioJitter,
    ca,
    credential,
    fileMountedCerts,
    files,
    outputDir: env.string('OUTPUT_CERTS'),
    fileDebounceMs: env.duration('FILE_DEBOUNCE_DURATION'),
    sdsSocketPath: `${WORKLOAD_IDENTITY_DIR}/${socketFile}`,
    socketFile,
    customSdsSocket: socketFile !== DEFAULT_WORKLOAD_IDENTITY_SOCKET_FILE,
    compliance,
    info,
    warnings,
  };
}

export interface RootCaChoice {
  /** The file used; '' with the system roots. */
  path: string;
  /** Undefined: the system roots. */
  pem?: Buffer;
}

/**
 * The roots to verify the certificate service with (Istio's FindRootCAForCA): CA_ROOT_CA (SYSTEM = the system
 * roots), else PROV_CERT's root-cert.pem, else the first mounted mesh root that exists. Throws with what to set
 * when there is none; read at every connection attempt, so a root published later is picked up.
 */
export function caRootCerts(ca: CaConnection, cwd: string): RootCaChoice {
  if (ca.rootCa === SYSTEM_ROOT_CERTS) return { path: '' };
  const candidates = ca.rootCa ? [ca.rootCa] : ca.provCertDir ? [path.join(ca.provCertDir, 'root-cert.pem')] : DEFAULT_ROOT_CERT_PATHS;
  for (const p of candidates) {
    try {
      return { path: p, pem: fs.readFileSync(path.resolve(cwd, p)) };
    } catch (e) {
      if (ca.rootCa) throw new IdentityOptionsError(`root CA file for CA does not exist ${p} (CA_ROOT_CA): ${(e as Error).message}`);
    }
  }
  throw new IdentityOptionsError(
    `root CA file for CA does not exist: none of ${candidates.join(', ')} (relative to ${cwd}); set CA_ROOT_CA to the mesh root certificate (pilot-discovery publishes it as root-cert.pem), or CA_ROOT_CA=SYSTEM for a CA with a publicly trusted certificate`,
  );
}
