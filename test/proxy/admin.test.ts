// The admin API as the agent and users use it: readiness through the init sequence, server_info,
// config_dump (Envoy's shape, ?resource, ?include_eds), stats (text, json, prometheus, filters),
// clusters, listeners, logging, drain_listeners, healthcheck fail/ok and quitquitquit.
import t from 'tap';
import net from 'node:net';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import {
  adminGet,
  adminPost,
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
} from './helpers';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';

const C = 'outbound|80||a.demo.svc.cluster.local';

t.test('readiness follows initialisation and health check state', async (t) => {
  const a = await backend('a');
  t.teardown(() => a.close());
  const adsPort = await freePort();
  // the proxy starts before its control plane exists: PRE_INITIALIZING/INITIALIZING until CDS+LDS arrive
  const p = await startProxy(adsBootstrap(`127.0.0.1:${adsPort}`));
  t.teardown(() => p.close());
  const early = await adminGet(p, '/ready');
  t.equal(early.status, 503);
  t.match(early.body, /^(PRE_INITIALIZING|INITIALIZING)\n$/);
  const info0 = JSON.parse((await adminGet(p, '/server_info')).body) as Record<string, unknown>;
  t.equal(info0.state, 'INITIALIZING');
  const lport = await freePort();
  const ads = await startAds(
    {
      clusters: [edsCluster(C)],
      endpoints: [cla(C, [{ port: a.port }])],
      listeners: [httpListener('0.0.0.0_8080', lport, hcm({ rds: 'http.8080' }), { traffic_direction: 'OUTBOUND' })],
      routes: [routeConfig('http.8080', [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: C } }] }])],
    },
    adsPort,
  );
  t.teardown(() => ads.close());
  await p.engine.initialized;
  const ready = await adminGet(p, '/ready');
  t.same(ready, { status: 200, body: 'LIVE\n' });
  t.equal((await request(lport, '/')).body, 'a /');
  t.same(await adminPost(p, '/healthcheck/fail'), { status: 200, body: 'OK\n' });
  t.same(await adminGet(p, '/ready'), { status: 503, body: 'DRAINING\n' });
  const stats = (await adminGet(p, '/stats?filter=^server\\.(live|state)$')).body;
  t.equal(statValue(stats, 'server.live'), 0);
  t.equal(statValue(stats, 'server.state'), 1);
  t.equal((await adminPost(p, '/healthcheck/ok')).status, 200);
  t.same(await adminGet(p, '/ready'), { status: 200, body: 'LIVE\n' });
  t.equal((await adminGet(p, '/healthcheck/fail')).status, 405, 'mutations need POST');
});

async function live(t: { teardown(f: () => unknown): void }) {
  const a = await backend('a');
  const lport = await freePort();
  const inPort = await freePort();
  const ads = await startAds({
    clusters: [edsCluster(C)],
    endpoints: [cla(C, [{ port: a.port }, { port: a.port + 1, health: 'DRAINING' }])],
    listeners: [
      httpListener('0.0.0.0_8080', lport, hcm({ statPrefix: 'outbound_0.0.0.0_8080', rds: 'http.8080' }), { traffic_direction: 'OUTBOUND' }),
      httpListener('virtualInbound', inPort, hcm({ statPrefix: 'inbound_0.0.0.0_15006', rds: 'http.8080' }), { traffic_direction: 'INBOUND' }),
    ],
    routes: [routeConfig('http.8080', [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: C } }] }])],
  });
  const p = await startProxy(adsBootstrap(ads.address), {
    configPath: '/etc/mesh/proxy/envoy-rev.json',
    drainTimeS: 1,
    concurrency: 2,
    serviceCluster: 'gw',
  });
  t.teardown(async () => {
    await p.close();
    await ads.close();
    await a.close();
  });
  await p.engine.initialized;
  return { a, ads, p, lport, inPort };
}

t.test('server_info, config_dump and clusters', async (t) => {
  const { a, ads, p, lport } = await live(t);
  await request(lport, '/');
  const info = JSON.parse((await adminGet(p, '/server_info')).body) as Record<string, unknown> & {
    command_line_options: Record<string, unknown>;
    node: Record<string, unknown>;
  };
  t.equal(info.state, 'LIVE');
  t.equal(info.hot_restart_version, 'disabled');
  t.equal(info.command_line_options.config_path, '/etc/mesh/proxy/envoy-rev.json');
  t.equal(info.command_line_options.drain_time, '1s');
  t.equal(info.command_line_options.concurrency, 2);
  t.equal(info.node.id, 'router~127.0.0.1~gw-0.mesh-system~mesh-system.svc.cluster.local');
  t.match(String(info.uptime_current_epoch), /^\d+s$/);
  const dump = JSON.parse((await adminGet(p, '/config_dump')).body) as { configs: Array<Record<string, unknown>> };
  t.same(
    dump.configs.map((c) => c['@type']),
    [
      'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump',
      'type.googleapis.com/envoy.admin.v3.ClustersConfigDump',
      'type.googleapis.com/envoy.admin.v3.ListenersConfigDump',
      'type.googleapis.com/envoy.admin.v3.RoutesConfigDump',
      'type.googleapis.com/envoy.admin.v3.SecretsConfigDump',
    ],
  );
  t.same(Object.keys(dump.configs[0]!)[0], '@type', '@type comes first like Envoy prints it');
  const clusters = dump.configs[1] as {
    version_info: string;
    static_clusters: Array<{ cluster: { name: string } }>;
    dynamic_active_clusters: Array<{ version_info: string; cluster: Record<string, unknown> }>;
  };
  t.equal(clusters.version_info, ads.world().version);
  t.same(
    clusters.static_clusters.map((c) => c.cluster.name),
    ['xds-grpc'],
  );
  t.equal(clusters.dynamic_active_clusters[0]?.cluster['@type'], 'type.googleapis.com/envoy.config.cluster.v3.Cluster');
  t.equal(clusters.dynamic_active_clusters[0]?.cluster.name, C);
  const listeners = dump.configs[2] as { dynamic_listeners: Array<{ name: string; active_state: { listener: { name: string } } }> };
  t.same(
    listeners.dynamic_listeners.map((l) => l.name),
    ['0.0.0.0_8080', 'virtualInbound'],
  );
  const routes = dump.configs[3] as { dynamic_route_configs: Array<{ route_config: { name: string } }> };
  t.equal(routes.dynamic_route_configs[0]?.route_config.name, 'http.8080');
  const only = JSON.parse((await adminGet(p, '/config_dump?resource=dynamic_active_clusters')).body) as { configs: Array<Record<string, unknown>> };
  t.equal(only.configs.length, 1);
  t.equal(only.configs[0]!['@type'], 'type.googleapis.com/envoy.admin.v3.ClustersConfigDump.DynamicCluster');
  const eds = JSON.parse((await adminGet(p, '/config_dump?include_eds')).body) as { configs: Array<Record<string, unknown>> };
  const ep = eds.configs.find((c) => c['@type'] === 'type.googleapis.com/envoy.admin.v3.EndpointsConfigDump') as {
    dynamic_endpoint_configs: Array<{ endpoint_config: { cluster_name: string } }>;
  };
  t.equal(ep.dynamic_endpoint_configs[0]?.endpoint_config.cluster_name, C);
  t.equal((await adminGet(p, '/config_dump?resource=nope')).status, 404);
  const text = (await adminGet(p, '/clusters')).body;
  t.match(text, new RegExp(`^${C.replace(/\|/g, '\\|')}::127\\.0\\.0\\.1:${a.port}::rq_total::1$`, 'm'));
  t.match(text, new RegExp(`::127\\.0\\.0\\.1:${a.port + 1}::health_flags::/pending_dynamic_removal/eds_status_draining$`, 'm'));
  t.match(text, /^xds-grpc::default_priority::max_connections::1024$/m);
  t.match(text, new RegExp(`^${C.replace(/\|/g, '\\|')}::added_via_api::true$`, 'm'));
  const cj = JSON.parse((await adminGet(p, '/clusters?format=json')).body) as {
    cluster_statuses: Array<{ name: string; host_statuses?: Array<{ health_status: { eds_health_status: string } }> }>;
  };
  const cs = cj.cluster_statuses.find((c) => c.name === C)!;
  t.same(
    cs.host_statuses?.map((h) => h.health_status.eds_health_status),
    ['HEALTHY', 'DRAINING'],
    'EDS UNKNOWN is reported HEALTHY, as Envoy does',
  );
  await waitForValue('EDS ACK', () => ads.ackedVersion(TYPE_URL.endpoint) === ads.world().version, { timeoutMs: 10_000, intervalMs: 20 });
});

t.test('stats in text, json and prometheus; listeners; logging', async (t) => {
  const { p, lport, inPort } = await live(t);
  await request(lport, '/');
  const used = (await adminGet(p, '/stats?usedonly&filter=^(cluster_manager\\.cds|listener_manager\\.lds)\\.(update_success|update_rejected)$')).body;
  t.match(
    used,
    /^cluster_manager\.cds\.update_success: [1-9]\d*\nlistener_manager\.lds\.update_success: [1-9]\d*\n$/,
    'the readiness query the agent makes',
  );
  const cx = (await adminGet(p, '/stats?filter=downstream_cx_active')).body;
  t.match(cx, new RegExp(`^listener\\.127\\.0\\.0\\.1_${lport}\\.downstream_cx_active: \\d+$`, 'm'));
  t.match(cx, /^http\.outbound_0\.0\.0\.0_8080\.downstream_cx_active: \d+$/m);
  const json = JSON.parse((await adminGet(p, '/stats?format=json&filter=downstream_rq_total')).body) as {
    stats: Array<{ name: string; value: number }>;
  };
  t.same(
    json.stats.find((s) => s.name === 'http.outbound_0.0.0.0_8080.downstream_rq_total'),
    { name: 'http.outbound_0.0.0.0_8080.downstream_rq_total', value: 1 },
  );
  t.equal((await adminGet(p, '/stats?filter=(')).status, 400, 'bad regex');
  const prom = (await adminGet(p, '/stats/prometheus')).body;
  // Envoy's default tag regexes stop at the first dot of a name: the rest stays in the metric name
  t.match(prom, /^envoy_cluster_demo_svc_cluster_local_upstream_rq_total\{envoy_cluster_name="outbound\|80\|\|a"\} 1$/m);
  t.match(prom, /^envoy_cluster_manager_cds_update_success [1-9]/m);
  t.match(prom, /^envoy_listener_manager_lds_update_success [1-9]/m);
  t.match(prom, /^envoy_server_live 1$/m);
  t.match(prom, /^envoy_server_uptime \d+$/m);
  t.match(prom, new RegExp(`^envoy_listener_downstream_cx_active\\{envoy_listener_address="127\\.0\\.0\\.1_${lport}"\\} \\d+$`, 'm'));
  t.match(prom, /^envoy_http_0_0_0_8080_downstream_rq_xx\{envoy_response_code_class="2",envoy_http_conn_manager_prefix="outbound_0"\} 1$/m);
  t.equal((await adminGet(p, '/stats?format=prometheus')).body.length > 0, true);
  t.equal((await adminGet(p, '/listeners')).body, `0.0.0.0_8080::127.0.0.1:${lport}\nvirtualInbound::127.0.0.1:${inPort}\n`);
  const lj = JSON.parse((await adminGet(p, '/listeners?format=json')).body) as {
    listener_statuses: Array<{ name: string; local_address: { socket_address: { port_value: number } } }>;
  };
  t.same(
    lj.listener_statuses.map((l) => [l.name, l.local_address.socket_address.port_value]),
    [
      ['0.0.0.0_8080', lport],
      ['virtualInbound', inPort],
    ],
  );
  t.match((await adminGet(p, '/logging')).body, /^active loggers:\n(  \w+: info\n)+$/);
  t.match((await adminPost(p, '/logging?level=debug')).body, /  upstream: debug\n/);
  t.match((await adminPost(p, '/logging?upstream=error')).body, /  upstream: error\n/);
  t.match((await adminPost(p, '/logging?paths=http:trace,router:warning')).body, /  http: trace\n[\s\S]*  router: warning\n/);
  t.equal((await adminPost(p, '/logging?nosuch=debug')).status, 404);
});

function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(port, '127.0.0.1', () => {
      c.destroy();
      resolve(false);
    });
    c.on('error', () => resolve(true));
  });
}

t.test('drain_listeners (inbound only, graceful) and quitquitquit', async (t) => {
  const { p, lport, inPort } = await live(t);
  t.equal((await adminPost(p, '/drain_listeners?inboundonly&graceful')).body, 'OK\n');
  const r = await request(inPort, '/');
  t.equal(r.headers.connection, 'close', 'draining HTTP/1.1 connections are told to close');
  await waitForValue('inbound listener stops accepting after the drain time', () => refused(inPort), { timeoutMs: 5000, intervalMs: 20 });
  t.equal((await request(lport, '/')).status, 200, 'outbound listener untouched');
  t.equal(await refused(lport), false);
  await adminPost(p, '/drain_listeners');
  await waitForValue('non-graceful drain stops listening at once', () => refused(lport), { timeoutMs: 2000, intervalMs: 20 });
  t.same(await adminPost(p, '/quitquitquit'), { status: 200, body: 'OK\n' });
  t.equal(await p.engine.exited, 0, 'the engine exits 0');
});

t.test('stats_config: stats_matcher limits what is shown, stats_tags name the labels', async (t) => {
  const p = await startProxy({
    node: { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local' },
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    stats_config: {
      use_all_default_tags: false,
      stats_tags: [{ tag_name: 'cluster_name', regex: '^cluster\\.((.+?(\\..+?\\.svc\\.cluster\\.local)?)\\.)' }],
      stats_matcher: { inclusion_list: { patterns: [{ prefix: 'server.' }, { prefix: 'cluster.outbound|' }, { suffix: 'downstream_cx_active' }] } },
    },
    static_resources: {
      clusters: [
        { name: 'outbound|80||a.demo.svc.cluster.local', type: 'STATIC', connect_timeout: '1s' },
        { name: 'hidden', type: 'STATIC', connect_timeout: '1s' },
      ],
    },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  const text = (await adminGet(p, '/stats')).body;
  t.match(text, /^server\.live: 1$/m);
  t.notMatch(text, /cluster\.hidden\./, 'not in the inclusion list');
  t.notMatch(text, /^cluster_manager\./m);
  const prom = (await adminGet(p, '/stats/prometheus')).body;
  t.match(
    prom,
    /^envoy_cluster_membership_total\{cluster_name="outbound\|80\|\|a\.demo\.svc\.cluster\.local"\} 0$/m,
    "Istio's cluster_name tag keeps the whole name",
  );
});

// Envoy gives a name stats_matcher rejects a null stat (nothing kept per cluster); the engine's own use of a
// rejected value — remaining_pending is max_pending_requests minus upstream_rq_pending_active — keeps counting.
t.test('stats_matcher: a rejected stat is neither kept nor shown, what the engine reads of one still counts', async (t) => {
  const held: Array<() => void> = [];
  const b = await backend('b', (_req, res) => {
    const answer = () => res.end('b');
    if (held.length === 0) held.push(answer);
    else answer();
  });
  t.teardown(() => b.close());
  const lport = await freePort();
  const p = await startProxy({
    node: { id: 'sidecar~127.0.0.1~app.ns~ns.svc.cluster.local' },
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    stats_config: {
      stats_matcher: { inclusion_list: { patterns: [{ prefix: 'server.' }, { suffix: '.remaining_pending' }, { suffix: '.upstream_rq_total' }] } },
    },
    static_resources: {
      clusters: [
        {
          name: 'b',
          type: 'STATIC',
          connect_timeout: '1s',
          load_assignment: {
            cluster_name: 'b',
            endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: b.port } } } }] }],
          },
          circuit_breakers: { thresholds: [{ max_connections: 1, max_pending_requests: 10, track_remaining: true }] },
        },
      ],
      listeners: [
        {
          name: 'in',
          address: { socket_address: { address: '127.0.0.1', port_value: lport } },
          filter_chains: [
            {
              filters: [
                hcm({
                  statPrefix: 'in',
                  routeConfig: { virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'b' } }] }] },
                }),
              ],
            },
          ],
        },
      ],
    },
  });
  t.teardown(() => p.close());
  await p.engine.initialized;
  const stats = async () => (await adminGet(p, '/stats')).body;
  t.equal(statValue(await stats(), 'cluster.b.circuit_breakers.default.remaining_pending'), 10);
  // one connection: the first request holds it, the next ones wait in the pool
  const replies = [request(lport, '/1')];
  await waitForValue('the backend holds the first request', () => held.length === 1, { timeoutMs: 10_000, intervalMs: 20 });
  replies.push(request(lport, '/2'));
  await new Promise((r) => setTimeout(r, 200));
  replies.push(request(lport, '/3'));
  const remaining = await waitForValue(
    'remaining_pending counts the waiting requests',
    async () => {
      const v = statValue(await stats(), 'cluster.b.circuit_breakers.default.remaining_pending');
      return v !== undefined && v < 10 ? v : undefined;
    },
    { timeoutMs: 10_000, intervalMs: 20 },
  );
  t.ok(remaining === 9 || remaining === 8, `remaining_pending ${remaining}: 10 less the requests waiting when it was last set`);
  const text = await stats();
  t.notMatch(text, /upstream_rq_pending_active/, 'the rejected gauge the engine reads is not shown');
  t.notMatch(text, /upstream_cx_total|upstream_rq_active|http\.in\./, 'rejected stats are not shown');
  t.equal(p.engine.stats.value('cluster.b.upstream_rq_pending_active'), undefined, 'nor kept in the store');
  t.equal(p.engine.stats.value('cluster.b.upstream_cx_total'), undefined);
  held[0]!();
  t.same(
    (await Promise.all(replies)).map((r) => r.status),
    [200, 200, 200],
  );
  t.equal((await request(lport, '/4')).status, 200);
  const after = await stats();
  t.equal(statValue(after, 'cluster.b.circuit_breakers.default.remaining_pending'), 10, 'back to the maximum once nothing waits');
  t.equal(statValue(after, 'cluster.b.upstream_rq_total'), 4, 'an included stat of the same cluster counts');
});
