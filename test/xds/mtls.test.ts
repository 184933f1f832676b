// Mesh mTLS translation tables. Expected values come from Istio 1.26.8's own tests and code:
// pilot/pkg/security/authn/policy_applier_test.go (TestComposePeerAuthentication),
// pilot/pkg/model/authentication.go (namespace modes), pilot/pkg/networking/core/cluster_tls_test.go
// (TestBuildAutoMtlsSettings, TestBuildUpstreamClusterTLSContext), filterchain_options.go,
// authn/utils BuildInboundTLS, listener_inbound.go populateListenerFilters, util.AppendLbEndpointMetadata,
// authz/model/generator_test.go (identity principals, as sidecars get them: authenticated principal_name).
import t from 'tap';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { composePeerAuthentication, NamespaceMtlsModes, type MutualTlsMode } from '../../src/discovery/push/peer-authentication';
import { endpointTlsMode } from '../../src/discovery/labels';
import type { ClientTLSSettings, Config, PeerAuthenticationSpec } from '../../src/config/types';
import {
  buildInboundTls,
  buildUpstreamTlsContext,
  buildUpstreamTlsSettings,
  credentialSds,
  autoMtlsTransportSocketMatches,
  tlsTransportSocket,
  type UpstreamTlsOptions,
} from '../../src/xds/gen/tls';
import { filterChainMatchOptions, inboundListenerFilters } from '../../src/xds/gen/inbound-mtls';
import { endpointMetadata } from '../../src/xds/gen/endpoints';
import { originalDst } from '../../src/xds/gen/filters';
import { UpstreamTlsContextSchema, DownstreamTlsContextSchema } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import { SdsSecretConfigSchema } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { Cluster_TransportSocketMatchSchema } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import { FilterChainSchema, ListenerFilterSchema } from '../../src/gen/envoy/config/listener/v3/listener_components_pb';
import { envoyTypeRegistry } from '../../src/lib/xds/registry';
import { generatePolicy, newModel } from '../../src/security/authz/model';
import { PolicySchema } from '../../src/gen/envoy/config/rbac/v3/rbac_pb';
import { cfg } from '../discovery/fixtures';
import { MESH_MTLS_CIPHERS } from '../helpers/tls';

const registry = envoyTypeRegistry();
const json = (v: unknown): JsonValue | undefined => (v === undefined ? undefined : (JSON.parse(JSON.stringify(v)) as JsonValue));

// ---------------------------------------------------------------------------------------------
// PeerAuthentication composition

const ROOT = 'root-namespace';
const pa = (ns: string, name: string, spec: PeerAuthenticationSpec, created?: string): Config<'PeerAuthentication'> =>
  cfg('PeerAuthentication', ns, name, spec, created ? { created } : {});
const NOW = '2024-06-01T00:00:10Z';
const SECOND_AGO = '2024-06-01T00:00:09Z';

t.test('composePeerAuthentication: Istio TestComposePeerAuthentication', async (t) => {
  const rows: Array<[string, Config<'PeerAuthentication'>[], MutualTlsMode, Record<number, MutualTlsMode>?]> = [
    ['no config', [], 'PERMISSIVE'],
    ['mesh only', [pa(ROOT, 'default', { mtls: { mode: 'STRICT' } })], 'STRICT'],
    [
      'mesh vs namespace',
      [pa(ROOT, 'default', { selector: { matchLabels: {} }, mtls: { mode: 'STRICT' } }), pa('my-ns', 'default', { mtls: { mode: 'PERMISSIVE' } })],
      'PERMISSIVE',
    ],
    [
      'ignore non-empty selector in root namespace',
      [pa(ROOT, 'default', { selector: { matchLabels: { app: 'foo' } }, mtls: { mode: 'STRICT' } })],
      'PERMISSIVE',
    ],
    ['workload vs namespace config', [pa('my-ns', 'default', {}), pa('my-ns', 'foo', { selector: { matchLabels: { app: 'foo' } } })], 'PERMISSIVE'],
    [
      'workload vs mesh config',
      [pa('my-ns', 'default', { mtls: { mode: 'PERMISSIVE' } }), pa(ROOT, 'default', { mtls: { mode: 'DISABLE' } })],
      'PERMISSIVE',
    ],
    [
      'multiple mesh policy: the oldest wins',
      [
        pa(ROOT, 'now', { mtls: { mode: 'DISABLE' } }, NOW),
        pa(ROOT, 'second ago', { mtls: { mode: 'PERMISSIVE' } }, SECOND_AGO),
        pa(ROOT, 'second later', { mtls: { mode: 'STRICT' } }, SECOND_AGO),
      ],
      'PERMISSIVE',
    ],
    [
      'multiple namespace policy',
      [
        pa('my-ns', 'now', { mtls: { mode: 'DISABLE' } }, NOW),
        pa('my-ns', 'second ago', { mtls: { mode: 'PERMISSIVE' } }, SECOND_AGO),
        pa('my-ns', 'second later', { mtls: { mode: 'STRICT' } }, SECOND_AGO),
      ],
      'PERMISSIVE',
    ],
    [
      'multiple workload policy',
      [
        pa('my-ns', 'now', { selector: { matchLabels: { app: 'foo' } }, mtls: { mode: 'DISABLE' } }, NOW),
        pa('my-ns', 'second ago', { selector: { matchLabels: { app: 'foo' } }, mtls: { mode: 'PERMISSIVE' } }, SECOND_AGO),
        pa('my-ns', 'second later', { selector: { matchLabels: { stage: 'prod' } }, mtls: { mode: 'STRICT' } }, SECOND_AGO),
      ],
      'PERMISSIVE',
    ],
    ['inheritance: default mesh (UNSET is PERMISSIVE)', [pa(ROOT, 'default', { mtls: { mode: 'UNSET' } })], 'PERMISSIVE'],
    [
      'inheritance: mesh to workload',
      [pa(ROOT, 'default', { mtls: { mode: 'STRICT' } }), pa('my-ns', 'foo', { selector: { matchLabels: { app: 'foo' } } })],
      'STRICT',
    ],
    [
      'inheritance: namespace to workload',
      [pa('my-ns', 'default', { mtls: { mode: 'STRICT' } }), pa('my-ns', 'foo', { selector: { matchLabels: { app: 'foo' } } })],
      'STRICT',
    ],
    [
      'inheritance: mesh to namespace to workload',
      [
        pa(ROOT, 'default', { mtls: { mode: 'STRICT' } }),
        pa('my-ns', 'default', { mtls: { mode: 'UNSET' } }),
        pa('my-ns', 'foo', { selector: { matchLabels: { app: 'foo' } } }),
      ],
      'STRICT',
    ],
    [
      'port level: DISABLE kept, UNSET and empty inherit the workload mode',
      [
        pa(ROOT, 'default', { mtls: { mode: 'STRICT' } }),
        pa('my-ns', 'foo', {
          selector: { matchLabels: { app: 'foo' } },
          portLevelMtls: { '80': { mode: 'DISABLE' }, '90': { mode: 'UNSET' }, '100': {} },
        }),
      ],
      'STRICT',
      { 80: 'DISABLE', 90: 'STRICT', 100: 'STRICT' },
    ],
  ];
  for (const [name, configs, mode, perPort] of rows) {
    const got = composePeerAuthentication(ROOT, configs);
    t.equal(got.mode, mode, name);
    t.same(Object.fromEntries(got.perPort), perPort ?? {}, `${name}: per port`);
  }
});

t.test('namespace modes clients assume (Istio GetNamespaceMutualTLSMode)', async (t) => {
  const rows: Array<[string, Config<'PeerAuthentication'>[], Record<string, MutualTlsMode>]> = [
    ['nothing: unknown everywhere', [], { a: 'UNKNOWN', [ROOT]: 'UNKNOWN' }],
    ['mesh STRICT reaches every namespace', [pa(ROOT, 'default', { mtls: { mode: 'STRICT' } })], { a: 'STRICT' }],
    ['mesh UNSET is PERMISSIVE', [pa(ROOT, 'default', {})], { a: 'PERMISSIVE' }],
    [
      'namespace UNSET inherits the mesh',
      [pa(ROOT, 'default', { mtls: { mode: 'DISABLE' } }), pa('a', 'default', { mtls: { mode: 'UNSET' } })],
      { a: 'DISABLE', b: 'DISABLE' },
    ],
    ['namespace UNSET without mesh is PERMISSIVE', [pa('a', 'default', {})], { a: 'PERMISSIVE', b: 'UNKNOWN' }],
    [
      'namespace overrides mesh',
      [pa(ROOT, 'default', { mtls: { mode: 'STRICT' } }), pa('a', 'x', { mtls: { mode: 'DISABLE' } })],
      { a: 'DISABLE', b: 'STRICT' },
    ],
    ['workload policies do not count', [pa('a', 'w', { selector: { matchLabels: { app: 'x' } }, mtls: { mode: 'STRICT' } })], { a: 'UNKNOWN' }],
    [
      'the oldest namespace policy wins',
      [pa('a', 'new', { mtls: { mode: 'STRICT' } }, NOW), pa('a', 'old', { mtls: { mode: 'DISABLE' } }, SECOND_AGO)],
      { a: 'DISABLE' },
    ],
  ];
  for (const [name, configs, want] of rows) {
    const m = new NamespaceMtlsModes(configs, ROOT);
    for (const [ns, mode] of Object.entries(want)) t.equal(m.forNamespace(ns), mode, `${name}: ${ns}`);
  }
});

// ---------------------------------------------------------------------------------------------
// upstream TLS

t.test('buildUpstreamTlsSettings: Istio TestBuildAutoMtlsSettings (rows without proxy metadata certificates)', async (t) => {
  const dr: ClientTLSSettings = { mode: 'ISTIO_MUTUAL', subjectAltNames: ['custom.foo.com'], sni: 'custom.foo.com' };
  const sa = ['spiffe://foo/serviceaccount/1'];
  const auto: ClientTLSSettings = { mode: 'ISTIO_MUTUAL', subjectAltNames: sa, sni: 'foo.com' };
  const simple: ClientTLSSettings = {
    mode: 'SIMPLE',
    privateKey: '/custom/key.pem',
    clientCertificate: '/custom/chain.pem',
    caCertificates: '/custom/root.pem',
  };
  const rows: Array<[string, ClientTLSSettings | undefined, boolean, boolean, MutualTlsMode, ClientTLSSettings | undefined, string]> = [
    ['DestinationRule TLS sni and SAN override', dr, false, false, 'UNKNOWN', dr, 'userSupplied'],
    ['auto fill for an internal service in strict mode', undefined, true, false, 'STRICT', auto, 'autoDetected'],
    ['auto fill for an internal service in permissive mode', undefined, true, false, 'PERMISSIVE', auto, 'autoDetected'],
    ['no auto fill in plaintext mode', undefined, true, false, 'DISABLE', undefined, 'userSupplied'],
    ['no auto fill in unknown mode', undefined, true, false, 'UNKNOWN', undefined, 'userSupplied'],
    ['no auto fill for external', undefined, true, true, 'UNKNOWN', undefined, 'userSupplied'],
    ['no auto fill with auto mTLS off', undefined, false, false, 'DISABLE', undefined, 'userSupplied'],
    ['SIMPLE as written', simple, false, false, 'UNKNOWN', simple, 'userSupplied'],
    [
      'ISTIO_MUTUAL without SNI/SANs gets the default SNI and service accounts',
      { mode: 'ISTIO_MUTUAL' },
      true,
      false,
      'STRICT',
      auto,
      'userSupplied',
    ],
  ];
  for (const [name, tls, autoMtls, external, mode, want, ctx] of rows) {
    const got = buildUpstreamTlsSettings(tls, sa, 'foo.com', autoMtls, external, mode);
    t.same(got.tls, want, name);
    t.equal(got.ctx, ctx, `${name}: context type`);
  }
});

const AGENT = (name: string) => ({
  name,
  sdsConfig: {
    apiConfigSource: {
      apiType: 'GRPC',
      transportApiVersion: 'V3',
      grpcServices: [{ envoyGrpc: { clusterName: 'sds-grpc' } }],
      setNodeOnFirstMessageOnly: true,
    },
    ...(name === 'default' || name === 'ROOTCA' ? { initialFetchTimeout: '0s' } : {}),
    resourceApiVersion: 'V3',
  },
});
const ADS = (name: string) => ({ name, sdsConfig: { ads: {}, resourceApiVersion: 'V3' } });
const TLS12_13 = { tlsMinimumProtocolVersion: 'TLSv1_2', tlsMaximumProtocolVersion: 'TLSv1_3' };

const base: UpstreamTlsOptions = {
  clusterName: 'outbound|8080||foo.com',
  http2: false,
  sidecar: false,
  drWithSelector: false,
  externalRegistry: false,
  serviceAccounts: [],
  metadataExchange: true,
  disableMxAlpn: false,
};

t.test('buildUpstreamTlsContext: Istio TestBuildUpstreamClusterTLSContext', async (t) => {
  const cred = 'some-fake-credential';
  const rows: Array<[string, ClientTLSSettings, Partial<UpstreamTlsOptions>, unknown]> = [
    ['DISABLE', { mode: 'DISABLE' }, {}, undefined],
    [
      'ISTIO_MUTUAL',
      { mode: 'ISTIO_MUTUAL', subjectAltNames: ['SAN'], sni: 'some-sni.com' },
      {},
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [AGENT('default')],
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: AGENT('ROOTCA'),
          },
          alpnProtocols: ['istio-peer-exchange', 'istio'],
        },
        sni: 'some-sni.com',
      },
    ],
    [
      'ISTIO_MUTUAL and H2',
      { mode: 'ISTIO_MUTUAL', subjectAltNames: ['SAN'], sni: 'some-sni.com' },
      { http2: true },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [AGENT('default')],
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: AGENT('ROOTCA'),
          },
          alpnProtocols: ['istio-peer-exchange', 'istio', 'h2'],
        },
        sni: 'some-sni.com',
      },
    ],
    [
      'ISTIO_MUTUAL with PILOT_DISABLE_MX_ALPN, H2',
      { mode: 'ISTIO_MUTUAL', sni: 's' },
      { http2: true, disableMxAlpn: true },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [AGENT('default')],
          combinedValidationContext: { defaultValidationContext: {}, validationContextSdsSecretConfig: AGENT('ROOTCA') },
          alpnProtocols: ['istio', 'h2'],
        },
        sni: 's',
      },
    ],
    [
      'SIMPLE with no certs: the system roots',
      { mode: 'SIMPLE', subjectAltNames: ['SAN'], sni: 'some-sni.com' },
      {},
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: AGENT('file-root:system'),
          },
        },
        sni: 'some-sni.com',
      },
    ],
    [
      'SIMPLE insecure: an empty validation context',
      { mode: 'SIMPLE', subjectAltNames: ['SAN'], sni: 'some-sni.com', insecureSkipVerify: true },
      {},
      { commonTlsContext: { tlsParams: TLS12_13, validationContext: {} }, sni: 'some-sni.com' },
    ],
    [
      'SIMPLE with SANs from the ServiceEntry',
      { mode: 'SIMPLE', caCertificates: '/ca.pem', sni: 'x' },
      { externalRegistry: true, serviceAccounts: ['se-san'] },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'se-san' }] },
            validationContextSdsSecretConfig: AGENT('file-root:/ca.pem'),
          },
        },
        sni: 'x',
      },
    ],
    [
      'MUTUAL with files, h2',
      {
        mode: 'MUTUAL',
        clientCertificate: '/path/to/cert',
        privateKey: '/path/to/key',
        caCertificates: 'path/to/cacert',
        subjectAltNames: ['SAN'],
        sni: 'some-sni.com',
      },
      { http2: true },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [AGENT('file-cert:/path/to/cert~/path/to/key')],
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: AGENT('file-root:path/to/cacert'),
          },
          alpnProtocols: ['h2'],
        },
        sni: 'some-sni.com',
      },
    ],
    [
      'MUTUAL with credentialName (gateway): secrets from the daemon over ADS',
      { mode: 'MUTUAL', credentialName: cred, subjectAltNames: ['SAN'], sni: 'some-sni.com' },
      {},
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [ADS(`kubernetes://${cred}`)],
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: ADS(`kubernetes://${cred}-cacert`),
          },
        },
        sni: 'some-sni.com',
      },
    ],
    [
      'MUTUAL with credentialName, h2 and no SAN',
      { mode: 'MUTUAL', credentialName: cred, sni: 'some-sni.com' },
      { http2: true },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          tlsCertificateSdsSecretConfigs: [ADS(`kubernetes://${cred}`)],
          combinedValidationContext: { defaultValidationContext: {}, validationContextSdsSecretConfig: ADS(`kubernetes://${cred}-cacert`) },
          alpnProtocols: ['h2'],
        },
        sni: 'some-sni.com',
      },
    ],
    ['MUTUAL credentialName on a sidecar: no TLS', { mode: 'MUTUAL', credentialName: 'fake-cred' }, { sidecar: true }, undefined],
    ['SIMPLE credentialName on a sidecar: no TLS', { mode: 'SIMPLE', credentialName: 'fake-cred' }, { sidecar: true }, undefined],
    [
      'SIMPLE credentialName on a sidecar, DestinationRule with workloadSelector',
      { mode: 'SIMPLE', credentialName: cred, subjectAltNames: ['SAN'], sni: 'some-sni.com' },
      { sidecar: true, drWithSelector: true },
      {
        commonTlsContext: {
          tlsParams: TLS12_13,
          combinedValidationContext: {
            defaultValidationContext: { matchSubjectAltNames: [{ exact: 'SAN' }] },
            validationContextSdsSecretConfig: ADS(`kubernetes://${cred}-cacert`),
          },
        },
        sni: 'some-sni.com',
      },
    ],
  ];
  for (const [name, tls, o, want] of rows) {
    const got = buildUpstreamTlsContext(tls, { ...base, ...o });
    t.same(got ? toJson(UpstreamTlsContextSchema, got.context) : undefined, want, name);
  }
  t.throws(
    () => buildUpstreamTlsContext({ mode: 'MUTUAL', caCertificates: '/ca' }, base),
    /client certificate and private key must not be empty/,
    'MUTUAL without a client certificate',
  );
  const auto = buildUpstreamTlsContext({ mode: 'SIMPLE' }, base)!;
  t.same([auto.autoSni, auto.autoSanValidation], [true, true], 'SIMPLE without SNI or SANs: auto_sni and auto_san_validation');
  const sniSet = buildUpstreamTlsContext({ mode: 'SIMPLE', sni: 'x' }, base)!;
  t.same([sniSet.autoSni, sniSet.autoSanValidation], [false, false], 'SNI given: neither');
  const sanSet = buildUpstreamTlsContext({ mode: 'SIMPLE', subjectAltNames: ['a'] }, base)!;
  t.same([sanSet.autoSni, sanSet.autoSanValidation], [true, false], 'SANs given: auto_sni only');
});

t.test('credential SDS: builtin:// is the proxy identity, everything else comes from the daemon over ADS', async (t) => {
  const rows: Array<[string, unknown]> = [
    ['builtin://', AGENT('default')],
    ['builtin://-cacert', AGENT('ROOTCA')],
    ['my-secret', ADS('kubernetes://my-secret')],
    ['kubernetes://ns/my-secret', ADS('kubernetes://ns/my-secret')],
    ['configmap://ns/roots', ADS('configmap://ns/roots')],
  ];
  for (const [name, want] of rows) t.same(toJson(SdsSecretConfigSchema, credentialSds(name)), want, name);
});

t.test('auto mTLS transport socket matches (Istio applyUpstreamTLSSettings)', async (t) => {
  const ctx = buildUpstreamTlsContext({ mode: 'ISTIO_MUTUAL', sni: 'outbound_.80_._.a' }, base)!.context;
  const matches = autoMtlsTransportSocketMatches(tlsTransportSocket(ctx)).map(
    (m) => toJson(Cluster_TransportSocketMatchSchema, m, { registry }) as Record<string, unknown>,
  );
  t.same(
    matches.map((m) => [
      m.name,
      m.match,
      (m.transportSocket as { name: string }).name,
      (m.transportSocket as { typedConfig: { '@type': string } }).typedConfig['@type'],
    ]),
    [
      [
        'tlsMode-istio',
        { tlsMode: 'istio' },
        'envoy.transport_sockets.tls',
        'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
      ],
      [
        'tlsMode-disabled',
        {},
        'envoy.transport_sockets.raw_buffer',
        'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer',
      ],
    ],
  );
});

t.test('endpoint tlsMode metadata (Istio GetTLSModeFromEndpointLabels, AppendLbEndpointMetadata)', async (t) => {
  const rows: Array<[Record<string, string>, string, unknown]> = [
    [{}, 'disabled', undefined],
    [{ 'security.istio.io/tlsMode': 'istio' }, 'istio', { filterMetadata: { 'envoy.transport_socket_match': { tlsMode: 'istio' } } }],
    [{ 'security.mesh.io/tlsMode': 'mesh' }, 'istio', { filterMetadata: { 'envoy.transport_socket_match': { tlsMode: 'istio' } } }],
    [{ 'security.mesh.io/tlsMode': 'disabled' }, 'disabled', undefined],
    [{ 'security.istio.io/tlsMode': 'other' }, 'other', { filterMetadata: { 'envoy.transport_socket_match': { tlsMode: 'other' } } }],
  ];
  for (const [labels, mode, md] of rows) {
    t.equal(endpointTlsMode(labels), mode, JSON.stringify(labels));
    const e = { address: '10.0.0.1', port: 80, servicePortName: 'http', hostname: 'a', namespace: 'n', labels, healthStatus: 'Healthy' as const };
    t.same(json(endpointMetadata(e)), json(md), `${JSON.stringify(labels)}: metadata`);
  }
});

// ---------------------------------------------------------------------------------------------
// inbound

t.test('filter chain match options by mode and protocol (Istio filterchain_options.go)', async (t) => {
  const mtlsHttp = ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
  const allMtls = ['istio', 'istio-peer-exchange', 'istio-http/1.0', 'istio-http/1.1', 'istio-h2'];
  const row = (protocol: string, transport: string, tls: boolean, alpn: string[] = []) => ({
    protocol,
    transportProtocol: transport,
    tls,
    applicationProtocols: alpn,
  });
  const rows: Array<[MutualTlsMode, 'HTTP' | 'TCP' | 'AUTO', unknown[]]> = [
    ['STRICT', 'HTTP', [row('HTTP', 'tls', true)]],
    ['PERMISSIVE', 'HTTP', [row('HTTP', 'tls', true, allMtls), row('HTTP', 'raw_buffer', false)]],
    ['DISABLE', 'HTTP', [row('HTTP', 'raw_buffer', false)]],
    ['STRICT', 'TCP', [row('TCP', 'tls', true)]],
    ['PERMISSIVE', 'TCP', [row('TCP', 'tls', true, allMtls), row('TCP', 'tls', false), row('TCP', 'raw_buffer', false)]],
    ['DISABLE', 'TCP', [row('TCP', 'raw_buffer', false)]],
    ['STRICT', 'AUTO', [row('HTTP', 'tls', true, mtlsHttp), row('TCP', 'tls', true)]],
    [
      'PERMISSIVE',
      'AUTO',
      [
        row('HTTP', 'tls', true, mtlsHttp),
        row('HTTP', 'raw_buffer', false, ['http/1.1', 'h2c']),
        row('TCP', 'tls', true, ['istio-peer-exchange', 'istio']),
        row('TCP', 'raw_buffer', false),
        row('TCP', 'tls', false),
      ],
    ],
    ['DISABLE', 'AUTO', [row('HTTP', 'raw_buffer', false, ['http/1.1', 'h2c']), row('TCP', 'raw_buffer', false)]],
    ['UNKNOWN', 'AUTO', [row('HTTP', 'raw_buffer', false, ['http/1.1', 'h2c']), row('TCP', 'raw_buffer', false)]],
  ];
  for (const [mode, protocol, want] of rows) t.same(json(filterChainMatchOptions(mode, protocol)), want, `${mode} ${protocol}`);
  t.same(
    filterChainMatchOptions('DISABLE', 'AUTO', true)[0]!.applicationProtocols,
    ['http/1.0', 'http/1.1', 'h2c'],
    'PILOT_HTTP10 adds http/1.0 to the plaintext match',
  );
});

t.test('inbound DownstreamTlsContext (Istio BuildInboundTLS)', async (t) => {
  const o = { trustDomains: ['cluster.local'], metadataExchange: true, disableMxAlpn: false };
  const want = (alpn: string[], min = 'TLSv1_2') => ({
    commonTlsContext: {
      tlsParams: { tlsMinimumProtocolVersion: min, tlsMaximumProtocolVersion: 'TLSv1_3', cipherSuites: MESH_MTLS_CIPHERS },
      tlsCertificateSdsSecretConfigs: [AGENT('default')],
      combinedValidationContext: {
        defaultValidationContext: { matchSubjectAltNames: [{ prefix: 'spiffe://cluster.local/' }] },
        validationContextSdsSecretConfig: AGENT('ROOTCA'),
      },
      alpnProtocols: alpn,
    },
    requireClientCertificate: true,
  });
  const j = (m: MutualTlsMode, tcp: boolean, x = {}) => {
    const c = buildInboundTls(m, tcp, { ...o, ...x });
    return c ? toJson(DownstreamTlsContextSchema, c) : undefined;
  };
  t.same(j('STRICT', false), want(['h2', 'http/1.1']), 'HTTP chains never negotiate istio ALPNs');
  t.same(j('PERMISSIVE', true), want(['istio-peer-exchange', 'h2', 'http/1.1']), 'TCP chains offer metadata exchange');
  t.same(j('STRICT', true, { disableMxAlpn: true }), want(['h2', 'http/1.1']), 'PILOT_DISABLE_MX_ALPN');
  t.same(j('STRICT', true, { metadataExchange: false }), want(['h2', 'http/1.1']), 'metadata exchange off');
  t.same(j('STRICT', false, { minProtocolVersion: 'TLSV1_3' }), want(['h2', 'http/1.1'], 'TLSv1_3'), 'meshMTLS minProtocolVersion TLSV1_3');
  t.equal(j('DISABLE', false), undefined, 'DISABLE: no TLS');
  t.equal(j('UNKNOWN', true), undefined, 'UNKNOWN: no TLS');
});

t.test('virtualInbound listener filters (Istio populateListenerFilters)', async (t) => {
  const chain = (port: number | undefined, transportProtocol = '', applicationProtocols: string[] = []) =>
    create(FilterChainSchema, { filterChainMatch: { ...(port ? { destinationPort: port } : {}), transportProtocol, applicationProtocols } });
  const names = (fs: ReturnType<typeof inboundListenerFilters>) =>
    fs
      .map((f) => [f.name, f.filterDisabled ? toJson(ListenerFilterSchema, f, { registry }) : undefined])
      .map(([n, j]) => [n, (j as { filterDisabled?: unknown } | undefined)?.filterDisabled]);
  const blackhole = chain(15006);
  // PERMISSIVE passthrough (AUTO) and a PERMISSIVE HTTP port 8080: TLS inspector everywhere except 15006,
  // HTTP inspector only where plaintext HTTP ALPNs are matched (the passthrough), so off on 8080 and 15006.
  const permissive = [
    blackhole,
    chain(undefined, 'tls', ['istio-http/1.0']),
    chain(undefined, 'raw_buffer', ['http/1.1', 'h2c']),
    chain(undefined, 'raw_buffer'),
    chain(8080, 'tls', ['istio']),
    chain(8080, 'raw_buffer'),
  ];
  t.same(names(inboundListenerFilters(permissive, originalDst())), [
    ['envoy.filters.listener.original_dst', undefined],
    ['envoy.filters.listener.tls_inspector', { destinationPortRange: { start: 15006, end: 15007 } }],
    [
      'envoy.filters.listener.http_inspector',
      { orMatch: { rules: [{ destinationPortRange: { start: 8080, end: 8081 } }, { destinationPortRange: { start: 15006, end: 15007 } }] } },
    ],
  ]);
  // DISABLE everywhere with a TCP port: no TLS chain at all, HTTP inspector for the passthrough only.
  const disabled = [blackhole, chain(undefined, 'raw_buffer', ['http/1.1', 'h2c']), chain(undefined, 'raw_buffer'), chain(9000, 'raw_buffer')];
  t.same(names(inboundListenerFilters(disabled, originalDst())), [
    ['envoy.filters.listener.original_dst', undefined],
    [
      'envoy.filters.listener.http_inspector',
      { orMatch: { rules: [{ destinationPortRange: { start: 9000, end: 9001 } }, { destinationPortRange: { start: 15006, end: 15007 } }] } },
    ],
  ]);
  // Passthrough DISABLE, port 9000 STRICT: the TLS inspector only on 9000 (not of the rest).
  const mixed = [blackhole, chain(undefined, 'raw_buffer', ['http/1.1', 'h2c']), chain(undefined, 'raw_buffer'), chain(9000, 'tls')];
  t.same(names(inboundListenerFilters(mixed, originalDst()))[1], [
    'envoy.filters.listener.tls_inspector',
    { notMatch: { destinationPortRange: { start: 9000, end: 9001 } } },
  ]);
});

// ---------------------------------------------------------------------------------------------
// identity in AuthorizationPolicy (sidecar form: authenticated principal_name)

t.test('identity principals (Istio srcPrincipal/srcNamespace generators, sidecar form)', async (t) => {
  const principals = (source: Record<string, string[]>) => {
    const p = generatePolicy(newModel('foo', { from: [{ source }] }, true), 'ALLOW');
    return (toJson(PolicySchema, create(PolicySchema, p)) as { principals: unknown[] }).principals;
  };
  const auth = (m: unknown) => ({ authenticated: { principalName: m } });
  t.same(
    principals({ principals: ['foo'] }),
    [{ andIds: { ids: [{ orIds: { ids: [auth({ exact: 'spiffe://foo' })] } }] } }],
    'principal foo → spiffe://foo',
  );
  t.same(
    principals({ principals: ['cluster.local/ns/a/sa/b', '*'] }),
    [{ andIds: { ids: [{ orIds: { ids: [auth({ exact: 'spiffe://cluster.local/ns/a/sa/b' }), auth({ safeRegex: { regex: '.+' } })] } }] } }],
    'principal * is any',
  );
  t.same(
    principals({ namespaces: ['foo'] }),
    [{ andIds: { ids: [{ orIds: { ids: [auth({ safeRegex: { regex: '.*/ns/foo/.*' } })] } }] } }],
    'namespace regex',
  );
  t.same(
    principals({ notNamespaces: ['bar*'] }),
    [{ andIds: { ids: [{ notId: { orIds: { ids: [auth({ safeRegex: { regex: '.*/ns/bar.*/.*' } })] } } }] } }],
    'notNamespaces negated',
  );
  t.same(
    principals({ notPrincipals: ['*/ns/x/sa/y'] }),
    [{ andIds: { ids: [{ notId: { orIds: { ids: [auth({ safeRegex: { regex: 'spiffe://.*/ns/x/sa/y' } })] } } }] } }],
    'notPrincipals with a leading * (Istio StringMatcherWithPrefix: regex after the spiffe:// prefix)',
  );
  const sni = generatePolicy(newModel('foo', { when: [{ key: 'connection.sni', values: ['exact.com'] }] }, true), 'ALLOW');
  t.same(
    (toJson(PolicySchema, create(PolicySchema, sni)) as { permissions: unknown[] }).permissions,
    [{ andRules: { rules: [{ orRules: { rules: [{ requestedServerName: { exact: 'exact.com' } }] } }] } }],
    'connection.sni → requested_server_name',
  );
});

t.test('istio.alpn on outbound and gateway HTTP connection managers, not inbound (Istio xdsfilters.Alpn)', async (t) => {
  const { alpnFilter } = await import('../../src/xds/gen/filters');
  const f = toJson(ListenerFilterSchema, create(ListenerFilterSchema, { name: 'x', configType: alpnFilter().configType as never }), { registry }) as {
    typedConfig: unknown;
  };
  t.same(f.typedConfig, {
    '@type': 'type.googleapis.com/istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig',
    alpnOverride: [
      { alpnOverride: ['istio-http/1.0', 'istio', 'http/1.0'] },
      { upstreamProtocol: 'HTTP11', alpnOverride: ['istio-http/1.1', 'istio', 'http/1.1'] },
      { upstreamProtocol: 'HTTP2', alpnOverride: ['istio-h2', 'istio', 'h2'] },
    ],
  });
});
