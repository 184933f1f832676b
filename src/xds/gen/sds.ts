// Credentials over ADS (Istio 1.26 SecretGen, pilot/pkg/xds/sds.go, and the credentials controller,
// pilot/pkg/credentials/kube/secrets.go): a gateway's (or DestinationRule's) credentialName becomes an SDS
// resource `kubernetes://[<namespace>/]<name>` the proxy requests on its ADS stream; the daemon answers with
// the Secret's key pair (tls.crt/tls.key or cert/key) or, for `<name>-cacert`, its CA bundle (ca.crt or
// cacert, from the `-cacert` Secret or else the main one). Only proxies with a verified identity get
// secrets, and only of their own namespace, the key pair further needing the right to list Secrets there.
import { create } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import { X509Certificate } from 'node:crypto';
import type { Config } from '../../config/types';
import type { Proxy } from '../../discovery/model';
import type { PushContext } from '../../discovery/push-context';
import type { GatewayServer } from '../../discovery/push/gateway';
import { DataSourceSchema } from '../../gen/envoy/config/core/v3/base_pb';
import { CertificateValidationContextSchema } from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import { SecretSchema, type Secret } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { defineCounter } from '../../lib/metrics';
import { registerScope } from '../../lib/log';
import type { Generator, Resource } from '../types';
import { CREDENTIAL_CA_SUFFIX, CREDENTIAL_PREFIX } from './tls';

const log = registerScope('ads', 'ads debugging');

export const sdsCertificateErrors = defineCounter({
  name: 'pilot_sds_certificate_errors_total',
  help: 'Total number of failures to fetch SDS key and certificate.',
});

const GATEWAY_SECRET_PREFIX = 'kubernetes-gateway://';

// Secret keys (Istio credentials/kube): the generic form and the kubernetes.io/tls form.
const GENERIC_CERT = 'cert';
const GENERIC_KEY = 'key';
const GENERIC_CA = 'cacert';
const GENERIC_CRL = 'crl';
const TLS_CERT = 'tls.crt';
const TLS_KEY = 'tls.key';
const TLS_OCSP = 'tls.ocsp-staple';
const TLS_CA = 'ca.crt';
const TLS_CRL = 'ca.crl';

/** `Secret/<namespace>/*` in configsUpdated: a push for the Secrets of that namespace (an authorization became known). */
export const ALL_SECRETS_OF = (namespace: string): string => `Secret/${namespace}/*`;

export type ResourceType = 'kubernetes' | 'kubernetes-gateway';

/** Istio credentials.SecretResource, for the kinds mesh serves. */
export interface SecretResource {
  type: ResourceType;
  name: string;
  namespace: string;
  resourceName: string;
}

/** Istio credentials.ParseResourceName: `kubernetes://name` is in the proxy's namespace; `kubernetes-gateway://` needs both. */
export function parseResourceName(resourceName: string, proxyNamespace: string): SecretResource | Error {
  if (resourceName.startsWith(CREDENTIAL_PREFIX)) {
    const split = resourceName.slice(CREDENTIAL_PREFIX.length).split('/');
    const [namespace, name] = split.length > 1 ? [split[0]!, split[1]!] : [proxyNamespace, split[0]!];
    return { type: 'kubernetes', name, namespace, resourceName };
  }
  if (resourceName.startsWith(GATEWAY_SECRET_PREFIX)) {
    const split = resourceName.slice(GATEWAY_SECRET_PREFIX.length).split('/');
    if (split.length <= 1) return new Error(`invalid resource name "${resourceName}". Expected namespace and name`);
    if (!split[0]) return new Error(`invalid resource name "${resourceName}". Expected namespace`);
    if (!split[1]) return new Error(`invalid resource name "${resourceName}". Expected name`);
    return { type: 'kubernetes-gateway', name: split[1], namespace: split[0], resourceName };
  }
  return new Error(`unknown resource type: ${resourceName}`);
}

// ---------------------------------------------------------------------------------------------
// reading a Secret

export interface CertInfo {
  cert: Buffer;
  key?: Buffer;
  staple?: Buffer;
  crl?: Buffer;
}

/** The Secret's entries as bytes: `data` is base64, `stringData` plain text written over it. */
export function secretData(s: Config<'Secret'>): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(s.spec.data ?? {})) out.set(k, Buffer.from(v, 'base64'));
  for (const [k, v] of Object.entries(s.spec.stringData ?? {})) out.set(k, Buffer.from(v, 'utf8'));
  return out;
}

const hasKeys = (d: Map<string, Buffer>, ...keys: string[]) => keys.every((k) => d.has(k));
const hasValue = (d: Map<string, Buffer>, ...keys: string[]) => keys.every((k) => (d.get(k)?.length ?? 0) > 0);

function truncatedKeys(d: Map<string, Buffer>): string {
  const keys = [...d.keys()].sort();
  return keys.length < 3 ? keys.join(', ') : `${keys.slice(0, 3).join(', ')}, and ${keys.length - 3} more...`;
}

/** Istio ExtractCertInfo: cert/key first, then tls.crt/tls.key. */
export function extractCertInfo(d: Map<string, Buffer>): CertInfo | Error {
  if (hasValue(d, GENERIC_CERT, GENERIC_KEY))
    return { cert: d.get(GENERIC_CERT)!, key: d.get(GENERIC_KEY)!, ...(d.get(GENERIC_CRL) ? { crl: d.get(GENERIC_CRL)! } : {}) };
  if (hasValue(d, TLS_CERT, TLS_KEY)) {
    return {
      cert: d.get(TLS_CERT)!,
      key: d.get(TLS_KEY)!,
      ...(d.get(TLS_OCSP) ? { staple: d.get(TLS_OCSP)! } : {}),
      ...(d.get(TLS_CRL) ? { crl: d.get(TLS_CRL)! } : {}),
    };
  }
  if (hasKeys(d, GENERIC_CERT, GENERIC_KEY)) return new Error(`found keys "${GENERIC_CERT}" and "${GENERIC_KEY}", but they were empty`);
  if (hasKeys(d, TLS_CERT, TLS_KEY)) return new Error(`found keys "${TLS_CERT}" and "${TLS_KEY}", but they were empty`);
  return new Error(
    `found secret, but didn't have expected keys (${GENERIC_CERT} and ${GENERIC_KEY}) or (${TLS_CERT} and ${TLS_KEY}); found: ${truncatedKeys(d)}`,
  );
}

/** Istio ExtractRoot: cacert first, then ca.crt. */
export function extractRoot(d: Map<string, Buffer>): CertInfo | Error {
  if (hasValue(d, GENERIC_CA)) return { cert: d.get(GENERIC_CA)!, ...(d.get(GENERIC_CRL) ? { crl: d.get(GENERIC_CRL)! } : {}) };
  if (hasValue(d, TLS_CA)) return { cert: d.get(TLS_CA)!, ...(d.get(TLS_CRL) ? { crl: d.get(TLS_CRL)! } : {}) };
  if (hasKeys(d, GENERIC_CA)) return new Error(`found key "${GENERIC_CA}", but it was empty`);
  if (hasKeys(d, TLS_CA)) return new Error(`found key "${TLS_CA}", but it was empty`);
  return new Error(`found secret, but didn't have expected keys ${GENERIC_CA} or ${TLS_CA}; found: ${truncatedKeys(d)}`);
}

/** Istio ValidateCertificate: the first PEM certificate parses and is valid now (served anyway; only counted). */
export function validateCertificate(pem: Buffer, now = Date.now()): Error | undefined {
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(pem);
  } catch {
    return new Error('pem decode failed');
  }
  if (now > Date.parse(cert.validTo) || now < Date.parse(cert.validFrom)) return new Error('certificate is expired or not yet valid');
  return undefined;
}

const inline = (b: Buffer) => create(DataSourceSchema, { specifier: { case: 'inlineBytes', value: new Uint8Array(b) } });

/** Istio toEnvoyTLSSecret (no private key provider). */
export function tlsSecret(name: string, info: CertInfo): Secret {
  return create(SecretSchema, {
    name,
    type: {
      case: 'tlsCertificate',
      value: {
        certificateChain: inline(info.cert),
        privateKey: inline(info.key ?? Buffer.alloc(0)),
        ...(info.staple ? { ocspStaple: inline(info.staple) } : {}),
      },
    },
  });
}

/** Istio toEnvoyCaSecret. */
export function caSecret(name: string, info: CertInfo): Secret {
  return create(SecretSchema, {
    name,
    type: {
      case: 'validationContext',
      value: create(CertificateValidationContextSchema, { trustedCa: inline(info.cert), ...(info.crl ? { crl: inline(info.crl) } : {}) }),
    },
  });
}

// ---------------------------------------------------------------------------------------------
// the generator

/** Where Secrets are read: the config store (files under --configDir, or the orchestrator's informer). */
export interface SecretSource {
  get(namespace: string, name: string): Config<'Secret'> | undefined;
}

/**
 * Istio CredentialsController.Authorize: may this service account list Secrets in its namespace? true/false,
 * or undefined while the answer is being fetched (the caller is pushed again with ALL_SECRETS_OF once known).
 */
export type SecretAuthorizer = (serviceAccount: string, namespace: string) => boolean | Error | undefined;

export interface SecretGenOptions {
  secrets: SecretSource;
  authorize: SecretAuthorizer;
  now?: () => number;
}

/** The annotation the Gateway API translation puts on the Gateways it makes (config/gateway-api/translate.ts). */
const GATEWAY_API_PARENTS = 'internal.mesh.io/parents';

/**
 * Istio MergedGateway.VerifiedCertificateReferences (model/gateway.go mergeGateways): the credentials of the
 * Gateways a router serves that it may read without further authorization, for Gateways in its own namespace: a
 * Secret in that namespace, or one elsewhere that a ReferenceGrant lets the Gateway use. Istio asks its Gateway API
 * controller for the grant; here the translation already did, and writes a `kubernetes-gateway://` credential for
 * another namespace's Secret only when one allows it (translate.ts buildTLS), so a Gateway it made carries only
 * verified ones. A MUTUAL server's `-cacert` companion goes with its credential.
 */
export function verifiedCertificateReferences(servers: readonly GatewayServer[], proxyNamespace: string): Set<string> {
  const out = new Set<string>();
  for (const { gateway, server } of servers) {
    const cn = server.tls?.credentialName;
    if (!cn || cn.startsWith('builtin://') || gateway.meta.namespace !== proxyNamespace) continue;
    const rn = cn.includes('://') ? cn : `${CREDENTIAL_PREFIX}${cn}`;
    const r = parseResourceName(rn, proxyNamespace);
    if (r instanceof Error) continue;
    if (r.namespace !== proxyNamespace && !(r.type === 'kubernetes-gateway' && gateway.meta.annotations?.[GATEWAY_API_PARENTS])) continue;
    out.add(rn);
    if (server.tls?.mode === 'MUTUAL') out.add(`${rn}${CREDENTIAL_CA_SUFFIX}`);
  }
  return out;
}

/** Istio filterAuthorizedResources. */
function authorizedResources(
  resources: readonly SecretResource[],
  proxy: Proxy,
  authorize: SecretAuthorizer,
  verified: ReadonlySet<string>,
): SecretResource[] {
  const id = proxy.verifiedIdentity!;
  const answer: { decided?: boolean | Error | undefined; asked: boolean } = { asked: false };
  const authorized = () => {
    if (!answer.asked) answer.decided = authorize(id.serviceAccount, id.namespace);
    answer.asked = true;
    return answer.decided === true;
  };
  const allowed: SecretResource[] = [];
  const denied: string[] = [];
  for (const r of resources) {
    if (r.type === 'kubernetes-gateway') {
      // only the references the proxy's own Gateways verified, as Istio
      if (verified.has(r.resourceName)) allowed.push(r);
      else denied.push(r.name);
      continue;
    }
    const sameNamespace = r.namespace === id.namespace;
    if (sameNamespace && (r.name.endsWith(CREDENTIAL_CA_SUFFIX) || authorized())) allowed.push(r);
    else denied.push(r.name);
  }
  // still waiting for the answer: the proxy is pushed again once it is known
  if (denied.length > 0 && !(answer.asked && answer.decided === undefined)) {
    const why = answer.decided instanceof Error ? answer.decided.message : 'cross namespace secret reference requires ReferenceGrant';
    const shown = denied.length > 3 ? `${denied.slice(0, 3).join(', ')}, and ${denied.length - 3} others` : denied.join(', ');
    log.warn(`proxy ${proxy.id} attempted to access unauthorized certificates ${shown}: ${why}`);
    sdsCertificateErrors.inc();
  }
  return allowed;
}

function generateOne(r: SecretResource, secrets: SecretSource, now: number): Resource | undefined {
  const fail = (what: string, err: Error) => {
    sdsCertificateErrors.inc();
    log.warn(`failed to fetch ${what} for ${r.resourceName}: ${err.message}`);
    return undefined;
  };
  const check = (cert: Buffer) => {
    const err = validateCertificate(cert, now);
    if (err) {
      sdsCertificateErrors.inc();
      log.warn(`invalid certificates: ${r.namespace}/${r.name} "${r.resourceName}": ${err.message}`);
    }
  };
  if (r.name.endsWith(CREDENTIAL_CA_SUFFIX)) {
    // Istio GetCaCert: the `-cacert` Secret itself, or else the Secret it is the companion of.
    const s = secrets.get(r.namespace, r.name) ?? secrets.get(r.namespace, r.name.slice(0, -CREDENTIAL_CA_SUFFIX.length));
    if (!s) return fail('ca certificate', new Error(`secret ${r.namespace}/${r.name.slice(0, -CREDENTIAL_CA_SUFFIX.length)} not found`));
    const root = extractRoot(secretData(s));
    if (root instanceof Error) return fail('ca certificate', root);
    check(root.cert);
    return { name: r.resourceName, resource: anyPack(SecretSchema, caSecret(r.resourceName, root)) };
  }
  const s = secrets.get(r.namespace, r.name);
  if (!s) return fail('key and certificate', new Error(`secret ${r.namespace}/${r.name} not found`));
  const info = extractCertInfo(secretData(s));
  if (info instanceof Error) return fail('key and certificate', info);
  check(info.cert);
  return { name: r.resourceName, resource: anyPack(SecretSchema, tlsSecret(r.resourceName, info)) };
}

/** Istio SecretGen.Generate, for the resource names a proxy watches. */
export function secretGenerator(o: SecretGenOptions): Generator<PushContext> {
  return {
    // Every watched name is generated on each push (sdsNeedsPush in ../server/needs-push decides whether
    // there is one): the server sends only those whose content changed, and a name left out would read
    // as removed to a delta client.
    generate(proxy: Proxy, watched, req) {
      if (!proxy.verifiedIdentity) {
        log.warn(`proxy ${proxy.id} is not authorized to receive credentials. Ensure you are connecting over TLS port and are authenticated.`);
        return { resources: [] };
      }
      const parsed: SecretResource[] = [];
      for (const n of watched.resourceNames) {
        const r = parseResourceName(n, proxy.verifiedIdentity.namespace);
        if (r instanceof Error) {
          sdsCertificateErrors.inc();
          log.warn(`error parsing resource name: ${r.message}`);
          continue;
        }
        parsed.push(r);
      }
      const now = (o.now ?? Date.now)();
      const resources: Resource[] = [];
      const verified =
        proxy.type === 'router' && parsed.some((r) => r.type === 'kubernetes-gateway')
          ? verifiedCertificateReferences(
              req.push.mergedGateway(proxy).ports.flatMap((p) => p.servers),
              proxy.verifiedIdentity.namespace,
            )
          : new Set<string>();
      for (const r of authorizedResources(parsed, proxy, o.authorize, verified)) {
        const res = generateOne(r, o.secrets, now);
        if (res) resources.push(res);
      }
      return { resources };
    },
  };
}
