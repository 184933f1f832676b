// Pure pieces of the workload identity: Istio's rotation time (grace ratio ± jitter), the retry pacing near
// expiry, and the settings read from the environment (doc 2 §5, §8 and Istio's defaults where not shown).
import * as fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { EnvTable } from '../../src/lib/env';
import { defaultProxyConfig, type ProxyConfig } from '../../src/config/proxyconfig';
import { caRootCerts, identityOptions, IdentityOptionsError } from '../../src/agent/identity/options';
import { retryDelayMs, rotationDelayMs, timeLeftText } from '../../src/agent/identity/rotation';
import { fileResource } from '../../src/agent/identity/secrets';
import { protocolMismatchHint } from '../../src/agent/tls-client';
import { program } from '../helpers/programs';
import { tempDir } from '../helpers/temp';

const H = 3_600_000;

t.test('rotation time: Istio renews when SECRET_GRACE_PERIOD_RATIO of the lifetime is left', async (t) => {
  const created = 1_000_000;
  const l = { createdAt: created, expiresAt: created + 24 * H };
  // No jitter: 24 h certificate, ratio 0.5 → renew 12 h after issue.
  t.equal(rotationDelayMs(l, created, 0.5, 0), 12 * H);
  t.equal(rotationDelayMs(l, created + 2 * H, 0.5, 0), 10 * H, 'measured from now');
  t.equal(rotationDelayMs(l, created, 0.2, 0), 24 * H - 0.2 * 24 * H);
  t.equal(rotationDelayMs(l, created + 20 * H, 0.5, 0), 0, 'overdue: at once, never negative');
  t.equal(rotationDelayMs(l, created, 0, 0.01), undefined, 'ratio 0 turns rotation off (Istio: no rotation)');
  // Jitter: the ratio moves by up to ±jitter; randomness decides the sign and the size.
  const seq =
    (...v: number[]) =>
    () =>
      v.shift()!;
  t.equal(rotationDelayMs(l, created, 0.5, 0.01, seq(0.9, 1)), Math.round(24 * H - 0.51 * 24 * H), '+1 % of the lifetime earlier');
  t.equal(rotationDelayMs(l, created, 0.5, 0.01, seq(0.1, 1)), Math.round(24 * H - 0.49 * 24 * H), '−1 % later');
  t.equal(rotationDelayMs(l, created, 0.995, 0.01, seq(0.9, 1)), 0, 'ratio capped at 1');
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < 2000; i++) {
    const d = rotationDelayMs(l, created, 0.5, 0.01)!;
    min = Math.min(min, d);
    max = Math.max(max, d);
  }
  t.ok(min >= 0.49 * 24 * H - 1 && max <= 0.51 * 24 * H + 1, `jittered delays stay within ±1 % of the lifetime (${min / H}–${max / H} h)`);
  t.ok(max - min > 0.01 * 24 * H, 'and are spread');
});

t.test('retry pacing: Istio backoff (500 ms ×1.5, ±50 %, ≤60 s), capped at half the time left before expiry', async (t) => {
  const mid = () => 0.5; // no randomization
  t.equal(retryDelayMs(0, undefined, mid), 500);
  t.equal(retryDelayMs(1, undefined, mid), 750);
  t.equal(retryDelayMs(4, undefined, mid), Math.round(500 * 1.5 ** 4));
  t.equal(retryDelayMs(30, undefined, mid), 60_000, 'at most a minute');
  t.equal(retryDelayMs(30, 10_000, mid), 5000, 'half of the 10 s left');
  t.equal(retryDelayMs(30, 50, mid), 100, 'at least 100 ms');
  t.equal(retryDelayMs(30, -5000, mid), 60_000, 'after expiry, plain backoff');
  t.equal(
    retryDelayMs(0, undefined, () => 0),
    250,
  );
  t.equal(
    retryDelayMs(0, undefined, () => 1),
    750,
  );
  t.equal(timeLeftText(41_200), 'expires in 41s');
  t.equal(timeLeftText(-3_000), 'expired 3s ago');
});

function opts(env: Record<string, string>, pc: Partial<ProxyConfig> = {}, cwd = '/nonexistent') {
  return identityOptions({
    env: new EnvTable(program('pilot-agent').env, env),
    raw: env,
    proxyConfig: { ...defaultProxyConfig(), ...pc },
    clusterId: 'c1',
    metadata: {},
    cwd,
  });
}

t.test("settings: defaults are Istio's", async (t) => {
  const o = opts({ POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'web' });
  t.equal(o.spiffeId, 'spiffe://cluster.local/ns/shop/sa/web');
  t.same(o.key, { kind: 'rsa', bits: 2048 });
  t.equal(o.secretTtlMs, 24 * H);
  t.equal(o.graceRatio, 0.5);
  t.equal(o.graceRatioJitter, 0.01);
  t.equal(o.ca.address, 'meshd.mesh-system.svc:15012', 'CA_ADDR defaults to the discovery address');
  t.equal(o.ca.plaintext, false);
  t.equal(o.ca.serverName, 'meshd.mesh-system.svc');
  t.same(
    o.credential,
    { kind: 'token-file', paths: ['./var/run/secrets/tokens/mesh-token', './var/run/secrets/tokens/istio-token'] },
    "ours, then Istio's third-party token",
  );
  t.equal(o.sdsSocketPath, './var/run/secrets/workload-spiffe-uds/socket');
  t.equal(o.fileMountedCerts, false);
  t.same(o.files, { certChain: './etc/certs/cert-chain.pem', key: './etc/certs/key.pem', root: './etc/certs/root-cert.pem' });
  t.equal(o.outputDir, '');
  t.equal(o.compliance, '');
  t.same(o.warnings, []);
});

t.test('settings: the variables change them', async (t) => {
  const o = opts({
    POD_NAMESPACE: 'shop',
    SERVICE_ACCOUNT: 'web',
    TRUST_DOMAIN: 'example.org',
    CA_ADDR: 'localhost:15012',
    SECRET_TTL: '1m',
    SECRET_GRACE_PERIOD_RATIO: '0.3',
    ECC_SIGNATURE_ALGORITHM: 'ECDSA',
    ECC_CURVE: 'P384',
    CA_HEADER_X_A: '1',
    FILE_MOUNTED_CERTS: 'true',
    WORKLOAD_IDENTITY_SOCKET_FILE: 'spire.sock',
    COMPLIANCE_POLICY: 'fips-140-2',
    OUTPUT_CERTS: '/out',
  });
  t.equal(o.spiffeId, 'spiffe://example.org/ns/shop/sa/web');
  t.equal(o.ca.serverName, 'meshd.mesh-system.svc', "localhost stands for the daemon's service name");
  t.equal(o.secretTtlMs, 60_000);
  t.equal(o.graceRatio, 0.3);
  t.same(o.key, { kind: 'ec', curve: 'P384' });
  t.same(o.ca.headers, { X_A: '1' });
  t.equal(o.fileMountedCerts, true);
  t.equal(o.sdsSocketPath, './var/run/secrets/workload-spiffe-uds/spire.sock');
  t.equal(o.customSdsSocket, true);
  t.equal(o.compliance, 'fips-140-2');
  t.equal(opts({ MESHD_SAN: 'meshd.prod.svc', CA_ADDR: '10.0.0.1:15012' }).ca.serverName, 'meshd.prod.svc', 'MESHD_SAN wins');
  t.equal(opts({ CA_ADDR: 'meshd:15010' }).ca.plaintext, true, ':15010 is plaintext, as Istio');
  t.equal(
    opts({}, { controlPlaneAuthPolicy: 'NONE', discoveryAddress: '127.0.0.1:9999' }).ca.plaintext,
    true,
    'a plaintext control plane reaches its CA in plaintext',
  );
  t.equal(opts({ CA_ADDR: 'ca.example:443' }, { controlPlaneAuthPolicy: 'NONE' }).ca.plaintext, false, 'an explicit CA_ADDR keeps TLS');
  t.match(opts({}).warnings.join(), /POD_NAMESPACE and SERVICE_ACCOUNT not set/);
  t.match(opts({ JWT_POLICY: 'first-party-jwt' }).warnings.join(), /deprecated JWT policy 'first-party-jwt'; treating as 'third-party-jwt'/);
});

t.test('settings: bad values name the variable', async (t) => {
  t.throws(() => opts({ WORKLOAD_RSA_KEY_SIZE: '1024' }), IdentityOptionsError);
  t.throws(() => opts({ WORKLOAD_RSA_KEY_SIZE: '1024' }), { message: /WORKLOAD_RSA_KEY_SIZE=1024/ });
  t.throws(() => opts({ SECRET_GRACE_PERIOD_RATIO: '1.5' }), { message: /SECRET_GRACE_PERIOD_RATIO=1\.5: must be between 0 and 1/ });
  t.throws(() => opts({ COMPLIANCE_POLICY: 'fips' }), { message: /COMPLIANCE_POLICY="fips": unknown compliance policy/ });
  t.throws(() => opts({ CREDENTIAL_FETCHER_TYPE: 'Kerberos' }), { message: /CREDENTIAL_FETCHER_TYPE=Kerberos: invalid credential fetcher type/ });
  t.throws(() => opts({ CREDENTIAL_FETCHER_TYPE: 'GoogleComputeEngine' }), { message: /not available in this build/ });
  t.throws(() => opts({ WORKLOAD_IDENTITY_SOCKET_FILE: '../x' }), { message: /must be a filename, not a path/ });
  t.throws(() => opts({ PROV_CERT: '/p', FILE_MOUNTED_CERTS: 'true' }), { message: /PROV_CERT and FILE_MOUNTED_CERTS are mutually exclusive/ });
  t.throws(() => opts({ SECRET_TTL: '0s' }), { message: /SECRET_TTL=0s: the certificate lifetime must be positive/ });
});

t.test('root for the CA: CA_ROOT_CA, SYSTEM, the mounted mesh root, or an error saying what to set', async (t) => {
  const cwd = tempDir(t);
  const ca = (rootCa: string) => ({ ...opts({}).ca, rootCa });
  t.throws(() => caRootCerts(ca(''), cwd), {
    message: /root CA file for CA does not exist: none of \.\/var\/run\/secrets\/mesh\/root-cert\.pem.*set CA_ROOT_CA/,
  });
  t.same(caRootCerts(ca('SYSTEM'), cwd), { path: '' }, 'SYSTEM: the system roots');
  t.throws(() => caRootCerts(ca('missing.pem'), cwd), { message: /root CA file for CA does not exist missing\.pem \(CA_ROOT_CA\)/ });
  fs.mkdirSync(path.join(cwd, 'var/run/secrets/istio'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'var/run/secrets/istio/root-cert.pem'), 'ROOT');
  t.equal(caRootCerts(ca(''), cwd).path, './var/run/secrets/istio/root-cert.pem', "Istio's mount point is read too");
  fs.mkdirSync(path.join(cwd, 'var/run/secrets/mesh'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'var/run/secrets/mesh/root-cert.pem'), 'MESH');
  t.equal(caRootCerts(ca(''), cwd).pem?.toString(), 'MESH', 'ours first');
});

t.test('workload-spiffe-credentials files replace the CA when all three are there', async (t) => {
  const cwd = tempDir(t);
  const d = path.join(cwd, 'var/run/secrets/workload-spiffe-credentials');
  fs.mkdirSync(d, { recursive: true });
  for (const f of ['cert-chain.pem', 'key.pem']) fs.writeFileSync(path.join(d, f), 'x');
  t.equal(opts({}, {}, cwd).fileMountedCerts, false, 'two of three: the CA');
  fs.writeFileSync(path.join(d, 'root-cert.pem'), 'x');
  const o = opts({}, {}, cwd);
  t.equal(o.fileMountedCerts, true);
  t.equal(o.files.certChain, './var/run/secrets/workload-spiffe-credentials/cert-chain.pem');
});

t.test("SDS resource names for files (Istio's SdsCertificateConfigFromResourceName)", async (t) => {
  t.same(fileResource('file-cert:/etc/c.pem~/etc/k.pem'), { kind: 'cert', cert: '/etc/c.pem', key: '/etc/k.pem' });
  t.same(fileResource('file-root:/etc/ca.pem'), { kind: 'root', ca: '/etc/ca.pem' });
  t.equal(fileResource('file-cert:/only-one.pem'), undefined);
  t.equal(fileResource('file-root:/a~/b'), undefined);
  t.equal(fileResource('kubernetes://gw-cred'), undefined);
});

t.test("protocol mismatch: OpenSSL's words become a sentence naming the port and the setting", async (t) => {
  const tlsToPlain = protocolMismatchHint(
    'No connection established. Last error: Error: C0B7:error:0A00010B:SSL routines:ssl3_get_record:wrong version number',
    { address: 'meshd:15010', tls: true, setting: 'discoveryAddress' },
  );
  t.match(tlsToPlain!, /meshd:15010 answered the TLS handshake in plaintext.*Point discoveryAddress at the TLS port.*controlPlaneAuthPolicy: NONE/);
  t.equal(protocolMismatchHint('connect ECONNREFUSED 127.0.0.1:1', { address: 'x:1', tls: true, setting: 'discoveryAddress' }), undefined);
  // grpc-js's words for a plaintext HTTP/2 connection a TLS server closed.
  const plainToTls = protocolMismatchHint('No connection established. Last error: Failed to connect (2026-11-25T21:02:59.486Z). Resolution note: ', {
    address: 'meshd:15012',
    tls: false,
    setting: 'discoveryAddress',
  });
  t.match(plainToTls!, /meshd:15012 dropped a plaintext HTTP\/2 connection: it may be a TLS port.*controlPlaneAuthPolicy: NONE/);
  t.equal(
    protocolMismatchHint('No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:1.', {
      address: 'x:1',
      tls: false,
      setting: 'discoveryAddress',
    }),
    undefined,
  );
});
