// The agent's xDS proxy against the real discovery daemon (dist/pilot-discovery): a downstream ADS client on
// the local Unix socket gets CDS/LDS through it and ACKs; the daemon restarting on the same port is bridged
// (the downstream stream stays open, the upstream reconnects with backoff and resumes by replaying the
// latest requests, later pushes still arrive); TLS with the expected server name; delta xDS; metrics.
import t, { type Test } from 'tap';
import * as fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create, type JsonObject } from '@bufbuild/protobuf';
import { anyUnpack } from '@bufbuild/protobuf/wkt';
import { AggregatedDiscoveryService } from '../../src/gen/envoy/service/discovery/v3/ads_pb';
import {
  DeltaDiscoveryRequestSchema,
  DiscoveryRequestSchema,
  type DeltaDiscoveryResponse,
  type DiscoveryResponse,
} from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { HEALTH_INFO_TYPE_URL, TYPE_URL } from '../../src/lib/xds/type-urls';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { ListenerSchema } from '../../src/gen/envoy/config/listener/v3/listener_pb';
import { addGrpcService, grpcClientConstructor } from '../../src/lib/xds/grpc';
import { AnySchema } from '@bufbuild/protobuf/wkt';
import { DiscoveryResponseSchema, type DiscoveryRequest } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { metricsText } from '../../src/lib/metrics';
import { fromBinary } from '@bufbuild/protobuf';
import { NameTableSchema } from '../../src/gen/istio/networking/nds/v1/nds_pb';
import { backoffDelay, DEFAULT_BACKOFF, XdsProxy, type UpstreamOptions } from '../../src/agent/xds-proxy';
import { built } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { gatewayConfig, GATEWAY_NS } from '../helpers/mesh-yaml';
import { makeServerCert } from '../helpers/agent';
import { metricValue } from '../helpers/prometheus';
import { startDiscovery, type RunningDaemon } from '../helpers/daemon';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const CDS = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const LDS = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const AdsClient = grpcClientConstructor(AggregatedDiscoveryService);

const NODE = create(NodeSchema, {
  id: `router~127.0.0.1~gw-0.${GATEWAY_NS}~${GATEWAY_NS}.svc.cluster.local`,
  metadata: { LABELS: { mesh: 'ingressgateway' }, NAMESPACE: GATEWAY_NS } as JsonObject,
});

/** A downstream like Envoy: requests CDS then LDS and ACKs everything it gets. */
class Downstream {
  readonly client: InstanceType<typeof AdsClient>;
  readonly call: ReturnType<InstanceType<typeof AdsClient>['streamAggregatedResources']>;
  readonly responses: DiscoveryResponse[] = [];
  status: grpc.StatusObject | undefined;
  constructor(socket: string) {
    const client = new AdsClient(`unix:${socket}`, grpc.credentials.createInsecure());
    this.client = client;
    this.call = client.streamAggregatedResources();
    this.call.on('data', (r: DiscoveryResponse) => {
      this.responses.push(r);
      this.call.write(create(DiscoveryRequestSchema, { typeUrl: r.typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce }));
    });
    this.call.on('error', () => {});
    this.call.on('status', (s: grpc.StatusObject) => (this.status = s));
  }
  subscribe(): void {
    this.call.write(create(DiscoveryRequestSchema, { typeUrl: CDS, node: NODE }));
    this.call.write(create(DiscoveryRequestSchema, { typeUrl: LDS }));
  }
  count(type: string): number {
    return this.responses.filter((r) => r.typeUrl === type).length;
  }
  listenerPorts(): number[] {
    const last = [...this.responses].reverse().find((r) => r.typeUrl === LDS);
    return (last?.resources ?? []).map((a) => {
      const l = anyUnpack(a, ListenerSchema)!;
      const sa = l.address?.address.case === 'socketAddress' ? l.address.address.value : undefined;
      return sa?.portSpecifier.case === 'portValue' ? sa.portSpecifier.value : 0;
    });
  }
  close(): void {
    this.call.end();
    this.client.close();
  }
}

async function metric(name: string, labels = ''): Promise<number> {
  return metricValue(await metricsText(), name, labels) ?? 0;
}

async function setup(
  t: Test,
  upstream?: (d: RunningDaemon) => Partial<UpstreamOptions>,
  daemonOpts: { tls?: { cert: string; key: string }; env?: NodeJS.ProcessEnv } = {},
) {
  const dir = tempDir(t);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  const gwPort = await freePort();
  fs.writeFileSync(path.join(configDir, 'gateway.yaml'), gatewayConfig(gwPort));
  let daemon = await startDiscovery({ configDir, ...daemonOpts });
  t.teardown(() => daemon.stop());
  const proxy = new XdsProxy({
    socketPath: path.join(dir, 'etc/mesh/proxy/XDS'),
    upstream: { address: daemon.grpc, clusterId: 'Orchestrator', ...upstream?.(daemon) },
  });
  await proxy.start();
  t.teardown(() => proxy.stop());
  const restart = async () => {
    const port = Number(daemon.grpc.split(':')[1]);
    daemon = await startDiscovery({ configDir, grpcPort: port, ...daemonOpts });
    return daemon;
  };
  return { dir, configDir, gwPort, proxy, daemon: () => daemon, restart };
}

t.test('forwards the proxy stream to the daemon and its ACKs back', async (t) => {
  const s = await setup(t);
  t.ok(fs.statSync(s.proxy.socketPath).isSocket(), 'listens on the Unix socket');
  const before = { req: await metric('xds_proxy_requests'), resp: await metric('xds_proxy_responses') };
  const down = new Downstream(s.proxy.socketPath);
  t.teardown(() => down.close());
  down.subscribe();
  await waitFor(
    () => `responses: ${down.responses.map((r) => r.typeUrl)}`,
    () => down.count(CDS) >= 1 && down.count(LDS) >= 1,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  t.ok(down.responses.find((r) => r.typeUrl === CDS)!.resources.length > 0, 'clusters arrived');
  t.same(down.listenerPorts(), [s.gwPort], "the Gateway's listener arrived");
  await waitFor(
    () => 'requests and ACKs counted',
    async () => (await metric('xds_proxy_requests')) >= before.req + 4,
    { timeoutMs: 5000, intervalMs: 50 },
  );
  t.ok((await metric('xds_proxy_responses')) >= before.resp + 2, 'responses counted');
  t.equal(s.proxy.streamCount(), 1);
  down.close();
  await waitFor(
    () => 'stream forgotten after the proxy left',
    () => s.proxy.streamCount() === 0,
    { timeoutMs: 5000, intervalMs: 50 },
  );
});

t.test('discovery restart: the downstream keeps its stream, the upstream reconnects and resumes', async (t) => {
  const s = await setup(t);
  const down = new Downstream(s.proxy.socketPath);
  t.teardown(() => down.close());
  down.subscribe();
  await waitFor(
    () => 'initial config',
    () => down.count(LDS) >= 1 && down.count(CDS) >= 1,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  const before = {
    term: (await metric('meshd_connection_terminations', 'type="cancelled"')) + (await metric('meshd_connection_terminations', 'type="error"')),
    fail: await metric('meshd_connection_failures'),
  };
  const counts = { cds: down.count(CDS), lds: down.count(LDS) };

  await s.daemon().stop();
  await waitFor(
    () => 'termination counted',
    async () =>
      (await metric('meshd_connection_terminations', 'type="cancelled"')) + (await metric('meshd_connection_terminations', 'type="error"')) >
      before.term,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  // The first reconnect comes after about a second and fails: nothing listens.
  await waitFor(
    () => 'connection failure counted',
    async () => (await metric('meshd_connection_failures')) > before.fail,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.equal(down.status, undefined, 'the downstream stream is still open while discovery is down');

  await s.restart();
  await waitFor(
    () => `resumed responses: ${down.responses.length}`,
    () => down.count(CDS) > counts.cds && down.count(LDS) > counts.lds,
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.equal(down.status, undefined, 'still the same downstream stream');
  t.same(down.listenerPorts(), [s.gwPort], 'the same config again');

  // Pushes after the reconnect still reach the proxy.
  const port2 = await freePort();
  fs.writeFileSync(path.join(s.configDir, 'gateway.yaml'), gatewayConfig(port2));
  await waitFor(
    () => `ports ${down.listenerPorts()}`,
    () => down.listenerPorts().includes(port2),
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.pass('a config change after the reconnect is pushed through the new upstream stream');
});

t.test('a downstream connecting while discovery is down waits, then gets config', async (t) => {
  const s = await setup(t);
  await s.daemon().stop();
  const down = new Downstream(s.proxy.socketPath);
  t.teardown(() => down.close());
  down.subscribe();
  await new Promise((r) => setTimeout(r, 1500));
  t.equal(down.status, undefined, 'not failed');
  t.equal(down.responses.length, 0);
  await s.restart();
  await waitFor(
    () => 'config after discovery came up',
    () => down.count(CDS) >= 1 && down.count(LDS) >= 1,
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.pass('requests made while discovery was down were replayed');
});

t.test('TLS to the secure port: the expected server name is checked; no client certificate', async (t) => {
  const certDir = tempDir(t, 'mesh-agent-certs-');
  const certs = makeServerCert(certDir, 'meshd.test.svc');
  const tlsOpts = { tls: { cert: certs.cert, key: certs.key }, env: { XDS_AUTH: 'false' } };
  const good = await setup(
    t,
    (d) => ({ address: d.secureGrpc!, tls: { rootCerts: fs.readFileSync(certs.ca), serverName: 'meshd.test.svc' } }),
    tlsOpts,
  );
  const down = new Downstream(good.proxy.socketPath);
  t.teardown(() => down.close());
  down.subscribe();
  await waitFor(
    () => 'config over TLS',
    () => down.count(LDS) >= 1,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  t.same(down.listenerPorts(), [good.gwPort]);

  const fails = await metric('meshd_connection_failures');
  const bad = await setup(
    t,
    (d) => ({ address: d.secureGrpc!, tls: { rootCerts: fs.readFileSync(certs.ca), serverName: 'someone-else.svc' } }),
    tlsOpts,
  );
  const down2 = new Downstream(bad.proxy.socketPath);
  t.teardown(() => down2.close());
  down2.subscribe();
  await waitFor(
    () => 'the wrong name fails the connection',
    async () => (await metric('meshd_connection_failures')) > fails,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.equal(down2.responses.length, 0, 'no config from a daemon with an unexpected certificate name');
  t.equal(down2.status, undefined, 'the downstream is kept waiting, not failed');
});

t.test('delta xDS is proxied and resumes after a restart', async (t) => {
  const s = await setup(t);
  const client = new AdsClient(`unix:${s.proxy.socketPath}`, grpc.credentials.createInsecure());
  const call = client.deltaAggregatedResources();
  t.teardown(() => {
    call.end();
    client.close();
  });
  const got: DeltaDiscoveryResponse[] = [];
  call.on('data', (r: DeltaDiscoveryResponse) => {
    got.push(r);
    call.write(create(DeltaDiscoveryRequestSchema, { typeUrl: r.typeUrl, responseNonce: r.nonce }));
  });
  call.on('error', () => {});
  let status: grpc.StatusObject | undefined;
  call.on('status', (st: grpc.StatusObject) => (status = st));
  call.write(create(DeltaDiscoveryRequestSchema, { typeUrl: LDS, node: NODE }));
  await waitFor(
    () => 'delta LDS',
    () => got.some((r) => r.typeUrl === LDS && r.resources.length > 0),
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  await s.daemon().stop();
  await s.restart();
  const port2 = await freePort();
  fs.writeFileSync(path.join(s.configDir, 'gateway.yaml'), gatewayConfig(port2));
  await waitFor(
    () => `delta responses: ${got.map((r) => r.resources.map((x) => x.name)).join(' | ')}`,
    () => got.some((r) => r.resources.some((res) => res.resource && anyUnpack(res.resource, ListenerSchema)?.name.endsWith(`_${port2}`))),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.equal(status, undefined, 'the delta stream stayed open across the restart');
});

t.test('agent-internal types (the DNS name table) are requested, consumed and ACKed by the agent', async (t) => {
  // A stand-in upstream that answers LDS and NDS and records what it is sent.
  const seen: DiscoveryRequest[] = [];
  const server = new grpc.Server();
  addGrpcService(server, AggregatedDiscoveryService, {
    streamAggregatedResources: (call) => {
      call.on('data', (req: DiscoveryRequest) => {
        seen.push(req);
        if (req.responseNonce !== '') return;
        const resources = req.typeUrl === TYPE_URL.nameTable ? [create(AnySchema, { typeUrl: TYPE_URL.nameTable, value: new Uint8Array() })] : [];
        call.write(create(DiscoveryResponseSchema, { typeUrl: req.typeUrl, versionInfo: 'v1', nonce: `n-${req.typeUrl}`, resources }));
      });
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  t.teardown(() => server.forceShutdown());
  const dir = tempDir(t);
  let tables = 0;
  const proxy = new XdsProxy({
    socketPath: path.join(dir, 'XDS'),
    upstream: { address: `127.0.0.1:${port}`, clusterId: 'c1' },
    handlers: new Map([[TYPE_URL.nameTable, () => (tables++, undefined)]]),
  });
  await proxy.start();
  t.teardown(() => proxy.stop());
  const down = new Downstream(proxy.socketPath);
  t.teardown(() => down.close());
  down.call.write(create(DiscoveryRequestSchema, { typeUrl: LDS, node: NODE }));
  await waitFor(
    () => `upstream saw ${seen.map((r) => `${r.typeUrl}/${r.responseNonce}`)}`,
    () => tables === 1 && seen.some((r) => r.typeUrl === TYPE_URL.nameTable && r.responseNonce === `n-${TYPE_URL.nameTable}`),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.equal(seen[0]!.typeUrl, LDS, "the proxy's request first");
  t.equal(seen[0]!.node?.id, NODE.id, 'with the node');
  t.equal(seen[1]!.typeUrl, TYPE_URL.nameTable, 'then the agent asks for the name table');
  const ack = seen.find((r) => r.typeUrl === TYPE_URL.nameTable && r.responseNonce !== '')!;
  t.equal(ack.versionInfo, 'v1', 'the agent ACKs the name table');
  t.equal(ack.errorDetail, undefined);
  await waitFor(
    () => 'LDS forwarded',
    () => down.count(LDS) === 1,
    { timeoutMs: 5000, intervalMs: 50 },
  );
  t.equal(down.responses.filter((r) => r.typeUrl === TYPE_URL.nameTable).length, 0, 'the name table is not forwarded to the proxy');
});

t.test(
  "health reports (Istio's istio.v1.HealthInformation) go upstream after the listener request and again on each new upstream stream",
  async (t) => {
    const seen: Array<{ stream: number; req: DiscoveryRequest }> = [];
    const calls: Array<grpc.ServerDuplexStream<DiscoveryRequest, unknown>> = [];
    const server = new grpc.Server();
    addGrpcService(server, AggregatedDiscoveryService, {
      streamAggregatedResources: (call) => {
        const stream = calls.push(call as never);
        call.on('data', (req: DiscoveryRequest) => seen.push({ stream, req }));
        call.on('end', () => call.end());
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
    );
    t.teardown(() => server.forceShutdown());
    const dir = tempDir(t);
    const proxy = new XdsProxy({
      socketPath: path.join(dir, 'XDS'),
      upstream: { address: `127.0.0.1:${port}`, clusterId: 'c1' },
      backoff: { initialMs: 50, maxMs: 100, multiplier: 2, jitter: 0 },
    });
    await proxy.start();
    t.teardown(() => proxy.stop());
    const health = (stream?: number) =>
      seen.filter((s) => s.req.typeUrl === HEALTH_INFO_TYPE_URL && (stream === undefined || s.stream === stream)).map((s) => s.req);

    // a report before the proxy asked for listeners waits
    proxy.reportHealth({ healthy: false, message: 'Get "http://10.0.0.1:8080/": dial tcp 10.0.0.1:8080: connect: connection refused' });
    const down = new Downstream(proxy.socketPath);
    t.teardown(() => down.close());
    down.call.write(create(DiscoveryRequestSchema, { typeUrl: CDS, node: NODE }));
    await waitFor(
      () => 'CDS upstream',
      () => seen.length === 1,
      { timeoutMs: 5000, intervalMs: 50 },
    );
    await new Promise((r) => setTimeout(r, 100));
    t.equal(health().length, 0, 'nothing before the listener request');
    down.call.write(create(DiscoveryRequestSchema, { typeUrl: LDS }));
    await waitFor(
      () => `upstream saw ${seen.map((s) => s.req.typeUrl)}`,
      () => health().length === 1,
      { timeoutMs: 5000, intervalMs: 50 },
    );
    t.same(
      seen.map((s) => s.req.typeUrl),
      [CDS, LDS, HEALTH_INFO_TYPE_URL],
      'after the listener request',
    );
    t.match(
      health()[0]!.errorDetail,
      { code: grpc.status.INTERNAL, message: 'Get "http://10.0.0.1:8080/": dial tcp 10.0.0.1:8080: connect: connection refused' },
      'unhealthy: error_detail Internal with the reason',
    );

    proxy.reportHealth({ healthy: true });
    await waitFor(
      () => 'the healthy report',
      () => health().length === 2,
      { timeoutMs: 5000, intervalMs: 50 },
    );
    t.equal(health()[1]!.errorDetail, undefined, 'healthy: no error_detail');

    // the upstream stream ends: the new one gets the subscriptions, then the latest report again
    calls[0]!.emit('error', { code: grpc.status.UNAVAILABLE, details: 'gone' });
    await waitFor(
      () => `second stream saw ${seen.filter((s) => s.stream === 2).map((s) => s.req.typeUrl)}`,
      () => health(2).length === 1,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    t.same(
      seen.filter((s) => s.stream === 2).map((s) => s.req.typeUrl),
      [CDS, LDS, HEALTH_INFO_TYPE_URL],
    );
    t.equal(health(2)[0]!.errorDetail, undefined, 'the latest report (healthy)');
    t.equal(down.responses.filter((r) => r.typeUrl === HEALTH_INFO_TYPE_URL).length, 0);
  },
);

t.test('the name table from the real daemon, over state-of-the-world and delta streams', async (t) => {
  const configDir = tempDir(t, 'mesh-nds-config-');
  fs.writeFileSync(
    path.join(configDir, 'se.yaml'),
    'apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: partner, namespace: default}\nspec:\n  hosts: [api.partner.test]\n  addresses: [240.240.0.7]\n  resolution: DNS\n  ports: [{number: 443, name: tls, protocol: TLS}]\n',
  );
  const d = await startDiscovery({ configDir });
  t.teardown(() => d.stop());
  const sidecar = create(NodeSchema, {
    id: 'sidecar~10.1.0.5~app-0.default~default.svc.cluster.local',
    metadata: { NAMESPACE: 'default', DNS_CAPTURE: 'true' } as JsonObject,
  });
  for (const mode of ['sotw', 'delta'] as const) {
    const tables: Record<string, { ips: string[]; registry: string }>[] = [];
    const proxy = new XdsProxy({
      socketPath: path.join(tempDir(t), 'XDS'),
      upstream: { address: d.grpc, clusterId: 'Orchestrator' },
      handlers: new Map([[TYPE_URL.nameTable, (any) => (tables.push(fromBinary(NameTableSchema, any.value).table), undefined)]]),
    });
    await proxy.start();
    t.teardown(() => proxy.stop());
    const client = new AdsClient(`unix:${proxy.socketPath}`, grpc.credentials.createInsecure());
    const types: string[] = [];
    if (mode === 'sotw') {
      const call = client.streamAggregatedResources();
      call.on('data', (r: DiscoveryResponse) => {
        types.push(r.typeUrl);
        call.write(create(DiscoveryRequestSchema, { typeUrl: r.typeUrl, versionInfo: r.versionInfo, responseNonce: r.nonce }));
      });
      call.on('error', () => {});
      call.write(create(DiscoveryRequestSchema, { typeUrl: LDS, node: sidecar }));
      t.teardown(() => call.end());
    } else {
      const call = client.deltaAggregatedResources();
      call.on('data', (r: DeltaDiscoveryResponse) => {
        types.push(r.typeUrl);
        call.write(create(DeltaDiscoveryRequestSchema, { typeUrl: r.typeUrl, responseNonce: r.nonce }));
      });
      call.on('error', () => {});
      call.write(create(DeltaDiscoveryRequestSchema, { typeUrl: LDS, node: sidecar }));
      t.teardown(() => call.end());
    }
    t.teardown(() => client.close());
    await waitFor(
      () => `${mode}: tables ${JSON.stringify(tables)}, proxy got ${types.join(',')}`,
      () => tables.length >= 1 && types.includes(LDS),
      { timeoutMs: 15_000, intervalMs: 50 },
    );
    t.same(
      { ips: tables[0]!['api.partner.test']!.ips, registry: tables[0]!['api.partner.test']!.registry },
      { ips: ['240.240.0.7'], registry: 'External' },
      `${mode}: the ServiceEntry's address`,
    );
    t.notOk(types.includes(TYPE_URL.nameTable), `${mode}: the name table stays with the agent`);
  }
});

t.test('backoff: exponential from one second, capped, jittered', async (t) => {
  const mid = () => 0.5;
  t.equal(backoffDelay(0, DEFAULT_BACKOFF, mid), 1000);
  t.equal(backoffDelay(1, DEFAULT_BACKOFF, mid), 2000);
  t.equal(backoffDelay(3, DEFAULT_BACKOFF, mid), 8000);
  t.equal(backoffDelay(20, DEFAULT_BACKOFF, mid), 30_000, 'capped');
  t.equal(
    backoffDelay(0, DEFAULT_BACKOFF, () => 0),
    800,
    '-20% jitter',
  );
  t.equal(
    backoffDelay(0, DEFAULT_BACKOFF, () => 1),
    1200,
    '+20% jitter',
  );
});
