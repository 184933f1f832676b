// A TLS certificate's material as config names it (Envoy's TlsCertificate: chain, key, password as DataSources),
// read and checked once: what a context loads, what an SDS secret must pass before it replaces the one in use,
// and what /certs shows.
import tls from 'node:tls';
import type { DataSource } from '../../gen/envoy/config/core/v3/base_pb';
import type { TlsCertificate } from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import { ConfigError } from '../common/config-error';
import { readDataSource } from '../common/data-source';

/** Envoy's name for a data source in /certs (Config::DataSource::getPath, else "<inline>"). */
export function sourcePath(d: DataSource | undefined): string {
  return d?.specifier.case === 'filename' ? d.specifier.value : '<inline>';
}

/** What /certs shows of a context (Envoy's Ssl::Context getCaCertInformation / getCertChainInformation). */
export interface ContextCerts {
  ca: { pem: Buffer; path: string } | undefined;
  chain: Array<{ pem: Buffer; path: string }>;
}

export function certPair(c: TlsCertificate, where: string): { cert: Buffer; key: Buffer; passphrase?: string; path: string } {
  const cert = readDataSource(c.certificateChain, `${where}.certificate_chain`);
  const key = readDataSource(c.privateKey, `${where}.private_key`);
  if (!cert) throw new ConfigError(`${where}.certificate_chain: is required`);
  if (!key) throw new ConfigError(`${where}.private_key: is required`);
  const pass = readDataSource(c.password, `${where}.password`);
  const path = sourcePath(c.certificateChain);
  return pass ? { cert, key, passphrase: pass.toString(), path } : { cert, key, path };
}

/**
 * A TLS certificate secret must load before it replaces the one in use: its chain and key (and their match)
 * go through OpenSSL once here, so that bad material is refused when it arrives (the SDS update is NACKed
 * and the last good secret keeps serving, as in Envoy) instead of failing every handshake that would use it.
 */
export function checkTlsCertificate(c: TlsCertificate, where: string): void {
  const { cert, key, passphrase } = certPair(c, where);
  try {
    tls.createSecureContext({ cert, key, ...(passphrase !== undefined ? { passphrase } : {}) });
  } catch (e) {
    throw new ConfigError(`${where}: Failed to load certificate chain and private key: ${(e as Error).message}`);
  }
}
