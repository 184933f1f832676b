// How the xDS proxy reaches the discovery daemon: plaintext when ProxyConfig.controlPlaneAuthPolicy is NONE
// (e.g. `:15010`), TLS otherwise (`:15012`), trusting XDS_ROOT_CA (or the mounted mesh root certificate) and
// expecting MESHD_SAN (or the discovery host) in the daemon's certificate. Over TLS the agent presents the
// workload certificate (see Agent), with COMPLIANCE_POLICY applied.
import * as fs from 'node:fs';
import path from 'node:path';
import type { CompliancePolicy } from '../lib/compliance';
import type { ProxyConfig } from '../config/proxyconfig';
import { DEFAULT_ROOT_CERT_PATHS, SYSTEM_ROOT_CERTS } from './identity/options';
import { pilotSan } from './node';
import type { UpstreamOptions } from './xds-proxy';

export { DEFAULT_ROOT_CERT_PATHS, SYSTEM_ROOT_CERTS };

export class DiscoveryConnectionError extends Error {}

export interface DiscoveryConnection {
  upstream: UpstreamOptions;
  /** The daemon's expected SAN, for node metadata PILOT_SAN (TLS only). */
  pilotSan: string[];
  /** The root certificate file in use, or '' (system roots / plaintext). */
  rootCertPath: string;
  info: string[];
  warnings: string[];
}

export function discoveryConnection(o: {
  proxyConfig: ProxyConfig;
  /** XDS_ROOT_CA */
  xdsRootCa: string;
  /** MESHD_SAN */
  meshdSan: string;
  clusterId: string;
  cwd: string;
  keepaliveTimeMs: number;
  keepaliveTimeoutMs: number;
  compliance?: CompliancePolicy;
}): DiscoveryConnection {
  const pc = o.proxyConfig;
  const base = { address: pc.discoveryAddress, clusterId: o.clusterId, keepaliveTimeMs: o.keepaliveTimeMs, keepaliveTimeoutMs: o.keepaliveTimeoutMs };
  if (pc.controlPlaneAuthPolicy === 'NONE') {
    return {
      upstream: base,
      pilotSan: [],
      rootCertPath: '',
      info: [`connecting to the discovery daemon at ${pc.discoveryAddress} in plaintext (controlPlaneAuthPolicy NONE)`],
      warnings: [],
    };
  }
  const info: string[] = [];
  const warnings: string[] = [];
  let rootCertPath = '';
  let rootCerts: Buffer | undefined;
  if (o.xdsRootCa === SYSTEM_ROOT_CERTS) {
    info.push('XDS_ROOT_CA=SYSTEM: trusting the system root certificates for the discovery daemon');
  } else if (o.xdsRootCa !== '') {
    rootCertPath = o.xdsRootCa;
    try {
      rootCerts = fs.readFileSync(path.resolve(o.cwd, rootCertPath));
    } catch (e) {
      throw new DiscoveryConnectionError(`root CA file for XDS does not exist ${rootCertPath} (XDS_ROOT_CA): ${(e as Error).message}`);
    }
  } else {
    rootCertPath = DEFAULT_ROOT_CERT_PATHS.find((p) => fs.existsSync(path.resolve(o.cwd, p))) ?? '';
    if (rootCertPath) rootCerts = fs.readFileSync(path.resolve(o.cwd, rootCertPath));
    else
      warnings.push(
        `no root CA file for XDS (XDS_ROOT_CA unset, none of ${DEFAULT_ROOT_CERT_PATHS.join(', ')} exists): trusting the system root certificates`,
      );
  }
  const san = o.meshdSan || pilotSan(pc.discoveryAddress);
  info.push(`connecting to the discovery daemon at ${pc.discoveryAddress} over mutual TLS, expecting the name ${san}`);
  return {
    upstream: { ...base, tls: { rootCerts, serverName: san, compliance: o.compliance ?? '' } },
    pilotSan: [san],
    rootCertPath,
    info,
    warnings,
  };
}
