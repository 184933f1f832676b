// GET /certs in Envoy's shape (envoy.admin.v3.Certificates, source/server/admin/server_cmd_handler /
// admin.cc handlerCerts and Extensions::TransportSockets::Tls::Utility): one entry per live TLS context,
// its CA (the first certificate of the trusted CA) and each certificate it presents (the leaf of each
// chain). Differs from Envoy: no ocsp_details (the engine does no OCSP stapling); SANs are listed DNS,
// then URI, then IP, not in the certificate's order.
import { X509Certificate } from 'node:crypto';
import type { JsonObject, JsonValue } from '@bufbuild/protobuf';
import type { ContextCerts } from '../tls/certificate';
import { parseSans } from '../tls/context';

const DAY_MS = 86_400_000;

/** A Timestamp as proto3 JSON writes it: RFC 3339, no fraction when there is none. */
const timestamp = (d: Date): string => d.toISOString().replace('.000Z', 'Z');

function details(pem: Buffer, path: string, now: number): JsonObject | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
  } catch {
    return undefined;
  }
  const notAfter = new Date(cert.validTo);
  const sans = parseSans(cert.subjectAltName);
  const left = notAfter.getTime() - now;
  return {
    path,
    // BN_bn2hex, lower-cased by Envoy
    serial_number: cert.serialNumber.replace(/^0+(?=.)/, '').toLowerCase(),
    subject_alt_names: [...sans.dns.map((dns) => ({ dns })), ...sans.uri.map((uri) => ({ uri })), ...sans.ip.map((ip_address) => ({ ip_address }))],
    // uint64: a string in proto3 JSON; an expired certificate has 0 days left
    days_until_expiration: String(left >= 0 ? Math.floor(left / DAY_MS) : 0),
    valid_from: timestamp(new Date(cert.validFrom)),
    expiration_time: timestamp(notAfter),
  };
}

export function certsJson(contexts: Iterable<ContextCerts>, now = Date.now()): JsonValue {
  const certificates: JsonObject[] = [];
  for (const c of contexts) {
    const ca = c.ca ? details(c.ca.pem, c.ca.path, now) : undefined;
    const chain = c.chain.map((x) => details(x.pem, x.path, now)).filter((x): x is JsonObject => x !== undefined);
    certificates.push({ ca_cert: ca ? [ca] : [], cert_chain: chain });
  }
  return { certificates };
}
