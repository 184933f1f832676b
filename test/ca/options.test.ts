// The daemon's identity settings with the built binary: operator files win over the CA-issued certificate,
// ENABLE_CA_SERVER=false and PILOT_CERT_PROVIDER leave the secure listeners to the operator, MESHD_CUSTOM_HOST
// names, COMPLIANCE_POLICY=fips-140-2 on both TLS listeners, XFCC from a trusted gateway, XDS_AUTH_PLAINTEXT
// with a token, and the settings this build refuses.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { ephemeralListeners, startDaemon } from '../helpers/daemon';
import { makeServerCert } from '../helpers/agent';
import { create } from '@bufbuild/protobuf';
import { DiscoveryRequestSchema, type DiscoveryResponse } from '../../src/gen/envoy/service/discovery/v3/discovery_pb';
import { AdsClient, CDS, node, SotwStream } from '../xds/server/helpers';
import { caClient, createCertificate, MESHD_HOST, opensslCsr, sans, startIssuer } from './helpers';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

const MOCK = ['--registries', 'Mock'];

function handshake(address: string, o: tls.ConnectionOptions): Promise<{ protocol: string | null; cipher: string; cert: tls.PeerCertificate }> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const s = tls.connect(
      { host: address.slice(0, i), port: Number(address.slice(i + 1)), servername: MESHD_HOST, rejectUnauthorized: false, ...o },
      () => {
        const r = { protocol: s.getProtocol(), cipher: s.getCipher().standardName, cert: s.getPeerCertificate() };
        s.end();
        resolve(r);
      },
    );
    s.on('error', reject);
  });
}

function cfgDir(t: Parameters<typeof tempDir>[0]): { dir: string; cfg: string } {
  const dir = tempDir(t);
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cfg);
  return { dir, cfg };
}

t.test('--tlsCertFile/--tlsKeyFile/--caCertFile win over the CA-issued certificate', async (t) => {
  const { dir, cfg } = cfgDir(t);
  const op = makeServerCert(dir, 'discovery.example.com');
  const d = await startDaemon(['--configDir', cfg, ...MOCK, '--tlsCertFile', op.cert, '--tlsKeyFile', op.key, '--caCertFile', op.ca], {});
  t.teardown(() => d.stop());
  for (const addr of [d.secureGrpc!, d.https!]) {
    const h = await handshake(addr, {});
    t.equal(h.cert.subjectaltname, 'DNS:discovery.example.com', "the operator's certificate is served");
  }
  t.ok(fs.existsSync(path.join(d.cwd, 'var/run/secrets/mesh/root-cert.pem')), 'the CA still runs and publishes its root');
});

t.test('ENABLE_CA_SERVER=false: no CA, no secure listeners without TLS files', async (t) => {
  const { cfg } = cfgDir(t);
  const d = await startDaemon(['--configDir', cfg, ...MOCK], { ENABLE_CA_SERVER: 'false' });
  t.teardown(() => d.stop());
  t.equal(d.secureGrpc, undefined);
  t.equal(d.https, undefined);
  t.match(
    d.log(),
    /secure discovery gRPC \(--secureGRPCAddr 127\.0\.0\.1:0\) not started: no --tlsCertFile\/--tlsKeyFile given and the CA is disabled \(ENABLE_CA_SERVER=false\)/,
  );
  t.notOk(fs.existsSync(path.join(d.cwd, 'var')), 'no root is made or published');
});

t.test('PILOT_CERT_PROVIDER other than istiod: the CA runs but issues no serving certificate', async (t) => {
  const { cfg } = cfgDir(t);
  const d = await startDaemon(['--configDir', cfg, ...MOCK], { PILOT_CERT_PROVIDER: 'none' });
  t.teardown(() => d.stop());
  t.equal(d.secureGrpc, undefined);
  t.match(d.log(), /PILOT_CERT_PROVIDER=none: no serving certificate is issued/);
  t.match(
    d.log(),
    /CA service istio\.v1\.auth\.IstioCertificateService on the plaintext gRPC listener/,
    'with no secure listener the CA service is on the plain one, as in Istio',
  );
});

t.test('MESHD_CUSTOM_HOST adds names (IP addresses become IP SANs)', async (t) => {
  const { cfg } = cfgDir(t);
  const d = await startDaemon(['--configDir', cfg, ...MOCK], { MESHD_CUSTOM_HOST: 'localhost,127.0.0.1,cp.example.com' });
  t.teardown(() => d.stop());
  const h = await handshake(d.secureGrpc!, {});
  t.equal(
    h.cert.subjectaltname,
    'IP Address:127.0.0.1, DNS:cp.example.com, DNS:localhost, DNS:mesh-pilot.mesh-system.svc, DNS:meshd-remote.mesh-system.svc, DNS:meshd.mesh-system.svc',
  );
  const root = fs.readFileSync(path.join(d.cwd, 'var/run/secrets/mesh/root-cert.pem'));
  const ok = await handshake(d.https!, { rejectUnauthorized: true, ca: root, servername: 'localhost' });
  t.ok(ok.protocol, 'a client that checks the name localhost against the published root accepts it');
});

t.test("COMPLIANCE_POLICY=fips-140-2: TLS 1.2 with Istio's FIPS suites only, on :15012 and :15017", async (t) => {
  const { cfg } = cfgDir(t);
  const d = await startDaemon(['--configDir', cfg, ...MOCK], { COMPLIANCE_POLICY: 'fips-140-2' });
  t.teardown(() => d.stop());
  for (const [name, addr] of [
    ['secure gRPC', d.secureGrpc!],
    ['webhook HTTPS', d.https!],
  ] as const) {
    const h = await handshake(addr, {});
    t.equal(h.protocol, 'TLSv1.2', `${name}: a default client ends up on TLS 1.2`);
    t.equal(h.cipher, 'TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256', `${name}: a FIPS suite`);
    await t.rejects(handshake(addr, { minVersion: 'TLSv1.3' }), /alert protocol version|unsupported protocol/i, `${name}: TLS 1.3 is refused`);
    await t.rejects(
      handshake(addr, { maxVersion: 'TLSv1.2', ciphers: 'ECDHE-RSA-CHACHA20-POLY1305:AES128-SHA' }),
      /handshake failure/i,
      `${name}: non-FIPS suites are refused`,
    );
  }
  const plain = await startDaemon(['--configDir', cfg, ...MOCK], {});
  t.teardown(() => plain.stop());
  t.equal((await handshake(plain.secureGrpc!, {})).protocol, 'TLSv1.3', 'without the policy TLS 1.3 is used');
});

t.test('XFCC from a trusted gateway, and XDS_AUTH_PLAINTEXT with a token', async (t) => {
  const { dir, cfg } = cfgDir(t);
  const issuer = await startIssuer(t);
  const d = await startDaemon(['--configDir', cfg, ...MOCK], {
    TRUSTED_GATEWAY_CIDR: '10.10.0.0/16',
    JWT_RULE: issuer.rule(),
    XDS_AUTH_PLAINTEXT: 'true',
  });
  t.teardown(() => d.stop());
  const root = fs.readFileSync(path.join(d.cwd, 'var/run/secrets/mesh/root-cert.pem'), 'utf8');
  const ca = caClient(t, d.secureGrpc!, root);
  const xfcc = 'By=spiffe://cluster.local/ns/mesh-system/sa/gateway;Hash=abc;URI=spiffe://cluster.local/ns/vm/sa/legacy';
  const chain = await createCertificate(ca, { csr: opensslCsr(dir, 'ec').csr, headers: { 'x-forwarded-client-cert': xfcc } });
  t.same(sans(chain[0]!), ['URI:spiffe://cluster.local/ns/vm/sa/legacy'], 'the forwarded identity (loopback counts as trusted, as in Istio)');

  const anon = new SotwStream(d.grpc);
  t.teardown(() => anon.close());
  anon.send({ node: node(), typeUrl: CDS });
  const st = await anon.inbox.status();
  t.equal(st.code, grpc.status.UNAUTHENTICATED, 'plaintext xDS without a credential');
  t.match(st.details, /XDS_AUTH_PLAINTEXT is true/);

  const client = new AdsClient(d.grpc, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${await issuer.token({ ns: 'default', sa: 'app' })}`);
  const call = client.streamAggregatedResources(md);
  t.teardown(() => call.cancel());
  const first = new Promise<DiscoveryResponse>((resolve, reject) => {
    call.on('data', resolve);
    call.on('error', reject);
  });
  call.write(create(DiscoveryRequestSchema, { node: node(), typeUrl: CDS }));
  t.equal((await first).typeUrl, CDS, 'plaintext xDS with a JWT_RULE token is served');
});

t.test('settings refused at start', async (t) => {
  const { dir, cfg } = cfgDir(t);
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ COMPLIANCE_POLICY: 'fips-140-3' }, /^Error: COMPLIANCE_POLICY="fips-140-3": unknown compliance policy/],
    // The registration authority and orchestrator-signed serving certificates need the orchestrator (test/ca/ra.test.ts).
    [
      { EXTERNAL_CA: 'ISTIOD_RA_KUBERNETES_API' },
      /^Error: EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API signs through the orchestrator's certificate API: give --orchconfig/,
    ],
    [
      { PILOT_CERT_PROVIDER: 'k8s.io/example.com/signer' },
      /^Error: PILOT_CERT_PROVIDER=k8s\.io\/example\.com\/signer signs through the orchestrator's certificate API/,
    ],
    [{ JWT_RULE: '{"issuer": ' }, /^Error: error initializing OIDC: JWT_RULE: failed to unmarshal JWT rule/],
    [
      { JWT_RULE: '{"issuer":"http://127.0.0.1:9"}' },
      /^Error: error initializing OIDC: failed at creating an OIDC provider for http:\/\/127\.0\.0\.1:9/,
    ],
    [{ CA_SELF_SIGNED_CA_RSA_KEY_SIZE: '1024' }, /requested key size does not meet the minimum required size of 2048 \(requested: 1024\)/],
  ];
  for (const [env, msg] of cases) {
    const cwd = fs.mkdtempSync(path.join(dir, 'cwd-'));
    const r = await exec(path.join(DIST, 'pilot-discovery'), ['discovery', '--configDir', cfg, ...MOCK, ...ephemeralListeners()], {
      cwd,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    });
    t.equal(r.code, 255, `${JSON.stringify(env)}: exit code`);
    t.match(r.stderr.trimEnd().split('\n').pop(), msg, JSON.stringify(env));
  }
});
