// TLS settings: server side (Gateway servers, Sidecar ingress) and client side (DestinationRule).
import type { ClientTLSSettings, ServerTLSSettings } from '../types';
import { dot, type Report } from './report';

// Gateway.server.tls.cipherSuites that BoringSSL knows (Istio's list, `bssl ciphers -openssl-name ALL` minus PSK).
const VALID_CIPHER_SUITES = new Set([
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
  'ECDHE-ECDSA-AES128-SHA',
  'ECDHE-RSA-AES128-SHA',
  'ECDHE-ECDSA-AES256-SHA',
  'ECDHE-RSA-AES256-SHA',
  'AES128-GCM-SHA256',
  'AES256-GCM-SHA384',
  'AES128-SHA',
  'AES256-SHA',
  'DES-CBC3-SHA',
]);

export function isValidCipherSuite(cs: string): boolean {
  if (cs === '' || cs === 'ALL') return true;
  // Operators like `-`/`+`/`!` prefixes are passed through to BoringSSL unparsed.
  if (!/^[\p{L}\p{N}]/u.test(cs)) return true;
  return VALID_CIPHER_SUITES.has(cs);
}

interface ServerTLSExtra extends ServerTLSSettings {
  caCrl?: string;
  credentialNames?: string[];
  tlsCertificates?: Array<{ serverCertificate?: string; privateKey?: string; caCertificates?: string }>;
}

/** validateTLSOptions. A missing mode is PASSTHROUGH, the proto default. */
export function checkServerTLS(tlsIn: ServerTLSSettings | undefined, path: string, r: Report): void {
  if (!tlsIn) return;
  const tls = tlsIn as ServerTLSExtra;
  const mode = tls.mode ?? 'PASSTHROUGH';
  const f = (name: string): string => dot(path, name);
  const ciphers = tls.cipherSuites ?? [];
  if ((tls.minProtocolVersion === 'TLSV1_0' || tls.minProtocolVersion === 'TLSV1_1') && ciphers.length === 0)
    r.warn(
      f('minProtocolVersion'),
      'TLS version below TLSV1_2 require setting compatible ciphers as by default they no longer include compatible ciphers.',
    );
  const invalid = new Set<string>();
  const valid = new Set<string>();
  const dup = new Set<string>();
  for (const cs of ciphers) {
    if (!isValidCipherSuite(cs)) invalid.add(cs);
    else if (valid.has(cs)) dup.add(cs);
    else valid.add(cs);
  }
  if (invalid.size > 0) r.warn(f('cipherSuites'), `ignoring invalid cipher suites: [${[...invalid].sort().join(' ')}]`);
  if (dup.size > 0) r.warn(f('cipherSuites'), `ignoring duplicate cipher suites: [${[...dup].sort().join(' ')}]`);

  const certs = tls.tlsCertificates ?? [];
  const credNames = tls.credentialNames ?? [];
  if (mode === 'ISTIO_MUTUAL') {
    // Workload certificates come from the mesh CA; any other source is a mistake.
    if (tls.serverCertificate) r.error(f('serverCertificate'), 'ISTIO_MUTUAL TLS cannot have associated server certificate');
    if (tls.privateKey) r.error(f('privateKey'), 'ISTIO_MUTUAL TLS cannot have associated private key');
    if (tls.caCertificates) r.error(f('caCertificates'), 'ISTIO_MUTUAL TLS cannot have associated CA bundle');
    if (certs.length > 0) r.error(f('tlsCertificates'), 'ISTIO_MUTUAL TLS cannot have associated tlsCertificates');
    if (tls.credentialName) r.error(f('credentialName'), 'ISTIO_MUTUAL TLS cannot have associated credentialName');
    if (credNames.length > 0) r.error(f('credentialNames'), 'ISTIO_MUTUAL TLS cannot have associated credentialNames');
    return;
  }
  if (mode === 'PASSTHROUGH' || mode === 'AUTO_PASSTHROUGH') {
    if (tls.caCrl || tls.serverCertificate || tls.privateKey || tls.caCertificates || certs.length > 0 || tls.credentialName || credNames.length > 0)
      r.warn(path, `${mode} mode does not use certificates, they will be ignored`);
  }
  let sources = 0;
  if (tls.serverCertificate && tls.privateKey) sources++;
  if (tls.credentialName) sources++;
  if (credNames.length > 0) sources++;
  if (certs.length > 0) sources++;
  if (sources > 1)
    r.error(path, 'only one of credential_name, credential_names, server_certificate/private_key, tls_certificates should be specified');

  const terminating = mode === 'SIMPLE' || mode === 'MUTUAL' || mode === 'OPTIONAL_MUTUAL';
  // With a credential name, certificates are fetched remotely (SDS): no files are required.
  if (terminating && (tls.credentialName || credNames.length > 0)) return;
  if (terminating) {
    const prefix = mode === 'SIMPLE' ? 'SIMPLE TLS' : 'MUTUAL TLS';
    if (mode !== 'SIMPLE' && !tls.caCertificates) r.error(f('caCertificates'), `${prefix} requires a client CA bundle`);
    if (certs.length > 2) r.warn(f('tlsCertificates'), `${prefix} can support up to 2 server certificates`);
    if (certs.length > 0) {
      certs.forEach((c, i) => {
        if (!c.serverCertificate) r.error(`${f('tlsCertificates')}[${i}].serverCertificate`, `${prefix} requires a server certificate`);
        if (!c.privateKey) r.error(`${f('tlsCertificates')}[${i}].privateKey`, `${prefix} requires a private key`);
      });
    } else {
      if (!tls.serverCertificate) r.error(f('serverCertificate'), `${prefix} requires a server certificate`);
      if (!tls.privateKey) r.error(f('privateKey'), `${prefix} requires a private key`);
    }
  }
  if (tls.caCrl) {
    if (tls.credentialName) r.error(f('caCrl'), 'CRL is not supported with credentialName. CRL has to be specified in the credential');
    if (mode === 'SIMPLE') r.error(f('caCrl'), 'CRL is not supported with SIMPLE TLS');
  }
}

/** agent.ValidateTLS (DestinationRule traffic policy). A missing mode is DISABLE. */
export function checkClientTLS(tlsIn: ClientTLSSettings | undefined, path: string, r: Report): void {
  if (!tlsIn) return;
  const tls = tlsIn as ClientTLSSettings & { caCrl?: string };
  const mode = tls.mode ?? 'DISABLE';
  const sans = (tls.subjectAltNames ?? []).length > 0;
  if (tls.insecureSkipVerify) {
    if (mode === 'SIMPLE' && (tls.caCertificates || tls.credentialName || sans))
      r.error(
        dot(path, 'insecureSkipVerify'),
        'cannot specify CaCertificates or CredentialName or SubjectAltNames when InsecureSkipVerify is set true',
      );
    if (mode === 'MUTUAL' && (tls.caCertificates || sans))
      r.error(dot(path, 'insecureSkipVerify'), 'cannot specify CaCertificates or SubjectAltNames when InsecureSkipVerify is set true');
  }
  if ((mode === 'SIMPLE' || mode === 'MUTUAL') && tls.credentialName) {
    if (tls.clientCertificate || tls.caCertificates || tls.privateKey || tls.caCrl)
      r.error(dot(path, 'credentialName'), 'cannot specify client certificates or CA certificate or CA CRL If credentialName is set');
    return;
  }
  if (mode === 'MUTUAL') {
    if (!tls.clientCertificate) r.error(dot(path, 'clientCertificate'), 'client certificate required for mutual tls');
    if (!tls.privateKey) r.error(dot(path, 'privateKey'), 'private key required for mutual tls');
  }
}
