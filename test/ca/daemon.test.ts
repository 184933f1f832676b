// The built daemon's CA with no cluster: started with no TLS flags it makes and persists a root, serves
// :15012 and :15017 with a certificate its root verifies, and signs workload CSRs made by openssl for
// callers that prove themselves with a JWT_RULE token — always with the caller's identity, never the
// CSR's. Faults: no/forged/expired tokens, malformed CSRs and too long TTLs are refused and counted.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { metricValue } from '../helpers/prometheus';
import { rsaKey } from '../security/helpers';
import { CDS, node, SotwStream } from '../xds/server/helpers';
import {
  caClient,
  createCertificate,
  lifetimeSeconds,
  MESHD_HOST,
  opensslCsr,
  opensslVerify,
  plainCaClient,
  sans,
  startIssuer,
  daemonDirs,
} from './helpers';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

/** The certificate a TLS listener presents, as PEM. */
function servedCertificate(address: string): Promise<string> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const s = tls.connect({ host, port, servername: MESHD_HOST, rejectUnauthorized: false, ALPNProtocols: ['h2', 'http/1.1'] }, () => {
      const der = s.getPeerCertificate().raw;
      s.end();
      resolve(`-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{64}/g, '$&\n')}\n-----END CERTIFICATE-----\n`);
    });
    s.on('error', reject);
  });
}

async function metrics(d: RunningDaemon): Promise<string> {
  return (await fetch(`http://${d.monitoring}/metrics`)).text();
}

const ROOT_FILE = 'var/run/secrets/mesh/root-cert.pem';

t.test('no TLS flags: a persisted root, :15012 and :15017 served with certificates it verifies, and the CA service', async (t) => {
  const { dir, cwd, cfg } = daemonDirs(t);
  const issuer = await startIssuer(t);
  const env = { JWT_RULE: issuer.rule(), MAX_WORKLOAD_CERT_TTL: '48h' };
  let d = await startDaemon(['--configDir', cfg, '--registries', 'Mock'], env, 30_000, { cwd });
  t.teardown(() => d.stop());

  t.ok(d.secureGrpc, 'the secure gRPC listener started without --tlsCertFile');
  t.ok(d.https, 'the webhook HTTPS listener started without --tlsCertFile');
  const rootPem = fs.readFileSync(path.join(cwd, ROOT_FILE), 'utf8');
  const keyStat = fs.statSync(path.join(cwd, 'var/lib/mesh/ca/ca-key.pem'));
  t.equal(keyStat.mode & 0o777, 0o600, 'the root key file is 0600');
  t.equal(fs.readFileSync(path.join(cwd, 'var/lib/mesh/ca/ca-cert.pem'), 'utf8'), rootPem, 'the published root is the stored CA certificate');

  for (const [name, addr] of [
    ['secure gRPC', d.secureGrpc!],
    ['webhook HTTPS', d.https!],
  ] as const) {
    const served = await servedCertificate(addr);
    const v = opensslVerify(dir, rootPem, served);
    t.ok(v.ok, `${name}: openssl verify -CAfile <published root> accepts the served certificate (${v.out})`);
    t.same(
      sans(served),
      ['DNS:mesh-pilot.mesh-system.svc', 'DNS:meshd-remote.mesh-system.svc', 'DNS:meshd.mesh-system.svc'],
      `${name}: Istio's service names, renamed`,
    );
  }
  // A TLS client that checks the name (as an agent does) accepts it too.
  await new Promise<void>((resolve, reject) => {
    const [h, p] = d.secureGrpc!.split(':');
    const s = tls.connect({ host: h, port: Number(p), servername: MESHD_HOST, ca: rootPem, ALPNProtocols: ['h2'] }, () => {
      s.end();
      resolve();
    });
    s.on('error', reject);
  });

  const ca = caClient(t, d.secureGrpc!, rootPem);
  const token = await issuer.token({ ns: 'default', sa: 'app' });
  const me = 'URI:spiffe://cluster.local/ns/default/sa/app';

  await t.test('a CSR naming another identity yields the caller identity only (RSA and ECDSA)', async (t) => {
    for (const kind of ['rsa', 'ec'] as const) {
      const { csr } = opensslCsr(dir, kind, { san: 'URI:spiffe://cluster.local/ns/kube-system/sa/admin,DNS:evil.example.com' });
      const chain = await createCertificate(ca, { csr, token });
      t.equal(chain.length, 2, `${kind}: leaf and root (a self-signed CA has no intermediates)`);
      t.same(sans(chain[0]!), [me], `${kind}: the SAN is the token's service account, nothing from the CSR`);
      t.equal(chain[1], rootPem, `${kind}: the last element is the published root bundle`);
      const v = opensslVerify(dir, rootPem, chain[0]!);
      t.ok(v.ok, `${kind}: the leaf verifies against the published root (${v.out})`);
      t.equal(lifetimeSeconds(chain[0]!), 24 * 3600 + 120, `${kind}: DEFAULT_WORKLOAD_CERT_TTL (24h) plus Istio's 2 minutes of clock skew`);
    }
  });

  await t.test('requested TTLs: honoured up to MAX_WORKLOAD_CERT_TTL, refused above it', async (t) => {
    const { csr } = opensslCsr(dir, 'ec');
    const chain = await createCertificate(ca, { csr, token, ttlSeconds: 3600 });
    t.equal(lifetimeSeconds(chain[0]!), 3600 + 120);
    const before = metricValue(await metrics(d), 'ca_server_csr_sign_err_count', 'error="TTL_ERROR"') ?? 0;
    await t.rejects(createCertificate(ca, { csr, token, ttlSeconds: 48 * 3600 + 1 }), {
      code: grpc.status.INVALID_ARGUMENT,
      details: 'CSR signing error (requested TTL 48h0m1s is greater than the max allowed TTL 48h0m0s)',
    });
    t.equal(metricValue(await metrics(d), 'ca_server_csr_sign_err_count', 'error="TTL_ERROR"'), before + 1, 'counted as a TTL_ERROR');
  });

  await t.test('no, forged and expired credentials: Unauthenticated, counted', async (t) => {
    const { csr } = opensslCsr(dir, 'ec');
    const m0 = await metrics(d);
    const failures0 = metricValue(m0, 'ca_server_authentication_failure_count') ?? 0;
    const csrs0 = metricValue(m0, 'ca_server_csr_count') ?? 0;
    const issued0 = metricValue(m0, 'ca_server_success_cert_issuance_count') ?? 0;
    const unauthenticated = { code: grpc.status.UNAUTHENTICATED, details: 'request authenticate failure' };
    await t.rejects(createCertificate(ca, { csr }), unauthenticated, 'no token');
    const forged = await issuer.token({ key: rsaKey('test-kid') });
    await t.rejects(createCertificate(ca, { csr, token: forged }), unauthenticated, 'a token signed by another key under the same kid');
    const expired = await issuer.token({ expSeconds: -30 });
    await t.rejects(createCertificate(ca, { csr, token: expired }), unauthenticated, 'an expired token');
    await t.rejects(createCertificate(ca, { csr, token: await issuer.token({ aud: 'someone-else' }) }), unauthenticated, 'another audience');
    await t.rejects(createCertificate(ca, { csr, token: await issuer.token({ iss: 'https://other.example' }) }), unauthenticated, 'another issuer');
    await t.rejects(
      createCertificate(ca, { csr, token: await issuer.token({ sub: 'alice' }) }),
      unauthenticated,
      'a subject that is no service account',
    );
    const m1 = await metrics(d);
    t.equal(metricValue(m1, 'ca_server_authentication_failure_count'), failures0 + 6, 'ca_server_authentication_failure_count');
    t.equal(metricValue(m1, 'ca_server_csr_count'), csrs0 + 6, 'ca_server_csr_count counts every request');
    t.equal(metricValue(m1, 'ca_server_success_cert_issuance_count'), issued0, 'nothing was issued');
    t.ok((metricValue(m1, 'ca_server_id_extraction_err_count') ?? 0) >= 1, 'the non-service-account subject is an identity extraction error');
    t.match(
      d.log(),
      /Failed to authenticate client from 127\.0\.0\.1:\d+: Authenticator ClientCertAuthenticator: .*Authenticator IDTokenAuthenticator: /,
      'the reasons are logged',
    );
  });

  await t.test('a malformed CSR: InvalidArgument, counted as a parsing error', async (t) => {
    const before = metricValue(await metrics(d), 'ca_server_csr_parsing_err_count') ?? 0;
    await t.rejects(createCertificate(ca, { csr: 'not a CSR', token }), {
      code: grpc.status.INVALID_ARGUMENT,
      details: /^CSR signing error \(certificate signing request is not properly encoded\)$/,
    });
    const garbled = '-----BEGIN CERTIFICATE REQUEST-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA\n-----END CERTIFICATE REQUEST-----\n';
    await t.rejects(createCertificate(ca, { csr: garbled, token }), {
      code: grpc.status.INVALID_ARGUMENT,
      details: /^CSR signing error \(failed to parse X\.509 certificate signing request/,
    });
    const m = await metrics(d);
    t.equal(metricValue(m, 'ca_server_csr_parsing_err_count'), before + 2);
    t.ok((metricValue(m, 'ca_server_csr_sign_err_count', 'error="CSR_ERROR"') ?? 0) >= 2, 'and as Istio counts it: a CSR_ERROR signing error');
  });

  await t.test('renewal: the certificate this CA issued authenticates its holder, as that identity only', async (t) => {
    const first = opensslCsr(dir, 'ec');
    const chain = await createCertificate(ca, { csr: first.csr, token: await issuer.token({ ns: 'payments', sa: 'billing' }) });
    const mtls = caClient(t, d.secureGrpc!, rootPem, { cert: chain[0]!, key: first.key });
    const next = opensslCsr(dir, 'rsa', { san: 'URI:spiffe://cluster.local/ns/default/sa/app' });
    const renewed = await createCertificate(mtls, { csr: next.csr });
    t.same(sans(renewed[0]!), ['URI:spiffe://cluster.local/ns/payments/sa/billing'], 'no token needed; the identity is the presented certificate');
  });

  await t.test('secured xDS on :15012: certificate or token, and only the namespace the identity holds', async (t) => {
    const sni = { 'grpc.ssl_target_name_override': MESHD_HOST, 'grpc.default_authority': MESHD_HOST };
    const ads = (credentials: grpc.ChannelCredentials) => {
      const s = new SotwStream(d.secureGrpc!, { credentials, channelOptions: sni });
      t.teardown(() => s.close());
      return s;
    };
    const withToken = (tok: string) =>
      grpc.credentials.combineChannelCredentials(
        grpc.credentials.createSsl(Buffer.from(rootPem)),
        grpc.credentials.createFromMetadataGenerator((_p, cb) => {
          const md = new grpc.Metadata();
          md.set('authorization', `Bearer ${tok}`);
          cb(null, md);
        }),
      );
    const key = opensslCsr(dir, 'ec');
    const chain = await createCertificate(ca, { csr: key.csr, token });
    const byCert = grpc.credentials.createSsl(Buffer.from(rootPem), Buffer.from(key.key), Buffer.from(chain[0]!));

    const a = ads(byCert);
    a.send({ node: node('sidecar~10.0.0.1~app-1.default~default.svc.cluster.local'), typeUrl: CDS });
    t.equal((await a.expect(CDS)).typeUrl, CDS, 'the CA-issued certificate of default/app may act in default');

    const b = ads(byCert);
    b.send({ node: node('sidecar~10.0.0.2~app-2.payments~payments.svc.cluster.local'), typeUrl: CDS });
    const denied = await b.inbox.status();
    t.equal(denied.code, grpc.status.PERMISSION_DENIED, 'but not claim another namespace (PILOT_ENABLE_XDS_IDENTITY_CHECK)');
    t.match(denied.details, /no identities \(\[spiffe:\/\/cluster\.local\/ns\/default\/sa\/app\]\) matched payments\//);

    const c = ads(withToken(await issuer.token({ ns: 'payments', sa: 'billing' })));
    c.send({ node: node('sidecar~10.0.0.2~app-2.payments~payments.svc.cluster.local'), typeUrl: CDS });
    t.equal((await c.expect(CDS)).typeUrl, CDS, 'a JWT_RULE token authenticates xDS too');

    const e = ads(grpc.credentials.createSsl(Buffer.from(rootPem)));
    e.send({ node: node(), typeUrl: CDS });
    const anon = await e.inbox.status();
    t.equal(anon.code, grpc.status.UNAUTHENTICATED, 'no credential at all');
    t.match(
      anon.details,
      /^authentication failure: Authenticator ClientCertAuthenticator: .*; Authenticator IDTokenAuthenticator: ID token extraction error/,
    );

    const p = new SotwStream(d.grpc);
    t.teardown(() => p.close());
    p.send({ node: node('sidecar~10.0.0.2~app-2.payments~payments.svc.cluster.local'), typeUrl: CDS });
    t.equal((await p.expect(CDS)).typeUrl, CDS, 'the plaintext port is not authenticated (XDS_AUTH_PLAINTEXT=false)');
  });

  await t.test('the plaintext port has no CA service while a secure port serves it, and the root expiry is exported', async (t) => {
    const plain = plainCaClient(t, d.grpc);
    await t.rejects(createCertificate(plain, { csr: opensslCsr(dir, 'ec').csr, token }), { code: grpc.status.UNIMPLEMENTED });
    const m = await metrics(d);
    const notAfter = Date.parse(new (await import('node:crypto')).X509Certificate(rootPem).validTo) / 1000;
    t.equal(metricValue(m, 'ca_server_root_cert_expiry_timestamp'), notAfter);
    const left = metricValue(m, 'ca_server_root_cert_expiry_seconds')!;
    t.ok(Math.abs(left - (notAfter - Date.now() / 1000)) < 30, 'seconds left until the root expires');
  });

  await t.test('a restart keeps the root', async (t) => {
    const { csr } = opensslCsr(dir, 'ec');
    const before = await createCertificate(ca, { csr, token });
    await d.stop();
    d = await startDaemon(['--configDir', cfg, '--registries', 'Mock'], env, 30_000, { cwd });
    t.equal(fs.readFileSync(path.join(cwd, ROOT_FILE), 'utf8'), rootPem, 'the same root is published');
    t.match(d.log(), /Load signing key and cert from existing directory \.\/var\/lib\/mesh\/ca/);
    const served = await servedCertificate(d.secureGrpc!);
    t.ok(opensslVerify(dir, rootPem, served).ok, 'the new serving certificate verifies against the old root');
    const ca2 = caClient(t, d.secureGrpc!, rootPem);
    const after = await createCertificate(ca2, { csr, token });
    t.ok(opensslVerify(dir, after[1]!, before[0]!).ok, 'a certificate issued before the restart verifies against the root after it');
  });
});
