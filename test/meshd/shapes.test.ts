// The debug JSON shapes against Istio's types (pilot/pkg/xds/debug.go, pilot/pkg/model): Go field names
// for untagged fields, json tags, omitempty, enum values.
import t from 'tap';
import { adszJson, configJson, connectionsJson, endpointShardzJson, findConnection, registryzJson, synczJson } from '../../src/meshd/debug/shapes';
import type { XdsConnectionInfo } from '../../src/meshd/providers';
import { endpoint, proxy, service, virtualService } from './helpers';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const EDS = 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment';
const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';

function conn(over: Partial<XdsConnectionInfo> = {}): XdsConnectionInfo {
  return {
    id: 'sidecar~10.0.0.7~reviews-v1-abc.default~default.svc.cluster.local-3',
    proxy: proxy(),
    peerAddress: '10.0.0.7:41000',
    connectedAt: Date.UTC(2024, 4, 6, 7, 8, 9, 500),
    watched: [
      { typeUrl: CDS, resourceNames: [], nonceSent: 'c2', nonceAcked: 'c1', lastSendTime: Date.UTC(2024, 4, 6, 7, 8, 10) },
      {
        typeUrl: EDS,
        resourceNames: ['outbound|9080||reviews.default.svc.cluster.local', 'outbound|80||a.b'],
        nonceSent: 'e1',
        lastError: 'bad cluster',
      },
    ],
    ...over,
  };
}

t.test('registryz: model.Service JSON', async (t) => {
  const [svc] = registryzJson([service()]);
  t.same(svc, {
    Attributes: {
      ServiceRegistry: 'Orchestrator',
      Name: 'reviews',
      Namespace: 'default',
      Labels: { app: 'reviews' },
      ExportTo: { '*': {} }, // sets.Set marshals as a map of empty structs
      LabelSelectors: { app: 'reviews' },
    },
    hostname: 'reviews.default.svc.cluster.local',
    ports: [{ name: 'http', port: 9080, protocol: 'HTTP' }],
    serviceAccounts: ['spiffe://cluster.local/ns/default/sa/reviews'],
    clusterVIPs: { Addresses: { Orchestrator: ['10.96.0.10'] } },
    creationTime: '2024-01-02T03:04:05.12Z',
    defaultAddress: '10.96.0.10',
    Resolution: 0, // ClientSideLB
    MeshExternal: false,
  });
  const [se] = registryzJson([
    service({
      hostname: 'api.example.com',
      name: undefined,
      addresses: [],
      resolution: 'DNS',
      meshExternal: true,
      registry: 'External',
      serviceAccounts: [],
      labels: {},
      selector: undefined,
    }),
  ]);
  t.equal((se!.Attributes as Record<string, unknown>).Name, 'api.example.com', 'ServiceEntry services are named by host');
  t.equal(se!.Resolution, 1, 'DNSLB');
  t.equal(se!.MeshExternal, true);
  t.equal(se!.defaultAddress, '0.0.0.0', 'no VIP: the unspecified address');
  t.same(se!.clusterVIPs, { Addresses: null });
  t.notOk('serviceAccounts' in se!, 'omitempty');
  t.equal((se!.Attributes as Record<string, unknown>).Labels, null, 'nil map');
  t.equal(registryzJson([service({ resolution: 'Passthrough' })])[0]!.Resolution, 2);
  t.equal(registryzJson([service({ resolution: 'DNSRoundRobin' })])[0]!.Resolution, 3);
});

t.test('endpointShardz: hostname → namespace → shards of IstioEndpoints', async (t) => {
  const out = endpointShardzJson(
    [service()],
    [endpoint(), endpoint({ address: '10.0.0.8', healthStatus: 'Draining', labels: {}, serviceAccount: undefined })],
  );
  const shard = (out['reviews.default.svc.cluster.local'] as Record<string, { Shards: Record<string, unknown[]>; ServiceAccounts: unknown }>)
    .default!;
  t.same(Object.keys(shard.Shards), ['Orchestrator/Orchestrator'], 'ShardKey is provider/cluster');
  const [first, second] = shard.Shards['Orchestrator/Orchestrator'] as Array<Record<string, unknown>>;
  t.same(first, {
    Labels: { app: 'reviews', version: 'v1', 'security.istio.io/tlsMode': 'istio' },
    Addresses: ['10.0.0.7'],
    ServicePortName: 'http',
    ServiceAccount: 'spiffe://cluster.local/ns/default/sa/reviews',
    Network: '',
    Locality: { Label: 'us-east1/us-east1-b/', ClusterID: 'Orchestrator' },
    EndpointPort: 9080,
    LbWeight: 0,
    TLSMode: 'istio',
    Namespace: 'default',
    WorkloadName: 'reviews-v1',
    HealthStatus: 1, // Healthy
  });
  t.equal(second!.HealthStatus, 3, 'Draining');
  t.equal(second!.TLSMode, 'disabled', 'no tlsMode label');
  t.same(shard.ServiceAccounts, { 'spiffe://cluster.local/ns/default/sa/reviews': {} });
});

t.test('configz: configs as Kubernetes objects', async (t) => {
  t.same(configJson(virtualService('reviews-route')), {
    kind: 'VirtualService',
    apiVersion: 'networking.istio.io/v1',
    metadata: { name: 'reviews-route', namespace: 'default', resourceVersion: '7', creationTimestamp: '2024-01-02T03:04:05Z' },
    spec: { hosts: ['reviews'], http: [{ route: [{ destination: { host: 'reviews' } }] }] },
  });
});

t.test('syncz: SyncStatus with omitempty and per-type resources', async (t) => {
  const [s] = synczJson([conn()]);
  t.same(s, {
    cluster_id: 'Orchestrator',
    proxy: 'reviews-v1-abc.default',
    proxy_type: 'sidecar',
    istio_version: '1.26.0',
    cluster_sent: 'c2',
    cluster_acked: 'c1',
    endpoint_sent: 'e1',
    resources: {
      [CDS]: { sent: 'c2', acked: 'c1', sentTime: '2024-05-06T07:08:10Z' },
      [EDS]: { sent: 'e1', sentTime: '0001-01-01T00:00:00Z', lastError: 'bad cluster' },
    },
  });
  t.same(synczJson([conn()], 'other-ns'), [], '?namespace= filters by proxy namespace');
  t.same(synczJson([]), [], 'an empty array, not null');
});

t.test('adsz and connections: AdsClients', async (t) => {
  t.same(adszJson([]), { totalClients: 0 }, 'clients is omitempty');
  t.same(adszJson([conn()]), {
    totalClients: 1,
    clients: [
      {
        connectionId: 'sidecar~10.0.0.7~reviews-v1-abc.default~default.svc.cluster.local-3',
        connectedAt: '2024-05-06T07:08:09.5Z',
        address: '10.0.0.7:41000',
        labels: { app: 'reviews' },
        metadata: { NAMESPACE: 'default', CLUSTER_ID: 'Orchestrator', ISTIO_VERSION: '1.26.0', LABELS: { app: 'reviews' } },
        watches: { [CDS]: [], [EDS]: ['outbound|80||a.b', 'outbound|9080||reviews.default.svc.cluster.local'] },
      },
    ],
  });
  t.same(connectionsJson([conn({ id: 'b-2' }), conn({ id: 'a-1', watched: [{ typeUrl: LDS, resourceNames: [] }] })]), {
    totalClients: 2,
    clients: [
      { connectionId: 'a-1', connectedAt: '2024-05-06T07:08:09.5Z', address: '10.0.0.7:41000' },
      { connectionId: 'b-2', connectedAt: '2024-05-06T07:08:09.5Z', address: '10.0.0.7:41000' },
    ],
  });
});

t.test('proxyID lookup: connection ID contains the query value', async (t) => {
  const conns = [conn({ id: 'router~10.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local-1' }), conn()];
  t.equal(findConnection(conns, 'gw-0.mesh-system')?.id, 'router~10.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local-1');
  t.equal(findConnection(conns, 'reviews-v1-abc')?.id, conn().id);
  t.equal(findConnection(conns, 'nope'), undefined);
});
