// TLS contexts as Istio builds them: upstream (DestinationRule tls → cluster transport socket) and
// downstream (Gateway server tls → filter chain transport socket). Secrets always come over SDS from
// the proxy's agent (`sds-grpc` cluster): `default`/`ROOTCA` for mesh identities,
// `kubernetes://<credentialName>` for credentials, `file-cert:<cert>~<key>` / `file-root:<ca>` for files.
import { create } from '@bufbuild/protobuf';
import type { ClientTLSSettings, ServerTLSSettings } from '../../config/types';
import { ApiConfigSource_ApiType, ApiVersion, ConfigSourceSchema, type ConfigSource } from '../../gen/envoy/config/core/v3/config_source_pb';
import { TransportSocketSchema, type TransportSocket } from '../../gen/envoy/config/core/v3/base_pb';
import { CertificateValidationContextSchema, TlsParameters_TlsProtocol, TlsParametersSchema } from '../../gen/envoy/extensions/transport_sockets/tls/v3/common_pb';
import {
  CommonTlsContext_CombinedCertificateValidationContextSchema,
  CommonTlsContextSchema,
  DownstreamTlsContextSchema,
  UpstreamTlsContextSchema,
  type CommonTlsContext,
} from '../../gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { SdsSecretConfigSchema, type SdsSecretConfig } from '../../gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { StringMatcherSchema } from '../../gen/envoy/type/matcher/v3/string_pb';
import { pack, WK } from './common';

export const SDS_CLUSTER = 'sds-grpc';
export const SDS_DEFAULT = 'default';
export const SDS_ROOTCA = 'ROOTCA';
export const CREDENTIAL_PREFIX = 'kubernetes://';
export const CREDENTIAL_CA_SUFFIX = '-cacert';
/** ALPN Istio offers on mesh mTLS connections. */
export const ALPN_ISTIO = ['istio-peer-exchange', 'istio'];
export const ALPN_H2_HTTP11 = ['h2', 'http/1.1'];

/** The agent's SDS server as every Istio proxy's bootstrap names it. */
export function sdsConfig(): ConfigSource {
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
  });
}

function sds(name: string): SdsSecretConfig {
  return create(SdsSecretConfigSchema, { name, sdsConfig: sdsConfig() });
}

function combinedValidation(rootSecret: string, sans: readonly string[]): CommonTlsContext['validationContextType'] {
  return {
    case: 'combinedValidationContext',
    value: create(CommonTlsContext_CombinedCertificateValidationContextSchema, {
      defaultValidationContext: create(CertificateValidationContextSchema, {
        matchSubjectAltNames: sans.map((v) => create(StringMatcherSchema, { matchPattern: { case: 'exact', value: v } })),
      }),
      validationContextSdsSecretConfig: sds(rootSecret),
    }),
  };
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

export interface UpstreamTlsInput {
  tls: ClientTLSSettings;
  /** `outbound_.<port>_.<subset>_.<host>`: SNI Istio uses for ISTIO_MUTUAL. */
  istioSni: string;
  /** Identities expected of the endpoints (service accounts), for ISTIO_MUTUAL SAN checks. */
  serviceAccounts: readonly string[];
  http2: boolean;
}

/** Transport socket for a cluster, or undefined for DISABLE / no TLS. */
export function upstreamTransportSocket(input: UpstreamTlsInput): TransportSocket | undefined {
  const tls = input.tls;
  const mode = tls.mode ?? 'DISABLE';
  if (mode === 'DISABLE') return undefined;
  const common = create(CommonTlsContextSchema, {});
  let sni = tls.sni ?? '';
  switch (mode) {
    case 'ISTIO_MUTUAL': {
      common.tlsCertificateSdsSecretConfigs = [sds(SDS_DEFAULT)];
      const sans = tls.subjectAltNames && tls.subjectAltNames.length > 0 ? tls.subjectAltNames : input.serviceAccounts;
      common.validationContextType = combinedValidation(SDS_ROOTCA, sans);
      common.alpnProtocols = input.http2 ? [...ALPN_ISTIO, 'h2'] : [...ALPN_ISTIO];
      if (!sni) sni = input.istioSni;
      break;
    }
    case 'SIMPLE':
    case 'MUTUAL': {
      if (tls.credentialName) {
        if (mode === 'MUTUAL') common.tlsCertificateSdsSecretConfigs = [sds(`${CREDENTIAL_PREFIX}${tls.credentialName}`)];
        if (!tls.insecureSkipVerify) {
          common.validationContextType = combinedValidation(`${CREDENTIAL_PREFIX}${tls.credentialName}${CREDENTIAL_CA_SUFFIX}`, tls.subjectAltNames ?? []);
        }
      } else {
        if (mode === 'MUTUAL' && tls.clientCertificate && tls.privateKey) {
          common.tlsCertificateSdsSecretConfigs = [sds(`file-cert:${tls.clientCertificate}~${tls.privateKey}`)];
        }
        if (tls.caCertificates && !tls.insecureSkipVerify) {
          common.validationContextType = combinedValidation(`file-root:${tls.caCertificates}`, tls.subjectAltNames ?? []);
        }
      }
      if (input.http2) common.alpnProtocols = ['h2'];
      break;
    }
  }
  return create(TransportSocketSchema, {
    name: WK.tlsTransportSocket,
    configType: { case: 'typedConfig', value: pack(UpstreamTlsContextSchema, { commonTlsContext: common, sni }) },
  });
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
    const cert = tls.credentialName ? `${CREDENTIAL_PREFIX}${tls.credentialName}` : `file-cert:${tls.serverCertificate ?? ''}~${tls.privateKey ?? ''}`;
    common.tlsCertificateSdsSecretConfigs = [sds(cert)];
    if (mode === 'MUTUAL' || mode === 'OPTIONAL_MUTUAL') {
      const root = tls.credentialName ? `${CREDENTIAL_PREFIX}${tls.credentialName}${CREDENTIAL_CA_SUFFIX}` : `file-root:${tls.caCertificates ?? ''}`;
      common.validationContextType = combinedValidation(root, tls.subjectAltNames ?? []);
      requireClientCertificate = mode === 'MUTUAL';
    }
  }
  if (http) common.alpnProtocols = [...ALPN_H2_HTTP11];
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
