// The name table (NDS) as Istio 1.26.8 builds it: the cases of pkg/dns/server/name_table_test.go (TestNameTable)
// and pilot/pkg/xds/nds_test.go (TestNDS, testdata/nds-se.yaml), with Istio's registry `Kubernetes` named
// `Orchestrator`. Services the test cases put in one namespace twice (a ServiceEntry decorating a service, two
// ServiceEntries for one host) sit in two namespaces here: mesh's registry keeps one service per namespace and host.
import t from 'tap';
import { fromBinary } from '@bufbuild/protobuf';
import type { Endpoint, Service } from '../../../src/discovery/model';
import { PushContext } from '../../../src/discovery/push-context';
import { AggregateRegistry } from '../../../src/discovery/registry/aggregate';
import { buildRegistries } from '../../../src/discovery/registry';
import { MemoryRegistry } from '../../../src/discovery/registry/memory';
import { NameTableSchema } from '../../../src/gen/istio/networking/nds/v1/nds_pb';
import { buildNameTable, ndsGenerator, type NameInfo } from '../../../src/xds/gen/nds';
import { typeNeedsFullPush } from '../../../src/xds/server/needs-push';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { newPushRequest } from '../../../src/xds/server/push-request';
import { ListStore, cfg, proxy } from '../../discovery/fixtures';

const NODE = (ips: string, meta: Record<string, unknown> = {}) =>
  proxy(`sidecar~${ips.split(',')[0]}~pod.testns~testns.svc.cluster.local`, { INSTANCE_IPS: ips, ...meta });
const plain = NODE('9.9.9.9');
const nw1 = NODE('9.9.9.9', { NETWORK: 'nw1' });
const cl1 = NODE('9.9.9.9', { CLUSTER_ID: 'cl1' });
const cl1DualStack = NODE('9.9.9.9,2001:2::2001', { CLUSTER_ID: 'cl1' });

let created = 0;
function svc(o: Partial<Service> & Pick<Service, 'hostname' | 'namespace'>): Service {
  return {
    addresses: [],
    ports: [{ name: 'tcp-port', port: 9000, protocol: 'TCP' }],
    resolution: 'ClientSide',
    meshExternal: false,
    exportTo: ['*'],
    labels: {},
    registry: 'Orchestrator',
    clusterId: 'Orchestrator',
    creationTime: ++created,
    serviceAccounts: [],
    ...o,
  };
}

/** Istio's makeServiceInstances: one endpoint at the pod's IP, on its network and cluster. */
function ep(
  s: Service,
  ip: string,
  o: { network?: string; cluster?: string; host?: string; subdomain?: string; health?: Endpoint['healthStatus'] } = {},
): Endpoint {
  return {
    address: ip,
    port: 9000,
    servicePortName: 'tcp-port',
    hostname: s.hostname,
    namespace: s.namespace,
    labels: {},
    healthStatus: o.health ?? 'Healthy',
    ...(o.network ? { network: o.network } : {}),
    ...(o.cluster ? { clusterId: o.cluster } : {}),
    ...(o.host ? { podHostname: o.host, podSubdomain: o.subdomain } : {}),
  };
}

function pushOf(...registries: Array<Array<[Service, Endpoint[]?]>>): PushContext {
  const agg = new AggregateRegistry();
  registries.forEach((list, i) => {
    const r = new MemoryRegistry(`mem${i}`);
    for (const [s, eps] of list) r.addService(s, eps ?? []);
    agg.addRegistry(r);
  });
  return PushContext.build(new ListStore([]), agg);
}

const headless = svc({ hostname: 'headless-svc.testns.svc.cluster.local', namespace: 'testns', name: 'headless-svc', resolution: 'Passthrough' });
const pods = (s: Service, health: Array<Endpoint['healthStatus']> = ['Healthy', 'Healthy', 'Healthy', 'Healthy'], names = true) =>
  [
    ep(s, '1.2.3.4', { host: names ? 'pod1' : undefined, subdomain: 'headless-svc', health: health[0] }),
    ep(s, '9.6.7.8', { host: names ? 'pod2' : undefined, subdomain: 'headless-svc', network: 'nw2', cluster: 'cl2', health: health[1] }),
    ep(s, '19.6.7.8', { host: names ? 'pod3' : undefined, subdomain: 'headless-svc', network: 'nw1', health: health[2] }),
    ep(s, '9.16.7.8', { host: names ? 'pod4' : undefined, subdomain: 'headless-svc', cluster: 'cl1', health: health[3] }),
  ].slice(0, health.length);

const K = (ips: string[], shortname: string, namespace = 'testns'): NameInfo => ({ ips, registry: 'Orchestrator', shortname, namespace });
const podEntries = (which: number[]) =>
  Object.fromEntries(
    which.map((n) => [
      `pod${n}.headless-svc.testns.svc.cluster.local`,
      K([['1.2.3.4', '9.6.7.8', '19.6.7.8', '9.16.7.8'][n - 1]!], `pod${n}.headless-svc`),
    ]),
  );

const push = pushOf([[headless, pods(headless)]]);
const seHeadless = svc({ hostname: 'foo.bar.com', namespace: 'testns', resolution: 'Passthrough', registry: 'External' });
const sepush = pushOf([[seHeadless, pods(seHeadless, undefined, false)]]);
const vip1 = svc({
  hostname: 'mysql.foo.bar',
  namespace: 'testns',
  name: 'mysql-svc',
  addresses: ['10.0.0.5'],
  resolution: 'Passthrough',
  registry: 'External',
  ports: [{ name: 'tcp', port: 3306, protocol: 'TCP' }],
});
const vip2 = { ...vip1, namespace: 'testns2', addresses: ['10.0.0.6'], creationTime: ++created };
const decorated = { ...vip1, namespace: 'testns3', addresses: ['10.0.0.7'], registry: 'Orchestrator' as const, creationTime: ++created };

const cases: Array<{
  name: string;
  node: typeof plain;
  push: PushContext;
  multicluster?: boolean;
  dualStack?: boolean;
  want: Record<string, NameInfo>;
}> = [
  {
    name: 'headless service pods',
    node: plain,
    push,
    multicluster: false,
    want: { ...podEntries([1, 2, 3, 4]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4', '9.6.7.8', '19.6.7.8', '9.16.7.8'], 'headless-svc') },
  },
  {
    name: 'headless service pods with network isolation',
    node: nw1,
    push,
    multicluster: false,
    want: { ...podEntries([1, 3, 4]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4', '19.6.7.8', '9.16.7.8'], 'headless-svc') },
  },
  {
    name: 'multi cluster headless service pods',
    node: cl1,
    push,
    multicluster: false,
    want: { ...podEntries([1, 2, 3, 4]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4', '19.6.7.8', '9.16.7.8'], 'headless-svc') },
  },
  {
    name: 'multi cluster headless service pods with multi cluster enabled',
    node: cl1,
    push,
    multicluster: true,
    want: { ...podEntries([1, 2, 3, 4]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4', '9.6.7.8', '19.6.7.8', '9.16.7.8'], 'headless-svc') },
  },
  {
    name: 'headless service with unhealthy pods',
    node: cl1,
    push: pushOf([[headless, pods(headless, ['Healthy', 'UnHealthy', 'Terminating'])]]),
    multicluster: true,
    want: { ...podEntries([1]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4'], 'headless-svc') },
  },
  {
    name: 'publish unready headless service with unhealthy pods',
    node: cl1,
    push: (() => {
      const s = { ...headless, publishNotReadyAddresses: true };
      return pushOf([[s, pods(s, ['Healthy', 'UnHealthy', 'Terminating'])]]);
    })(),
    multicluster: true,
    want: { ...podEntries([1, 2, 3]), 'headless-svc.testns.svc.cluster.local': K(['1.2.3.4', '9.6.7.8', '19.6.7.8'], 'headless-svc') },
  },
  {
    name: 'wildcard service pods',
    node: plain,
    push: pushOf([[svc({ hostname: '*.testns.svc.cluster.local', namespace: 'testns', name: 'wildcard-svc', addresses: ['172.10.10.10'] })]]),
    want: { '*.testns.svc.cluster.local': K(['172.10.10.10'], 'wildcard-svc') },
  },
  {
    name: 'cidr service',
    node: plain,
    push: pushOf([[svc({ hostname: '*.testns.svc.cluster.local', namespace: 'testns', name: 'cidr-svc', addresses: ['172.217.0.0/16'] })]]),
    want: {},
  },
  {
    name: 'service entry with resolution = NONE',
    node: plain,
    push: sepush,
    want: { 'foo.bar.com': { ips: ['1.2.3.4', '9.6.7.8', '19.6.7.8', '9.16.7.8'], registry: 'External' } },
  },
  {
    name: 'dual stack',
    node: cl1DualStack,
    dualStack: true,
    push: pushOf([
      [
        svc({
          hostname: 'dual.foo.bar',
          namespace: 'testns',
          name: 'mysql-svc',
          addresses: ['2001:2::', '10.0.0.8'],
          resolution: 'Passthrough',
          registry: 'External',
        }),
      ],
    ]),
    want: { 'dual.foo.bar': { ips: ['2001:2::', '10.0.0.8'], registry: 'External' } },
  },
  {
    name: 'service entry with resolution = NONE with network isolation',
    node: nw1,
    push: sepush,
    want: { 'foo.bar.com': { ips: ['1.2.3.4', '19.6.7.8', '9.16.7.8'], registry: 'External' } },
  },
  {
    name: 'multi cluster service entry with resolution = NONE',
    node: cl1,
    push: sepush,
    multicluster: false,
    want: { 'foo.bar.com': { ips: ['1.2.3.4', '19.6.7.8', '9.16.7.8'], registry: 'External' } },
  },
  {
    name: 'service entry with multiple VIPs',
    node: plain,
    push: pushOf([
      [vip1, []],
      [vip2, []],
    ]),
    want: { 'mysql.foo.bar': { ips: ['10.0.0.5', '10.0.0.6'], registry: 'External' } },
  },
  {
    name: 'service entry as a decorator(created before k8s service)',
    node: plain,
    push: pushOf([
      [vip1, []],
      [decorated, []],
    ]),
    want: { 'mysql.foo.bar': K(['10.0.0.7'], 'mysql-svc', 'testns3') },
  },
  {
    name: 'service entry as a decorator(created after k8s service)',
    node: plain,
    push: pushOf([
      [{ ...decorated, creationTime: 0 }, []],
      [vip2, []],
    ]),
    want: { 'mysql.foo.bar': K(['10.0.0.7'], 'mysql-svc', 'testns3') },
  },
];

t.test('BuildNameTable (Istio TestNameTable)', async (t) => {
  for (const c of cases) {
    const got = buildNameTable(c.node, c.push, { multiclusterHeadless: c.multicluster ?? false, dualStack: c.dualStack ?? false });
    t.same(Object.fromEntries(got), c.want, c.name);
  }
});

t.test('NDS over ServiceEntries (Istio TestNDS "auto allocate" and "just capture", testdata/nds-se.yaml)', async (t) => {
  const se = (name: string, spec: Record<string, unknown>, ns = 'ns2') => cfg('ServiceEntry', ns, name, spec as never);
  const http = [{ number: 80, name: 'http', protocol: 'HTTP' }];
  const store = new ListStore([
    se('service-dns-no-addr', { hosts: ['random-1.host.example'], ports: http, resolution: 'DNS' }),
    se('service-dns-with-addr', { hosts: ['random-2.host.example'], addresses: ['9.9.9.9'], ports: http, resolution: 'DNS' }),
    se('service-static-no-addr', {
      hosts: ['random-3.host.example'],
      ports: http,
      resolution: 'STATIC',
      location: 'MESH_INTERNAL',
      endpoints: [{ address: '1.2.3.4' }],
    }),
    se('service-none-wildcard', { hosts: ['*.random-4.host.example'], ports: http, resolution: 'NONE' }),
    se('service-none-no-wildcard', { hosts: ['random-5.host.example'], ports: http, resolution: 'NONE' }),
    se('cidr', { hosts: ['address.internal'], addresses: ['198.51.100.0/31'], ports: [{ number: 8888, name: 'tcp', protocol: 'TCP' }] }, 'default'),
  ]);
  // Istio's test turns PILOT_ENABLE_IP_AUTOALLOCATE off to exercise the in-discovery (legacy) allocation.
  const p = PushContext.build(store, buildRegistries(store, []), { ipAutoallocate: false });
  const table = (meta: Record<string, unknown>) => {
    const n = proxy('sidecar~10.1.1.1~app.ns2~ns2.svc.cluster.local', meta);
    const r = ndsGenerator().generate(
      n,
      { typeUrl: TYPE_URL.nameTable, resourceNames: new Set(), wildcard: true },
      newPushRequest(p, { full: true }),
    );
    const nt = fromBinary(NameTableSchema, r.resources[0]!.resource.value);
    return Object.fromEntries(
      Object.entries(nt.table).map(([k, v]) => [k, { ips: v.ips, registry: v.registry, shortname: v.shortname, namespace: v.namespace }]),
    );
  };
  t.same(
    table({ DNS_CAPTURE: 'true', DNS_AUTO_ALLOCATE: 'true' }),
    {
      'random-1.host.example': { ips: ['240.240.116.21'], registry: 'External', shortname: '', namespace: '' },
      'random-2.host.example': { ips: ['9.9.9.9'], registry: 'External', shortname: '', namespace: '' },
      'random-3.host.example': { ips: ['240.240.81.100'], registry: 'External', shortname: '', namespace: '' },
    },
    'auto allocate',
  );
  const node = proxy('sidecar~10.1.1.1~app.ns2~ns2.svc.cluster.local', { DNS_CAPTURE: 'true' });
  const res = ndsGenerator().generate(
    node,
    { typeUrl: TYPE_URL.nameTable, resourceNames: new Set(), wildcard: true },
    newPushRequest(p, { full: true }),
  );
  t.equal(res.resources.length, 1, 'one resource');
  t.equal(res.resources[0]!.name, '', 'unnamed, as Istio sends it');
  t.equal(res.resources[0]!.resource.typeUrl, TYPE_URL.nameTable);
  const nt = fromBinary(NameTableSchema, res.resources[0]!.resource.value);
  t.same(
    Object.fromEntries(
      Object.entries(nt.table).map(([k, v]) => [k, { ips: v.ips, registry: v.registry, shortname: v.shortname, namespace: v.namespace }]),
    ),
    { 'random-2.host.example': { ips: ['9.9.9.9'], registry: 'External', shortname: '', namespace: '' } },
    'just capture',
  );
});

t.test('NDS needs a push for the kinds Istio does not skip', async (t) => {
  const nds = TYPE_URL.nameTable;
  t.ok(typeNeedsFullPush(nds, 'sidecar', new Set()), 'a push naming nothing');
  t.ok(typeNeedsFullPush(nds, 'sidecar', new Set(['ServiceEntry/ns/se'])), 'ServiceEntry');
  t.ok(typeNeedsFullPush(nds, 'sidecar', new Set(['DNSName/ns/h.ns.svc.cluster.local'])), 'headless endpoints (DNSName)');
  t.ok(typeNeedsFullPush(nds, 'sidecar', new Set(['Sidecar/ns/default'])), 'Sidecar');
  for (const k of ['VirtualService', 'DestinationRule', 'Gateway', 'AuthorizationPolicy', 'PeerAuthentication', 'WorkloadEntry']) {
    t.notOk(typeNeedsFullPush(nds, 'sidecar', new Set([`${k}/ns/x`])), k);
  }
});
