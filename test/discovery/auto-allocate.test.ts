// ServiceEntry address auto-allocation as Istio 1.26 does it in discovery: the expectations of
// pilot/pkg/serviceregistry/serviceentry/controller_test.go (Test_legacyAutoAllocateIP_conditions,
// _values, _deterministic, Test_autoAllocateIP_with_duplicated_host), then what a proxy sees: the name table
// and the TCP listener of a ServiceEntry without addresses, only for proxies that capture DNS and use
// auto allocation (DNS_AUTO_ALLOCATE, or PILOT_ENABLE_IP_AUTOALLOCATE for all).
import t from 'tap';
import type { Resolution, Service } from '../../src/discovery/model';
import { autoAllocateIPs, fnv32a, withAutoAllocatedIPs } from '../../src/discovery/auto-allocate';
import { PushContext } from '../../src/discovery/push-context';
import { buildRegistries } from '../../src/discovery/registry';
import { buildNameTable } from '../../src/xds/gen/nds';
import { buildSidecarOutboundListeners } from '../../src/xds/gen/lds';
import { buildSidecarRouteConfiguration } from '../../src/xds/gen/rds';
import { ListStore, cfg, proxy } from './fixtures';

let created = 0;
function svc(hostname: string, resolution: Resolution = 'ClientSide', o: Partial<Service> = {}): Service {
  return {
    hostname,
    namespace: '',
    addresses: [],
    ports: [{ name: 'tcp', port: 9000, protocol: 'TCP' }],
    resolution,
    meshExternal: true,
    exportTo: ['*'],
    labels: {},
    registry: 'External',
    clusterId: '',
    creationTime: ++created,
    serviceAccounts: [],
    ...o,
  };
}

const v4 = (s: Service[]) => s.map((x) => x.autoAllocatedIPv4Address);
const v6 = (s: Service[]) => s.map((x) => x.autoAllocatedIPv6Address);

t.test('FNV-1a 32 (Go hash/fnv New32a)', async (t) => {
  t.equal(fnv32a(''), 0x811c9dc5);
  t.equal(fnv32a('a'), 0xe40c292c);
  t.equal(fnv32a('foobar'), 0xbf9cf968);
});

t.test('Istio Test_legacyAutoAllocateIP_conditions', async (t) => {
  const cases: Array<[string, Service[], Array<string | undefined>, Array<string | undefined>]> = [
    ['no allocation for passthrough', [svc('foo.com', 'Passthrough')], [undefined], [undefined]],
    ['no allocation if address exists', [svc('foo.com', 'ClientSide', { addresses: ['1.1.1.1'] })], [undefined], [undefined]],
    ['no allocation if hostname is wildcard', [svc('*.foo.com', 'ClientSide')], [undefined], [undefined]],
    ['allocate IP for clientside lb', [svc('foo.com', 'ClientSide')], ['240.240.227.81'], ['2001:2::f0f0:e351']],
    ['allocate IP for dns lb', [svc('foo.com', 'DNS')], ['240.240.227.81'], ['2001:2::f0f0:e351']],
    [
      'collision',
      [svc('a17061.example.com', 'DNS'), svc('a44155.example.com', 'DNS')],
      ['240.240.25.11', '240.240.31.17'],
      ['2001:2::f0f0:19b', '2001:2::f0f0:1f11'],
    ],
    ['stable IP - baseline test', [svc('a.example.com', 'DNS', { namespace: 'a' })], ['240.240.134.206'], ['2001:2::f0f0:86ce']],
    [
      'stable IP - not affected by other namespace',
      [svc('a.example.com', 'DNS', { namespace: 'a' }), svc('a.example.com', 'DNS', { namespace: 'b' })],
      ['240.240.134.206', '240.240.41.100'],
      ['2001:2::f0f0:86ce', '2001:2::f0f0:2964'],
    ],
    ['orchestrator services are not ServiceEntries', [svc('foo.com', 'ClientSide', { registry: 'Orchestrator' })], [undefined], [undefined]],
  ];
  for (const [name, input, want4, want6] of cases) {
    const got = autoAllocateIPs(input);
    t.same(v4(got), want4, `${name}: IPv4`);
    t.same(v6(got), want6, `${name}: IPv6`);
  }
});

t.test('Istio Test_legacyAutoAllocateIP_values: the whole range, no x.y.z.0 or x.y.z.255, last 240.240.10.222', async (t) => {
  const max = 256 * 254;
  const got = autoAllocateIPs(Array.from({ length: max }, (_, i) => svc(`foo${i}.com`)));
  t.equal(got[got.length - 1]!.autoAllocatedIPv4Address, '240.240.10.222');
  const seen = new Map<string, string>();
  let bad = 0;
  for (const s of got) {
    const a = s.autoAllocatedIPv4Address ?? '';
    const m = /^240\.240\.(\d+)\.(\d+)$/.exec(a);
    if (!m || Number(m[1]) > 255 || Number(m[2]) > 254 || Number(m[2]) === 0) bad++;
    if (seen.has(a) && seen.get(a) !== s.hostname) bad++;
    seen.set(a, s.hostname);
  }
  t.equal(bad, 0, 'every address valid, in 240.240.0.0/16, not ending in .0 or .255, and unique');
  t.equal(seen.size, max);
});

t.test('Istio Test_legacyAutoAllocateIP_deterministic and _with_duplicated_host', async (t) => {
  const original: Record<string, string> = {
    'a.com': '240.240.109.8',
    'c.com': '240.240.234.51',
    'e.com': '240.240.85.60',
    'g.com': '240.240.23.172',
    'i.com': '240.240.15.2',
    'k.com': '240.240.160.161',
    'l.com': '240.240.42.96',
    'n.com': '240.240.121.61',
    'o.com': '240.240.122.71',
  };
  const check = (services: Service[], what: string) => {
    const got = withAutoAllocatedIPs(services);
    const byHost = new Map<string, Set<string>>();
    for (const s of got) byHost.set(s.hostname, new Set([...(byHost.get(s.hostname) ?? []), s.autoAllocatedIPv4Address!]));
    t.same(Object.fromEntries(Object.keys(original).map((h) => [h, [...(byHost.get(h) ?? [])].join()])), original, what);
  };
  let services = Object.keys(original).map((h) => svc(h));
  check(services, 'the original services');
  services = [...services, ...['b.com', 'd.com', 'f.com', 'h.com', 'j.com', 'm.com', 'p.com', 'q.com', 'r.com'].map((h) => svc(h))];
  check(services, 'services added in between keep the addresses of the others');
  services = services.filter((s, i) => s.hostname in original || i % 2 === 1);
  check(services, 'and so do deletions');
  check([...Object.keys(original).map((h) => svc(h)), svc('i.com')], 'a duplicated host reuses its address');
});

// ---------------------------------------------------------------------------------------------
// what proxies see

const store = new ListStore([
  cfg('ServiceEntry', 'demo', 'db', {
    hosts: ['db.example.com'],
    location: 'MESH_EXTERNAL',
    resolution: 'DNS',
    ports: [{ number: 5432, name: 'tcp-pg', protocol: 'TCP' }],
  }),
  cfg('ServiceEntry', 'demo', 'web', {
    hosts: ['web.example.com'],
    location: 'MESH_EXTERNAL',
    resolution: 'DNS',
    ports: [{ number: 80, name: 'http', protocol: 'HTTP' }],
  }),
  cfg('ServiceEntry', 'demo', 'wild', {
    hosts: ['*.wild.example.com'],
    location: 'MESH_EXTERNAL',
    resolution: 'NONE',
    ports: [{ number: 5433, name: 'tcp', protocol: 'TCP' }],
  }),
  cfg('ServiceEntry', 'demo', 'fixed', {
    hosts: ['fixed.example.com'],
    addresses: ['10.9.9.9'],
    location: 'MESH_EXTERNAL',
    resolution: 'DNS',
    ports: [{ number: 5434, name: 'tcp', protocol: 'TCP' }],
  }),
]);
// Istio's key is namespace/host: the address is derived from it, not read back from the code under test.
const DB_ADDRESS = autoAllocateIPs([svc('db.example.com', 'DNS', { namespace: 'demo' })])[0]!.autoAllocatedIPv4Address!;
const WEB_ADDRESS = autoAllocateIPs([svc('web.example.com', 'DNS', { namespace: 'demo' })])[0]!.autoAllocatedIPv4Address!;

const node = (meta: Record<string, unknown>) => proxy('sidecar~10.1.0.5~app-1.demo~demo.svc.cluster.local', { INSTANCE_IPS: '10.1.0.5', ...meta });
const capturing = node({ DNS_CAPTURE: 'true', DNS_AUTO_ALLOCATE: 'true' });
const captureOnly = node({ DNS_CAPTURE: 'true' });
const allocateOnly = node({ DNS_AUTO_ALLOCATE: 'true' });

function push(ipAutoallocate: boolean): PushContext {
  return PushContext.build(store, buildRegistries(store, []), { ipAutoallocate });
}

t.test('the name table carries the auto-allocated address to proxies that capture DNS and use it', async (t) => {
  t.match(DB_ADDRESS, /^240\.240\.\d+\.\d+$/);
  const legacy = push(false);
  t.same(buildNameTable(capturing, legacy).get('db.example.com')?.ips, [DB_ADDRESS], 'DNS_CAPTURE + DNS_AUTO_ALLOCATE');
  t.notOk(buildNameTable(captureOnly, legacy).has('db.example.com'), 'DNS capture alone, legacy allocation: no address, no entry');
  t.notOk(buildNameTable(allocateOnly, legacy).has('db.example.com'), 'auto allocation without DNS capture: the agent would not answer');
  t.same(buildNameTable(captureOnly, push(true)).get('db.example.com')?.ips, [DB_ADDRESS], 'PILOT_ENABLE_IP_AUTOALLOCATE: every DNS-capturing proxy');
  t.notOk(buildNameTable(capturing, legacy).has('*.wild.example.com'), 'wildcard hosts get none');
  t.same(buildNameTable(capturing, legacy).get('fixed.example.com')?.ips, ['10.9.9.9'], 'a ServiceEntry with addresses keeps them');
});

t.test('a TCP port gets its outbound listener on the auto-allocated address; HTTP virtual hosts answer to it', async (t) => {
  const names = (p: ReturnType<typeof node>, ctx: PushContext) => buildSidecarOutboundListeners(p, ctx).map((l) => l.name);
  const legacy = push(false);
  t.ok(names(capturing, legacy).includes(`${DB_ADDRESS}_5432`), `listener ${DB_ADDRESS}_5432`);
  t.notOk(names(capturing, legacy).includes('0.0.0.0_5432'), 'not on the wildcard address');
  t.ok(names(captureOnly, legacy).includes('0.0.0.0_5432'), 'a proxy that does not use auto allocation: 0.0.0.0 as before');
  t.ok(names(capturing, legacy).includes('10.9.9.9_5434'), 'its own address for a ServiceEntry that has one');
  const rc = buildSidecarRouteConfiguration(capturing, legacy, '80');
  const vh = rc.virtualHosts.find((v) => v.domains.includes('web.example.com'));
  t.ok(vh?.domains.includes(WEB_ADDRESS), 'the auto-allocated address is one of the virtual host domains');
});

t.test('proxies that differ only in auto-allocation use do not share generated output', async (t) => {
  const p = push(false);
  t.not(p.sharedKey(capturing), p.sharedKey(captureOnly));
});
