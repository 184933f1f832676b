// The built `pilot-discovery discovery --configDir` serving sidecars over ADS in three namespaces whose
// PeerAuthentications are STRICT, PERMISSIVE and DISABLE, with a DestinationRule asking ISTIO_MUTUAL in the
// DISABLE one. Expected shapes follow Istio 1.26: auto mTLS as tlsMode-istio / tlsMode-disabled transport
// socket matches where the destination namespace is not DISABLE, user TLS as a plain transport socket,
// tlsMode metadata on endpoints whose workload has a sidecar, and virtualInbound chains split by mode.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { toJson } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { Cluster } from '../../src/gen/envoy/config/cluster/v3/cluster_pb';
import type { Listener } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import {
  DownstreamTlsContextSchema,
  UpstreamTlsContextSchema,
  type DownstreamTlsContext,
  type UpstreamTlsContext,
} from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/tls_pb';
import type { TransportSocket } from '../../src/gen/envoy/config/core/v3/base_pb';
import {
  HttpConnectionManager_ForwardClientCertDetails,
  HttpConnectionManagerSchema,
} from '../../src/gen/envoy/extensions/filters/network/http_connection_manager/v3/http_connection_manager_pb';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { CDS, EDS, LDS, XdsWatch } from '../helpers/xds';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NAMESPACES = { strict: 'STRICT', permissive: 'PERMISSIVE', disabled: 'DISABLE' } as const;
const ip = (i: number, n = 1) => `10.10.${i}.${n}`;
const host = (ns: string) => `${ns}-svc.${ns}.svc.cluster.local`;

function services(ns: string, i: number): string {
  return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: ${ns}-svc, namespace: ${ns}}
spec:
  hosts: [${host(ns)}]
  location: MESH_INTERNAL
  resolution: STATIC
  ports:
  - {number: 8080, name: http, protocol: HTTP}
  - {number: 9000, name: tcp, protocol: TCP}
  workloadSelector: {labels: {app: ${ns}-app}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: ${ns}-1, namespace: ${ns}}
spec:
  address: ${ip(i)}
  serviceAccount: ${ns}-sa
  labels: {app: ${ns}-app, security.mesh.io/tlsMode: mesh}
---
`;
}

function peerAuthentication(ns: string, mode: string): string {
  return `apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: ${ns}}
spec:
  mtls: {mode: ${mode}}
`;
}

function writeConfig(dir: string, modes: Record<string, string>): void {
  let i = 1;
  let text = '';
  for (const ns of Object.keys(NAMESPACES)) text += services(ns, i++);
  // a workload without a sidecar behind the PERMISSIVE service: plaintext by the tlsMode-disabled match
  text += `apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: permissive-2, namespace: permissive}
spec:
  address: ${ip(2, 2)}
  labels: {app: permissive-app}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: disabled-svc, namespace: disabled}
spec:
  host: ${host('disabled')}
  trafficPolicy:
    tls: {mode: ISTIO_MUTUAL}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: external, namespace: permissive}
spec:
  hosts: [api.example.com]
  location: MESH_EXTERNAL
  resolution: DNS
  ports: [{number: 443, name: https, protocol: HTTPS}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: external, namespace: permissive}
spec:
  host: api.example.com
  workloadSelector: {matchLabels: {app: permissive-app}}
  trafficPolicy:
    tls: {mode: SIMPLE, credentialName: api-ca}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: tcp-port, namespace: strict}
spec:
  selector: {matchLabels: {app: strict-app}}
  portLevelMtls:
    9000: {mode: PERMISSIVE}
`;
  writeFileSync(path.join(dir, 'services.yaml'), text);
  writeFileSync(
    path.join(dir, 'peer.yaml'),
    Object.entries(modes)
      .map(([ns, m]) => peerAuthentication(ns, m))
      .join('---\n'),
  );
}

function sidecar(ns: string, i: number) {
  return {
    id: `sidecar~${ip(i)}~${ns}-1.${ns}~${ns}.svc.cluster.local`,
    metadata: {
      NAMESPACE: ns,
      MESH_VERSION: '1.26.0',
      INSTANCE_IPS: ip(i),
      LABELS: { app: `${ns}-app` },
      CLUSTER_ID: 'Orchestrator',
      INTERCEPTION_MODE: 'REDIRECT',
    },
  };
}

function upstream(ts: TransportSocket | undefined): UpstreamTlsContext | undefined {
  return ts?.configType.case === 'typedConfig' ? anyUnpack(ts.configType.value, UpstreamTlsContextSchema) : undefined;
}
function downstream(ts: TransportSocket | undefined): DownstreamTlsContext | undefined {
  return ts?.configType.case === 'typedConfig' ? anyUnpack(ts.configType.value, DownstreamTlsContextSchema) : undefined;
}

/** What a sidecar's mTLS on a cluster looks like: matches (auto), socket (rule), or none. */
function clusterTls(c: Cluster | undefined): { kind: string; sni?: string; sans?: string[]; alpn?: string[]; matches?: unknown } {
  if (!c) return { kind: 'missing' };
  const describe = (kind: string, u: UpstreamTlsContext | undefined) => {
    const v = u?.commonTlsContext?.validationContextType;
    const sans =
      v?.case === 'combinedValidationContext' ? v.value.defaultValidationContext?.matchSubjectAltNames.map((m) => String(m.matchPattern.value)) : [];
    return { kind, sni: u?.sni, sans, alpn: u?.commonTlsContext?.alpnProtocols };
  };
  if (c.transportSocketMatches.length > 0) {
    const matches = c.transportSocketMatches.map((m) => [m.name, m.match, m.transportSocket?.name]);
    return { ...describe('auto', upstream(c.transportSocketMatches[0]!.transportSocket)), matches };
  }
  if (c.transportSocket) return describe('rule', upstream(c.transportSocket));
  return { kind: 'none' };
}

/** virtualInbound chains of a port: [transport protocol, ALPNs, TLS with client certs required?]. */
function inboundChains(l: Listener | undefined, port: number | undefined): Array<[string, string[], boolean | undefined]> {
  return (l?.filterChains ?? [])
    .filter((c) => (c.filterChainMatch?.destinationPort ?? undefined) === port && c.name !== 'virtualInbound-blackhole')
    .map((c) => [
      c.filterChainMatch?.transportProtocol ?? '',
      [...(c.filterChainMatch?.applicationProtocols ?? [])],
      c.transportSocket ? downstream(c.transportSocket)?.requireClientCertificate : undefined,
    ]);
}

const ALL_MTLS = ['istio', 'istio-peer-exchange', 'istio-http/1.0', 'istio-http/1.1', 'istio-h2'];

t.test('sidecars over ADS: auto mTLS, DestinationRule ISTIO_MUTUAL, and inbound chains for STRICT / PERMISSIVE / DISABLE', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-mtls-daemon-'));
  writeConfig(dir, NAMESPACES);
  const d: RunningDaemon = await startDaemon(['--configDir', dir]);
  const watches: Array<XdsWatch<typeof CDS | typeof LDS | typeof EDS>> = [];
  t.teardown(async () => {
    for (const w of watches) w.close();
    await d.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const watch = <T extends typeof CDS | typeof LDS | typeof EDS>(ns: string, i: number, type: T, names: string[] = []) => {
    const w = new XdsWatch(d.grpc, sidecar(ns, i), type, names);
    watches.push(w);
    return w;
  };

  // ---- clusters, as the PERMISSIVE namespace's sidecar sees them
  const cds = watch('permissive', 2, CDS);
  const cluster = (ns: string, port = 8080) => cds.resources.get(`outbound|${port}||${host(ns)}`);
  await cds.until((w) => w.resources.has(`outbound|8080||${host('disabled')}`), 'outbound clusters');
  t.same(
    clusterTls(cluster('strict')),
    {
      matches: [
        ['tlsMode-istio', { tlsMode: 'istio' }, 'envoy.transport_sockets.tls'],
        ['tlsMode-disabled', {}, 'envoy.transport_sockets.raw_buffer'],
      ],
      kind: 'auto',
      sni: `outbound_.8080_._.${host('strict')}`,
      sans: ['spiffe://cluster.local/ns/strict/sa/strict-sa'],
      alpn: ['istio-peer-exchange', 'istio'],
    },
    'STRICT destination: auto mTLS with the default SNI, the service account SAN and Istio ALPN',
  );
  t.same(clusterTls(cluster('permissive', 9000)).kind, 'auto', 'PERMISSIVE destination: auto mTLS too (TCP port)');
  t.same(
    clusterTls(cluster('disabled')),
    {
      kind: 'rule',
      sni: `outbound_.8080_._.${host('disabled')}`,
      sans: ['spiffe://cluster.local/ns/disabled/sa/disabled-sa'],
      alpn: ['istio-peer-exchange', 'istio'],
    },
    'DISABLE destination with a DestinationRule ISTIO_MUTUAL: the rule wins, a plain transport socket',
  );
  const sds = (c: Cluster | undefined) => {
    const u = upstream(c?.transportSocket);
    return u
      ? (
          toJson(UpstreamTlsContextSchema, u) as { commonTlsContext: { tlsCertificateSdsSecretConfigs: Array<{ name: string; sdsConfig: unknown }> } }
        ).commonTlsContext.tlsCertificateSdsSecretConfigs.map((s) => s.name)
      : [];
  };
  t.same(sds(cluster('disabled')), ['default'], 'the workload certificate from the agent (SDS `default`)');
  const ext = upstream(cds.resources.get('outbound|443||api.example.com')?.transportSocket);
  const extJson =
    ext &&
    (toJson(UpstreamTlsContextSchema, ext) as { commonTlsContext: { combinedValidationContext: { validationContextSdsSecretConfig: unknown } } });
  t.same(
    extJson?.commonTlsContext.combinedValidationContext.validationContextSdsSecretConfig,
    { name: 'kubernetes://api-ca-cacert', sdsConfig: { ads: {}, resourceApiVersion: 'V3' } },
    'credentialName: the CA secret from the daemon over ADS, not the agent',
  );
  t.equal(clusterTls(cds.resources.get('outbound|443||api.example.com')).kind, 'rule', "external service: the rule's TLS, never auto mTLS");

  // ---- endpoints: tlsMode metadata only where the workload has a sidecar
  const eds = watch('strict', 1, EDS, [`outbound|8080||${host('permissive')}`]);
  const cla = await eds.until((w) => w.resources.get(`outbound|8080||${host('permissive')}`), 'permissive endpoints');
  const meta = cla.endpoints
    .flatMap((l) => l.lbEndpoints)
    .map((e) => {
      const a =
        e.hostIdentifier.case === 'endpoint' && e.hostIdentifier.value.address?.address.case === 'socketAddress'
          ? e.hostIdentifier.value.address.address.value.address
          : '';
      return [a, e.metadata?.filterMetadata['envoy.transport_socket_match'] ?? null];
    })
    .sort();
  t.same(
    meta,
    [
      [ip(2), { tlsMode: 'istio' }],
      [ip(2, 2), null],
    ],
    'security.mesh.io/tlsMode: mesh → tlsMode istio; no label → no metadata',
  );

  // ---- inbound chains per namespace mode
  const lds = Object.fromEntries(Object.keys(NAMESPACES).map((ns, i) => [ns, watch(ns, i + 1, LDS)]));
  const vi = async (ns: string) => lds[ns]!.until((w) => w.resources.get('virtualInbound'), `${ns} virtualInbound`);
  const strict = await vi('strict');
  t.same(inboundChains(strict, 8080), [['tls', [], true]], 'STRICT HTTP port: one mTLS chain requiring client certificates');
  t.same(
    inboundChains(strict, 9000),
    [
      ['tls', ALL_MTLS, true],
      ['tls', [], undefined],
      ['raw_buffer', [], undefined],
    ],
    'port-level PERMISSIVE on 9000 overrides the namespace STRICT',
  );
  t.same(
    inboundChains(strict, undefined),
    [
      ['tls', ['istio-http/1.0', 'istio-http/1.1', 'istio-h2'], true],
      ['tls', [], true],
    ],
    'STRICT passthrough: mTLS only',
  );
  const http = strict.filterChains.find((c) => c.filterChainMatch?.destinationPort === 8080)!;
  const dtls = toJson(DownstreamTlsContextSchema, downstream(http.transportSocket)!) as { commonTlsContext: Record<string, unknown> };
  t.same(dtls.commonTlsContext.alpnProtocols, ['h2', 'http/1.1'], 'HTTP chain ALPN');
  t.same(
    (dtls.commonTlsContext.combinedValidationContext as { defaultValidationContext: unknown }).defaultValidationContext,
    { matchSubjectAltNames: [{ prefix: 'spiffe://cluster.local/' }] },
    'peers of the trust domain',
  );
  t.same(
    strict.listenerFilters.map((f) => f.name),
    ['envoy.filters.listener.original_dst', 'envoy.filters.listener.tls_inspector'],
    'no chain matches plaintext HTTP ALPNs under STRICT: no HTTP inspector',
  );

  const httpFilterNames = (l: Listener | undefined) =>
    (l?.filterChains ?? [])
      .flatMap((c) => c.filters)
      .filter((f) => f.name === 'envoy.filters.network.http_connection_manager')
      .map((f) =>
        f.configType.case === 'typedConfig' ? anyUnpack(f.configType.value, HttpConnectionManagerSchema)!.httpFilters.map((h) => h.name) : [],
      );
  const outbound = await lds.strict!.until((w) => w.resources.get('0.0.0.0_8080'), 'the outbound HTTP listener');
  t.ok(
    httpFilterNames(outbound).every((names) => names.includes('istio.alpn')),
    'outbound HCMs carry istio.alpn',
  );
  t.ok(
    httpFilterNames(strict).every((names) => !names.includes('istio.alpn')),
    'inbound HCMs do not',
  );
  const hcm = strict.filterChains.find((c) => c.filterChainMatch?.destinationPort === 8080)!.filters.at(-1)!.configType;
  const inboundHcm = anyUnpack(hcm.case === 'typedConfig' ? hcm.value : (undefined as never), HttpConnectionManagerSchema)!;
  t.same(
    [
      inboundHcm.forwardClientCertDetails,
      inboundHcm.setCurrentClientCertDetails?.subject,
      inboundHcm.setCurrentClientCertDetails?.uri,
      inboundHcm.setCurrentClientCertDetails?.dns,
      inboundHcm.setCurrentClientCertDetails?.cert,
    ],
    [HttpConnectionManager_ForwardClientCertDetails.APPEND_FORWARD, true, true, true, false],
    'x-forwarded-client-cert: APPEND_FORWARD with Subject, URI, DNS',
  );

  const permissive = await vi('permissive');
  t.same(
    inboundChains(permissive, 8080),
    [
      ['tls', ALL_MTLS, true],
      ['raw_buffer', [], undefined],
    ],
    'PERMISSIVE HTTP port: mTLS and plaintext',
  );
  t.same(
    inboundChains(permissive, undefined).map((c) => c[0]),
    ['tls', 'raw_buffer', 'tls', 'raw_buffer', 'tls'],
    "PERMISSIVE passthrough: Istio's five chains",
  );

  const disabled = await vi('disabled');
  t.same(inboundChains(disabled, 8080), [['raw_buffer', [], undefined]], 'DISABLE HTTP port: plaintext only');
  t.same(inboundChains(disabled, 9000), [['raw_buffer', [], undefined]], 'DISABLE TCP port: plaintext only');
  t.notOk(
    disabled.listenerFilters.some((f) => f.name === 'envoy.filters.listener.tls_inspector'),
    'no TLS inspector when no chain matches TLS',
  );

  // ---- a change: the STRICT namespace turns DISABLE; its clients stop auto mTLS, its inbound goes plaintext
  writeConfig(dir, { ...NAMESPACES, strict: 'DISABLE' });
  await cds.until(
    (w) => clusterTls(w.resources.get(`outbound|8080||${host('strict')}`)).kind === 'none',
    'auto mTLS off for the now-DISABLE namespace',
  );
  const after = await lds.strict!.until((w) => {
    const l = w.resources.get('virtualInbound');
    return l && inboundChains(l, 8080)[0]?.[0] === 'raw_buffer' ? l : undefined;
  }, 'strict sidecar inbound turned plaintext');
  t.same(inboundChains(after, 8080), [['raw_buffer', [], undefined]], 'pushed without a restart');
  t.same(inboundChains(after, 9000).length, 3, 'the port-level PERMISSIVE stays');
});
