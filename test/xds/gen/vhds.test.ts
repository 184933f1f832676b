// VHDS generator: route configurations without virtual hosts for VHDS proxies, their virtual hosts as
// VirtualHost resources `<route config>/<virtual host>` (Envoy's naming), the same routing content as full
// RDS, and what a delta push of an edit sends (changed only) and removes.
import t from 'tap';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import type { PushContext } from '../../../src/discovery/push-context';
import type { Proxy } from '../../../src/discovery/model';
import { ApiConfigSource_ApiType } from '../../../src/gen/envoy/config/core/v3/config_source_pb';
import { VirtualHostSchema } from '../../../src/gen/envoy/config/route/v3/route_components_pb';
import { RouteConfigurationSchema } from '../../../src/gen/envoy/config/route/v3/route_pb';
import { generatorsFor } from '../../../src/xds/gen';
import { deltaDiff } from '../../../src/xds/server/delta';
import { hashResource } from '../../../src/xds/server/resources';
import type { Resource } from '../../../src/xds/types';
import { TYPE_URL } from '../../../src/lib/xds/type-urls';
import { markVhds } from '../../../src/xds/vhds';
import { initKey } from '../../../src/xds/gen/reuse';
import { routeConfigParts, sidecarVirtualServiceOrder } from '../../../src/xds/gen/rds';
import { packedRouteVirtualHosts, patchedSidecarVirtualHosts, type LastBuild } from '../../../src/xds/gen/vhds';
import { cfg, proxy, internalService } from '../../discovery/fixtures';
import { fullPush, pushOf } from './helpers';

const base = [
  internalService('apps', 'reviews', {
    addresses: ['10.96.0.9'],
    ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
  }),
  internalService('apps', 'ratings', {
    addresses: ['10.96.0.10'],
    ports: [{ number: 9080, name: 'http', protocol: 'HTTP' }],
  }),
  cfg('Gateway', 'mesh-system', 'gw', {
    selector: { istio: 'ingressgateway' },
    servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*.example.com'] }],
  }),
  cfg('VirtualService', 'apps', 'reviews', {
    hosts: ['reviews', 'shop.example.com'],
    gateways: ['mesh-system/gw', 'mesh'],
    http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '3s' }],
  }),
];

const byName = (typeUrl: string, names: string[]) => ({ typeUrl, resourceNames: new Set(names), wildcard: false });
const vhdsWatch = (routeConfigs: string[], names: string[] = []) => ({
  typeUrl: TYPE_URL.virtualHost,
  resourceNames: new Set(names),
  wildcard: names.length === 0,
  routeConfigs: new Set(routeConfigs),
});

const vhdsSidecar = (): Proxy => {
  const p = proxy('sidecar~10.1.0.1~r1.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews' } });
  markVhds(p);
  return p;
};
const vhdsGateway = (): Proxy => {
  const p = proxy('router~10.0.0.1~gw.mesh-system~mesh-system.svc.cluster.local', { LABELS: { istio: 'ingressgateway' }, NAMESPACE: 'mesh-system' });
  markVhds(p);
  return p;
};
const plainSidecar = proxy('sidecar~10.1.0.2~r2.apps~apps.svc.cluster.local', { NAMESPACE: 'apps', LABELS: { app: 'reviews' } });

const vhosts = (p: Proxy, push: PushContext, rcs: string[], names: string[] = []): Resource[] =>
  generatorsFor(p)[TYPE_URL.virtualHost]!.generate(p, vhdsWatch(rcs, names), fullPush(push)).resources;
const decode = (r: Resource) => anyUnpack(r.resource, VirtualHostSchema)!;

t.test('a VHDS proxy gets route configurations without virtual hosts, naming a DELTA_GRPC vhds source', async (t) => {
  const push = pushOf(base);
  for (const [p, name] of [
    [vhdsSidecar(), '9080'],
    [vhdsGateway(), 'http.80'],
  ] as const) {
    const [r] = generatorsFor(p)[TYPE_URL.route]!.generate(p, byName(TYPE_URL.route, [name]), fullPush(push)).resources;
    const rc = anyUnpack(r!.resource, RouteConfigurationSchema)!;
    t.equal(rc.name, name);
    t.same(rc.virtualHosts, [], `${name}: no inline virtual hosts`);
    const src = rc.vhds?.configSource?.configSourceSpecifier;
    t.equal(src?.case, 'apiConfigSource', `${name}: vhds config source`);
    t.equal(src?.case === 'apiConfigSource' && src.value.apiType, ApiConfigSource_ApiType.DELTA_GRPC, 'Envoy accepts VHDS only over DELTA_GRPC');
    t.equal(rc.ignorePortInHostMatching, true, 'the other fields stay');
  }
});

t.test('a VHDS route configuration has every field of the full one but its virtual hosts', async (t) => {
  const push = pushOf(base);
  const plainGateway = proxy('router~10.0.0.2~gw2.mesh-system~mesh-system.svc.cluster.local', {
    LABELS: { istio: 'ingressgateway' },
    NAMESPACE: 'mesh-system',
  });
  for (const [vp, pp, name] of [
    [vhdsSidecar(), plainSidecar, '9080'],
    [vhdsGateway(), plainGateway, 'http.80'],
    [vhdsGateway(), plainGateway, 'http.81'],
  ] as const) {
    const get = (p: Proxy) =>
      anyUnpack(
        generatorsFor(p)[TYPE_URL.route]!.generate(p, byName(TYPE_URL.route, [name]), fullPush(push)).resources[0]!.resource,
        RouteConfigurationSchema,
      )!;
    const viaVhds = get(vp);
    const full = get(pp);
    t.same({ ...viaVhds, vhds: undefined, virtualHosts: [] }, { ...full, virtualHosts: [] }, name);
  }
});

t.test('a proxy without VHDS keeps full RDS', async (t) => {
  const push = pushOf(base);
  const [r] = generatorsFor(plainSidecar)[TYPE_URL.route]!.generate(plainSidecar, byName(TYPE_URL.route, ['9080']), fullPush(push)).resources;
  const rc = anyUnpack(r!.resource, RouteConfigurationSchema)!;
  t.equal(rc.vhds, undefined);
  t.ok(rc.virtualHosts.length >= 3);
});

// Names `<route config>/<vhost>` and domains as Istio builds them (generateVirtualHostDomains for the
// proxy's own namespace: FQDN, short name, `name.ns.svc`, `name.ns`, VIP; gateways: the intersected host).
const table: Array<{ what: string; p: () => Proxy; rcs: string[]; want: Record<string, string[]> }> = [
  {
    what: 'sidecar port 9080',
    p: vhdsSidecar,
    rcs: ['9080'],
    want: {
      '9080/ratings.apps.svc.cluster.local:9080': ['ratings.apps.svc.cluster.local', 'ratings', 'ratings.apps.svc', 'ratings.apps', '10.96.0.10'],
      '9080/reviews.apps.svc.cluster.local:9080': ['reviews.apps.svc.cluster.local', 'reviews', 'reviews.apps.svc', 'reviews.apps', '10.96.0.9'],
      '9080/shop.example.com:9080': ['shop.example.com'],
      '9080/allow_any': ['*'],
    },
  },
  { what: 'gateway http.80', p: vhdsGateway, rcs: ['http.80'], want: { 'http.80/shop.example.com:80': ['shop.example.com'] } },
  { what: 'no route configuration watched', p: vhdsSidecar, rcs: [], want: {} },
];
for (const c of table) {
  t.test(`VirtualHost names and domains: ${c.what}`, async (t) => {
    const got = vhosts(c.p(), pushOf(base), c.rcs);
    t.same(Object.fromEntries(got.map((r) => [r.name, decode(r).domains])), c.want);
    for (const r of got) t.equal(decode(r).name, r.name, 'the VirtualHost is named like its resource');
  });
}

t.test('VHDS carries the same routes as full RDS', async (t) => {
  const push = pushOf(base);
  const [full] = generatorsFor(plainSidecar)[TYPE_URL.route]!.generate(plainSidecar, byName(TYPE_URL.route, ['9080']), fullPush(push)).resources;
  const fromRds = anyUnpack(full!.resource, RouteConfigurationSchema)!.virtualHosts.map((v) => ({ ...v, name: `9080/${v.name}` }));
  const fromVhds = vhosts(vhdsSidecar(), push, ['9080']).map(decode);
  t.same(
    fromVhds.sort((a, b) => a.name.localeCompare(b.name)),
    fromRds.sort((a, b) => a.name.localeCompare(b.name)),
  );
});

t.test('a named watch gets only what it names', async (t) => {
  const got = vhosts(vhdsSidecar(), pushOf(base), ['9080'], ['9080/allow_any', '9080/nope']);
  t.same(
    got.map((r) => r.name),
    ['9080/allow_any'],
  );
});

t.test('an edit: a delta push sends the changed virtual host only, and removes the ones that went away', async (t) => {
  const p = vhdsSidecar();
  const before = vhosts(p, pushOf(base), ['9080']).map(hashResource);
  const known = new Map(before.map((r) => [r.name, r.hash]));
  // the VirtualService's route timeout changes and it stops claiming shop.example.com
  const edited = base.map((c) =>
    c.kind === 'VirtualService'
      ? cfg('VirtualService', 'apps', 'reviews', {
          hosts: ['reviews'],
          gateways: ['mesh'],
          http: [{ route: [{ destination: { host: 'reviews' } }], timeout: '7s' }],
        })
      : c,
  );
  const after = vhosts(p, pushOf(edited), ['9080']).map(hashResource);
  const diff = deltaDiff(known, after, new Set());
  t.same(
    diff.send.map((r) => r.name),
    ['9080/reviews.apps.svc.cluster.local:9080'],
    'only the edited virtual host',
  );
  t.same(diff.removed, ['9080/shop.example.com:9080']);
  const r = decode(diff.send[0]!).routes[0]!.action;
  t.equal(r.case === 'route' ? r.value.timeout?.seconds : undefined, 7n);
  // a route configuration no longer watched takes its virtual hosts with it
  const gone = deltaDiff(new Map(after.map((x) => [x.name, x.hash])), vhosts(p, pushOf(edited), []).map(hashResource), new Set());
  t.same(gone.removed, after.map((x) => x.name).sort());
});

// After an edit that changes only some VirtualServices' routes, a sidecar's virtual hosts are patched from
// the previous push's instead of built again; the result must be exactly what a full build gives.
t.test("an edit of a VirtualService's routes rebuilds only its virtual hosts, and gives what a full build gives", async (t) => {
  const p = vhdsSidecar();
  const withTimeout = (timeout: string, hosts = ['reviews', 'shop.example.com']) =>
    base.map((c) =>
      c.kind === 'VirtualService'
        ? cfg('VirtualService', 'apps', 'reviews', {
            hosts,
            gateways: ['mesh-system/gw', 'mesh'],
            http: [{ route: [{ destination: { host: 'reviews' } }], timeout }],
          })
        : c,
    );
  const edit = (keys: string[]) => ({ full: true, configsUpdated: new Set(keys) });
  const lastOf = (push: PushContext): LastBuild => ({
    pushVersion: push.pushVersion,
    virtualHosts: routeConfigParts(p, push, '9080').virtualHosts,
    order: sidecarVirtualServiceOrder(p, push, 9080),
    dups: [],
  });
  const p0 = pushOf(base);
  const last = lastOf(p0);
  const p1 = pushOf(withTimeout('9s'));
  const order = sidecarVirtualServiceOrder(p, p1, 9080);
  const patched = patchedSidecarVirtualHosts(p, p1, '9080', {}, edit(['VirtualService/apps/reviews']), last, order);
  t.ok(patched, 'patched');
  const full = routeConfigParts(p, p1, '9080').virtualHosts;
  t.same(
    patched!.map((v) => initKey(v)),
    full.map((v) => initKey(v)),
    'same virtual hosts as a full build',
  );
  const reviews = patched!.find((v) => v.name === 'reviews.apps.svc.cluster.local:9080')!;
  const action = reviews.routes[0]!.action as { case: string; value: { timeout?: { seconds: bigint } } };
  t.equal(action.value.timeout?.seconds, 9n, 'the edited route');
  t.equal(
    patched!
      .filter((v, i) => v !== last.virtualHosts[i])
      .map((v) => v.name)
      .join(','),
    'reviews.apps.svc.cluster.local:9080,shop.example.com:9080',
    'the other virtual hosts are the previous objects',
  );
  t.same(
    packedRouteVirtualHosts(p, p1, '9080', {}, patched!).map((r) => hashResource(r).hash),
    packedRouteVirtualHosts(p, p1, '9080', {}, full).map((r) => hashResource(r).hash),
    'same bytes',
  );

  // Cases a patch cannot know the answer to: a full build is needed.
  const p2 = pushOf(withTimeout('9s', ['reviews']));
  t.equal(
    patchedSidecarVirtualHosts(p, p2, '9080', {}, edit(['VirtualService/apps/reviews']), lastOf(p1), sidecarVirtualServiceOrder(p, p2, 9080)),
    undefined,
    'hosts changed',
  );
  const p3 = pushOf(withTimeout('2s'));
  t.equal(
    patchedSidecarVirtualHosts(p, p3, '9080', {}, edit(['VirtualService/apps/reviews']), last, sidecarVirtualServiceOrder(p, p3, 9080)),
    undefined,
    'the last build is not of the push just before',
  );
  const p4 = pushOf(withTimeout('3s'));
  const l3 = lastOf(p3);
  t.equal(
    patchedSidecarVirtualHosts(p, p4, '9080', {}, edit(['VirtualService/apps/reviews', 'DestinationRule/apps/reviews']), l3, l3.order),
    undefined,
    'another kind changed too',
  );
  t.equal(patchedSidecarVirtualHosts(p, p4, '9080', {}, edit([]), l3, l3.order), undefined, 'a push naming nothing changes everything');
  t.equal(
    patchedSidecarVirtualHosts(p, p4, '9080', {}, edit(['VirtualService/apps/other']), l3, l3.order),
    undefined,
    'a VirtualService that built no virtual host here',
  );
  t.ok(patchedSidecarVirtualHosts(p, p4, '9080', {}, edit(['VirtualService/apps/reviews']), l3, l3.order), 'the push just after');
  const gw = vhdsGateway();
  t.equal(
    patchedSidecarVirtualHosts(gw, p4, 'http.80', {}, edit(['VirtualService/apps/reviews']), l3, l3.order),
    undefined,
    'gateways are built in full',
  );
});

t.test('the generator patches across consecutive edits and matches a full build each time', async (t) => {
  const p = vhdsSidecar();
  const gen = generatorsFor(p)[TYPE_URL.virtualHost]!;
  const plain = vhdsSidecar();
  let push = pushOf(base);
  gen.generate(p, vhdsWatch(['9080']), fullPush(push));
  for (const timeout of ['4s', '5s', '6s']) {
    push = pushOf(
      base.map((c) =>
        c.kind === 'VirtualService'
          ? cfg('VirtualService', 'apps', 'reviews', {
              ...(c.spec as { hosts: string[] }),
              http: [{ route: [{ destination: { host: 'reviews' } }], timeout }],
            })
          : c,
      ),
    );
    const got = gen.generate(p, vhdsWatch(['9080']), { ...fullPush(push), configsUpdated: new Set(['VirtualService/apps/reviews']) }).resources;
    // a fresh generator and a push request naming nothing: a full build
    const want = generatorsFor(plain)[TYPE_URL.virtualHost]!.generate(plain, vhdsWatch(['9080']), fullPush(push)).resources;
    t.same(got.map(decode), want.map(decode), `timeout ${timeout}`);
    const reviews = got.map(decode).find((v) => v.name === '9080/reviews.apps.svc.cluster.local:9080')!;
    const a = reviews.routes[0]!.action;
    t.equal(a.case === 'route' ? a.value.timeout?.seconds : undefined, BigInt(Number.parseInt(timeout, 10)));
  }
});
