// The agent's workload identity against a certificate service made of OpenSSL (test/helpers/ca-double.ts):
// the certificate it obtains carries its SPIFFE identity, is read over SDS the way the engine reads it
// (the engine's own GrpcMux and SecretManager on the agent's socket), is renewed before it expires, and
// survives an unreachable CA until it expires. Certificates are read back with openssl, not our code.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import { X509Certificate } from 'node:crypto';
import * as net from 'node:net';
import path from 'node:path';
import t, { type Test } from 'tap';
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { SdsSecretConfigSchema, type Secret } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { EnvTable } from '../../src/lib/env';
import { defaultProxyConfig } from '../../src/config/proxyconfig';
import { identityOptions, type IdentityOptions } from '../../src/agent/identity/options';
import { WorkloadIdentity } from '../../src/agent/identity';
import { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { SecretManager, type SecretWatch } from '../../src/proxy/tls/secrets';
import { LoggerRegistry } from '../../src/proxy/log';
import { StatsStore } from '../../src/proxy/stats/store';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { sdsConfig } from '../../src/xds/gen/tls';
import { metricsText } from '../../src/lib/metrics';
import { close as closeLogs, setSinks } from '../../src/lib/log/config';
import { program } from '../helpers/programs';
import { startCaDouble, type CaDouble } from '../helpers/ca-double';
import { metricValue } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';
import { EC_P256_KEY, signWith } from '../helpers/openssl';

const ID = 'spiffe://cluster.local/ns/shop/sa/checkout';

function opts(cwd: string, ca: CaDouble, env: Record<string, string> = {}): IdentityOptions {
  const all = {
    POD_NAMESPACE: 'shop',
    SERVICE_ACCOUNT: 'checkout',
    CA_ADDR: ca.address,
    CA_ROOT_CA: ca.rootPath,
    MESHD_SAN: ca.serverName,
    ...env,
  };
  return identityOptions({
    env: new EnvTable(program('pilot-agent').env, all),
    raw: all,
    proxyConfig: { ...defaultProxyConfig(), discoveryAddress: '127.0.0.1:1' },
    clusterId: 'Orchestrator',
    metadata: { CERT_SIGNER: env['CERT_SIGNER'] ?? '' },
    cwd,
  });
}

async function startIdentity(t: Test, cwd: string, o: IdentityOptions): Promise<WorkloadIdentity> {
  const id = new WorkloadIdentity({ options: o, cwd, serveSds: true });
  await id.start();
  t.teardown(() => id.stop());
  return id;
}

/** The engine's SDS client on the agent's socket: its GrpcMux and SecretManager, as the bootstrap's sds-grpc cluster. */
function engineSds(t: Test, cwd: string): { watch(name: string): SecretWatch } {
  const loggers = new LoggerRegistry('warning');
  const mux = new GrpcMux({
    target: `unix:${path.join(cwd, 'var/run/secrets/workload-spiffe-uds/socket')}`,
    credentials: grpc.credentials.createInsecure(),
    node: create(NodeSchema, { id: 'router~127.0.0.1~gw.shop~shop.svc.cluster.local' }),
    service: 'sds',
    setNodeOnFirstMessageOnly: true,
    log: loggers.get('secret'),
    typeRegistry: proxyTypeRegistry(),
    backoffBaseMs: 100,
    backoffMaxMs: 1000,
  });
  t.teardown(() => mux.close());
  const manager = new SecretManager(() => ({ key: 'sds-grpc', mux }), loggers.get('secret'), new StatsStore());
  return { watch: (name) => manager.watch(create(SdsSecretConfigSchema, { name, sdsConfig: sdsConfig() }), `test ${name}`) };
}

function tlsCert(s: Secret | undefined): { chain: string; key: string } {
  if (s?.type.case !== 'tlsCertificate') throw new Error(`not a tls_certificate secret: ${s?.type.case}`);
  const v = s.type.value;
  if (v.certificateChain?.specifier.case !== 'inlineBytes' || v.privateKey?.specifier.case !== 'inlineBytes')
    throw new Error('expected inline bytes');
  return { chain: Buffer.from(v.certificateChain.specifier.value).toString(), key: Buffer.from(v.privateKey.specifier.value).toString() };
}

function rootCa(s: Secret | undefined): string {
  if (s?.type.case !== 'validationContext' || s.type.value.trustedCa?.specifier.case !== 'inlineBytes')
    throw new Error('not a validation_context secret with inline trusted_ca');
  return Buffer.from(s.type.value.trustedCa.specifier.value).toString();
}

/** `openssl x509 -text` of the first certificate of a PEM chain. */
function opensslText(pem: string, dir: string): string {
  const f = path.join(dir, `x-${Date.now()}-${Math.random()}.pem`);
  fs.writeFileSync(f, pem);
  return execFileSync('openssl', ['x509', '-in', f, '-noout', '-text'], { encoding: 'utf8' });
}

t.test('default and ROOTCA over SDS: the URI SAN is the identity, the key matches, the root verifies the chain', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  fs.mkdirSync(path.join(cwd, 'var/run/secrets/tokens'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'var/run/secrets/tokens/istio-token'), 'header.payload.signature\n');
  await startIdentity(t, cwd, opts(cwd, ca, { CERT_SIGNER: 'my-signer', CA_HEADER_X_TENANT: 'blue' }));
  const sds = engineSds(t, cwd);
  const def = sds.watch('default');
  const root = sds.watch('ROOTCA');
  await Promise.all([def.ready, root.ready]);
  const { chain, key } = tlsCert(def.current());
  const text = opensslText(chain, cwd);
  t.match(text, new RegExp(`X509v3 Subject Alternative Name: critical\\s+URI:${ID.replace(/\//g, '\\/')}\\s`), 'URI SAN is the SPIFFE identity');
  t.match(text, /Public Key Algorithm: rsaEncryption[\s\S]*Public-Key: \(2048 bit\)/, 'RSA 2048 by default (WORKLOAD_RSA_KEY_SIZE)');
  t.match(key, /^-----BEGIN RSA PRIVATE KEY-----/, 'PKCS#1 key, as Istio writes it without PKCS8_KEY');
  const leaf = new X509Certificate(chain);
  t.ok(leaf.checkPrivateKey((await import('node:crypto')).createPrivateKey(key)), "the key is the certificate's");
  t.equal(rootCa(root.current()), fs.readFileSync(ca.rootPath, 'utf8'), "ROOTCA is the CA's root");
  fs.writeFileSync(path.join(cwd, 'chain.pem'), chain);
  t.match(execFileSync('openssl', ['verify', '-CAfile', ca.rootPath, path.join(cwd, 'chain.pem')], { encoding: 'utf8' }), /OK/);

  const call = ca.calls[0]!;
  t.equal(call.metadata['authorization'], 'Bearer header.payload.signature', 'the token file, trimmed, as a bearer token');
  t.equal(call.metadata['clusterid'], 'Orchestrator', 'ClusterID metadata');
  t.equal(call.metadata['x_tenant'], 'blue', 'CA_HEADER_* metadata');
  t.equal(call.certSigner, 'my-signer', 'CertSigner request metadata');
  t.equal(call.ttlSeconds, 86400, 'SECRET_TTL 24h by default');
  const expiry = metricValue(await metricsText(), 'cert_expiry_seconds', 'resource_name="default"');
  t.ok(expiry !== undefined && expiry > 86000 && expiry <= 86400, `cert_expiry_seconds ≈ 24h (${expiry})`);
});

t.test('ECDSA keys: ECC_SIGNATURE_ALGORITHM=ECDSA on P-256, ECC_CURVE=P384', async (t) => {
  const ca = await startCaDouble(t);
  for (const [curve, nist, sig] of [
    ['', 'P-256', 'ecdsa-with-SHA256'],
    ['P384', 'P-384', 'ecdsa-with-SHA384'],
  ] as const) {
    const cwd = tempDir(t);
    await startIdentity(t, cwd, opts(cwd, ca, { ECC_SIGNATURE_ALGORITHM: 'ECDSA', ...(curve ? { ECC_CURVE: curve } : {}) }));
    const def = engineSds(t, cwd).watch('default');
    await def.ready;
    const { chain, key } = tlsCert(def.current());
    t.match(opensslText(chain, cwd), new RegExp(`NIST CURVE: ${nist}`), `${nist} key in the certificate`);
    t.match(key, /^-----BEGIN EC PRIVATE KEY-----/, 'SEC1 key');
    const csrFile = path.join(cwd, 'req.csr');
    fs.writeFileSync(csrFile, ca.calls[ca.calls.length - 1]!.csr);
    const csrText = execFileSync('openssl', ['req', '-in', csrFile, '-noout', '-text', '-verify'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.match(csrText, new RegExp(`Signature Algorithm: ${sig}`), `CSR signed with ${sig}`);
  }
});

t.test('PKCS8_KEY writes PKCS#8 keys; OUTPUT_CERTS gets key.pem (0600), cert-chain.pem, root-cert.pem', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  const id = await startIdentity(t, cwd, opts(cwd, ca, { PKCS8_KEY: 'true', OUTPUT_CERTS: 'out' }));
  await id.secrets.whenAvailable('default');
  const out = path.join(cwd, 'out');
  await waitFor(
    () => 'output files',
    () => fs.existsSync(path.join(out, 'root-cert.pem')),
    { timeoutMs: 5000, intervalMs: 50 },
  );
  t.match(fs.readFileSync(path.join(out, 'key.pem'), 'utf8'), /^-----BEGIN PRIVATE KEY-----/);
  t.equal(fs.statSync(path.join(out, 'key.pem')).mode & 0o777, 0o600);
  t.equal(fs.readFileSync(path.join(out, 'root-cert.pem'), 'utf8'), fs.readFileSync(ca.rootPath, 'utf8'));
  t.match(opensslText(fs.readFileSync(path.join(out, 'cert-chain.pem'), 'utf8'), cwd), new RegExp(`URI:${ID}`));
});

t.test('rotation: a short TTL is renewed at the grace ratio, pushed over SDS each time', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  // 6 s certificates renewed when half is left: a new one about every 3 s.
  await startIdentity(t, cwd, opts(cwd, ca, { SECRET_TTL: '6s', SECRET_GRACE_PERIOD_RATIO: '0.5', SECRET_GRACE_PERIOD_RATIO_JITTER: '0' }));
  const def = engineSds(t, cwd).watch('default');
  await def.ready;
  const seen: string[] = [];
  const record = () => {
    const serial = new X509Certificate(tlsCert(def.current()).chain).serialNumber;
    if (seen[seen.length - 1] !== serial) seen.push(serial);
  };
  record();
  def.onChange(record);
  const t0 = Date.now();
  await waitFor(
    () => `certificates seen: ${seen.join(', ')}`,
    () => seen.length >= 3,
    { timeoutMs: 15_000, intervalMs: 50 },
  );
  const elapsed = Date.now() - t0;
  t.ok(elapsed >= 5000, `two renewals take about 2 × 3 s (${elapsed} ms), not less`);
  t.equal(ca.calls.length, seen.length, 'one CSR per certificate');
  t.ok(
    ca.calls.every((c) => c.ttlSeconds === 6),
    'SECRET_TTL asked for each time',
  );
});

t.test('CA unreachable near expiry: the last certificate stays, retries back off, time left is logged; not ready only once expired', async (t) => {
  const logs: string[] = [];
  setSinks([{ write: (line) => void logs.push(line) }]);
  t.teardown(() => closeLogs());
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  // Renewal is due 8 s in; the certificate expires at 16 s (room for a busy machine).
  const id = await startIdentity(
    t,
    cwd,
    opts(cwd, ca, { SECRET_TTL: '16s', SECRET_GRACE_PERIOD_RATIO: '0.5', SECRET_GRACE_PERIOD_RATIO_JITTER: '0' }),
  );
  const def = engineSds(t, cwd).watch('default');
  await def.ready;
  const first = new X509Certificate(tlsCert(def.current()).chain);
  const expiresAt = new Date(first.validTo).getTime();
  const calls = ca.calls.length;
  ca.failWith(grpc.status.UNAVAILABLE);
  await waitFor(
    () => `a failed renewal:\n${logs.join('')}`,
    () => logs.some((l) => /failed to renew the workload certificate/.test(l)),
    { timeoutMs: 16_000, intervalMs: 50 },
  );
  t.ok(Date.now() < expiresAt, 'the renewal failed before expiry');
  t.ok(ca.calls.length >= calls + 5, `the CA client retried the call (${ca.calls.length - calls} calls)`);
  t.equal(new X509Certificate(tlsCert(def.current()).chain).serialNumber, first.serialNumber, 'the last certificate is still served');
  t.equal(id.notReadyReason(), undefined, 'still ready before expiry');
  t.match(
    logs.join(''),
    /failed to renew the workload certificate \(attempt 1\): create certificate: rpc error: code = UNAVAILABLE[^\n]*the current certificate expires in \d+s, still served; retrying in \d+ms/,
    'the time left is logged',
  );
  await waitFor(
    () => 'not ready after expiry',
    () => id.notReadyReason() !== undefined,
    { timeoutMs: 20_000, intervalMs: 50 },
  );
  t.ok(Date.now() >= expiresAt, 'not ready only once expired');
  t.match(id.notReadyReason()!, /the workload certificate expired \d+s ago/);
  await waitFor(
    () => 'the expiry is logged',
    () => /the workload certificate has expired and no new one could be issued/.test(logs.join('')),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  ca.failWith(undefined);
  await waitFor(
    () => 'a new certificate once the CA is back',
    () => new X509Certificate(tlsCert(def.current()).chain).serialNumber !== first.serialNumber,
    { timeoutMs: 70_000, intervalMs: 50 },
  );
  t.equal(id.notReadyReason(), undefined, 'ready again with a new certificate');
});

/** A root, and a leaf for `uri` signed by it, made with openssl in `dir`. */
function opensslCerts(dir: string, uri: string, days = 2): { root: string; cert: string; key: string } {
  const run = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  run(['req', '-x509', ...EC_P256_KEY, '-keyout', 'root.key', '-out', 'root.pem', '-days', '3', '-subj', '/O=files']);
  run(['req', ...EC_P256_KEY, '-keyout', 'key.pem', '-out', 'leaf.csr', '-subj', '/O=files', '-addext', `subjectAltName=URI:${uri}`]);
  run([...signWith('leaf.csr', 'root.pem', 'root.key'), '-days', String(days), '-out', 'cert-chain.pem', '-copy_extensions', 'copy']);
  return { root: path.join(dir, 'root.pem'), cert: path.join(dir, 'cert-chain.pem'), key: path.join(dir, 'key.pem') };
}

t.test('FILE_MOUNTED_CERTS: ./etc/certs is served, the CA is never asked, a rewritten file is pushed', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  const certs = path.join(cwd, 'etc/certs');
  fs.mkdirSync(certs, { recursive: true });
  const made = opensslCerts(certs, 'spiffe://files.example/ns/shop/sa/checkout');
  fs.renameSync(made.root, path.join(certs, 'root-cert.pem'));
  await startIdentity(t, cwd, opts(cwd, ca, { FILE_MOUNTED_CERTS: 'true', FILE_DEBOUNCE_DURATION: '10ms' }));
  const sds = engineSds(t, cwd);
  const def = sds.watch('default');
  const root = sds.watch('ROOTCA');
  await Promise.all([def.ready, root.ready]);
  t.equal(tlsCert(def.current()).chain, fs.readFileSync(made.cert, 'utf8'), 'default is ./etc/certs/cert-chain.pem');
  t.equal(rootCa(root.current()), fs.readFileSync(path.join(certs, 'root-cert.pem'), 'utf8'), 'ROOTCA is ./etc/certs/root-cert.pem');
  t.equal(ca.calls.length, 0, 'no CSR sent');
  const before = new X509Certificate(tlsCert(def.current()).chain).serialNumber;
  // Renew the files as a mounted Secret would be: new key and certificate under the same names.
  const next = path.join(cwd, 'next');
  fs.mkdirSync(next);
  const renewed = opensslCerts(next, 'spiffe://files.example/ns/shop/sa/checkout');
  fs.copyFileSync(renewed.key, path.join(certs, 'key.pem'));
  fs.copyFileSync(renewed.cert, path.join(certs, 'cert-chain.pem'));
  await waitFor(
    () => 'the rewritten certificate pushed',
    () => new X509Certificate(tlsCert(def.current()).chain).serialNumber !== before,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.pass('the rewritten files were pushed over SDS');
});

t.test('file-cert: and file-root: resources (gateway TLS files): served, and served once a missing file appears', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  const dir = path.join(cwd, 'gw-certs');
  fs.mkdirSync(dir);
  const made = opensslCerts(dir, 'spiffe://x/ns/y/sa/z');
  const id = await startIdentity(t, cwd, opts(cwd, ca, { FILE_DEBOUNCE_DURATION: '10ms' }));
  const sds = engineSds(t, cwd);
  const cert = sds.watch(`file-cert:${made.cert}~${made.key}`);
  const root = sds.watch(`file-root:${made.root}`);
  await Promise.all([cert.ready, root.ready]);
  t.equal(tlsCert(cert.current()).chain, fs.readFileSync(made.cert, 'utf8'));
  t.equal(rootCa(root.current()), fs.readFileSync(made.root, 'utf8'));
  const later = path.join(dir, 'later.pem');
  const w = sds.watch(`file-root:${later}`);
  await new Promise((r) => setTimeout(r, 300));
  t.equal(w.current(), undefined, 'not there yet: nothing sent');
  fs.copyFileSync(made.root, later);
  await waitFor(
    () => 'the file served once written',
    () => w.current() !== undefined,
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.equal(rootCa(w.current()), fs.readFileSync(made.root, 'utf8'));
  t.notOk(id.secrets.serves('kubernetes://gw-cred'), "credentials are not the agent's to serve");
});

t.test("WORKLOAD_IDENTITY_SOCKET_FILE: another SDS server's socket is left to it; a missing one is an error", async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  const missing = new WorkloadIdentity({ options: opts(cwd, ca, { WORKLOAD_IDENTITY_SOCKET_FILE: 'spire.sock' }), cwd, serveSds: true });
  await t.rejects(missing.start(), {
    message: /agent configured for non-default SDS socket path: \.\/var\/run\/secrets\/workload-spiffe-uds\/spire\.sock but no socket found/,
  });
  missing.stop();
  // A live server on the configured socket (e.g. SPIRE's): the agent does not serve workload certificates.
  const sockDir = path.join(cwd, 'var/run/secrets/workload-spiffe-uds');
  fs.mkdirSync(sockDir, { recursive: true });
  const other = net.createServer((s) => s.destroy());
  await new Promise<void>((r) => other.listen(path.join(sockDir, 'spire.sock'), r));
  t.teardown(() => new Promise<void>((r) => other.close(() => r())));
  const id = await startIdentity(t, cwd, opts(cwd, ca, { WORKLOAD_IDENTITY_SOCKET_FILE: 'spire.sock' }));
  await new Promise((r) => setTimeout(r, 500));
  t.equal(ca.calls.length, 0, 'no certificate asked for');
  t.notOk(fs.existsSync(path.join(sockDir, 'socket')), 'no SDS server of its own');
  t.equal(id.clientCertificate(), undefined);
});

t.test('without a proxy (DISABLE_PROXY) the certificate is still issued and rotated, with no SDS server', async (t) => {
  const ca = await startCaDouble(t);
  const cwd = tempDir(t);
  const id = new WorkloadIdentity({ options: opts(cwd, ca, { OUTPUT_CERTS: 'out' }), cwd, serveSds: false });
  await id.start();
  t.teardown(() => id.stop());
  await id.secrets.whenAvailable('default');
  t.ok(fs.existsSync(path.join(cwd, 'out/cert-chain.pem')), 'written to OUTPUT_CERTS');
  t.notOk(fs.existsSync(path.join(cwd, 'var/run/secrets/workload-spiffe-uds/socket')), 'no SDS socket');
});
