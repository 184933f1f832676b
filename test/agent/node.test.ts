// Node identity and metadata as Istio's agent builds them (pilot-agent initProxy, bootstrap.GetNodeMetaData):
// the `type~ip~pod.ns~domain` node ID, META/METAJSON env, the downward-API labels file, locality, the
// service cluster name, and the checks of the daemon's parser (src/discovery/proxy.ts) on the result.
import t from 'tap';
import { defaultProxyConfig, type ProxyConfig } from '../../src/config/proxyconfig';
import {
  allIpv6,
  localityFromLabel,
  nodeMetadata,
  parseDownwardApi,
  parseNodeType,
  pilotSan,
  privateIps,
  proxyIdentity,
  serviceCluster,
  type NodeMetadataInputs,
} from '../../src/agent/node';
import { parseNodeMetadata, parseServiceNode } from '../../src/discovery/proxy';
import { gatewayNodeInputs } from './helpers';

t.test('proxy type argument', async (t) => {
  t.equal(parseNodeType('router'), 'router');
  t.equal(parseNodeType('sidecar'), 'sidecar');
  t.throws(() => parseNodeType('waypoint'), { message: 'Invalid proxy Type: waypoint' });
});

t.test('node ID: type~ip~pod.namespace~domain, INSTANCE_IP first', async (t) => {
  const id = proxyIdentity({
    type: 'router',
    podName: 'gw-0',
    podNamespace: 'mesh-system',
    instanceIp: '10.1.2.3',
    domain: '',
    machineIps: ['192.168.1.5', '10.1.2.3'],
  });
  t.equal(id.nodeId, 'router~10.1.2.3~gw-0.mesh-system~mesh-system.svc.cluster.local');
  t.same(id.ipAddresses, ['10.1.2.3', '192.168.1.5'], 'duplicates dropped, the instance IP stays first');
  t.equal(
    proxyIdentity({ type: 'sidecar', podName: 'a', podNamespace: 'b', instanceIp: '', domain: 'corp.example', machineIps: [] }).nodeId,
    'sidecar~127.0.0.1~a.b~corp.example',
    '--domain wins; no addresses → loopback',
  );
  t.equal(
    proxyIdentity({ type: 'sidecar', podName: 'a', podNamespace: 'b', instanceIp: 'not-an-ip', domain: '', machineIps: ['10.0.0.9'] }).ipAddresses[0],
    '10.0.0.9',
    'an invalid INSTANCE_IP is ignored',
  );
  t.ok(allIpv6(['fd00::1', '::1']));
  t.notOk(allIpv6(['fd00::1', '10.0.0.1']));
});

t.test('private IPs skip loopback and link-local', async (t) => {
  t.same(
    privateIps({
      lo: [
        { address: '127.0.0.1', family: 'IPv4', internal: true },
        { address: '::1', family: 'IPv6', internal: true },
      ],
      eth0: [
        { address: '10.0.0.4', family: 'IPv4', internal: false },
        { address: 'fe80::1', family: 'IPv6', internal: false },
        { address: 'fd00::4', family: 'IPv6', internal: false },
        { address: '169.254.3.3', family: 'IPv4', internal: false },
      ],
    }),
    ['10.0.0.4', 'fd00::4'],
  );
});

t.test('downward API: key="value" lines with Go quoting', async (t) => {
  t.same(parseDownwardApi('app="reviews"\nversion="v1"\nnote="a \\"quoted\\"\\n\\u00e9"\n\n', 'labels'), {
    app: 'reviews',
    version: 'v1',
    note: 'a "quoted"\né',
  });
  t.throws(() => parseDownwardApi('app=reviews\n', './etc/mesh/pod/labels'), {
    message: './etc/mesh/pod/labels:1: failed to unquote reviews: invalid syntax',
  });
});

t.test('locality from the istio-locality label', async (t) => {
  t.same(localityFromLabel('us-east.us-east-1a.rack7'), {
    label: 'us-east/us-east-1a/rack7',
    locality: { region: 'us-east', zone: 'us-east-1a', subZone: 'rack7' },
  });
  t.same(localityFromLabel(undefined), { label: '' });
});

function inputs(over: Partial<NodeMetadataInputs> = {}, pc: Partial<ProxyConfig> = {}): NodeMetadataInputs {
  const proxyConfig = { ...defaultProxyConfig(), serviceCluster: 'mesh-proxy', ...pc };
  return gatewayNodeInputs({ proxyConfig, instanceIp: '127.0.0.1', machineIps: ['10.0.0.4'] }, over);
}

t.test('metadata from env: MESH_META_* strings, MESH_METAJSON_* JSON, proxyMetadata', async (t) => {
  const n = nodeMetadata(
    inputs(
      {
        env: {
          POD_NAME: 'gw-0',
          POD_NAMESPACE: 'mesh-system',
          SERVICE_ACCOUNT: 'gw-sa',
          MESH_META_CLUSTER_ID: 'east',
          MESH_META_POD_PORTS: '[{"containerPort":8080}]',
          MESH_META_INTERCEPTION_MODE: 'REDIRECT',
          ISTIO_META_MESH_ID: 'istio-spelling',
          ISTIO_META_CLUSTER_ID: 'loses',
          MESH_METAJSON_LABELS: '{"mesh":"ingressgateway","app":"gw"}',
          MESH_METAJSON_BROKEN: '{not json',
        },
      },
      { proxyMetadata: { MESH_META_WORKLOAD_NAME: 'gateway', NOT_META: 'x' } },
    ),
  );
  const md = n.metadata;
  t.equal(md['CLUSTER_ID'], 'east', 'MESH_META_ wins over ISTIO_META_');
  t.equal(md['MESH_ID'], 'istio-spelling', "Istio's prefix is accepted");
  t.equal(md['POD_PORTS'], '[{"containerPort":8080}]', 'META values stay strings');
  t.equal(md['INTERCEPTION_MODE'], 'REDIRECT');
  t.equal(md['WORKLOAD_NAME'], 'gateway', 'proxyMetadata META entries become metadata');
  t.equal(md['NOT_META'], undefined);
  t.same(md['LABELS'], { mesh: 'ingressgateway', app: 'gw' }, 'METAJSON_LABELS → LABELS');
  t.equal(md['NAMESPACE'], 'mesh-system');
  t.equal(md['NAME'], 'gw-0');
  t.equal(md['SERVICE_ACCOUNT'], 'gw-sa');
  t.equal(md['INSTANCE_IPS'], '127.0.0.1,10.0.0.4');
  t.equal(md['MESH_VERSION'], '1.26.0');
  t.equal(md['ISTIO_VERSION'], '1.26.0');
  t.equal(md['ENVOY_STATUS_PORT'], 15021);
  t.equal(md['ENVOY_PROMETHEUS_PORT'], 15090);
  t.equal(md['EXIT_ON_ZERO_ACTIVE_CONNECTIONS'], undefined, 'omitted when off');
  t.equal((md['PROXY_CONFIG'] as Record<string, unknown>)['discoveryAddress'], 'meshd.mesh-system.svc:15012');
  t.equal(md['BROKEN'], undefined);
  t.match(n.warnings, [/MESH_METAJSON_BROKEN \[\{not json\] failed json unmarshal/]);
  t.equal(n.cluster, 'gw.mesh-system', 'default service cluster: app label + namespace');
  t.same(
    n.info,
    [
      "node metadata read from Istio's variable names ISTIO_META_MESH_ID (mesh's own: MESH_META_MESH_ID); ISTIO_META_CLUSTER_ID ignored: the MESH_ variable of the same name is set and wins",
    ],
    'one line says which spelling was read and which lost',
  );

  // The daemon reads what the agent wrote.
  const proxy = parseServiceNode(n.id, parseNodeMetadata(md as Record<string, unknown>));
  t.equal(proxy.type, 'router');
  t.equal(proxy.namespace, 'mesh-system');
  t.same(proxy.labels, { mesh: 'ingressgateway', app: 'gw' });
  t.equal(proxy.metadata.clusterId, 'east');
  t.same(proxy.ipAddresses, ['127.0.0.1', '10.0.0.4']);
  t.equal(proxy.metadata.meshVersion, '1.26.0');
});

t.test("Istio's ISTIO_METAJSON_LABELS alone gives the labels; no note when only ours are used", async (t) => {
  const istio = nodeMetadata(
    inputs({ env: { POD_NAMESPACE: 'mesh-system', ISTIO_METAJSON_LABELS: '{"istio":"ingressgateway"}', ISTIO_METAJSON_BAD: '[' } }),
  );
  t.same(istio.labels, { istio: 'ingressgateway' });
  t.same(istio.metadata['LABELS'], { istio: 'ingressgateway' });
  t.match(istio.warnings, [/^Env variable ISTIO_METAJSON_BAD \[\[\] failed json unmarshal/], 'the warning names the variable as written');
  t.same(istio.info, [
    "node metadata read from Istio's variable names ISTIO_METAJSON_BAD, ISTIO_METAJSON_LABELS (mesh's own: MESH_METAJSON_BAD, MESH_METAJSON_LABELS)",
  ]);
  const ours = nodeMetadata(inputs({ env: { MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}' } }));
  t.same(ours.info, []);
});

t.test('labels file overrides METAJSON labels, drops pod-template-hash, sets locality', async (t) => {
  const n = nodeMetadata(
    inputs({
      env: { POD_NAMESPACE: 'demo', MESH_METAJSON_LABELS: '{"app":"static","team":"a"}' },
      podLabels: { app: 'reviews', 'pod-template-hash': '5d4f8', 'istio-locality': 'eu.eu-1.r1' },
      podAnnotations: { 'sidecar.mesh.io/status': '{}' },
      exitOnZeroActiveConnections: true,
      stsPort: 15463,
      pilotSan: ['meshd.mesh-system.svc'],
      outlierLogPath: '/dev/stdout',
    }),
  );
  t.same(n.metadata['LABELS'], { app: 'reviews', team: 'a', 'istio-locality': 'eu/eu-1/r1' });
  t.same(n.locality, { region: 'eu', zone: 'eu-1', subZone: 'r1' });
  t.same(n.metadata['ANNOTATIONS'], { 'sidecar.mesh.io/status': '{}' });
  t.equal(n.metadata['EXIT_ON_ZERO_ACTIVE_CONNECTIONS'], 'true');
  t.equal(n.metadata['STS_PORT'], '15463');
  t.same(n.metadata['PILOT_SAN'], ['meshd.mesh-system.svc']);
  t.equal(n.metadata['OUTLIER_LOG_PATH'], '/dev/stdout');
  t.equal(n.cluster, 'reviews.demo');
});

t.test('service cluster: Istio getServiceCluster', async (t) => {
  const pc = (over: Partial<ProxyConfig>) => ({ ...defaultProxyConfig(), ...over });
  t.equal(serviceCluster(pc({ serviceCluster: 'custom' }), { app: 'x' }, '', 'ns'), 'custom', 'an explicit name wins');
  t.equal(serviceCluster(pc({ serviceCluster: 'mesh-proxy' }), {}, 'wl', 'ns'), 'wl.ns', 'workload name + namespace');
  t.equal(serviceCluster(pc({ serviceCluster: 'istio-proxy' }), {}, '', 'ns'), 'mesh-proxy.ns', "Istio's default name counts as the default");
  t.equal(serviceCluster(pc({ serviceCluster: '' }), {}, '', ''), 'mesh-proxy');
  t.equal(serviceCluster(pc({ tracingServiceName: 'CANONICAL_NAME_ONLY' }), { 'service.istio.io/canonical-name': 'cn', app: 'a' }, '', 'ns'), 'cn');
  t.equal(serviceCluster(pc({ tracingServiceName: 'CANONICAL_NAME_AND_NAMESPACE' }), { app: 'a' }, '', 'ns'), 'a.ns');
});

t.test('pilot SAN: the discovery host, localhost meaning the in-cluster daemon', async (t) => {
  t.equal(pilotSan('meshd.mesh-system.svc:15012'), 'meshd.mesh-system.svc');
  t.equal(pilotSan('localhost:15012'), 'meshd.mesh-system.svc');
  t.equal(pilotSan('10.0.0.1:15012'), '10.0.0.1');
});
