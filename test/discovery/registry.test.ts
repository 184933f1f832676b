// Registries: ServiceEntry/WorkloadEntry/WorkloadGroup and orchestrator objects → services and
// endpoints (Istio serviceentry conversion and kube controller rules), change notifications, Mock.
import t from 'tap';
import { convertServiceEntries, ServiceEntryRegistry } from '../../src/discovery/registry/serviceentry';
import { convertOrchestrator } from '../../src/discovery/registry/orchestrator';
import { orchPortProtocol } from '../../src/discovery/registry/protocol';
import { buildRegistries, MemoryRegistry } from '../../src/discovery/registry';
import type { RegistryEvent } from '../../src/discovery/registry/types';
import { cfg, ListStore } from './fixtures';

t.test('ServiceEntry hosts × ports with inline endpoints', async (t) => {
  const se = cfg('ServiceEntry', 'ns1', 'ext', {
    hosts: ['api.example.com', 'www.example.com'],
    addresses: ['240.0.0.1/32'],
    ports: [{ number: 443, name: 'https', protocol: 'HTTPS' }, { number: 80, name: 'http', protocol: 'HTTP', targetPort: 8080 }],
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
  t.same(api.service.ports.map((p) => [p.name, p.protocol]), [['https', 'HTTPS'], ['http', 'HTTP']]);
  const ports = api.endpoints.map((e) => `${e.address}:${e.port}/${e.servicePortName}`).sort();
  // endpoint `ports` map by name wins, then the SE port's targetPort, then the port number
  t.same(ports, ['10.0.0.1:8080/http', '10.0.0.1:8443/https', '10.0.0.2:443/https', '10.0.0.2:8080/http']);
  t.equal(api.endpoints.find((e) => e.address === '10.0.0.1')!.locality, 'us/east/a');
});

t.test('resolution and DNS hosts without endpoints', async (t) => {
  const mk = (resolution: 'NONE' | 'DNS' | 'DNS_ROUND_ROBIN' | undefined) =>
    convertServiceEntries({
      serviceEntries: [cfg('ServiceEntry', 'ns', 'x', { hosts: ['db.example.com'], ports: [{ number: 5432, name: 'tcp', protocol: 'TCP' }], ...(resolution ? { resolution } : {}), location: 'MESH_INTERNAL' })],
      workloadEntries: [],
      workloadGroups: [],
      pods: [],
    })[0]!;
  t.equal(mk(undefined).service.resolution, 'Passthrough');
  t.equal(mk('DNS_ROUND_ROBIN').service.resolution, 'DNSRoundRobin');
  const dns = mk('DNS');
  t.equal(dns.service.meshExternal, false);
  t.same(dns.endpoints.map((e) => `${e.address}:${e.port}`), ['db.example.com:5432'], 'the host itself is the endpoint');
  t.same(mk('NONE').endpoints, []);
});

t.test('workloadSelector picks WorkloadEntries completed by their WorkloadGroup', async (t) => {
  const se = cfg('ServiceEntry', 'app', 'echo', {
    hosts: ['echo.app.svc.cluster.local'],
    ports: [{ number: 7070, name: 'grpc', protocol: 'GRPC', targetPort: 17070 }],
    resolution: 'STATIC',
    location: 'MESH_INTERNAL',
    workloadSelector: { labels: { app: 'echo' } },
  });
  const wg = cfg('WorkloadGroup', 'app', 'echo-vms', { metadata: { labels: { app: 'echo', version: 'v2' } }, template: { serviceAccount: 'echo-sa', ports: { grpc: 27070 } } });
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
  const svc = cfg('Service', 'default', 'reviews', { clusterIP: '10.96.0.10', selector: { app: 'reviews' }, ports: [{ name: 'http', port: 9080, targetPort: 9080 }] }, { annotations: { 'networking.istio.io/exportTo': '.,istio-system' } });
  const headless = cfg('Service', 'default', 'db', { clusterIP: 'None', ports: [{ name: 'tcp', port: 5432 }] });
  const ext = cfg('Service', 'default', 'web', { type: 'ExternalName', externalName: 'www.example.com', ports: [{ name: 'http', port: 80 }] });
  const pod = cfg('Pod', 'default', 'reviews-1', { serviceAccountName: 'bookinfo-reviews', nodeName: 'n1' }, { labels: { app: 'reviews', version: 'v1' }, status: { podIP: '10.1.0.5' } });
  const slice = cfg('EndpointSlice', 'default', 'reviews-abc', {
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 9080 }],
    endpoints: [
      { addresses: ['10.1.0.5'], conditions: { ready: true }, targetRef: { kind: 'Pod', name: 'reviews-1' } },
      { addresses: ['10.1.0.6'], conditions: { ready: false, terminating: true } },
      { addresses: ['10.1.0.7'], conditions: { ready: false } },
    ],
  }, { labels: { 'kubernetes.io/service-name': 'reviews' } });
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
  t.same(reviews.endpoints.map((e) => [e.address, e.healthStatus]), [['10.1.0.5', 'Healthy'], ['10.1.0.6', 'Terminating'], ['10.1.0.7', 'UnHealthy']]);
  const e0 = reviews.endpoints[0]!;
  t.same(e0.labels, { app: 'reviews', version: 'v1' });
  t.equal(e0.serviceAccount, 'spiffe://cluster.local/ns/default/sa/bookinfo-reviews');
  t.equal(e0.locality, 'r1/z1/');
  t.equal(out.find((s) => s.service.name === 'db')!.service.resolution, 'Passthrough');
  const web = out.find((s) => s.service.name === 'web')!;
  t.equal(web.service.resolution, 'DNS');
  t.same(web.endpoints.map((e) => `${e.address}:${e.port}`), ['www.example.com:80']);
});

t.test('change notifications say which hosts changed and whether only endpoints did', async (t) => {
  const store = new ListStore([
    cfg('ServiceEntry', 'ns', 'a', { hosts: ['a.example.com'], ports: [{ number: 80, name: 'http', protocol: 'HTTP' }], resolution: 'STATIC', workloadSelector: { labels: { app: 'a' } } }),
    cfg('WorkloadEntry', 'ns', 'w1', { address: '10.0.0.1', labels: { app: 'a' } }),
  ]);
  const reg = new ServiceEntryRegistry(store);
  const events: RegistryEvent[] = [];
  reg.subscribe((e) => events.push(e));
  store.remove('WorkloadEntry', 'ns', 'w1');
  t.same(events.map((e) => [[...e.hostnames], e.endpointsOnly]), [[['a.example.com'], true]]);
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
  mock.addService({ hostname: 'm.example.com', namespace: 'ns', addresses: [], ports: [{ name: 'http', port: 80, protocol: 'HTTP' }], resolution: 'ClientSide', meshExternal: false, exportTo: ['*'], labels: {}, registry: 'External', clusterId: 'c', creationTime: 0, serviceAccounts: [] });
  t.same(agg.services().map((s) => s.hostname), ['m.example.com']);
  t.equal(events.length, 1);
  t.throws(() => buildRegistries(store, ['Consul']), { message: 'service registry Consul is not supported' });
});
