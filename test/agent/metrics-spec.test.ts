// Every metric of doc 2 §4.6 against the built `pilot-agent proxy` (a gateway with its DNS proxy on, in front
// of the fake proxy of test/agent/fixtures, connected to the built discovery daemon): names and Prometheus
// types come from the spec table, label names from Istio 1.26 (pkg/istio-agent/metrics, pkg/dns,
// security/pkg/monitoring…). Names whose behaviour mesh's agent does not have are listed in ABSENT with
// the reason; they must not be exported.
import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { checkSpecMetrics, parseExposition, sampleSum, specMetrics } from '../helpers/metrics-spec';
import { fakeEnvoyBinary, makeServerCert, summarize, GATEWAY_POD_ENV } from '../helpers/agent';
import { freePort } from '../helpers/ports';
import { gatewayConfig } from '../helpers/mesh-yaml';
import { startDiscovery } from '../helpers/daemon';
import { tempDir } from '../helpers/temp';
import * as grpcJs from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { SecretDiscoveryService } from '../../src/gen/envoy/service/secret/v3/sds_pb';
import { DiscoveryRequestSchema, type DiscoveryResponse } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { grpcClientConstructor } from '../../src/lib/xds/grpc';
import { TYPE_URL } from '../../src/lib/xds/type-urls';
import { waitFor } from '../helpers/wait';

const SdsClient = grpcClientConstructor(SecretDiscoveryService);

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** Label names of Istio 1.26; none when not listed. */
const LABELS: Record<string, readonly string[]> = {
  cert_expiry_seconds: ['resource_name'],
  proxy_connection_terminations: ['type'],
  meshd_connection_terminations: ['type'],
  num_failed_outgoing_requests: ['request_type'],
  num_outgoing_requests: ['request_type'],
  num_outgoing_retries: ['request_type'],
  outgoing_latency: ['request_type'],
  pilot_total_xds_rejects: ['type'],
  pilot_xds_expired_nonce: ['type'],
  scrape_failures_total: ['type'],
  mesh_build: ['component', 'tag'],
};

const NO_WASM = 'the agent does not fetch or convert Wasm modules (WasmPlugin is validated and stored, not applied)';
const NO_QUEUE =
  "Istio's agent links pkg/queue but runs no queue.Instance (its secret cache uses a Delayed queue, which has no metrics); mesh's agent has no controller queue either";
// pilot_xds_{cds,eds,lds,rds}_reject are declared with the SDS server's pkg/xds metrics (a TYPE line) but get
// no sample in an agent, as in Istio's: the SDS server's NACKs are of secrets (pilot_total_xds_rejects{type="sds"}).
/** Spec names whose behaviour mesh's agent does not have (reviewed data: each says why). */
const ABSENT: Record<string, string> = {
  pilot_worker_queue_depth: NO_QUEUE,
  pilot_worker_queue_duration: NO_QUEUE,
  pilot_worker_queue_latency: NO_QUEUE,
  wasm_cache_entries: NO_WASM,
  wasm_cache_lookup_count: NO_WASM,
  wasm_config_conversion_count: NO_WASM,
  wasm_config_conversion_duration: NO_WASM,
  wasm_remote_fetch_count: NO_WASM,
};

/** One DNS question (type A) for `name` over UDP; resolves with whatever answer comes back. */
function dnsQuery(port: number, name: string): Promise<Buffer> {
  const labels = name.split('.').map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)]));
  const q = Buffer.concat([Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]), ...labels, Buffer.from([0, 0, 1, 0, 1])]);
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket('udp4');
    const timer = setTimeout(() => (s.close(), reject(new Error('no DNS answer'))), 5000);
    s.on('message', (m) => (clearTimeout(timer), s.close(), resolve(m)));
    s.send(q, port, '127.0.0.1');
  });
}

t.test('doc 2 §4.6: every agent metric exported with its type and Istio labels, or listed as absent with the reason', async (t) => {
  const dir = tempDir(t);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  fs.mkdirSync(path.join(dir, 'bin'));
  const envoy = fakeEnvoyBinary(path.join(dir, 'bin'));
  const [status, admin, envoyStatus, envoyMetrics, gw, grpc, dns] = await Promise.all([0, 1, 2, 3, 4, 5, 6].map(() => freePort()));
  fs.writeFileSync(path.join(configDir, 'gateway.yaml'), gatewayConfig(gw!));
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: 127.0.0.1:${grpc}\n  controlPlaneAuthPolicy: NONE\n`);
  const daemon = await startDiscovery({ configDir, grpcPort: grpc! });
  t.teardown(() => daemon.stop());

  const agent = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml'], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...GATEWAY_POD_ENV,
      MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
      MESH_META_ENABLE_DNS_SERVER: 'true',
      DNS_PROXY_ADDR: `127.0.0.1:${dns}`,
      PROXY_STATUS_PORT: String(envoyStatus),
      PROXY_METRICS_PORT: String(envoyMetrics),
      FAKE_ENVOY_EVENTS: path.join(dir, 'events.jsonl'),
      PROXY_CONFIG: JSON.stringify({ binaryPath: envoy, statusPort: status, proxyAdminPort: admin, terminationDrainDuration: '1s' }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  agent.stdout.on('data', (d) => (out += d));
  agent.stderr.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => agent.on('exit', resolve));
  t.teardown(async () => {
    if (agent.exitCode === null && agent.signalCode === null) agent.kill('SIGKILL');
    await exited;
  });
  await waitFor(
    () => `agent not ready:\n${summarize(out)}`,
    async () => (await fetch(`http://127.0.0.1:${status}/healthz/ready`)).status === 200,
    { timeoutMs: 40_000, intervalMs: 50 },
  );
  // a name of the mesh's table and one forwarded upstream (answered or failed: both are counted)
  await dnsQuery(dns!, 'gateway.example.com').catch(() => undefined);

  // The SDS server's pkg/xds metrics, as the proxy's SDS client moves them: a push (pilot_xds_send_time), a
  // NACK of it (pilot_total_xds_rejects{type="sds"}) and a request with a nonce never sent (pilot_xds_expired_nonce).
  const root = makeServerCert(dir, 'sds.example.com').ca;
  const sds = new SdsClient(`unix:${path.join(dir, 'var/run/secrets/workload-spiffe-uds/socket')}`, grpcJs.credentials.createInsecure());
  t.teardown(() => sds.close());
  const stream = sds.streamSecrets();
  stream.on('error', () => undefined);
  const pushed = new Promise<DiscoveryResponse>((resolve) => stream.once('data', resolve));
  const names = [`file-root:${root}`];
  stream.write(
    create(DiscoveryRequestSchema, { node: { id: 'sds-test~127.0.0.1~x.y~y.svc.cluster.local' }, typeUrl: TYPE_URL.secret, resourceNames: names }),
  );
  const push = await pushed;
  stream.write(
    create(DiscoveryRequestSchema, {
      typeUrl: TYPE_URL.secret,
      resourceNames: names,
      responseNonce: push.nonce,
      errorDetail: { code: 3, message: 'bad secret' },
    }),
  );
  stream.write(create(DiscoveryRequestSchema, { typeUrl: TYPE_URL.secret, resourceNames: names, responseNonce: 'never-sent' }));

  const scrape = async () => parseExposition(await (await fetch(`http://127.0.0.1:${status}/stats/prometheus`)).text());
  const spec = specMetrics(2, '### 4.6');
  t.ok(spec.length >= 37, `the spec lists ${spec.length} agent metrics`);
  const moved: Array<[string, Record<string, string>?]> = [
    ['xds_proxy_requests'],
    ['xds_proxy_responses'],
    ['startup_duration_seconds'],
    ['scrapes_total'],
    ['dns_requests_total'],
    ['mesh_build', { component: 'pilot-agent' }],
    ['pilot_xds_send_time'],
    ['pilot_total_xds_rejects', { type: 'sds' }],
    ['pilot_xds_expired_nonce', { type: 'sds' }],
  ];
  let exp = await scrape();
  await waitFor(
    () =>
      `still zero: ${moved
        .filter(([n, l]) => !(sampleSum(exp, n, l) > 0))
        .map(([n]) => n)
        .join(', ')}\n${summarize(out)}`,
    async () => {
      exp = await scrape();
      return moved.every(([n, l]) => sampleSum(exp, n, l) > 0);
    },
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.same(checkSpecMetrics(exp, spec, LABELS, ABSENT), [], 'every spec name exported with its type and labels, or absent with a reason');
  t.equal(sampleSum(exp, 'pilot_total_xds_rejects', { type: 'sds' }), 1, 'the one NACK of a secret');
  t.equal(sampleSum(exp, 'pilot_xds_expired_nonce', { type: 'sds' }), 1, 'the one request with a nonce never sent');
  for (const name of ['pilot_xds_cds_reject', 'pilot_xds_eds_reject', 'pilot_xds_lds_reject', 'pilot_xds_rds_reject']) {
    t.notOk(exp.samples.has(name), `${name}: declared, no sample in an agent (as in Istio's)`);
  }
});
