// Registries: ServiceEntry/WorkloadEntry/WorkloadGroup and orchestrator objects → services and
// endpoints (Istio serviceentry conversion and kube controller rules), change notifications, Mock.
import t from 'tap';
import { convertServiceEntries, ServiceEntryRegistry } from '../../src/discovery/registry/serviceentry';
import { convertOrchestrator } from '../../src/discovery/registry/orchestrator';
import { orchPortProtocol } from '../../src/discovery/registry/protocol';
import { buildRegistries, MemoryRegistry } from '../../src/discovery/registry';
import type { RegistryEvent } from '../../src/discovery/registry/types';
import type { Config } from '../../src/config/types';
import { cfg, ListStore, internalService } from './fixtures';

t.test('ServiceEntry hosts × ports with inline endpoints', async (t) => {
  const se = cfg('ServiceEntry', 'ns1', 'ext', {
    hosts: ['api.example.com', 'www.example.com'],
    addresses: ['240.0.0.1/32'],
    ports: [
      { number: 443, name: 'https', protocol: 'HTTPS' },
      { number: 80, name: 'http', protocol: 'HTTP', targetPort: 8080 },
    ],
    resolution: 'STATIC',
    endpoints: [{ address: '10.0.0.1', ports: { https: 8443 }, labels: { v: '1' }, locality: 'us.east.a' }, { address: '10.0.0.2' }],
  });
  const out = convertServiceEntries({ serviceEntries: [se], workloadEntries: [], workloadGroups: [], pods: [] });
  t.equal(out.length, 2);
  const api = out.find((s) => s.service.hostname === 'api.example.com')!;
  t.equal(api.service.resolution, 'ClientSide');
  t.equal(api.service.meshExternal, true, 'location defaults to MESH_EXTERNAL');
  t.same(api.service.addresses, ['240.0.0.1']);
  t.same(api.service.exportTo, ['*']);
  t.same(
    api.service.ports.map((p) => [p.name, p.protocol]),
    [
      ['https', 'HTTPS'],
      ['http', 'HTTP'],
    ],
  );
  const ports = api.endpoints.map((e) => `${e.address}:${e.port}/${e.servicePortName}`).sort();
  // endpoint `ports` map by name wins, then the SE port's targetPort, then the port number
  t.same(ports, ['10.0.0.1:8080/http', '10.0.0.1:8443/https', '10.0.0.2:443/https', '10.0.0.2:8080/http']);
  t.equal(api.endpoints.find((e) => e.address === '10.0.0.1')!.locality, 'us/east/a');
});

t.test('resolution and DNS hosts without endpoints', async (t) => {
  const mk = (resolution: 'NONE' | 'DNS' | 'DNS_ROUND_ROBIN' | undefined) =>
    convertServiceEntries({
      serviceEntries: [
        cfg('ServiceEntry', 'ns', 'x', {
          hosts: ['db.example.com'],
          ports: [{ number: 5432, name: 'tcp', protocol: 'TCP' }],
          ...(resolution ? { resolution } : {}),
          location: 'MESH_INTERNAL',
        }),
      ],
      workloadEntries: [],
      workloadGroups: [],
      pods: [],
    })[0]!;
  t.equal(mk(undefined).service.resolution, 'Passthrough');
  t.equal(mk('DNS_ROUND_ROBIN').service.resolution, 'DNSRoundRobin');
  const dns = mk('DNS');
  t.equal(dns.service.meshExternal, false);
  t.same(
    dns.endpoints.map((e) => `${e.address}:${e.port}`),
    ['db.example.com:5432'],
    'the host itself is the endpoint',
  );
  t.same(mk('NONE').endpoints, []);
});

t.test('workloadSelector picks WorkloadEntries completed by their WorkloadGroup', async (t) => {
  const se = internalService('app', 'echo', {
    ports: [{ number: 7070, name: 'grpc', protocol: 'GRPC', targetPort: 17070 }],
    workloadSelector: { labels: { app: 'echo' } },
  });
  const wg = cfg('WorkloadGroup', 'app', 'echo-vms', {
    metadata: { labels: { app: 'echo', version: 'v2' } },
    template: { serviceAccount: 'echo-sa', ports: { grpc: 27070 } },
  });
  const we1 = cfg('WorkloadEntry', 'app', 'vm-1', { address: '10.2.0.1', labels: { app: 'echo', version: 'v1' }, serviceAccount: 'vm' });
  const we2 = cfg('WorkloadEntry', 'app', 'vm-2', { address: '10.2.0.2' }, { annotations: { 'istio.io/autoRegistrationGroup': 'echo-vms' } });
  const other = cfg('WorkloadEntry', 'app', 'other', { address: '10.2.0.3', labels: { app: 'other' } });
  const elsewhere = cfg('WorkloadEntry', 'app2', 'vm-x', { address: '10.2.0.4', labels: { app: 'echo' } });
  const [s] = convertServiceEntries({ serviceEntries: [se], workloadEntries: [we1, we2, other, elsewhere], workloadGroups: [wg], pods: [] });
  const eps = s!.endpoints.map((e) => ({ a: e.address, p: e.port, v: e.labels['version'], sa: e.serviceAccount }));
  t.same(eps, [
    { a: '10.2.0.1', p: 17070, v: 'v1', sa: 'spiffe://cluster.local/ns/app/sa/vm' },
    { a: '10.2.0.2', p: 27070, v: 'v2', sa: 'spiffe://cluster.local/ns/app/sa/echo-sa' },
  ]);
  t.same(s!.service.serviceAccounts, ['spiffe://cluster.local/ns/app/sa/echo-sa', 'spiffe://cluster.local/ns/app/sa/vm']);
});

t.test('orchestrator port protocols as kube.ConvertProtocol', async (t) => {
  t.equal(orchPortProtocol(80, 'http-web', 'TCP', undefined), 'HTTP');
  t.equal(orchPortProtocol(80, 'grpc', 'TCP', undefined), 'GRPC');
  t.equal(orchPortProtocol(80, 'tcp-db', 'TCP', undefined), 'TCP');
  t.equal(orchPortProtocol(80, 'web', 'TCP', 'http2'), 'HTTP2');
  t.equal(orchPortProtocol(80, 'http', 'TCP', 'kubernetes.io/h2c'), 'HTTP2');
  t.equal(orchPortProtocol(53, 'dns', 'UDP', undefined), 'UDP');
  t.equal(orchPortProtocol(8080, 'web', 'TCP', undefined), 'UnsupportedProtocol');
  t.equal(orchPortProtocol(3306, '', 'TCP', undefined), 'TCP');
});

t.test('Services, EndpointSlices and Pods', async (t) => {
  const svc = cfg(
    'Service',
    'default',
    'reviews',
    { clusterIP: '10.96.0.10', selector: { app: 'reviews' }, ports: [{ name: 'http', port: 9080, targetPort: 9080 }] },
    { annotations: { 'networking.istio.io/exportTo': '.,istio-system' } },
  );
  const headless = cfg('Service', 'default', 'db', { clusterIP: 'None', ports: [{ name: 'tcp', port: 5432 }] });
  const ext = cfg('Service', 'default', 'web', { type: 'ExternalName', externalName: 'www.example.com', ports: [{ name: 'http', port: 80 }] });
  const pod = cfg(
    'Pod',
    'default',
    'reviews-1',
    { serviceAccountName: 'bookinfo-reviews', nodeName: 'n1' },
    { labels: { app: 'reviews', version: 'v1' }, status: { podIP: '10.1.0.5' } },
  );
  const slice = cfg(
    'EndpointSlice',
    'default',
    'reviews-abc',
    {
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 9080 }],
      endpoints: [
        { addresses: ['10.1.0.5'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'reviews-1' } },
        { addresses: ['10.1.0.6'], conditions: { ready: false, terminating: true } },
        { addresses: ['10.1.0.7'], conditions: { ready: false } },
      ],
    },
    { labels: { 'kubernetes.io/service-name': 'reviews' } },
  );
  const out = convertOrchestrator(
    { services: [svc, headless, ext], endpointSlices: [slice], pods: [pod] },
    { domain: 'example.local', nodeLocality: (n) => (n === 'n1' ? 'r1/z1/' : undefined) },
  );
  const reviews = out.find((s) => s.service.name === 'reviews')!;
  t.equal(reviews.service.hostname, 'reviews.default.svc.example.local');
  t.same(reviews.service.addresses, ['10.96.0.10']);
  t.equal(reviews.service.resolution, 'ClientSide');
  t.same(reviews.service.exportTo, ['.', 'istio-system']);
  t.same(reviews.service.ports, [{ name: 'http', port: 9080, protocol: 'HTTP' }]);
  // Istio's endpointHealthStatus counts an unset `terminating` as true: not ready and not said to be
  // staying is Terminating; UnHealthy needs `terminating: false`.
  t.same(
    reviews.endpoints.map((e) => [e.address, e.healthStatus]),
    [
      ['10.1.0.5', 'Healthy'],
      ['10.1.0.6', 'Terminating'],
      ['10.1.0.7', 'Terminating'],
    ],
  );
  const e0 = reviews.endpoints[0]!;
  t.same(e0.labels, { app: 'reviews', version: 'v1' });
  t.equal(e0.serviceAccount, 'spiffe://cluster.local/ns/default/sa/bookinfo-reviews');
  t.equal(e0.locality, 'r1/z1/');
  t.equal(out.find((s) => s.service.name === 'db')!.service.resolution, 'Passthrough');
  const web = out.find((s) => s.service.name === 'web')!;
  t.equal(web.service.resolution, 'DNS');
  t.same(
    web.endpoints.map((e) => `${e.address}:${e.port}`),
    ['www.example.com:80'],
  );
});

t.test("EndpointSlices joined with Pods as Istio's endpointslice controller and PodCache do", async (t) => {
  const svc = (labels: Record<string, string> = {}) =>
    cfg('Service', 'ns', 'web', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] }, { labels });
  const ready = [{ type: 'Ready', status: 'True' }];
  const pod = (
    name: string,
    ip: string,
    o: { ns?: string; phase?: string; ready?: boolean; deleting?: boolean; node?: string; labels?: Record<string, string> } = {},
  ) =>
    cfg(
      'Pod',
      o.ns ?? 'ns',
      name,
      { serviceAccountName: name, ...(o.node ? { nodeName: o.node } : {}) },
      {
        labels: { app: 'web', ...o.labels },
        status: { podIP: ip, phase: o.phase ?? 'Running', conditions: o.ready === false ? [{ type: 'Ready', status: 'False' }] : ready },
        ...(o.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
      },
    );
  const slice = (name: string, endpoints: Config<'EndpointSlice'>['spec']['endpoints']) =>
    cfg(
      'EndpointSlice',
      'ns',
      name,
      { addressType: 'IPv4', ports: [{ name: 'http', port: 8080 }], endpoints },
      { labels: { 'kubernetes.io/service-name': 'web' } },
    );
  const eps = (inputs: Parameters<typeof convertOrchestrator>[0], o: Parameters<typeof convertOrchestrator>[1] = {}) => {
    const missing: Array<{ slice: string; ip: string; hostname: string }> = [];
    const [s] = convertOrchestrator(inputs, o, missing);
    return { eps: s!.endpoints.map((e) => `${e.address}:${e.port} ${e.healthStatus} ${e.workloadName ?? '-'} ${e.locality ?? '-'}`), missing };
  };

  // targetRef to a Pod not known yet: left out and reported, served once the Pod is there.
  const refSlice = slice('web-1', [
    { addresses: ['10.0.0.1'], targetRef: { kind: 'Pod', name: 'web-a', namespace: 'ns' }, conditions: { ready: true } },
  ]);
  const without = eps({ services: [svc()], endpointSlices: [refSlice], pods: [] });
  t.same(without.eps, [], 'no endpoint without its Pod');
  t.same(without.missing, [{ slice: 'ns/web-1', ip: '10.0.0.1', hostname: 'web.ns.svc.cluster.local' }]);
  t.same(
    eps(
      { services: [svc()], endpointSlices: [refSlice], pods: [pod('web-a', '10.0.0.1', { node: 'n1' })] },
      { nodeLocality: (n) => (n === 'n1' ? 'r/z/s' : undefined) },
    ).eps,
    ['10.0.0.1:8080 Healthy web-a r/z/s'],
    'with the Pod: its name, and the locality of its Node',
  );
  t.same(
    eps(
      { services: [svc()], endpointSlices: [refSlice], pods: [pod('web-a', '10.0.0.1', { node: 'n1', labels: { 'istio-locality': 'x.y.z' } })] },
      { nodeLocality: () => 'r/z/s' },
    ).eps,
    ['10.0.0.1:8080 Healthy web-a x/y/z'],
    'the istio-locality label wins over the Node',
  );

  // No targetRef: metadata from a ready, running Pod with the IP in the same namespace.
  const bare = slice('web-2', [{ addresses: ['10.0.0.2'] }]);
  const byIp = (pods: ReturnType<typeof pod>[]) => eps({ services: [svc()], endpointSlices: [bare], pods }).eps;
  t.same(
    byIp([pod('old', '10.0.0.2', { phase: 'Succeeded' }), pod('new', '10.0.0.2')]),
    ['10.0.0.2:8080 Healthy new -'],
    'an IP reused after a Pod finished finds the new Pod',
  );
  t.same(byIp([pod('gone', '10.0.0.2', { deleting: true })]), ['10.0.0.2:8080 Healthy - -'], 'a Pod being deleted is not matched by IP');
  t.same(byIp([pod('unready', '10.0.0.2', { ready: false })]), ['10.0.0.2:8080 Healthy - -'], 'nor one that is not ready');
  t.same(byIp([pod('other-ns', '10.0.0.2', { ns: 'other' })]), ['10.0.0.2:8080 Healthy - -'], 'nor one in another namespace');

  // Conditions, and persistent-session services that keep draining endpoints.
  const conds = slice('web-3', [
    { addresses: ['10.0.0.3'], conditions: { ready: false, serving: true, terminating: true } },
    { addresses: ['10.0.0.4'], conditions: { ready: false, serving: false, terminating: false } },
    { addresses: ['10.0.0.5'], conditions: {} },
  ]);
  t.same(eps({ services: [svc()], endpointSlices: [conds], pods: [] }).eps, [
    '10.0.0.3:8080 Terminating - -',
    '10.0.0.4:8080 UnHealthy - -',
    '10.0.0.5:8080 Healthy - -',
  ]);
  t.same(
    eps(
      { services: [svc({ 'mesh.io/persistent-session': 'cookie' })], endpointSlices: [conds], pods: [] },
      { persistentSessionLabels: ['mesh.io/persistent-session'] },
    ).eps[0],
    '10.0.0.3:8080 Draining - -',
    'serving while terminating is Draining for a persistent-session service',
  );

  // An endpoint moving between slices is one endpoint.
  const dup = [slice('web-a', [{ addresses: ['10.0.0.6'] }]), slice('web-b', [{ addresses: ['10.0.0.6'] }])];
  t.same(eps({ services: [svc()], endpointSlices: dup, pods: [] }).eps, ['10.0.0.6:8080 Healthy - -']);
});

t.test('the live orchestrator registry recomputes what a change reaches: a Pod arriving, a Node relabelled', async (t) => {
  const { OrchestratorRegistry } = await import('../../src/discovery/registry/orchestrator');
  const store = new ListStore([
    cfg('Service', 'ns', 'web', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80 }] }),
    cfg('Service', 'ns', 'other', { ports: [{ name: 'http', port: 80 }] }),
    cfg(
      'EndpointSlice',
      'ns',
      'web-1',
      {
        addressType: 'IPv4',
        ports: [{ name: 'http', port: 8080 }],
        endpoints: [{ addresses: ['10.0.0.1'], targetRef: { kind: 'Pod', name: 'web-a', namespace: 'ns' } }],
      },
      { labels: { 'kubernetes.io/service-name': 'web' } },
    ),
  ]);
  let zone = 'z1';
  const reg = new OrchestratorRegistry(store, { nodeLocality: () => `r/${zone}/` });
  const events: RegistryEvent[] = [];
  reg.subscribe((e) => events.push(e));
  t.same(reg.endpoints('web.ns.svc.cluster.local'), [], 'the Pod is not known yet');
  t.same(
    reg.endpointsWithoutPod().map((m) => m.ip),
    ['10.0.0.1'],
  );
  store.apply(
    cfg(
      'Pod',
      'ns',
      'web-a',
      { nodeName: 'n1' },
      { labels: { app: 'web' }, status: { podIP: '10.0.0.1', phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } },
    ),
  );
  t.same(
    reg.endpoints('web.ns.svc.cluster.local').map((e) => `${e.address} ${e.locality}`),
    ['10.0.0.1 r/z1/'],
    'served once the Pod arrived',
  );
  t.same(
    events.map((e) => [...e.hostnames]),
    [['web.ns.svc.cluster.local']],
    'only the service that waited for it',
  );
  t.same(reg.endpointsWithoutPod(), []);
  zone = 'z2';
  reg.nodeChanged('n9');
  t.equal(events.length, 1, 'a Node no endpoint is on changes nothing');
  reg.nodeChanged('n1');
  t.same(
    reg.endpoints('web.ns.svc.cluster.local').map((e) => e.locality),
    ['r/z2/'],
  );
  t.same([...events[1]!.hostnames], ['web.ns.svc.cluster.local']);
  store.remove('Service', 'ns', 'web');
  t.same(
    reg.services().map((s) => s.hostname),
    ['other.ns.svc.cluster.local'],
  );
  t.equal(events[2]!.endpointsOnly, false);
  reg.close();
});

t.test('change notifications say which hosts changed and whether only endpoints did', async (t) => {
  const store = new ListStore([
    cfg('ServiceEntry', 'ns', 'a', {
      hosts: ['a.example.com'],
      ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
      resolution: 'STATIC',
      workloadSelector: { labels: { app: 'a' } },
    }),
    cfg('WorkloadEntry', 'ns', 'w1', { address: '10.0.0.1', labels: { app: 'a' } }),
  ]);
  const reg = new ServiceEntryRegistry(store);
  const events: RegistryEvent[] = [];
  reg.subscribe((e) => events.push(e));
  store.remove('WorkloadEntry', 'ns', 'w1');
  t.same(
    events.map((e) => [[...e.hostnames], e.endpointsOnly]),
    [[['a.example.com'], true]],
  );
  t.same(reg.endpoints('a.example.com'), []);
  store.apply(cfg('ServiceEntry', 'ns', 'b', { hosts: ['b.example.com'], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }] }));
  t.same([...events[1]!.hostnames], ['b.example.com']);
  t.equal(events[1]!.endpointsOnly, false);
  store.apply(cfg('VirtualService', 'ns', 'vs', { hosts: ['x'] }));
  t.equal(events.length, 2, 'unrelated kinds do not notify');
  reg.close();
});

t.test('--registries: Mock is an empty programmable registry; unknown names fail like Istio', async (t) => {
  const store = new ListStore();
  const agg = buildRegistries(store, ['Mock']);
  t.same(agg.services(), []);
  const mock = agg.getRegistries().find((r) => r.id === 'Mock') as MemoryRegistry;
  const events: RegistryEvent[] = [];
  agg.subscribe((e) => events.push(e));
  mock.addService({
    hostname: 'm.example.com',
    namespace: 'ns',
    addresses: [],
    ports: [{ name: 'http', port: 80, protocol: 'HTTP' }],
    resolution: 'ClientSide',
    meshExternal: false,
    exportTo: ['*'],
    labels: {},
    registry: 'External',
    clusterId: 'c',
    creationTime: 0,
    serviceAccounts: [],
  });
  t.same(
    agg.services().map((s) => s.hostname),
    ['m.example.com'],
  );
  t.equal(events.length, 1);
  t.throws(() => buildRegistries(store, ['Consul']), { message: 'service registry Consul is not supported' });
});
