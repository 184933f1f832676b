// Workload identity end to end with the built programs and no cluster (issue 10): the gateway's agent
// authenticates to the daemon's CA with a token from an OIDC issuer the daemon trusts (JWT_RULE), gets a
// certificate for spiffe://cluster.local/ns/mesh-system/sa/ingressgateway, serves it over SDS to the engine
// (read here with the engine's own SDS client too), and the engine terminates ISTIO_MUTUAL TLS with it. The
// certificate is renewed under load without a failed request, and an unreachable CA near expiry leaves the
// last certificate in place until it expires. Certificates are examined with node:crypto and openssl.
import { execFileSync, spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import t, { type Test } from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { SdsSecretConfigSchema, type Secret } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { SecretManager, type SecretWatch } from '../../src/proxy/tls/secrets';
import { LoggerRegistry } from '../../src/proxy/log';
import { StatsStore } from '../../src/proxy/stats/store';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { sdsConfig } from '../../src/xds/gen/tls';
import { built, DIST } from '../helpers/binary';
import { freePort } from '../helpers/ports';
import { metricValue } from '../helpers/prometheus';
import { startDiscovery } from '../helpers/daemon';
import { GATEWAY_IDENTITY, startGateway, type GatewayPorts, type GatewayRig } from '../helpers/gateway';
import { gatewayYaml, virtualServiceDoc } from '../helpers/mesh-yaml';
import { caClient, createCertificate, opensslCsr } from '../ca/helpers';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** A Gateway with a plain HTTP server and an ISTIO_MUTUAL HTTPS server, both routed to the backend. */
function config(p: GatewayPorts, tlsPort: number): string {
  const servers = `  - port: {number: ${tlsPort}, name: https-mesh, protocol: HTTPS}
    hosts: ["*"]
    tls: {mode: ISTIO_MUTUAL}
`;
  return gatewayYaml(p, virtualServiceDoc('all'), { servers });
}

async function gateway(t: Test, agentEnv: NodeJS.ProcessEnv = {}): Promise<{ rig: GatewayRig; tlsPort: number }> {
  const tlsPort = await freePort();
  const rig = await startGateway(t, { config: (p) => config(p, tlsPort), agentEnv });
  return { rig, tlsPort };
}

/** A client certificate for another workload (demo/client), issued by the daemon's CA against a token. */
async function clientCert(t: Test, rig: GatewayRig): Promise<{ cert: string; key: string; ca: string }> {
  const root = fs.readFileSync(rig.daemon.rootCertPath, 'utf8');
  const { csr, key } = opensslCsr(rig.dir, 'ec');
  const token = await rig.issuer!.token({ ns: 'demo', sa: 'client' });
  const chain = await createCertificate(caClient(t, rig.daemon.secureGrpc!, root), { csr, token, ttlSeconds: 3600 });
  return { cert: chain.join(''), key, ca: root };
}

interface TlsReply {
  status: number;
  peer: X509Certificate;
}

/** GET over a new mutual-TLS connection to the gateway's ISTIO_MUTUAL server; the server's certificate comes back. */
function httpsGet(port: number, c: { cert: string; key: string; ca: string }): Promise<TlsReply> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: '/hello',
        cert: c.cert,
        key: c.key,
        ca: c.ca,
        servername: 'gateway.mesh-system',
        agent: false,
        checkServerIdentity: () => undefined,
      },
      (res) => {
        const peer = (res.socket as TLSSocket).getPeerX509Certificate();
        res.resume();
        res.on('end', () => (peer ? resolve({ status: res.statusCode ?? 0, peer }) : reject(new Error('no server certificate'))));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timed out')));
    req.end();
  });
}

/** The engine's SDS client (its GrpcMux and SecretManager) on the agent's socket, as the bootstrap's sds-grpc cluster. */
function engineSds(t: Test, cwd: string): { watch(name: string): SecretWatch } {
  const loggers = new LoggerRegistry('warning');
  const mux = new GrpcMux({
    target: `unix:${path.join(cwd, 'var/run/secrets/workload-spiffe-uds/socket')}`,
    credentials: grpc.credentials.createInsecure(),
    node: create(NodeSchema, { id: 'router~127.0.0.1~reader.mesh-system~mesh-system.svc.cluster.local' }),
    service: 'sds',
    setNodeOnFirstMessageOnly: true,
    log: loggers.get('secret'),
    typeRegistry: proxyTypeRegistry(),
  });
  t.teardown(() => mux.close());
  const manager = new SecretManager(() => ({ key: 'sds-grpc', mux }), loggers.get('secret'), new StatsStore());
  return { watch: (name) => manager.watch(create(SdsSecretConfigSchema, { name, sdsConfig: sdsConfig() }), name) };
}

function inline(s: Secret | undefined, kind: 'cert' | 'root'): string {
  if (kind === 'cert' && s?.type.case === 'tlsCertificate' && s.type.value.certificateChain?.specifier.case === 'inlineBytes') {
    return Buffer.from(s.type.value.certificateChain.specifier.value).toString();
  }
  if (kind === 'root' && s?.type.case === 'validationContext' && s.type.value.trustedCa?.specifier.case === 'inlineBytes') {
    return Buffer.from(s.type.value.trustedCa.specifier.value).toString();
  }
  throw new Error(`secret ${s?.name} is not an inline ${kind}`);
}

t.test('the gateway gets its SPIFFE certificate from the daemon, serves it over SDS, and the engine terminates ISTIO_MUTUAL with it', async (t) => {
  const { rig, tlsPort } = await gateway(t);
  await waitFor(
    () => rig.agentOut(),
    async () => (await rig.get('/hello')).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );

  const sds = engineSds(t, rig.dir);
  const def = sds.watch('default');
  const root = sds.watch('ROOTCA');
  await Promise.all([def.ready, root.ready]);
  const chain = inline(def.current(), 'cert');
  const leaf = new X509Certificate(chain);
  t.equal(leaf.subjectAltName, `URI:${GATEWAY_IDENTITY}`, "the URI SAN is the gateway's identity");
  t.equal(leaf.publicKey.asymmetricKeyType, 'rsa', 'RSA by default');
  t.equal(leaf.publicKey.asymmetricKeyDetails?.modulusLength, 2048);
  t.equal(inline(root.current(), 'root'), fs.readFileSync(rig.daemon.rootCertPath, 'utf8'), 'ROOTCA is the root the daemon publishes');
  fs.writeFileSync(path.join(rig.dir, 'served.pem'), chain);
  t.match(
    execFileSync('openssl', ['verify', '-CAfile', rig.daemon.rootCertPath, path.join(rig.dir, 'served.pem')], { encoding: 'utf8' }),
    /served\.pem: OK/,
    'openssl verifies it against the published root',
  );

  const client = await clientCert(t, rig);
  const r = await httpsGet(tlsPort, client);
  t.equal(r.status, 200, 'routed over ISTIO_MUTUAL');
  t.equal(r.peer.serialNumber, leaf.serialNumber, 'the engine serves the certificate it read over SDS');
  t.equal(r.peer.subjectAltName, `URI:${GATEWAY_IDENTITY}`);
  await t.rejects(httpsGet(tlsPort, { ...client, cert: '', key: '' }), 'no client certificate: refused');

  const stats = await (await fetch(`http://127.0.0.1:${rig.ports.status}/stats/prometheus`)).text();
  const expiry = metricValue(stats, 'cert_expiry_seconds', 'resource_name="default"');
  t.ok(expiry !== undefined && expiry > 86_000 && expiry <= 86_400, `cert_expiry_seconds{resource_name="default"} ≈ 24 h (${expiry})`);
  t.equal(metricValue(stats, 'num_outgoing_requests', 'request_type="csr"'), 1, 'one CSR');
  t.match(rig.agentOut(), /connecting to the discovery daemon at 127\.0\.0\.1:\d+ over mutual TLS, expecting the name meshd\.mesh-system\.svc/);
  t.match(rig.agentOut(), /generated new workload certificate/);

  // The certificate alone authenticates the agent: without its token, a restarted daemon (XDS_AUTH on) still
  // serves it config over the reconnected stream.
  fs.rmSync(path.join(rig.dir, 'var/run/secrets/tokens/mesh-token'));
  await rig.restartDaemon();
  fs.writeFileSync(
    path.join(rig.configDir, 'moved.yaml'),
    `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: moved, namespace: mesh-system}
spec:
  hosts: ["*"]
  gateways: [gw]
  http:
  - match: [{uri: {prefix: /moved}}]
    directResponse: {status: 299}
`,
  );
  await waitFor(
    () => `${rig.agentOut()}\n--- daemon:\n${rig.daemon.log()}`,
    async () => (await rig.get('/moved')).status === 299,
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  t.pass('config from the restarted daemon, authenticated by the workload certificate only');
  t.notMatch(rig.daemon.log(), /rejected unauthenticated stream/, 'no stream was refused');
});

t.test('renewal under load: ECDSA certificates with a short TTL are replaced twice, no request fails', async (t) => {
  // 20 s certificates renewed when half is left: a new one about every 10 s.
  const { rig, tlsPort } = await gateway(t, { SECRET_TTL: '20s', SECRET_GRACE_PERIOD_RATIO_JITTER: '0', ECC_SIGNATURE_ALGORITHM: 'ECDSA' });
  await waitFor(
    () => rig.agentOut(),
    async () => (await rig.get('/hello')).status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  const client = await clientCert(t, rig);
  const serials: string[] = [];
  /** Seconds each certificate had left when first served: at most the SECRET_TTL asked for. */
  const leftAtFirstSight: number[] = [];
  let requests = 0;
  const failures: string[] = [];
  const deadline = Date.now() + 90_000;
  while (serials.length < 3 && Date.now() < deadline) {
    // A bounded loop of alternating plain and mutual-TLS requests, each on a new connection.
    try {
      const plain = await rig.get('/hello');
      requests++;
      if (plain.status !== 200) failures.push(`HTTP ${plain.status}`);
      const r = await httpsGet(tlsPort, client);
      requests++;
      if (r.status !== 200) failures.push(`HTTPS ${r.status}`);
      if (r.peer.subjectAltName !== `URI:${GATEWAY_IDENTITY}`) failures.push(`served ${r.peer.subjectAltName}`);
      if (r.peer.publicKey.asymmetricKeyType !== 'ec') failures.push(`served a ${r.peer.publicKey.asymmetricKeyType} key`);
      if (serials[serials.length - 1] !== r.peer.serialNumber) {
        serials.push(r.peer.serialNumber);
        leftAtFirstSight.push((Date.parse(r.peer.validTo) - Date.now()) / 1000);
      }
    } catch (e) {
      failures.push((e as Error).message);
    }
  }
  t.ok(serials.length >= 3, `the certificate was replaced at least twice (${serials.length} served)`);
  t.same(failures, [], `0 failed requests of ${requests}`);
  t.ok(
    leftAtFirstSight.every((s) => s > 0 && s <= 21),
    `each certificate expires within the 20 s SECRET_TTL asked for (${leftAtFirstSight.map((s) => s.toFixed(1)).join(', ')} s left when first served)`,
  );
  t.match(rig.agentOut(), /rotating the workload certificate[\s\S]*generated new workload certificate/);
});

t.test(
  'the daemon down while the certificate nears expiry: the last one is kept and retried, not ready once it expires, back with the daemon',
  async (t) => {
    const { rig } = await gateway(t, { SECRET_TTL: '24s', SECRET_GRACE_PERIOD_RATIO_JITTER: '0' });
    await waitFor(
      () => rig.agentOut(),
      async () => (await rig.get('/hello')).status === 200,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    const def = engineSds(t, rig.dir).watch('default');
    await def.ready;
    const first = new X509Certificate(inline(def.current(), 'cert'));
    const expiresAt = Date.parse(first.validTo);
    await rig.daemon.stop();

    await waitFor(
      () => rig.agentOut(),
      () => /failed to renew the workload certificate/.test(rig.agentOut()),
      { timeoutMs: 20_000, intervalMs: 50 },
    );
    t.match(
      rig.agentOut(),
      /failed to renew the workload certificate \(attempt \d+\): [^\n]*the current certificate expires in \d+s, still served; retrying in \d+ms/,
      'the time left is logged',
    );
    t.ok(Date.now() < expiresAt, 'before expiry');
    const ready = async () => (await fetch(`http://127.0.0.1:${rig.ports.status}/healthz/ready`)).status;
    t.equal(await ready(), 200, 'still ready while the certificate is valid');
    t.equal((await rig.get('/hello')).status, 200, 'still serving');
    t.equal(new X509Certificate(inline(def.current(), 'cert')).serialNumber, first.serialNumber, 'the last certificate is still served');

    await waitFor(
      () => rig.agentOut(),
      async () => (await ready()) === 503,
      { timeoutMs: 30_000, intervalMs: 50 },
    );
    t.ok(Date.now() >= expiresAt - 1000, 'not ready only once it expired');
    t.match(rig.agentOut(), /proxy is NOT ready: the workload certificate expired \d+s ago/);

    await rig.restartDaemon();
    await waitFor(
      () => rig.agentOut(),
      async () => (await ready()) === 200,
      { timeoutMs: 60_000, intervalMs: 50 },
    );
    // ready means the agent has the new certificate; this test's own SDS stream may hear of it a moment later
    const served = () => new X509Certificate(inline(def.current(), 'cert')).serialNumber;
    await waitFor(
      () => `still served over SDS: ${served()}`,
      () => served() !== first.serialNumber,
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const renewed = new X509Certificate(inline(def.current(), 'cert'));
    t.not(renewed.serialNumber, first.serialNumber, 'a new certificate once the daemon is back');
    t.ok(
      renewed.checkIssued(new X509Certificate(fs.readFileSync(rig.daemon.rootCertPath))),
      'from the same root (the daemon kept it across the restart)',
    );
    t.equal((await rig.get('/hello')).status, 200);
  },
);

t.test('TLS to the plaintext port: the agent says which port it reached and what to set', async (t) => {
  const dir = tempDir(t, 'mesh-mismatch-');
  fs.mkdirSync(path.join(dir, 'config'));
  const daemon = await startDiscovery({ configDir: path.join(dir, 'config'), cwd: dir });
  t.teardown(() => daemon.stop());
  // The default controlPlaneAuthPolicy (MUTUAL_TLS) with the plaintext --grpcAddr: a common slip.
  fs.writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${daemon.grpc}\n`);
  const agent = spawn(path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', 'mesh.yaml'], {
    cwd: dir,
    env: {
      PATH: process.env['PATH'],
      POD_NAME: 'gw-0',
      POD_NAMESPACE: 'mesh-system',
      SERVICE_ACCOUNT: 'ingressgateway',
      MESHD_SAN: 'meshd.mesh-system.svc',
      PROXY_CONFIG: JSON.stringify({ statusPort: await freePort(), proxyAdminPort: await freePort(), binaryPath: path.join(dir, 'no-envoy') }),
      PROXY_STATUS_PORT: String(await freePort()),
      PROXY_METRICS_PORT: String(await freePort()),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  agent.stdout!.on('data', (d) => (out += d));
  agent.stderr!.on('data', (d) => (out += d));
  const exited = new Promise((r) => agent.on('exit', r));
  t.teardown(async () => {
    agent.kill('SIGKILL');
    await exited;
  });
  const sentence = `${daemon.grpc} answered the TLS handshake in plaintext: it is a plaintext port (such as the daemon's --grpcAddr :15010), not a TLS one (--secureGRPCAddr :15012)`;
  await waitFor(
    () => out,
    () => out.includes(`${sentence}. Point discoveryAddress at the TLS port`),
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  t.pass('the xDS connection names discoveryAddress');
  t.ok(out.includes(`${sentence}. Point CA_ADDR (default: the discoveryAddress) at the TLS port`), 'the certificate request names CA_ADDR');
  t.notMatch(
    out
      .split('\n')
      .filter((l) => l.includes('wrong version number') && !l.includes('answered the TLS handshake'))
      .join('\n'),
    /./,
    "never OpenSSL's words alone",
  );
});
