// The daemon shell in-process with fake providers, every listener on 127.0.0.1:0: readiness, the debug
// pages on both HTTP listeners, the unsafe-admin gate, metrics, version, access restrictions, bind errors.
import * as http from 'node:http';
import * as net from 'node:net';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { buildInfo } from '../../src/lib/buildinfo';
import { DaemonStartError, startDaemon } from '../../src/meshd/daemon';
import {
  echo,
  endpoint,
  externalIPv4,
  FakeProviders,
  getJSON,
  loopbackOptions,
  proxy,
  request,
  service,
  startTestDaemon,
  virtualService,
} from './helpers';
import type { Config } from '../../src/config/types';
import { waitForValue } from '../helpers/wait';

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const ext = externalIPv4();

function populate(p: FakeProviders): void {
  p.syncState = { ready: true };
  p.serviceList = [service()];
  p.endpointList = [endpoint()];
  const dr: Config = { ...virtualService('dr'), kind: 'DestinationRule', spec: { host: 'reviews' } as never };
  p.configList = [virtualService('reviews-route'), virtualService('reviews-canary'), dr];
  p.xds.connections_ = [
    {
      id: `${proxy().nodeId}-1`,
      proxy: proxy(),
      peerAddress: '10.0.0.7:41000',
      connectedAt: Date.UTC(2024, 4, 6, 7, 8, 9),
      watched: [{ typeUrl: CDS, resourceNames: [], nonceSent: 'n2', nonceAcked: 'n2' }],
    },
  ];
}

t.test('ready: 503 with the reason until config is synced, then 200', async (t) => {
  const { providers, url } = await startTestDaemon(t);
  const before = await request(url('http', '/ready'));
  t.equal(before.status, 503);
  t.match(before.body, /config store: initial read of \.\/config not finished/);
  providers.syncState = { ready: true };
  const after = await request(url('http', '/ready'));
  t.equal(after.status, 200);
  t.equal(after.body, '', 'Istio answers an empty 200');
});

t.test('shutdown in-process: not ready, xDS stopped with the grace period, providers closed', async (t) => {
  const { daemon, providers } = await startTestDaemon(t, { shutdownDurationMs: 4000 });
  providers.syncState = { ready: true };
  t.same(daemon.readiness(), { ready: true });
  const done = daemon.shutdown('test');
  t.same(daemon.readiness(), { ready: false, reason: 'shutting down' });
  t.equal(daemon.shutdown('again'), done, 'idempotent');
  await done;
  await daemon.stopped;
  t.equal(providers.xds.stopCalls.length, 1);
  t.ok(
    providers.xds.stopCalls[0]! > 3000 && providers.xds.stopCalls[0]! <= 3600,
    `grace ${providers.xds.stopCalls[0]} ms: the duration less a tenth`,
  );
  t.ok(providers.closed);
});

t.test('every listener is bound and the plain gRPC listener serves the xDS server', async (t) => {
  const { daemon, providers } = await startTestDaemon(t);
  for (const name of ['http', 'monitoring', 'grpc', 'ctrlz'] as const) {
    t.match(daemon.addresses[name]?.address, /^127\.0\.0\.1:\d+$/, `${name} bound on an ephemeral port`);
    t.not(daemon.addresses[name]?.port, 0);
  }
  t.equal(daemon.addresses.secureGrpc, undefined, 'no TLS gRPC without certificate files');
  t.equal(daemon.addresses.https, undefined, 'no webhook HTTPS without certificate files');
  t.same(providers.xds.attached, [{ secure: false }]);
  t.equal(await echo(daemon.addresses.grpc!.address, grpc.credentials.createInsecure(), 'ping'), 'plain:nocert:ping');
});

t.test('debug pages on :8080 and :15014 with Istio shapes', async (t) => {
  const { providers, url } = await startTestDaemon(t);
  populate(providers);
  for (const listener of ['http', 'monitoring'] as const) {
    const u = (p: string) => url(listener, p);
    t.same(
      await getJSON(u('/debug/list')),
      ['adsz', 'clusterz', 'config_dump', 'configz', 'connections', 'endpointShardz', 'endpointz', 'push_status', 'registryz', 'syncz'],
      `${listener}: list names every command but list and pprof, sorted`,
    );
    const syncz = (await getJSON(u('/debug/syncz'))) as Array<Record<string, unknown>>;
    t.equal(syncz[0]?.proxy, 'reviews-v1-abc.default');
    t.equal(syncz[0]?.cluster_acked, 'n2');
    const registry = (await getJSON(u('/debug/registryz'))) as Array<Record<string, unknown>>;
    t.equal(registry[0]?.hostname, 'reviews.default.svc.cluster.local');
    const shards = (await getJSON(u('/debug/endpointShardz'))) as Record<string, unknown>;
    t.same(Object.keys(shards), ['reviews.default.svc.cluster.local']);
    t.same(await getJSON(u('/debug/endpointz')), shards, 'endpointz answers as endpointShardz (Istio: obsolete alias)');
    // Istio's clusterz with no orchestrator registry (no ListRemoteClusters): 400, no body.
    const clusterz = await request(u('/debug/clusterz'));
    t.same([clusterz.status, clusterz.body], [400, '']);
    const configz = (await getJSON(u('/debug/configz'))) as Array<Record<string, unknown>>;
    t.same(
      configz.map((c) => `${c.kind}/${(c.metadata as { name: string }).name}`),
      ['DestinationRule/dr', 'VirtualService/reviews-canary', 'VirtualService/reviews-route'],
    );
    const adsz = (await getJSON(u('/debug/adsz'))) as { totalClients: number; clients: Array<Record<string, unknown>> };
    t.equal(adsz.totalClients, 1);
    t.same(adsz.clients[0]?.watches, { [CDS]: [] });
    const single = (await getJSON(u('/debug/adsz?proxyID=reviews-v1'))) as { totalClients: number };
    t.equal(single.totalClients, 1);
    const missing = await request(u('/debug/adsz?proxyID=not-here'));
    t.equal(missing.status, 404);
    t.equal(missing.body, 'Proxy not connected to this Pilot instance. It may be connected to another instance.\n');
    const conns = (await getJSON(u('/debug/connections'))) as { totalClients: number; clients: Array<Record<string, unknown>> };
    t.same(Object.keys(conns.clients[0]!), ['connectionId', 'connectedAt', 'address']);
  }
  const pretty = await request(url('http', '/debug/connections?pretty'));
  t.match(pretty.body, /^\{\n {4}"totalClients": 1,/, '?pretty indents by four spaces');
  t.equal(pretty.headers['content-type'], 'application/json');
  const index = await request(url('http', '/debug'));
  t.equal(index.status, 200);
  t.match(index.body, /<title>Pilot Debug Console<\/title>/);
  t.match(index.body, /<a href='\/debug\/syncz'>\/debug\/syncz<\/a><\/td><td>Synchronization status of all Envoys/);
  t.equal((await request(url('http', '/debug/nosuchpage'))).status, 404);
});

t.test('push_status and config_dump', async (t) => {
  const { providers, url } = await startTestDaemon(t);
  populate(providers);
  const none = await request(url('monitoring', '/debug/push_status'));
  t.equal(none.body, '{}', 'nothing pushed yet');
  providers.status = { pilot_eds_no_instances: { 'outbound|80||a.b': { proxy: 'gw-0.mesh-system', message: 'no endpoints' } } };
  const status = await request(url('monitoring', '/debug/push_status'));
  t.equal(status.body, JSON.stringify(providers.status, null, 4), "Istio's StatusJSON: indented by four spaces");

  const noId = await request(url('monitoring', '/debug/config_dump'));
  t.equal(noId.status, 400);
  t.equal(noId.body, 'You must provide a proxyID in the query string\n');
  t.equal((await request(url('monitoring', '/debug/config_dump?proxyID=nobody'))).status, 404);
  const dump = await getJSON(url('monitoring', '/debug/config_dump?proxyID=reviews-v1-abc&include_eds&types=cds,eds'));
  t.same(dump, { configs: [{ '@type': 'type.googleapis.com/envoy.admin.v3.BootstrapConfigDump' }] });
  t.same(providers.xds.dumps.at(-1), { id: `${proxy().nodeId}-1`, opts: { includeEds: true, types: ['cds', 'eds'] } });
});

t.test('force_disconnect only with UNSAFE_ENABLE_ADMIN_ENDPOINTS', async (t) => {
  const off = await startTestDaemon(t);
  populate(off.providers);
  const denied = await request(off.url('monitoring', `/debug/force_disconnect?proxyID=reviews-v1-abc`));
  t.equal(denied.status, 404);
  t.match(denied.body, /UNSAFE_ENABLE_ADMIN_ENDPOINTS=true/);
  t.same(off.providers.xds.disconnected, []);
  t.notOk(((await getJSON(off.url('http', '/debug/list'))) as string[]).includes('force_disconnect'));

  const on = await startTestDaemon(t, { unsafeAdminEndpoints: true });
  populate(on.providers);
  t.ok(((await getJSON(on.url('http', '/debug/list'))) as string[]).includes('force_disconnect'));
  const ok = await request(on.url('monitoring', '/debug/force_disconnect?proxyID=reviews-v1-abc'));
  t.equal(ok.status, 200);
  t.equal(ok.body, 'OK');
  t.same(on.providers.xds.disconnected, [`${proxy().nodeId}-1`]);
  t.equal((await request(on.url('monitoring', '/debug/force_disconnect?proxyID=reviews-v1-abc'))).status, 404, 'gone now');
  t.equal((await request(on.url('monitoring', '/debug/force_disconnect'))).status, 400);
});

t.test('ENABLE_DEBUG_ON_HTTP=false turns the debug pages off on the HTTP listener only', async (t) => {
  const { providers, url } = await startTestDaemon(t, { enableDebugOnHttp: false });
  populate(providers);
  t.equal((await request(url('http', '/debug/syncz'))).status, 404);
  t.equal((await request(url('http', '/ready'))).status, 200, 'readiness stays');
  t.equal((await request(url('monitoring', '/debug/syncz'))).status, 200);
});

t.test('metrics and version on the monitoring listener', async (t) => {
  const { providers, url } = await startTestDaemon(t);
  populate(providers);
  const m = await request(url('monitoring', '/metrics'));
  t.equal(m.status, 200);
  t.match(m.headers['content-type'], /^text\/plain; version=0\.0\.4/);
  const b = buildInfo();
  const version = `${b.version}-${b.revision}-${b.status}`;
  t.match(m.body, /^# TYPE meshd_uptime_seconds gauge$/m);
  t.match(m.body, /^meshd_uptime_seconds \d+(\.\d+)?$/m);
  t.match(m.body, new RegExp(`^pilot_info\\{version="${version.replace(/[.]/g, '\\.')}"\\} 1$`, 'm'));
  t.match(m.body, new RegExp(`^mesh_build\\{component="pilot",tag="${b.tag.replace(/[.]/g, '\\.')}"\\} 1$`, 'm'));
  t.match(m.body, /^pilot_services 1$/m);
  t.match(m.body, /^pilot_virt_services 2$/m, 'two VirtualServices among three configs');
  providers.serviceList = [service(), service({ hostname: 'ratings.default.svc.cluster.local' })];
  t.match((await request(url('monitoring', '/metrics'))).body, /^pilot_services 2$/m, 'read at scrape time');
  const v = await request(url('monitoring', '/version'));
  t.equal(v.body, version, "Istio's BuildInfo.String()");
  t.equal((await request(url('http', '/metrics'))).status, 404, 'metrics are not on the HTTP listener');
});

t.test('an empty --monitoringAddr multiplexes monitoring on the HTTP listener', async (t) => {
  const { daemon, url } = await startTestDaemon(t, { monitoringAddr: '' });
  t.equal(daemon.addresses.monitoring, undefined);
  t.match((await request(url('http', '/metrics'))).body, /meshd_uptime_seconds/);
  t.equal((await request(url('http', '/debug/syncz'))).status, 200);
});

t.test(
  'non-loopback clients: METRICS_LOCALHOST_ACCESS_ONLY and debug authentication',
  { skip: ext ? false : 'no non-loopback IPv4 address on this machine' },
  async (t) => {
    const local = await startTestDaemon(t, { monitoringAddr: '0.0.0.0:0', httpAddr: '0.0.0.0:0', metricsLocalhostOnly: true });
    const port = local.daemon.addresses.monitoring!.port;
    const remote = await request(`http://${ext}:${port}/metrics`, { localAddress: ext });
    t.equal(remote.status, 403);
    t.equal(remote.body, 'Only requests from localhost are allowed\n');
    t.equal((await request(`http://127.0.0.1:${port}/metrics`)).status, 200);
    t.equal((await request(`http://${ext}:${port}/version`, { localAddress: ext })).status, 200, 'only /metrics is restricted');

    const open = await startTestDaemon(t, { monitoringAddr: '0.0.0.0:0' });
    t.equal((await request(`http://${ext}:${open.daemon.addresses.monitoring!.port}/metrics`, { localAddress: ext })).status, 200);

    // Debug pages: loopback is trusted; others must authenticate like xDS clients (none configured → 401).
    const dbg = await request(`http://${ext}:${port}/debug/syncz`, { localAddress: ext });
    t.equal(dbg.status, 401);
    const authed = new FakeProviders();
    authed.authenticateDebug = async (req) =>
      req.headers.authorization === 'Bearer good' ? ['spiffe://cluster.local/ns/mesh-system/sa/admin'] : undefined;
    const withAuth = await startTestDaemon(t, { monitoringAddr: '0.0.0.0:0' }, authed);
    const wport = withAuth.daemon.addresses.monitoring!.port;
    t.equal((await request(`http://${ext}:${wport}/debug/syncz`, { localAddress: ext })).status, 401);
    t.equal((await request(`http://${ext}:${wport}/debug/syncz`, { localAddress: ext, headers: { authorization: 'Bearer good' } })).status, 200);
  },
);

async function occupiedPort(t: { teardown(fn: () => unknown): void }): Promise<number> {
  const blocker = net.createServer();
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())));
  return (blocker.address() as net.AddressInfo).port;
}

t.test('bind errors name the flag and the address; started listeners are released', async (t) => {
  const port = await occupiedPort(t);
  const free = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const err = await startDaemon(loopbackOptions({ httpAddr: `127.0.0.1:${free}`, grpcAddr: `127.0.0.1:${port}` }), new FakeProviders()).then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  t.type(err, DaemonStartError);
  t.match(err?.message, new RegExp(`^--grpcAddr 127\\.0\\.0\\.1:${port}: listen EADDRINUSE: address already in use`));
  // The HTTP listener that had started is closed again.
  await waitForValue(
    'the HTTP port to be released',
    async () => {
      const s = net.createServer();
      return new Promise<true | undefined>((resolve) => {
        s.once('error', () => resolve(undefined));
        s.listen(free, '127.0.0.1', () => s.close(() => resolve(true)));
      });
    },
    { timeoutMs: 10_000 },
  );

  const bad = await startDaemon(loopbackOptions({ monitoringAddr: '15014' }), new FakeProviders()).catch((e: Error) => e);
  t.equal((bad as Error).message, '--monitoringAddr 15014: listen tcp: address 15014: missing port in address');
  const host = await startDaemon(
    loopbackOptions({ httpsAddr: 'no-such-host.invalid:0', tls: { certFile: '', keyFile: '', caCertFile: '', cipherSuites: [] } }),
    new FakeProviders(),
  );
  t.equal(host.addresses.https, undefined, 'httpsAddr is not even resolved without certificates');
  await host.shutdown('test');
});

t.test('`:port` listens on every interface, `*` does for ControlZ', async (t) => {
  const { daemon } = await startTestDaemon(t, { httpAddr: ':0', ctrlzAddress: '*' });
  const probes = { http: ['/ready', 503], ctrlz: ['/homej', 200] } as const;
  for (const name of ['http', 'ctrlz'] as const) {
    const a = daemon.addresses[name]!;
    const [path, status] = probes[name];
    t.match(a.address, /^(\[::\]|0\.0\.0\.0):\d+$/, `${name} reported like Go's listener address`);
    t.equal((await request(`http://127.0.0.1:${a.port}${path}`)).status, status, `${name} reachable on loopback`);
    if (ext) t.equal((await request(`http://${ext}:${a.port}${path}`, { localAddress: ext })).status, status, `${name} reachable on ${ext}`);
  }
});

t.test('ControlZ that cannot bind is logged, not fatal (as in Istio)', async (t) => {
  const port = await occupiedPort(t);
  const { daemon } = await startTestDaemon(t, { ctrlzPort: port });
  t.equal(daemon.addresses.ctrlz, undefined);
  t.ok(daemon.addresses.http);
});

t.test('--profile: /debug/pprof/ with V8 profiles', async (t) => {
  const off = await startTestDaemon(t);
  const disabled = await request(off.url('http', '/debug/pprof/profile?seconds=1'));
  t.equal(disabled.status, 404);
  t.match(disabled.body, /--profile/);

  const { url } = await startTestDaemon(t, { profile: true });
  const index = await request(url('http', '/debug/pprof/'));
  t.equal(index.status, 200);
  t.match(index.body, /cpuprofile/);
  t.equal((await request(url('monitoring', '/debug/pprof/cmdline'))).body, process.argv.join('\u0000'), "Go's cmdline: NUL-separated");
  const [profile, concurrent] = await Promise.all([
    request(url('http', '/debug/pprof/profile?seconds=1')),
    new Promise((r) => setTimeout(r, 200)).then(() => request(url('monitoring', '/debug/pprof/profile?seconds=1'))),
  ]);
  t.equal(profile.status, 200);
  t.equal(profile.headers['content-disposition'], 'attachment; filename="profile.cpuprofile"');
  const cpu = JSON.parse(profile.body) as { nodes: unknown[]; startTime: number; endTime: number; samples: unknown[] };
  t.ok(Array.isArray(cpu.nodes) && cpu.nodes.length > 0, 'V8 CPU profile nodes');
  t.ok(cpu.endTime - cpu.startTime >= 900_000, 'about one second of profile (microseconds)');
  t.equal(concurrent.status, 500);
  t.equal(concurrent.body, 'Could not enable CPU profiling: cpu profiling already in use\n');
  const heapStart = await new Promise<{ status?: number; disposition?: string; head: string }>((resolve, reject) => {
    http
      .get(url('monitoring', '/debug/pprof/heap'), (res) => {
        res.once('data', (chunk: Buffer) => {
          resolve({ status: res.statusCode, disposition: res.headers['content-disposition'], head: chunk.toString('utf8', 0, 40) });
          res.destroy();
        });
      })
      .on('error', reject);
  });
  t.equal(heapStart.status, 200);
  t.equal(heapStart.disposition, 'attachment; filename="heap.heapsnapshot"');
  t.match(heapStart.head, /^\{"snapshot":\{"meta":/, 'a V8 heap snapshot');
  const goroutine = await request(url('http', '/debug/pprof/goroutine'));
  t.equal(goroutine.status, 404);
  t.match(goroutine.body, /Go runtime profile/);
});
