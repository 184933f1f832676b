// Every resource of the proxyless gRPC generator goes through @grpc/grpc-js-xds 1.14's own decode and
// validation (its xds-resource-type classes), proving grpc-js clients accept them.
import t from 'tap';
import { createRequire } from 'node:module';
import { initPushContext } from '../../../src/discovery/push-context';
import { buildRegistries } from '../../../src/discovery/registry';
import { generatorsFor } from '../../../src/xds/gen';
import type { PushRequest } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import type { PushContext } from '../../../src/discovery/push-context';
import { cfg, ListStore, proxy, internalService } from '../../discovery/fixtures';

const require = createRequire(import.meta.url);
const base = '@grpc/grpc-js-xds/build/src';
// registering the xDS resolver also registers the fault and router HTTP filters grpc-js validates against
require('@grpc/grpc-js-xds').register();
const { ListenerResourceType } = require(`${base}/xds-resource-type/listener-resource-type`);
const { RouteConfigurationResourceType } = require(`${base}/xds-resource-type/route-config-resource-type`);
const { ClusterResourceType } = require(`${base}/xds-resource-type/cluster-resource-type`);
const { EndpointResourceType } = require(`${base}/xds-resource-type/endpoint-resource-type`);

const context = { bootstrap: { certificateProviders: {} }, server: {} };
const decode = (
  type: { decode: (c: unknown, r: unknown) => { name: string; error?: string; value?: unknown } },
  r: { typeUrl: string; value: Uint8Array },
) => type.decode(context, { type_url: r.typeUrl, value: Buffer.from(r.value) });

const store = new ListStore([
  internalService('app', 'echo', {
    addresses: ['10.96.1.1'],
    ports: [{ number: 7070, name: 'grpc', protocol: 'GRPC' }],
    workloadSelector: { matchLabels: { app: 'echo' } },
  }),
  cfg('ServiceEntry', 'app', 'dns', { hosts: ['dns.example.com'], resolution: 'DNS', ports: [{ number: 443, name: 'grpc', protocol: 'GRPC' }] }),
  cfg('WorkloadEntry', 'app', 'a', { address: '127.0.0.1', ports: { grpc: 17070 }, labels: { app: 'echo', version: 'v1' }, locality: 'r/z/s' }),
  cfg('WorkloadEntry', 'app', 'b', { address: '127.0.0.2', ports: { grpc: 17070 }, labels: { app: 'echo', version: 'v2' } }),
  cfg('DestinationRule', 'app', 'echo', {
    host: 'echo',
    subsets: [
      { name: 'v1', labels: { version: 'v1' } },
      { name: 'v2', labels: { version: 'v2' }, trafficPolicy: { loadBalancer: { consistentHash: { httpHeaderName: 'x' } } } },
    ],
  }),
  cfg('VirtualService', 'app', 'echo', {
    hosts: ['echo'],
    http: [
      {
        match: [{ headers: { 'x-canary': { exact: 'yes' } } }],
        route: [{ destination: { host: 'echo', subset: 'v2' } }],
        fault: { abort: { grpcStatus: 'UNAVAILABLE', percentage: { value: 50 } } },
      },
      {
        route: [
          { destination: { host: 'echo', subset: 'v1' }, weight: 90 },
          { destination: { host: 'echo', subset: 'v2' }, weight: 10 },
        ],
        timeout: '2s',
        retries: { attempts: 2, retryOn: 'unavailable' },
      },
    ],
  }),
]);
const push = initPushContext(store, buildRegistries(store, []));
const client = proxy('sidecar~127.0.0.9~client.app~app.svc.cluster.local', { GENERATOR: 'grpc', NAMESPACE: 'app' });
const gens = generatorsFor(client);
const req: PushRequest<PushContext> = { full: true, configsUpdated: new Set(), edsUpdates: new Set(), reasons: new Map(), push, start: 0 };
const watch = (typeUrl: string, names: string[]) => ({ typeUrl, resourceNames: new Set(names), wildcard: false });

t.test('LDS api_listener', async (t) => {
  const res = gens[TYPE_URL.listener]!.generate(client, watch(TYPE_URL.listener, ['echo.app.svc.cluster.local:7070', 'echo:7070']), req).resources;
  t.same(
    res.map((r) => r.name),
    ['echo.app.svc.cluster.local:7070', 'echo:7070'],
  );
  for (const r of res) {
    const d = decode(ListenerResourceType.get(), r.resource);
    t.equal(d.error, undefined, `${r.name} accepted`);
    t.equal(d.name, r.name);
  }
});

t.test('RDS', async (t) => {
  const res = gens[TYPE_URL.route]!.generate(client, watch(TYPE_URL.route, ['echo.app.svc.cluster.local:7070']), req).resources;
  t.equal(res.length, 1);
  const d = decode(RouteConfigurationResourceType.get(), res[0]!.resource) as {
    error?: string;
    value: { virtual_hosts: Array<{ domains: string[]; routes: unknown[] }> };
  };
  t.equal(d.error, undefined);
  t.equal(d.value.virtual_hosts.length, 1);
  t.ok(d.value.virtual_hosts[0]!.domains.includes('echo.app.svc.cluster.local:7070'));
  t.equal(d.value.virtual_hosts[0]!.routes.length, 2);
});

t.test('CDS: default, subsets, ring hash and LOGICAL_DNS', async (t) => {
  const names = [
    'outbound|7070||echo.app.svc.cluster.local',
    'outbound|7070|v1|echo.app.svc.cluster.local',
    'outbound|7070|v2|echo.app.svc.cluster.local',
    'outbound|443||dns.example.com',
  ];
  const res = gens[TYPE_URL.cluster]!.generate(client, watch(TYPE_URL.cluster, names), req).resources;
  t.same(
    res.map((r) => r.name),
    names,
  );
  for (const r of res) {
    const d = decode(ClusterResourceType.get(), r.resource) as { error?: string; value?: { type: string } };
    t.equal(d.error, undefined, `${r.name} accepted`);
  }
  t.equal((decode(ClusterResourceType.get(), res[3]!.resource) as { value: { type: string } }).value.type, 'LOGICAL_DNS');
});

t.test('EDS', async (t) => {
  const names = [
    'outbound|7070||echo.app.svc.cluster.local',
    'outbound|7070|v1|echo.app.svc.cluster.local',
    'outbound|7070|v3|echo.app.svc.cluster.local',
  ];
  const res = gens[TYPE_URL.endpoint]!.generate(client, watch(TYPE_URL.endpoint, names), req).resources;
  t.equal(res.length, 3);
  const counts = res.map((r) => {
    const d = decode(EndpointResourceType.get(), r.resource) as { error?: string; value: { endpoints: Array<{ lb_endpoints: unknown[] }> } };
    t.equal(d.error, undefined, `${r.name} accepted`);
    return d.value.endpoints.reduce((n, l) => n + l.lb_endpoints.length, 0);
  });
  t.same(counts, [2, 1, 0]);
});
