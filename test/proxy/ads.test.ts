// The engine against a real ADS server (src/xds/server) serving LDS/RDS/CDS/EDS resources built with
// the generated schemas, with real HTTP backends: routing by host, path, header and weight, direct
// responses and redirects, 404 for unknown hosts, live updates, ADS outage and reconnect, NACKs.
import t, { type Test } from 'tap';
import type { JsonObject } from '@bufbuild/protobuf';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import {
  adminGet,
  adsBootstrap,
  backend,
  cla,
  edsCluster,
  hcm,
  httpListener,
  request,
  routeConfig,
  startAds,
  startProxy,
  statValue,
  type Backend,
  type TestAds,
} from './helpers';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';

const A = 'outbound|80||a.demo.svc.cluster.local';
const B = 'outbound|80||b.demo.svc.cluster.local';

function routes(extraRoutes: JsonObject[] = []) {
  return routeConfig('http.8080', [
    {
      name: 'a.example.com:8080',
      domains: ['a.example.com'],
      routes: [
        ...extraRoutes,
        { match: { prefix: '/b/' }, route: { cluster: B, timeout: '0s' } },
        { match: { prefix: '/', headers: [{ name: 'x-version', string_match: { exact: 'b' } }] }, route: { cluster: B } },
        {
          match: { prefix: '/split' },
          route: {
            weighted_clusters: {
              clusters: [
                { name: A, weight: 50 },
                { name: B, weight: 50 },
              ],
            },
          },
        },
        { match: { path: '/direct' }, direct_response: { status: 418, body: { inline_string: 'teapot' } } },
        { match: { prefix: '/old' }, redirect: { path_redirect: '/new', response_code: 'FOUND' } },
        { match: { prefix: '/' }, route: { cluster: A } },
      ],
    },
    { name: 'b.example.com:8080', domains: ['b.example.com', 'b.example.com:*'], routes: [{ match: { prefix: '/' }, route: { cluster: B } }] },
  ]);
}

async function setup(
  t: Test,
  settings: Parameters<typeof startAds>[2] = {},
): Promise<{ ads: TestAds; a: Backend; b: Backend; port: number; proxy: Awaited<ReturnType<typeof startProxy>> }> {
  const a = await backend('a');
  const b = await backend('b');
  const port = await freePort();
  const ads = await startAds(
    {
      clusters: [edsCluster(A), edsCluster(B)],
      endpoints: [cla(A, [{ port: a.port }]), cla(B, [{ port: b.port }])],
      listeners: [httpListener('0.0.0.0_8080', port, hcm({ statPrefix: 'outbound_0.0.0.0_8080', rds: 'http.8080' }))],
      routes: [routes()],
    },
    0,
    settings,
  );
  const proxy = await startProxy(adsBootstrap(ads.address));
  t.teardown(async () => {
    await proxy.close();
    await ads.close();
    await a.close();
    await b.close();
  });
  await proxy.engine.initialized;
  return { ads, a, b, port, proxy };
}

t.test('routes by host, path prefix, header and weight', async (t) => {
  const { port } = await setup(t);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x', 'default route of host a');
  t.equal((await request(port, '/b/1', { host: 'a.example.com' })).body, 'b /b/1', 'path prefix /b/ goes to b');
  t.equal((await request(port, '/x', { host: 'a.example.com', headers: { 'x-version': 'b' } })).body, 'b /x', 'header match');
  t.equal((await request(port, '/x', { host: 'b.example.com:8080' })).body, 'b /x', 'host with port');
  const seen = new Set<string>();
  for (let i = 0; i < 40 && seen.size < 2; i++) seen.add((await request(port, '/split', { host: 'a.example.com' })).body.split(' ')[0]!);
  t.same([...seen].sort(), ['a', 'b'], 'a 50/50 split reaches both clusters');
});

t.test('the engine speaks delta xDS, and state of the world to a server without it (MESH_DELTA_XDS=false)', async (t) => {
  const delta = await setup(t);
  t.equal(delta.ads.ads.connections()[0]?.kind, 'delta');
  t.equal((await request(delta.port, '/x', { host: 'a.example.com' })).body, 'a /x');
  const sotw = await setup(t, { deltaXds: false });
  t.equal(sotw.ads.ads.connections()[0]?.kind, 'sotw', 'UNIMPLEMENTED: the engine falls back');
  t.equal((await request(sotw.port, '/x', { host: 'a.example.com' })).body, 'a /x', 'and routes');
  sotw.ads.update({ routes: [routes([{ match: { prefix: '/x' }, route: { cluster: B } }])] });
  await waitForValue('update over SotW applied', async () => (await request(sotw.port, '/x', { host: 'a.example.com' })).body === 'b /x', {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
});

t.test('direct response, redirect and unknown host', async (t) => {
  const { port, proxy } = await setup(t);
  const d = await request(port, '/direct', { host: 'a.example.com' });
  t.equal(d.status, 418);
  t.equal(d.body, 'teapot');
  const r = await request(port, '/old?q=1', { host: 'a.example.com' });
  t.equal(r.status, 302);
  t.equal(r.headers.location, 'http://a.example.com/new?q=1', 'path_redirect keeps the query');
  const n = await request(port, '/', { host: 'unknown.example.com' });
  t.equal(n.status, 404, 'no virtual host → 404');
  t.equal(n.body, '', 'Envoy answers NR with an empty body');
  const stats = (await adminGet(proxy, '/stats')).body;
  t.equal(statValue(stats, 'http.outbound_0.0.0.0_8080.no_route'), 1);
  t.equal(statValue(stats, 'http.outbound_0.0.0.0_8080.downstream_rq_4xx'), 2, 'the 418 and the 404');
  t.equal(statValue(stats, 'http.outbound_0.0.0.0_8080.rq_direct_response'), 1);
  t.equal(statValue(stats, 'http.outbound_0.0.0.0_8080.rq_redirect'), 1);
});

t.test('a route update changes routing without restart; ACKed versions follow', async (t) => {
  const { ads, port } = await setup(t);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x');
  ads.update({ routes: [routes([{ match: { prefix: '/x' }, route: { cluster: B } }])] });
  await waitForValue('new route applied', async () => (await request(port, '/x', { host: 'a.example.com' })).body === 'b /x', {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  await waitForValue('RDS ACK of the new version', () => ads.ackedVersion(TYPE_URL.route) === ads.world().version, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.pass('routing changed and the update was ACKed');
});

t.test('endpoints update, unhealthy endpoints are skipped, no endpoints → 503', async (t) => {
  const { ads, a, b, port } = await setup(t);
  ads.update({ endpoints: [cla(A, [{ port: b.port }]), cla(B, [{ port: b.port }])] });
  await waitForValue('A now points at b', async () => (await request(port, '/x', { host: 'a.example.com' })).body.startsWith('b '), {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  ads.update({ endpoints: [cla(A, [{ port: a.port }, { port: b.port, health: 'UNHEALTHY' }]), cla(B, [{ port: b.port }])] });
  await waitForValue('A back on a', async () => (await request(port, '/x', { host: 'a.example.com' })).body.startsWith('a '), {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  for (let i = 0; i < 10; i++) t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x', `request ${i} avoids the unhealthy host`);
  ads.update({ endpoints: [cla(A, []), cla(B, [{ port: b.port }])] });
  const r = await waitForValue(
    'no endpoints',
    async () => {
      const x = await request(port, '/x', { host: 'a.example.com' });
      return x.status === 503 ? x : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(r.body, 'no healthy upstream');
});

t.test('the proxy keeps routing while the ADS server is down and reconnects when it is back', async (t) => {
  const { ads, port, proxy } = await setup(t);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x');
  await ads.close();
  await waitForValue('disconnect noticed', async () => statValue((await adminGet(proxy, '/stats')).body, 'control_plane.connected_state') === 0, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  for (let i = 0; i < 5; i++) t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x', 'last good config still serves');
  // a new server on the same port, with a route change the proxy can only learn by reconnecting
  const w = ads.world();
  const again = await startAds({ ...w, routes: [routes([{ match: { prefix: '/x' }, route: { cluster: B } }])] }, ads.port);
  t.teardown(() => again.close());
  await waitForValue('reconnected and updated', async () => (await request(port, '/x', { host: 'a.example.com' })).body === 'b /x', {
    timeoutMs: 20_000,
    intervalMs: 20,
  });
  t.equal(statValue((await adminGet(proxy, '/stats')).body, 'control_plane.connected_state'), 1);
});

t.test('an invalid listener is NACKed with a real error_detail; valid ones keep working', async (t) => {
  const { ads, port } = await setup(t);
  const bad = httpListener(
    '0.0.0.0_9999',
    await freePort(),
    hcm({
      statPrefix: 'bad',
      rds: 'http.8080',
      httpFilters: [{ name: 'bogus.filter', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy' } }],
    }),
  );
  ads.update({ listeners: [...ads.world().listeners, bad] });
  const nack = await waitForValue('LDS NACK', () => ads.lastNack(TYPE_URL.listener), { timeoutMs: 10_000, intervalMs: 20 });
  t.match(nack, /^Error adding\/updating listener\(s\) 0\.0\.0\.0_9999: Didn't find a registered implementation for name: 'bogus\.filter'/);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x', 'existing listener unaffected');
  // an optional unknown filter is skipped instead
  const optional = httpListener(
    '0.0.0.0_9999',
    await freePort(),
    hcm({
      statPrefix: 'opt',
      rds: 'http.8080',
      httpFilters: [
        {
          name: 'bogus.filter',
          is_optional: true,
          typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy' },
        },
      ],
    }),
  );
  ads.update({ listeners: [ads.world().listeners[0]!, optional] });
  await waitForValue('LDS ACK with the optional filter', () => ads.ackedVersion(TYPE_URL.listener) === ads.world().version, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.pass('optional unknown filter accepted');
  const disabled = httpListener(
    '0.0.0.0_9999',
    await freePort(),
    hcm({
      statPrefix: 'dis',
      rds: 'http.8080',
      httpFilters: [
        { name: 'acme.unknown', disabled: true, typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.CorsPolicy' } },
      ],
    }),
  );
  ads.update({ listeners: [ads.world().listeners[0]!, disabled] });
  await waitForValue('LDS ACK with a disabled unknown filter', () => ads.ackedVersion(TYPE_URL.listener) === ads.world().version, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.pass('disabled unknown filter accepted');
});

t.test('a listener renamed on the same address in one LDS update takes the socket over', async (t) => {
  const { ads, port, proxy } = await setup(t);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).status, 200);
  const inline = {
    name: 'inline',
    virtual_hosts: [
      { name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'renamed' } } }] },
    ],
  };
  ads.update({ listeners: [httpListener('renamed_8080', port, hcm({ statPrefix: 'renamed', routeConfig: inline }))] });
  await waitForValue(
    'the LDS update answered',
    async () => ads.ackedVersion(TYPE_URL.listener) === ads.world().version || ads.lastNack(TYPE_URL.listener),
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(ads.lastNack(TYPE_URL.listener), undefined, "accepted: the address is the removed listener's, not a conflict");
  await waitForValue(
    'the renamed listener serves on the same port',
    async () => (await request(port, '/x', { host: 'a.example.com' })).body === 'renamed',
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.match((await adminGet(proxy, '/listeners')).body, /^renamed_8080::/m);
  t.notMatch((await adminGet(proxy, '/listeners')).body, /^0\.0\.0\.0_8080::/m, 'the old name is gone');
});

t.test('a listener renamed in one LDS update keeps its RDS route configuration and warms', async (t) => {
  // The old listener's route provider must outlive the update: were it released first, the engine would
  // drop the RDS name and re-add it in the same breath, the server would see no change, and the new
  // listener would wait for a route table that never comes again.
  const { ads, port, proxy } = await setup(t);
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x');
  ads.update({ listeners: [httpListener('renamed_8080', port, hcm({ statPrefix: 'renamed', rds: 'http.8080' }))] });
  await waitForValue(
    'the LDS update answered',
    async () => ads.ackedVersion(TYPE_URL.listener) === ads.world().version || ads.lastNack(TYPE_URL.listener),
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(ads.lastNack(TYPE_URL.listener), undefined);
  await waitForValue(
    'the renamed listener is active (warmed with the route table it already had)',
    async () => /^renamed_8080::/m.test((await adminGet(proxy, '/listeners')).body),
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.equal(statValue((await adminGet(proxy, '/stats')).body, 'listener_manager.total_listeners_warming'), 0);
  t.equal((await request(port, '/x', { host: 'b.example.com' })).body, 'b /x', 'routes by the same table');
});

// Delta CDS hands the cluster manager only what changed (the mux keeps the rest encoded): an unchanged
// cluster is kept as it is, a changed one rebuilt, a removed one dropped; config_dump shows what was sent.
t.test('clusters over delta xDS: changed ones are rebuilt, unchanged kept, removed dropped', async (t) => {
  const { ads, port, proxy } = await setup(t);
  const stat = async (name: string) => statValue((await adminGet(proxy, '/stats')).body, name);
  t.equal(ads.ads.connections()[0]?.kind, 'delta');
  const added = (await stat('cluster_manager.cluster_added'))!;
  const active = (await stat('cluster_manager.active_clusters'))!;
  t.ok(added >= 2 && active >= 2, "A, B (and the bootstrap's static cluster)");
  ads.update({ clusters: [edsCluster(A, { connect_timeout: '2s' }), edsCluster(B)] });
  await waitForValue('the changed cluster is rebuilt', async () => (await stat('cluster_manager.cluster_modified')) === 1, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.equal(await stat('cluster_manager.cluster_added'), added, 'the unchanged one is not');
  ads.update({ clusters: [edsCluster(A, { connect_timeout: '2s' })] });
  await waitForValue('the removed cluster is dropped', async () => (await stat('cluster_manager.cluster_removed')) === 1, {
    timeoutMs: 10_000,
    intervalMs: 20,
  });
  t.equal(await stat('cluster_manager.active_clusters'), active - 1);
  t.equal(await stat('cluster_manager.cluster_modified'), 1);
  const dump = JSON.parse((await adminGet(proxy, '/config_dump?resource=dynamic_active_clusters')).body) as {
    configs: Array<{ cluster: { name: string; connect_timeout: string } }>;
  };
  t.same(
    dump.configs.map((c) => [c.cluster.name, c.cluster.connect_timeout]),
    [[A, '2s']],
  );
  t.equal((await request(port, '/x', { host: 'a.example.com' })).body, 'a /x', 'the rebuilt cluster routes');
  t.equal((await request(port, '/b/1', { host: 'a.example.com' })).status, 503, 'the removed one is gone');
});
