// The registration authority (EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API) and PILOT_CERT_PROVIDER=k8s.io/<signer>
// against a real API server: the daemon authenticates the caller, checks the CSR as Istio's ValidateCSR,
// creates a CertificateSigningRequest for ORCH_SIGNER, approves it, and returns what the signer issued with
// the external root. The signer is this test (as cert-manager or a cloud CA would be): it watches for approved
// requests of its signerName and signs them with openssl under a root the daemon never saw the key of.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { X509Certificate } from 'node:crypto';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import t, { type Test } from 'tap';
import { built, exec, MESH } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { namespace, startKube, type KubeApi, type Obj, kubeUnavailable } from '../helpers/kube';
import { caClient, createCertificate, MESHD_HOST, openssl, opensslVerify, sans } from './helpers';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';
import { EC_P256_KEY, signWith } from '../helpers/openssl';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

const SIGNER = 'example.com/mesh-workloads';
const SERVING_SIGNER = 'example.com/meshd-serving';
const CSRS = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

interface Csr {
  metadata: { name: string };
  spec: { request: string; signerName: string; usages: string[]; expirationSeconds?: number };
  status?: { certificate?: string; conditions?: Array<{ type: string; status: string }> };
}

/** The external CA: a root made with openssl, and a loop that signs approved requests of its signers. */
function startSigner(t: Test, api: KubeApi, dir: string, o: { deny?: string[] } = {}) {
  openssl(
    [
      'req',
      '-x509',
      ...EC_P256_KEY,
      '-keyout',
      'ext-root-key.pem',
      '-out',
      'ext-root.pem',
      '-days',
      '30',
      '-subj',
      '/O=External CA/CN=external-root',
      '-addext',
      'basicConstraints=critical,CA:TRUE',
      '-addext',
      'keyUsage=critical,keyCertSign,cRLSign',
    ],
    { cwd: dir },
  );
  fs.writeFileSync(
    path.join(dir, 'leaf.ext'),
    'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n',
  );
  const seen: Csr[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const list = (await api.get(CSRS)).items as Csr[];
      for (const c of list) {
        if (![SIGNER, SERVING_SIGNER].includes(c.spec.signerName) || c.status?.certificate) continue;
        if (!c.status?.conditions?.some((x) => x.type === 'Approved' && x.status === 'True')) continue;
        if (seen.some((s) => s.metadata.name === c.metadata.name)) continue;
        seen.push(c);
        if (o.deny?.includes(c.spec.signerName)) {
          await api.request('PUT', `${CSRS}/${c.metadata.name}/status`, {
            ...c,
            status: {
              ...c.status,
              conditions: [
                ...(c.status?.conditions ?? []),
                { type: 'Failed', status: 'True', reason: 'SignerRefused', message: 'the test signer refuses this signer name' },
              ],
            },
          });
          continue;
        }
        const csrFile = path.join(dir, `${c.metadata.name}.csr`);
        fs.writeFileSync(csrFile, Buffer.from(c.spec.request, 'base64'));
        const leaf = openssl(
          [...signWith(csrFile, 'ext-root.pem', 'ext-root-key.pem'), '-days', '1', '-copy_extensions', 'copy', '-extfile', 'leaf.ext'],
          { cwd: dir },
        );
        await api.request('PUT', `${CSRS}/${c.metadata.name}/status`, {
          ...c,
          status: { ...c.status, certificate: Buffer.from(leaf).toString('base64') },
        });
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  t.teardown(async () => {
    stopped = true;
    await loop.catch(() => undefined);
  });
  return { rootPem: fs.readFileSync(path.join(dir, 'ext-root.pem'), 'utf8'), seen };
}

async function serviceAccountToken(api: KubeApi, ns: string, sa: string): Promise<string> {
  await api.create(`/api/v1/namespaces/${ns}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa } });
  const r = await api.create(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { audiences: ['mesh-ca'], expirationSeconds: 3600 },
  });
  return r.status.token as string;
}

function csr(dir: string, o: { san: string; subj?: string }): string {
  const base = path.join(dir, `w-${Math.random().toString(36).slice(2)}`);
  openssl([
    'req',
    '-new',
    ...EC_P256_KEY,
    '-keyout',
    `${base}.key`,
    '-out',
    `${base}.csr`,
    '-subj',
    o.subj ?? '/',
    '-addext',
    `subjectAltName=${o.san}`,
  ]);
  return fs.readFileSync(`${base}.csr`, 'utf8');
}

/** The certificate a TLS server presents, verified against `rootPem` for the daemon's name. */
function servingCertificate(address: string, rootPem: string): Promise<X509Certificate> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const s = tls.connect(
      { host: address.slice(0, i), port: Number(address.slice(i + 1)), servername: MESHD_HOST, ca: rootPem, ALPNProtocols: ['h2'] },
      () => {
        const raw = s.getPeerCertificate().raw;
        s.destroy();
        resolve(new X509Certificate(raw));
      },
    );
    s.once('error', reject);
  });
}

/**
 * An API server with namespaces mesh-system and demo, the test signer on it, a token of demo/app, and the daemon's
 * working directory holding the signer's root where EXTERNAL_CA reads it (./etc/external-ca-cert/root-cert.pem).
 */
async function signerCluster(t: Test, o: { deny?: string[] } = {}) {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const api = kube.api;
  t.teardown(() => api.close());
  await api.create('/api/v1/namespaces', namespace('mesh-system'));
  await api.create('/api/v1/namespaces', namespace('demo'));
  const dir = tempDir(t);
  const signer = startSigner(t, api, dir, o);
  const token = await serviceAccountToken(api, 'demo', 'app');
  const cwd = path.join(dir, 'meshd');
  fs.mkdirSync(path.join(cwd, 'etc/external-ca-cert'), { recursive: true });
  fs.writeFileSync(path.join(cwd, 'etc/external-ca-cert/root-cert.pem'), signer.rootPem);
  return { kube, api, dir, signer, token, cwd };
}

t.test(
  'EXTERNAL_CA=ISTIOD_RA_KUBERNETES_API: workload and serving certificates from the orchestrator signer',
  { skip: kubeUnavailable() },
  async (t) => {
    const { kube, api, dir, signer, token, cwd } = await signerCluster(t);

    const d: RunningDaemon = await startDaemon(
      ['--orchconfig', kube.kubeconfig],
      { EXTERNAL_CA: 'ISTIOD_RA_KUBERNETES_API', ORCH_SIGNER: SIGNER },
      60_000,
      { cwd },
    );
    t.teardown(() => d.stop());

    const serving = await servingCertificate(d.secureGrpc!, signer.rootPem);
    t.ok(serving.verify(new X509Certificate(signer.rootPem).publicKey), ':15012 presents a certificate the external root signed');
    t.match(serving.subjectAltName ?? '', /DNS:meshd\.mesh-system\.svc/, "for the daemon's service name");
    t.notOk(fs.existsSync(path.join(cwd, 'var/lib/mesh/ca')), 'no built-in CA material is made');
    const missing = await api.find('/api/v1/namespaces/mesh-system/secrets/mesh-ca-secret');
    t.notOk(missing, 'no CA Secret either');
    // The namespace controller (leader only) writes it into every namespace.
    let cm: Obj | undefined;
    await waitFor(
      () => 'mesh-ca-root-cert in demo',
      async () => Boolean((cm = await api.find('/api/v1/namespaces/demo/configmaps/mesh-ca-root-cert'))),
      { timeoutMs: 30_000 },
    );
    t.equal(cm!.data['root-cert.pem'], signer.rootPem, 'the external root is what workloads are told to trust, in every namespace');

    const ca = caClient(t, d.secureGrpc!, signer.rootPem);
    const id = 'spiffe://cluster.local/ns/demo/sa/app';
    const chain = await createCertificate(ca, { csr: csr(dir, { san: `URI:${id}` }), token, ttlSeconds: 3600 });
    t.equal(chain.length, 2, 'leaf, then the root bundle');
    t.same(sans(chain[0]!), [`URI:${id}`], "the caller's identity");
    t.equal(chain[1], signer.rootPem, 'the root is the mounted external root');
    const v = opensslVerify(dir, signer.rootPem, chain[0]!);
    t.ok(v.ok, `openssl verify: ${v.out}`);
    const asked = signer.seen.find((c) => c.metadata.name.startsWith('csr-workload-'))!;
    t.equal(asked.spec.signerName, SIGNER);
    t.ok(
      signer.seen.some((c) => c.metadata.name.startsWith('csr-meshd-') && c.spec.signerName === SIGNER),
      'the serving certificate came from ORCH_SIGNER too (PILOT_CERT_PROVIDER=istiod, and there is no built-in CA)',
    );
    t.same([...asked.spec.usages].sort(), ['client auth', 'digital signature', 'key encipherment', 'server auth'], "Istio's key usages");
    t.equal(asked.spec.expirationSeconds, 3600, 'the requested lifetime is passed on');
    await new Promise((r) => setTimeout(r, 300));
    const left = ((await api.get(CSRS)).items as Csr[]).filter((c) => c.spec.signerName === SIGNER);
    t.same(left, [], 'the request object is deleted once read');

    await t.rejects(
      createCertificate(ca, { csr: csr(dir, { san: 'URI:spiffe://cluster.local/ns/demo/sa/admin' }), token }),
      {
        code: grpc.status.INVALID_ARGUMENT,
        details: /CSR is not valid for this caller: the CSR asks for spiffe:\/\/cluster\.local\/ns\/demo\/sa\/admin/,
      },
      'another identity in the CSR is refused, not replaced',
    );
    await t.rejects(
      createCertificate(ca, { csr: csr(dir, { san: `URI:${id}`, subj: '/CN=app' }), token }),
      { code: grpc.status.INVALID_ARGUMENT, details: /has a subject/ },
      'a subject is refused',
    );
    await t.rejects(createCertificate(ca, { csr: csr(dir, { san: `URI:${id}` }), token, ttlSeconds: 365 * 24 * 3600 }), {
      code: grpc.status.INVALID_ARGUMENT,
      details: /greater than the max allowed TTL/,
    });
    await t.rejects(
      createCertificate(ca, { csr: csr(dir, { san: `URI:${id}` }) }),
      { code: grpc.status.UNAUTHENTICATED },
      'no credential, no request object',
    );
  },
);

t.test('a signer that fails the request: the caller gets an error naming the request and the signer', { skip: kubeUnavailable() }, async (t) => {
  const { kube, dir, signer, token, cwd } = await signerCluster(t, { deny: [SIGNER] });
  // The serving certificate from another signer (PILOT_CERT_PROVIDER=k8s.io/<signer>), which does sign.
  const d = await startDaemon(
    ['--orchconfig', kube.kubeconfig],
    { EXTERNAL_CA: 'ISTIOD_RA_KUBERNETES_API', ORCH_SIGNER: SIGNER, PILOT_CERT_PROVIDER: `k8s.io/${SERVING_SIGNER}` },
    60_000,
    { cwd },
  );
  t.teardown(() => d.stop());
  t.ok(
    signer.seen.some((c) => c.spec.signerName === SERVING_SIGNER),
    "the serving certificate was asked of PILOT_CERT_PROVIDER's signer",
  );
  const ca = caClient(t, d.secureGrpc!, signer.rootPem);
  await t.rejects(createCertificate(ca, { csr: csr(dir, { san: 'URI:spiffe://cluster.local/ns/demo/sa/app' }), token }), {
    code: grpc.status.INTERNAL,
    details: new RegExp(`CertificateSigningRequest csr-workload-\\w+ for signer ${SIGNER} failed: SignerRefused`),
  });
});

t.test('start-up errors name what is missing', async (t) => {
  const cases: Array<[Record<string, string>, string[], RegExp]> = [
    [{ EXTERNAL_CA: 'VAULT' }, [], /EXTERNAL_CA=VAULT: invalid CA name; the registration authority mesh has is ISTIOD_RA_KUBERNETES_API/],
    [{ PILOT_CERT_PROVIDER: 'k8s.io/' }, [], /PILOT_CERT_PROVIDER=k8s\.io\/ names no signer/],
  ];
  for (const [env, args, message] of cases) {
    const r = await exec(
      MESH,
      [
        'pilot-discovery',
        'discovery',
        '--configDir',
        tempDir(t),
        '--httpAddr',
        '127.0.0.1:0',
        '--grpcAddr',
        '127.0.0.1:0',
        '--secureGRPCAddr',
        '127.0.0.1:0',
        '--httpsAddr',
        '127.0.0.1:0',
        '--monitoringAddr',
        '127.0.0.1:0',
        '--ctrlz_port',
        '0',
        ...args,
      ],
      { env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env }, cwd: tempDir(t) },
    );
    t.not(r.code, 0, JSON.stringify(env));
    t.match(r.stderr, message);
  }
});
