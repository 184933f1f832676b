// Node ID `type~ip~id~domain` and node metadata, with Istio's rules and error texts
// (model.ParseServiceNodeWithMetadata, GetProxyConfigNamespace).
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { parseNodeMetadata, parseServiceNode, proxyFromNode, ProxyParseError } from '../../src/discovery/proxy';

t.test('a router node ID', async (t) => {
  const p = proxyFromNode(
    create(NodeSchema, {
      id: 'router~10.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local',
      metadata: { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system', CLUSTER_ID: 'Kubernetes', ISTIO_VERSION: '1.26.0' },
    }),
  );
  t.equal(p.type, 'router');
  t.same(p.ipAddresses, ['10.0.0.1']);
  t.equal(p.id, 'gw-0.mesh-system');
  t.equal(p.dnsDomain, 'mesh-system.svc.cluster.local');
  t.equal(p.namespace, 'mesh-system');
  t.same(p.labels, { istio: 'ingressgateway' });
  t.equal(p.metadata.clusterId, 'Kubernetes');
  t.equal(p.metadata.meshVersion, '1.26.0');
  t.equal(p.proxyless, false);
});

t.test('metadata fields and proxyless gRPC', async (t) => {
  const md = parseNodeMetadata({
    GENERATOR: 'grpc',
    INSTANCE_IPS: '10.1.1.1,fd00::1',
    INTERCEPTION_MODE: 'REDIRECT',
    WORKLOAD_NAME: 'echo',
    SERVICE_ACCOUNT: 'echo-sa',
    DNS_CAPTURE: 'true',
    MESH_VERSION: '1.26.1',
  });
  const p = parseServiceNode('sidecar~10.9.9.9~echo-1.app~app.svc.cluster.local', md);
  t.equal(p.proxyless, true);
  t.same(p.ipAddresses, ['10.1.1.1', 'fd00::1'], 'INSTANCE_IPS win over the ID');
  t.equal(p.namespace, 'app', 'namespace from the DNS domain without NAMESPACE');
  t.equal(md.interceptionMode, 'REDIRECT');
  t.equal(md.workloadName, 'echo');
  t.equal(md.serviceAccount, 'echo-sa');
  t.equal(md.dnsCapture, true);
  t.equal(md.meshVersion, '1.26.1');
});

t.test('bad node IDs fail with Istio messages', async (t) => {
  const md = parseNodeMetadata({});
  t.throws(() => parseServiceNode('sidecar~10.0.0.1~x', md), new ProxyParseError('missing parts in the service node "sidecar~10.0.0.1~x"'));
  t.throws(
    () => parseServiceNode('ingress~10.0.0.1~x.ns~ns.svc.cluster.local', md),
    new ProxyParseError('invalid node type (valid types: [sidecar router]) in the service node "ingress~10.0.0.1~x.ns~ns.svc.cluster.local"'),
  );
  t.throws(
    () => parseServiceNode('sidecar~not-an-ip~x.ns~ns.svc.cluster.local', md),
    new ProxyParseError('no valid IP address in the service node id or metadata'),
  );
  t.throws(() => proxyFromNode(undefined), { message: 'node is required in the first request of a stream' });
});
