// TLS contexts as Istio builds them: upstream (DestinationRule tls and auto mTLS → cluster transport
// socket or transport socket matches), inbound mesh mTLS (PeerAuthentication → virtualInbound filter
// chains) and downstream gateway TLS (Gateway server tls). Secrets come over SDS: from the proxy's agent
// (`sds-grpc` cluster) for `default`/`ROOTCA` (mesh identity) and `file-cert:<cert>~<key>` /
// `file-root:<ca>` (files), from the discovery daemon over ADS for credentials (`kubernetes://<name>`).
// The mesh ALPN lists live here too, with what an upstream Envoy without istio.alpn is offered instead.
import { create } from '@bufbuild/protobuf';
import { anyPack } from '@bufbuild/protobuf/wkt';
import type { ClientTLSSettings, ServerTLSSettings } from '../../config/types';
import type { MutualTlsMode } from '../../discovery/push/peer-authentication';
import { supports, type ProxyCapabilities } from '../../discovery/capabilities';
import { TLS_MODE_ISTIO } from '../../discovery/labels';
import { Cluster_TransportSocketMatchSchema, type Cluster_TransportSocketMatch } from '../../gen/envoy/config/cluster/v3/cluster_pb';
import { RawBufferSchema } from '../../gen/envoy/extensions/transport_sockets/raw_buffer/v3/raw_buffer_pb';
import { ApiConfigSource_ApiType, ApiVersion, ConfigSourceSchema, type ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import { TransportSocketSchema, type TransportSocket } from '../../gen/envoy/config/core/v3/base_pb';
import {
  CertificateValidationContextSchema,
  TlsParameters_TlsProtocol,
  TlsParametersSchema,
} from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import {
  CommonTlsContext_CombinedCertificateValidationContextSchema,
  CommonTlsContextSchema,
  DownstreamTlsContextSchema,
  UpstreamTlsContextSchema,
  type CommonTlsContext,
  type DownstreamTlsContext,
  type UpstreamTlsContext,
} from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { SdsSecretConfigSchema, type SdsSecretConfig } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { StringMatcherSchema, type StringMatcher } from '../../gen/envoy/type/matcher/v3/string_pb';
import { durationMs, pack, WK } from './common';

export const SDS_CLUSTER = 'sds-grpc';
export const SDS_DEFAULT = 'default';
export const SDS_ROOTCA = 'ROOTCA';
export const CREDENTIAL_PREFIX = 'kubernetes://';
export const CREDENTIAL_CA_SUFFIX = '-cacert';
/** credentialName prefixes (Istio pilot/pkg/model/credentials). */
const BUILTIN_PREFIX = 'builtin://';
const CONFIGMAP_PREFIX = 'configmap://';
const INVALID_PREFIX = 'invalid://';
const GATEWAY_SECRET_PREFIX = 'kubernetes-gateway://';
export const FILE_ROOT_SYSTEM = 'file-root:system';

// ALPN values (Istio pilot/pkg/networking/util, pkg/model).
export const ALPN_IN_MESH = ['istio'];
export const ALPN_IN_MESH_WITH_MXC = ['istio-peer-exchange', 'istio'];
export const ALPN_IN_MESH_H2 = ['istio', 'h2'];
export const ALPN_IN_MESH_H2_WITH_MXC = ['istio-peer-exchange', 'istio', 'h2'];
export const ALPN_H2_ONLY = ['h2'];
export const ALPN_HTTP = ['h2', 'http/1.1'];
export const ALPN_DOWNSTREAM_WITH_MXC = ['istio-peer-exchange', 'h2', 'http/1.1'];
/** What Istio's istio.alpn filter offers over mesh mTLS by upstream HTTP protocol (xdsfilters.Alpn, mtlsHTTP*ALPN). */
export const ALPN_MTLS_HTTP10 = ['istio-http/1.0', 'istio', 'http/1.0'];
export const ALPN_MTLS_HTTP11 = ['istio-http/1.1', 'istio', 'http/1.1'];
export const ALPN_MTLS_HTTP2 = ['istio-h2', 'istio', 'h2'];

/** Cipher suites Istio allows on inbound mesh mTLS (authn/utils SupportedCiphers). */
export const MESH_MTLS_CIPHERS = [
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'AES256-GCM-SHA384',
  'AES128-GCM-SHA256',
];

/** The agent's SDS server as every Istio proxy's bootstrap names it. */
export function sdsConfig(initialFetchTimeoutZero = false): ConfigSource {
  return create(ConfigSourceSchema, {
    configSourceSpecifier: {
      case: 'apiConfigSource',
      value: {
        apiType: ApiConfigSource_ApiType.GRPC,
        transportApiVersion: ApiVersion.V3,
        grpcServices: [{ targetSpecifier: { case: 'envoyGrpc', value: { clusterName: SDS_CLUSTER } } }],
        setNodeOnFirstMessageOnly: true,
      },
    },
    resourceApiVersion: ApiVersion.V3,
    // Istio's shared default/ROOTCA configs do not wait for the first answer; file secrets do.
    ...(initialFetchTimeoutZero ? { initialFetchTimeout: durationMs(0) } : {}),
  });
}

/**
 * Istio SDSAdsConfig: credentials (`kubernetes://…`) are served by the discovery daemon over the ADS stream,
 * without initial_fetch_timeout 0 so a missing secret does not block the whole listener or cluster.
 */
export function sdsAdsConfig(): ConfigSource {
  return create(ConfigSourceSchema, { configSourceSpecifier: { case: 'ads', value: {} }, resourceApiVersion: ApiVersion.V3 });
}

/** Istio ConstructSdsSecretConfig: a secret from the agent (`default`, `ROOTCA`, `file-cert:…`, `file-root:…`). */
export function sds(name: string): SdsSecretConfig {
  return create(SdsSecretConfigSchema, { name, sdsConfig: sdsConfig(name === SDS_DEFAULT || name === SDS_ROOTCA) });
}

/** Istio credentials.ToResourceName. */
export function credentialResourceName(name: string): string {
  if (name.startsWith(BUILTIN_PREFIX)) return SDS_DEFAULT;
  if (name.startsWith(INVALID_PREFIX)) return INVALID_PREFIX;
  if (name.startsWith(CONFIGMAP_PREFIX) || name.startsWith(CREDENTIAL_PREFIX) || name.startsWith(GATEWAY_SECRET_PREFIX)) return name;
  return `${CREDENTIAL_PREFIX}${name}`;
}

/**
 * Istio ConstructSdsSecretConfigForCredential: `builtin://` is the proxy's own identity from the agent;
 * every other credential is a secret the daemon serves over ADS.
 */
export function credentialSds(name: string): SdsSecretConfig {
  if (name === BUILTIN_PREFIX) return sds(SDS_DEFAULT);
  if (name === `${BUILTIN_PREFIX}${CREDENTIAL_CA_SUFFIX}`) return sds(SDS_ROOTCA);
  return create(SdsSecretConfigSchema, { name: credentialResourceName(name), sdsConfig: sdsAdsConfig() });
}

const exact = (v: string) => create(StringMatcherSchema, { matchPattern: { case: 'exact', value: v } });
const prefix = (v: string) => create(StringMatcherSchema, { matchPattern: { case: 'prefix', value: v } });

function combined(root: SdsSecretConfig, sans: readonly StringMatcher[]): CommonTlsContext['validationContextType'] {
  return {
    case: 'combinedValidationContext',
    value: create(CommonTlsContext_CombinedCertificateValidationContextSchema, {
      defaultValidationContext: create(CertificateValidationContextSchema, { matchSubjectAltNames: [...sans] }),
      validationContextSdsSecretConfig: root,
    }),
  };
}

function combinedValidation(rootSecret: string, sans: readonly string[]): CommonTlsContext['validationContextType'] {
  return combined(sds(rootSecret), sans.map(exact));
}

function protocol(v: string | undefined): TlsParameters_TlsProtocol | undefined {
  switch (v) {
    case 'TLSV1_0':
      return TlsParameters_TlsProtocol.TLSv1_0;
    case 'TLSV1_1':
      return TlsParameters_TlsProtocol.TLSv1_1;
    case 'TLSV1_2':
      return TlsParameters_TlsProtocol.TLSv1_2;
    case 'TLSV1_3':
      return TlsParameters_TlsProtocol.TLSv1_3;
    default:
      return undefined;
  }
}

// ---------------------------------------------------------------------------------------------
// upstream (Istio cluster_tls.go)

/** Whether TLS settings came from a DestinationRule or were chosen by auto mTLS (Istio mtlsContextType). */
export type MtlsContextType = 'userSupplied' | 'autoDetected';

/**
 * Istio buildUpstreamTLSSettings: the DestinationRule's settings (ISTIO_MUTUAL completed with the default SNI
 * and the service accounts as SANs), or — when it gives none — ISTIO_MUTUAL chosen by auto mTLS unless the
 * service is external, auto mTLS is off, or the destination's mode is DISABLE or unknown.
 */
export function buildUpstreamTlsSettings(
  tls: ClientTLSSettings | undefined,
  serviceAccounts: readonly string[],
  sni: string,
  autoMtlsEnabled: boolean,
  meshExternal: boolean,
  serviceMtlsMode: MutualTlsMode,
): { tls: ClientTLSSettings | undefined; ctx: MtlsContextType } {
  if (tls) {
    if (tls.mode !== 'ISTIO_MUTUAL') return { tls, ctx: 'userSupplied' };
    const sans = tls.subjectAltNames && tls.subjectAltNames.length > 0 ? tls.subjectAltNames : [...serviceAccounts];
    return { tls: { mode: 'ISTIO_MUTUAL', subjectAltNames: sans, sni: tls.sni || sni }, ctx: 'userSupplied' };
  }
  if (meshExternal || !autoMtlsEnabled || serviceMtlsMode === 'UNKNOWN' || serviceMtlsMode === 'DISABLE')
    return { tls: undefined, ctx: 'userSupplied' };
  return { tls: { mode: 'ISTIO_MUTUAL', subjectAltNames: [...serviceAccounts], sni }, ctx: 'autoDetected' };
}

export interface UpstreamTlsOptions {
  /** Cluster name: ISTIO_MUTUAL's SNI when the settings carry none. */
  clusterName: string;
  /** The cluster speaks HTTP/2 upstream. */
  http2: boolean;
  /** Built for a sidecar (not a gateway). */
  sidecar: boolean;
  /** The DestinationRule has a workloadSelector. */
  drWithSelector: boolean;
  /** The service comes from a ServiceEntry (Istio provider.External). */
  externalRegistry: boolean;
  serviceAccounts: readonly string[];
  metadataExchange: boolean;
  disableMxAlpn: boolean;
  /** ISTIO_MUTUAL: the ALPN istio.alpn would set, for a proxy without that filter (capabilities.ts). */
  alpnInsteadOfFilter?: readonly string[];
}

export interface UpstreamTls {
  context: UpstreamTlsContext;
  /** SIMPLE/MUTUAL without SNI: the cluster's HTTP options ask for auto_sni / auto_san_validation. */
  autoSni: boolean;
  autoSanValidation: boolean;
}

function defaultUpstreamCommon(): CommonTlsContext {
  // if not specified, Envoy's client default is TLSv1_2 only
  return create(CommonTlsContextSchema, {
    tlsParams: create(TlsParametersSchema, {
      tlsMinimumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_2,
      tlsMaximumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_3,
    }),
  });
}

/**
 * Istio buildUpstreamClusterTLSContext; undefined for no TLS. Throws (Istio logs and sends the cluster
 * without TLS) when MUTUAL names no client certificate.
 */
export function buildUpstreamTlsContext(tls: ClientTLSSettings | undefined, o: UpstreamTlsOptions): UpstreamTls | undefined {
  if (!tls) return undefined;
  const mode = tls.mode ?? 'DISABLE';
  // A sidecar gets no credentialName TLS from a DestinationRule without workloadSelector: Istio will not hand
  // every sidecar in scope a secret it cannot read (configmap:// roots excepted).
  const privileged = !!tls.credentialName && !tls.credentialName.startsWith(CONFIGMAP_PREFIX);
  if (privileged && o.sidecar && !o.drWithSelector && (mode === 'SIMPLE' || mode === 'MUTUAL')) return undefined;
  const common = defaultUpstreamCommon();
  switch (mode) {
    case 'DISABLE':
      return undefined;
    case 'ISTIO_MUTUAL': {
      common.tlsCertificateSdsSecretConfigs = [sds(SDS_DEFAULT)];
      common.validationContextType = combinedValidation(SDS_ROOTCA, tls.subjectAltNames ?? []);
      const mx = o.metadataExchange && !o.disableMxAlpn;
      common.alpnProtocols = o.alpnInsteadOfFilter
        ? [...o.alpnInsteadOfFilter]
        : o.http2
          ? [...(mx ? ALPN_IN_MESH_H2_WITH_MXC : ALPN_IN_MESH_H2)]
          : [...(mx ? ALPN_IN_MESH_WITH_MXC : ALPN_IN_MESH)];
      const context = create(UpstreamTlsContextSchema, { commonTlsContext: common, sni: tls.sni || o.clusterName });
      return { context, autoSni: false, autoSanValidation: false };
    }
    case 'SIMPLE':
    case 'MUTUAL': {
      const autoSni = !tls.sni;
      const autoSanValidation = autoSni && (tls.subjectAltNames ?? []).length === 0 && !tls.insecureSkipVerify;
      // ServiceEntry hosts: their subjectAltNames stand in when the rule gives none.
      const sans = o.externalRegistry && (tls.subjectAltNames ?? []).length === 0 ? [...o.serviceAccounts] : (tls.subjectAltNames ?? []);
      if (tls.credentialName) {
        if (mode === 'MUTUAL') common.tlsCertificateSdsSecretConfigs = [credentialSds(tls.credentialName)];
        if (!tls.insecureSkipVerify)
          common.validationContextType = combined(credentialSds(`${tls.credentialName}${CREDENTIAL_CA_SUFFIX}`), sans.map(exact));
      } else {
        // Files named in the rule are read by the agent and served over SDS (rotation without restarts).
        const ca = tls.caCertificates || 'system';
        if (mode === 'MUTUAL') {
          if (!tls.clientCertificate || !tls.privateKey) {
            throw new Error(`failed to apply tls setting for ${o.clusterName}: client certificate and private key must not be empty`);
          }
          common.tlsCertificateSdsSecretConfigs = [sds(`file-cert:${tls.clientCertificate}~${tls.privateKey}`)];
        }
        if (tls.insecureSkipVerify) {
          common.validationContextType = { case: 'validationContext', value: create(CertificateValidationContextSchema, {}) };
        } else {
          common.validationContextType = combinedValidation(`file-root:${ca}`, sans);
        }
      }
      if (o.http2) common.alpnProtocols = [...ALPN_H2_ONLY];
      return { context: create(UpstreamTlsContextSchema, { commonTlsContext: common, sni: tls.sni ?? '' }), autoSni, autoSanValidation };
    }
  }
  return undefined;
}

export function tlsTransportSocket(context: UpstreamTlsContext | DownstreamTlsContext): TransportSocket {
  const value =
    context.$typeName === 'envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext'
      ? anyPack(UpstreamTlsContextSchema, context)
      : anyPack(DownstreamTlsContextSchema, context as DownstreamTlsContext);
  return create(TransportSocketSchema, { name: WK.tlsTransportSocket, configType: { case: 'typedConfig', value } });
}

/** Istio's raw buffer transport socket (xdsfilters.RawBufferTransportSocket). */
export function rawBufferTransportSocket(): TransportSocket {
  return create(TransportSocketSchema, { name: WK.rawBufferTransportSocket, configType: { case: 'typedConfig', value: pack(RawBufferSchema, {}) } });
}

/** Transport socket match names and values (Istio cluster_tls.go). */
export const TRANSPORT_SOCKET_MATCH_KEY = 'envoy.transport_socket_match';
export const TLS_MODE_KEY = 'tlsMode';

/**
 * Istio applyUpstreamTLSSettings after auto mTLS: `tlsMode-istio` (endpoints whose metadata says tlsMode
 * istio get the mTLS socket) then `tlsMode-disabled` (everything else, plaintext).
 */
export function autoMtlsTransportSocketMatches(socket: TransportSocket): Cluster_TransportSocketMatch[] {
  return [
    create(Cluster_TransportSocketMatchSchema, {
      name: `tlsMode-${TLS_MODE_ISTIO}`,
      match: { [TLS_MODE_KEY]: TLS_MODE_ISTIO },
      transportSocket: socket,
    }),
    create(Cluster_TransportSocketMatchSchema, { name: 'tlsMode-disabled', match: {}, transportSocket: rawBufferTransportSocket() }),
  ];
}

// ---------------------------------------------------------------------------------------------
// inbound mesh mTLS (Istio authn/utils BuildInboundTLS, security/model ApplyToCommonTLSContext)

export interface InboundTlsOptions {
  /** The mesh's trust domain and aliases (Istio TrustDomainsForValidation), accepted as SPIFFE prefixes. */
  trustDomains: readonly string[];
  metadataExchange: boolean;
  disableMxAlpn: boolean;
  /** meshMTLS.minProtocolVersion: TLSV1_3 raises the minimum, anything else is TLS 1.2. */
  minProtocolVersion?: string;
}

/**
 * The DownstreamTlsContext of an inbound mTLS filter chain; undefined for DISABLE/UNKNOWN. TCP chains offer
 * `istio-peer-exchange` (metadata exchange) before h2/http1.1; HTTP chains only h2/http1.1 — `istio` must not
 * be negotiated by the server, it is only what the filter chain matches on.
 */
export function buildInboundTls(mode: MutualTlsMode, tcp: boolean, o: InboundTlsOptions): DownstreamTlsContext | undefined {
  if (mode === 'DISABLE' || mode === 'UNKNOWN') return undefined;
  const alpn = tcp && o.metadataExchange ? (o.disableMxAlpn ? ALPN_HTTP : ALPN_DOWNSTREAM_WITH_MXC) : ALPN_HTTP;
  const common = create(CommonTlsContextSchema, {
    alpnProtocols: [...alpn],
    tlsParams: create(TlsParametersSchema, {
      cipherSuites: [...MESH_MTLS_CIPHERS],
      tlsMinimumProtocolVersion: o.minProtocolVersion === 'TLSV1_3' ? TlsParameters_TlsProtocol.TLSv1_3 : TlsParameters_TlsProtocol.TLSv1_2,
      tlsMaximumProtocolVersion: TlsParameters_TlsProtocol.TLSv1_3,
    }),
    validationContextType: combined(
      sds(SDS_ROOTCA),
      o.trustDomains.map((td) => prefix(`spiffe://${td}/`)),
    ),
    tlsCertificateSdsSecretConfigs: [sds(SDS_DEFAULT)],
  });
  return create(DownstreamTlsContextSchema, { commonTlsContext: common, requireClientCertificate: true });
}

/** DownstreamTlsContext for a gateway server that terminates TLS (Istio BuildListenerTLSContext). */
export function downstreamTransportSocket(tls: ServerTLSSettings, http: boolean): TransportSocket {
  const common = create(CommonTlsContextSchema, {});
  const mode = tls.mode ?? 'SIMPLE';
  let requireClientCertificate = false;
  if (mode === 'ISTIO_MUTUAL') {
    common.tlsCertificateSdsSecretConfigs = [sds(SDS_DEFAULT)];
    common.validationContextType = combinedValidation(SDS_ROOTCA, tls.subjectAltNames ?? []);
    requireClientCertificate = true;
  } else {
    common.tlsCertificateSdsSecretConfigs = [
      tls.credentialName ? credentialSds(tls.credentialName) : sds(`file-cert:${tls.serverCertificate ?? ''}~${tls.privateKey ?? ''}`),
    ];
    if (mode === 'MUTUAL' || mode === 'OPTIONAL_MUTUAL') {
      const root = tls.credentialName ? credentialSds(`${tls.credentialName}${CREDENTIAL_CA_SUFFIX}`) : sds(`file-root:${tls.caCertificates ?? ''}`);
      common.validationContextType = combined(root, (tls.subjectAltNames ?? []).map(exact));
      requireClientCertificate = mode === 'MUTUAL';
    }
  }
  if (http) common.alpnProtocols = [...ALPN_HTTP];
  // Istio servers default to TLS 1.2 as the minimum version.
  common.tlsParams = create(TlsParametersSchema, {
    tlsMinimumProtocolVersion: protocol(tls.minProtocolVersion) ?? TlsParameters_TlsProtocol.TLSv1_2,
    tlsMaximumProtocolVersion: protocol(tls.maxProtocolVersion) ?? TlsParameters_TlsProtocol.TLS_AUTO,
    cipherSuites: tls.cipherSuites ?? [],
  });
  return create(TransportSocketSchema, {
    name: WK.tlsTransportSocket,
    configType: {
      case: 'typedConfig',
      value: pack(DownstreamTlsContextSchema, { commonTlsContext: common, requireClientCertificate }),
    },
  });
}

/** The upstream HTTP version of a cluster, when its port fixes one. */
export type UpstreamHttp = 'http/1.1' | 'h2';

/**
 * Upstream Envoy's way to what istio.alpn does: the mesh mTLS cluster offers the ALPN the filter would have set
 * for its protocol (the server sidecar's inbound chains tell HTTP from TCP by it). Undefined when the proxy has
 * the filter, or when the protocol is not fixed (TCP, the downstream's protocol): those keep Istio's ALPN.
 */
export function alpnInsteadOfFilter(caps: ProxyCapabilities | undefined, upstream: UpstreamHttp | undefined): readonly string[] | undefined {
  if (supports(caps, 'alpn') || !upstream) return undefined;
  return upstream === 'h2' ? ALPN_MTLS_HTTP2 : ALPN_MTLS_HTTP11;
}
