// `pilot-agent proxy` end to end, run from source as a child process against the built discovery daemon and
// a fake proxy (test/agent/fixtures/fake-envoy.ts) that speaks only the agent↔proxy contract: readiness
// 503→200 (directly and through the proxy's :15021 listener), `wait`, the merged /stats/prometheus,
// /quitquitquit and /drain from localhost only, the SIGTERM drain sequence as the proxy sees it,
// EXIT_ON_ZERO_ACTIVE_CONNECTIONS, the proxy's exit status, DISABLE_PROXY with GRPC_XDS_BOOTSTRAP.
import t, { type Test } from 'tap';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { built } from '../helpers/binary';
import { makeRequestHandler } from '../../src/agent/request-command';
import { fakeEnvoyBinary, fakeEvents, runAgent, type AgentChild, summarize, GATEWAY_POD_ENV, requestContext } from '../helpers/agent';
import { freePorts } from '../helpers/ports';
import { gatewayConfig, GATEWAY_NS } from '../helpers/mesh-yaml';
import { metricValue } from '../helpers/prometheus';
import { startDiscovery, type RunningDaemon } from '../helpers/daemon';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

interface Rig {
  dir: string;
  configDir: string;
  events: string;
  ports: { status: number; admin: number; envoyStatus: number; envoyMetrics: number; gw: number; grpc: number };
  env: NodeJS.ProcessEnv;
  daemon?: RunningDaemon;
  startDaemon: () => Promise<RunningDaemon>;
  agent: (args?: string[], env?: NodeJS.ProcessEnv) => AgentChild;
}

async function rig(t: Test, o: { type?: 'router' | 'sidecar'; daemon?: boolean; proxyConfig?: Record<string, unknown> } = {}): Promise<Rig> {
  const dir = tempDir(t);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.mkdirSync(path.join(dir, 'bin'));
  const envoy = fakeEnvoyBinary(path.join(dir, 'bin'));
  const ports = await freePorts('status', 'admin', 'envoyStatus', 'envoyMetrics', 'gw', 'grpc');
  fs.writeFileSync(path.join(configDir, 'gateway.yaml'), gatewayConfig(ports.gw));
  // The discovery address comes from the mesh config file, the ports from PROXY_CONFIG.
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${ports.grpc}\n  controlPlaneAuthPolicy: NONE\n`);
  const events = path.join(dir, 'events.jsonl');
  const env: NodeJS.ProcessEnv = {
    ...GATEWAY_POD_ENV,
    MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
    PROXY_STATUS_PORT: String(ports.envoyStatus),
    PROXY_METRICS_PORT: String(ports.envoyMetrics),
    FAKE_ENVOY_EVENTS: events,
    PROXY_CONFIG: JSON.stringify({
      binaryPath: envoy,
      statusPort: ports.status,
      proxyAdminPort: ports.admin,
      terminationDrainDuration: '1s',
      ...o.proxyConfig,
    }),
  };
  const r: Rig = {
    dir,
    configDir,
    events,
    ports,
    env,
    startDaemon: async () => {
      r.daemon = await startDiscovery({ configDir, grpcPort: ports.grpc });
      t.teardown(() => r.daemon?.stop());
      return r.daemon;
    },
    agent: (args = [], extra = {}) => {
      const a = runAgent(['proxy', o.type ?? 'router', '--meshConfig', 'mesh.yaml', ...args], { cwd: dir, env: { ...env, ...extra } });
      t.teardown(() => a.stop());
      return a;
    },
  };
  if (o.daemon !== false) await r.startDaemon();
  return r;
}

async function status(port: number, p: string, method = 'GET', host = '127.0.0.1'): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://${host.includes(':') ? `[${host}]` : host}:${port}${p}`, { method });
  return { status: res.status, body: await res.text() };
}

async function waitReady(r: Rig, a: AgentChild): Promise<void> {
  await waitFor(
    () => `agent not ready:\n${summarize(a.out())}`,
    async () => (await status(r.ports.status, '/healthz/ready')).status === 200,
    { timeoutMs: 40_000, intervalMs: 50 },
  );
}

/** Checks the exit code; the child's output is shown only when it is wrong. */
async function expectExit(t: Test, a: AgentChild, code: number, msg: string): Promise<void> {
  const got = await a.exited;
  t.equal(got, code, msg);
  if (got !== code) t.comment(summarize(a.out()));
}

function nonLoopbackIp(): string | undefined {
  for (const addrs of Object.values(os.networkInterfaces())) {
    for (const a of addrs ?? []) if (!a.internal && a.family === 'IPv4') return a.address;
  }
  return undefined;
}

t.test('readiness 503 → 200, wait, merged metrics, request, /quitquitquit', async (t) => {
  const r = await rig(t, { daemon: false });
  const a = r.agent();
  await a.waitForLog(/status server listening on port/);
  await waitFor(
    () => `fake proxy did not start:\n${a.out()}`,
    () => fakeEvents(r.events).some((e) => e.event === 'admin_listening'),
    { timeoutMs: 30_000, intervalMs: 50 },
  );

  const notReady = await status(r.ports.status, '/healthz/ready');
  t.equal(notReady.status, 503, 'not ready while discovery is down');
  t.match(
    notReady.body,
    /config not received from XDS server \(is meshd running\?\): cds updates: 0 successful, 0 rejected; lds updates: 0 successful, 0 rejected/,
  );
  t.equal((await status(r.ports.envoyStatus, '/healthz/ready')).status, 503, "the proxy's :15021 listener forwards to the agent");

  // `wait` gives up with Istio's message and exit 255 …
  const timeout = runAgent(['wait', '--url', `http://127.0.0.1:${r.ports.status}/healthz/ready`, '--timeoutSeconds', '1', '--periodMillis', '100'], {
    cwd: r.dir,
    env: {},
  });
  t.equal(await timeout.exited, 255);
  t.match(timeout.out(), /Error: timeout waiting for proxy to become ready\. Last error: HTTP status code 503/);

  // … and returns 0 once discovery comes up and the proxy applied CDS and LDS.
  const waiting = runAgent(
    ['wait', '--url', `http://127.0.0.1:${r.ports.envoyStatus}/healthz/ready`, '--timeoutSeconds', '60', '--periodMillis', '200'],
    { cwd: r.dir, env: {} },
  );
  t.teardown(() => waiting.stop());
  await r.startDaemon();
  await expectExit(t, waiting, 0, 'wait returns 0 once ready');
  t.equal((await status(r.ports.status, '/healthz/ready')).status, 200);

  const ev = fakeEvents(r.events);
  const start = ev.find((e) => e.event === 'start')!;
  const args = start['args'] as string[];
  t.same(args.slice(0, 2), ['-c', path.join(r.dir, 'etc/mesh/proxy/envoy-rev.json')], 'the proxy reads the rendered bootstrap');
  for (const f of [
    '--drain-time-s',
    '--drain-strategy',
    '--parent-shutdown-time-s',
    '--local-address-ip-version',
    '--disable-hot-restart',
    '--allow-unknown-static-fields',
    '-l',
  ]) {
    t.ok(args.includes(f), `proxy started with ${f}`);
  }
  t.equal(args[args.indexOf('--drain-strategy') + 1], 'immediate');
  t.equal(args[args.indexOf('--drain-time-s') + 1], '45');
  t.equal(args[args.indexOf('-l') + 1], 'warning');
  t.ok(
    ev.some((e) => e.event === 'ack' && e['type'] === 'type.googleapis.com/envoy.config.listener.v3.Listener' && e['resources'] === 1),
    'the Gateway listener came through the xDS proxy',
  );
  const bootstrap = JSON.parse(fs.readFileSync(path.join(r.dir, 'etc/mesh/proxy/envoy-rev.json'), 'utf8'));
  t.equal(bootstrap.node.id, `router~127.0.0.1~gw-0.${GATEWAY_NS}~${GATEWAY_NS}.svc.cluster.local`);
  t.ok(fs.statSync(path.join(r.dir, 'etc/mesh/proxy/XDS')).isSocket(), 'xDS socket under the config path');

  const metrics = await status(r.ports.status, '/stats/prometheus');
  t.equal(metrics.status, 200);
  t.ok((metricValue(metrics.body, 'xds_proxy_requests') ?? 0) >= 4, 'agent metrics: xds_proxy_requests');
  t.ok((metricValue(metrics.body, 'xds_proxy_responses') ?? 0) >= 2, 'agent metrics: xds_proxy_responses');
  t.ok((metricValue(metrics.body, 'startup_duration_seconds') ?? 0) > 0, 'startup_duration_seconds set when ready');
  t.equal(metricValue(metrics.body, 'envoy_cluster_manager_cds_update_success'), 1, "proxy metrics follow the agent's");
  t.ok(metrics.body.indexOf('xds_proxy_requests') < metrics.body.indexOf('envoy_cluster_manager'), 'agent first, then proxy');

  // `pilot-agent request GET config_dump` prints the proxy's JSON; 15000 maps to the fake's admin port.
  const out = new PassThrough();
  let printed = '';
  out.on('data', (d) => (printed += d));
  const request = makeRequestHandler((port) => `127.0.0.1:${port === 15000 ? r.ports.admin : port}`);
  const ctx = (args: string[], port = 15000) => requestContext(args, port, out);
  t.equal(await request(ctx(['GET', 'config_dump'])), 0);
  const dump = JSON.parse(printed);
  t.equal(dump.configs[2]['@type'], 'type.googleapis.com/envoy.admin.v3.ListenersConfigDump');
  t.ok(dump.configs[2].version_info, 'the listeners version the proxy ACKed');
  await t.rejects(request(ctx(['GET', 'config_dump'], 15001)), { message: 'debug port 15001 is not in allowed list [15000 15004 15020 15021]' });

  t.equal((await status(r.ports.status, '/quitquitquit')).status, 405, 'GET is not allowed');
  const ip = nonLoopbackIp();
  if (ip) t.equal((await status(r.ports.status, '/quitquitquit', 'POST', ip)).status, 403, `refused from ${ip}`);
  else t.pass('refused from a non-loopback address', { skip: 'no non-loopback address on this machine' });
  t.equal((await status(r.ports.status, '/quitquitquit', 'POST')).status, 200);
  const t0 = Date.now();
  await expectExit(t, a, 0, 'the agent exits at once');
  t.ok(Date.now() - t0 < 5000, 'no drain period');
  t.notOk(
    fakeEvents(r.events).some((e) => e.event === 'drain_listeners'),
    'no drain',
  );
  t.ok(
    fakeEvents(r.events).some((e) => e.event === 'SIGTERM'),
    'the proxy was stopped',
  );
  t.notOk(fs.existsSync(path.join(r.dir, 'etc/mesh/proxy/envoy-rev.json')), 'the bootstrap is removed when the proxy ends');
});

t.test('SIGTERM: drain listeners, wait terminationDrainDuration, stop the proxy', async (t) => {
  const r = await rig(t, { proxyConfig: { terminationDrainDuration: '2s' } });
  const a = r.agent();
  await waitReady(r, a);
  const sent = Date.now();
  a.child.kill('SIGTERM');
  await waitFor(
    () => a.out(),
    () => fakeEvents(r.events).some((e) => e.event === 'drain_listeners'),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  const ready = await status(r.ports.status, '/healthz/ready').catch(() => ({ status: 0, body: '' }));
  t.equal(ready.status, 503, 'not ready once shutdown began');
  t.match(ready.body, /server is terminated: SIGTERM received/);
  await expectExit(t, a, 0, 'exit 0 after the drain');
  const ev = fakeEvents(r.events);
  const drain = ev.find((e) => e.event === 'drain_listeners')!;
  const term = ev.find((e) => e.event === 'SIGTERM')!;
  t.equal(drain['query'], '?graceful', 'a gateway drains all listeners gracefully');
  t.ok(drain.t >= sent - 50, 'drain after the signal');
  t.ok(term.t - drain.t >= 1900, `the proxy is stopped after terminationDrainDuration (${term.t - drain.t}ms)`);
  t.ok(term.t - drain.t < 6000, 'and not much later');
  t.match(a.out(), /Graceful termination period complete/);
});

t.test('/quitquitquit during a graceful termination cuts it short', async (t) => {
  const r = await rig(t, { proxyConfig: { terminationDrainDuration: '60s' } });
  const a = r.agent();
  await waitReady(r, a);
  a.child.kill('SIGTERM');
  await a.waitForLog(/Graceful termination period is 60000ms/);
  const sent = Date.now();
  t.equal((await status(r.ports.status, '/quitquitquit', 'POST')).status, 200);
  await expectExit(t, a, 0, 'exit 0');
  t.ok(Date.now() - sent < 8000, 'well before the termination drain duration');
  t.ok(
    fakeEvents(r.events).some((e) => e.event === 'SIGTERM'),
    'the proxy was stopped',
  );
});

t.test('sidecar: /drain drains inbound listeners now; SIGTERM then stops at once', async (t) => {
  const r = await rig(t, { type: 'sidecar', proxyConfig: { terminationDrainDuration: '20s' } });
  const a = r.agent();
  await waitReady(r, a);
  t.equal((await status(r.ports.status, '/drain', 'GET')).status, 405);
  t.equal((await status(r.ports.status, '/drain', 'POST')).status, 200);
  await waitFor(
    () => a.out(),
    () => fakeEvents(r.events).some((e) => e.event === 'drain_listeners'),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.equal(fakeEvents(r.events).find((e) => e.event === 'drain_listeners')!['query'], '?inboundonly&graceful&skip_exit');
  t.equal((await status(r.ports.status, '/healthz/ready')).status, 503, 'draining is not ready');
  const sent = Date.now();
  a.child.kill('SIGTERM');
  t.equal(await a.exited, 0);
  t.ok(Date.now() - sent < 8000, 'no second drain period after /drain');
  t.equal(fakeEvents(r.events).filter((e) => e.event === 'drain_listeners').length, 1, 'drained once');
});

t.test('EXIT_ON_ZERO_ACTIVE_CONNECTIONS: minimum drain, then exit when the last connection closes', async (t) => {
  const r = await rig(t, { proxyConfig: { terminationDrainDuration: '30s' } });
  const a = r.agent([], { EXIT_ON_ZERO_ACTIVE_CONNECTIONS: 'true', MINIMUM_DRAIN_DURATION: '1s' });
  await waitReady(r, a);
  const sock = net.connect(r.ports.gw, '127.0.0.1');
  await new Promise((resolve) => sock.once('connect', resolve));
  a.child.kill('SIGTERM');
  await a.waitForLog(/There are still 1 active connections/);
  t.notOk(
    fakeEvents(r.events).some((e) => e.event === 'SIGTERM'),
    'the proxy runs while a connection is open',
  );
  const closed = Date.now();
  sock.destroy();
  await expectExit(t, a, 0, 'exit 0 once no connection is left');
  const ev = fakeEvents(r.events);
  const drain = ev.find((e) => e.event === 'drain_listeners')!;
  const polls = ev.filter((e) => e.event === 'admin' && String(e['query']).includes('downstream_cx_active'));
  const term = ev.find((e) => e.event === 'SIGTERM')!;
  t.ok(polls.length >= 1 && polls[0]!.t - drain.t >= 950, 'the first check comes after MINIMUM_DRAIN_DURATION');
  t.ok(term.t >= closed && term.t - closed < 4000, `stopped soon after the connection closed (${term.t - closed}ms)`);
  t.match(a.out(), /There are no more active connections\. terminating proxy/);
});

t.test("the proxy's exit status is the agent's; labels file and bootstrap override reach the proxy", async (t) => {
  const r = await rig(t, { daemon: false });
  fs.mkdirSync(path.join(r.dir, 'etc/mesh/pod'), { recursive: true });
  fs.writeFileSync(path.join(r.dir, 'etc/mesh/pod/labels'), 'app="gw"\npod-template-hash="abc12"\nistio-locality="eu.eu-1"\n');
  fs.writeFileSync(path.join(r.dir, 'override.yaml'), 'stats_flush_interval: 7s\n');
  const a = r.agent([], { FAKE_ENVOY_EXIT: '3:1500', MESH_BOOTSTRAP_OVERRIDE: 'override.yaml' });
  await expectExit(t, a, 3, 'exit status of the proxy');
  t.match(a.out(), /Envoy exited with error: exit status 3/);
  const start = fakeEvents(r.events).find((e) => e.event === 'start')!;
  const node = start['node'] as { cluster: string; locality: Record<string, string>; metadata: Record<string, unknown> };
  t.same(node.metadata['LABELS'], { mesh: 'ingressgateway', app: 'gw', 'istio-locality': 'eu/eu-1' }, 'METAJSON labels + the downward-API file');
  t.same(node.locality, { region: 'eu', zone: 'eu-1' });
  t.equal(node.cluster, `gw.${GATEWAY_NS}`);
  const args = start['args'] as string[];
  t.equal(args[args.indexOf('--config-yaml') + 1], '{"stats_flush_interval":"7s"}', 'MESH_BOOTSTRAP_OVERRIDE as JSON');
});

t.test('a proxy ignoring SIGTERM is killed after the grace period', async (t) => {
  const r = await rig(t, { daemon: false, proxyConfig: { terminationDrainDuration: '0s' } });
  const a = r.agent([], { FAKE_ENVOY_IGNORE_SIGTERM: '1' });
  await waitFor(
    () => a.out(),
    () => fakeEvents(r.events).some((e) => e.event === 'admin_listening'),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  a.child.kill('SIGTERM');
  await expectExit(t, a, 0, 'exit 0');
  t.ok(
    fakeEvents(r.events).some((e) => e.event === 'SIGTERM'),
    'SIGTERM first',
  );
  t.match(a.out(), /killed/);
});

t.test('DISABLE_PROXY with GRPC_XDS_BOOTSTRAP: agent only, ready without a proxy', async (t) => {
  const r = await rig(t);
  const a = r.agent([], { DISABLE_PROXY: 'true', GRPC_XDS_BOOTSTRAP: 'etc/mesh/proxy/grpc-bootstrap.json' });
  await waitReady(r, a);
  const g = JSON.parse(fs.readFileSync(path.join(r.dir, 'etc/mesh/proxy/grpc-bootstrap.json'), 'utf8'));
  t.same(g.xds_servers[0].server_uri, `unix://${path.join(r.dir, 'etc/mesh/proxy/XDS')}`);
  t.equal(g.node.metadata.GENERATOR, 'grpc');
  t.equal(g.node.id, `router~127.0.0.1~gw-0.${GATEWAY_NS}~${GATEWAY_NS}.svc.cluster.local`);
  t.notOk(
    fakeEvents(r.events).some((e) => e.event === 'start'),
    'no proxy started',
  );
  a.child.kill('SIGTERM');
  t.equal(await a.exited, 0);
});

t.test('bad input fails before anything starts, naming what is wrong', async (t) => {
  const r = await rig(t, { daemon: false });
  const bad = runAgent(['proxy', 'gateway'], { cwd: r.dir, env: r.env });
  t.equal(await bad.exited, 255);
  t.match(bad.out(), /Error: Invalid proxy Type: gateway/);
  fs.writeFileSync(path.join(r.dir, 'bad-mesh.yaml'), 'defaultConfig:\n  proxyAdminPort: many\n');
  const badMesh = runAgent(['proxy', 'router', '--meshConfig', 'bad-mesh.yaml'], { cwd: r.dir, env: r.env });
  t.equal(await badMesh.exited, 255);
  t.match(
    badMesh.out(),
    /Error: failed to get proxy config: failed to unmarshal mesh config from file \[bad-mesh\.yaml\]: defaultConfig\.proxyAdminPort: expected a port number, got string "many"/,
  );
  const missing = runAgent(['proxy', 'router', '--meshConfig', 'nope.yaml'], { cwd: r.dir, env: r.env });
  t.equal(await missing.exited, 255);
  t.match(missing.out(), /Error: failed to read mesh config file nope\.yaml: no such file/);
  const badEnv = runAgent(['proxy', 'router'], { cwd: r.dir, env: { ...r.env, PROXY_CONFIG: '{"statusPort": "x"}' } });
  t.equal(await badEnv.exited, 255);
  t.match(badEnv.out(), /failed to unmarshal mesh config from environment \[PROXY_CONFIG\]: PROXY_CONFIG\.statusPort: expected a port number/);
  // The Go-template engine is loaded only for a template: its errors still stop the agent, naming the file.
  fs.writeFileSync(path.join(r.dir, 'bad.tmpl'), '{"node": {{ .nodeID }');
  const badTemplate = runAgent(['proxy', 'router', '--templateFile', 'bad.tmpl'], { cwd: r.dir, env: r.env });
  t.equal(await badTemplate.exited, 255);
  t.match(badTemplate.out(), /Error: failed to generate bootstrap config: failed to render bootstrap template bad\.tmpl: template: bad\.tmpl:1: /);
});
