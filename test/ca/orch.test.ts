// The CA in orchestrator mode against a real API server (../shared/kube): the root persisted in the Secret
// mesh-system/mesh-ca-secret (or `cacerts` with USE_CACERTS_FOR_SELF_SIGNED_CA) and kept across restarts,
// the root published in the ConfigMap mesh-ca-root-cert, service-account tokens checked with TokenReview
// against TOKEN_AUDIENCES, and node proxies (CA_TRUSTED_NODE_ACCOUNTS) asking for identities of pods on
// their node only.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { built } from '../helpers/binary';
import { startDaemon, type RunningDaemon } from '../helpers/daemon';
import { namespace, startKube, type KubeApi, requireKube } from '../helpers/kube';
import { metricValue } from '../helpers/prometheus';
import { caClient, createCertificate, opensslCsr, opensslVerify, sans } from './helpers';
import { tempDir } from '../helpers/temp';
import { mintWorkloadToken, TOKEN_KEY_FILE, tokenSigningKey } from '../../src/ca/token';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');

const b64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');

async function serviceAccount(api: KubeApi, ns: string, name: string): Promise<void> {
  await api.create(`/api/v1/namespaces/${ns}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } });
}

/** A pod on `node` running as `sa` (never run: there is no kubelet; the API object is what counts). */
async function pod(api: KubeApi, ns: string, name: string, sa: string, node: string): Promise<string> {
  const p = await api.create(`/api/v1/namespaces/${ns}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: { serviceAccountName: sa, nodeName: node, containers: [{ name: 'app', image: 'example.invalid/app' }] },
  });
  return p.metadata.uid as string;
}

/** TokenRequest: a token for `sa`, optionally bound to a pod (the TokenReview then names it). */
async function token(api: KubeApi, ns: string, sa: string, o: { audiences?: string[]; pod?: { name: string; uid: string } } = {}): Promise<string> {
  const r = await api.create(`/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: {
      audiences: o.audiences ?? ['mesh-ca'],
      expirationSeconds: 3600,
      ...(o.pod ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: o.pod.name, uid: o.pod.uid } } : {}),
    },
  });
  return r.status.token as string;
}

t.test('orchestrator mode', async (t) => {
  const kube = await startKube(t, { controllerManager: false });
  const api = kube.api;
  t.teardown(() => api.close());
  await api.create('/api/v1/namespaces', namespace('mesh-system'));
  await api.create('/api/v1/namespaces', namespace('demo'));
  for (const [ns, sa] of [
    ['demo', 'app'],
    ['demo', 'db'],
    ['mesh-system', 'nodeproxy'],
  ] as const)
    await serviceAccount(api, ns, sa);
  const nodeproxyUid = await pod(api, 'mesh-system', 'nodeproxy-a', 'nodeproxy', 'node-a');
  await pod(api, 'demo', 'app-1', 'app', 'node-a');
  await pod(api, 'demo', 'db-1', 'db', 'node-b');

  const dir = tempDir(t);
  const cwd = path.join(dir, 'meshd');
  fs.mkdirSync(cwd);
  const args = ['--orchconfig', kube.kubeconfig];
  const env = { CA_TRUSTED_NODE_ACCOUNTS: 'mesh-system/nodeproxy' };
  let d: RunningDaemon = await startDaemon(args, env, 60_000, { cwd });
  t.teardown(() => d.stop());

  const secret = await api.get('/api/v1/namespaces/mesh-system/secrets/mesh-ca-secret');
  t.equal(secret.type, 'mesh.io/ca-root', "Istio's CA secret, renamed");
  t.same(Object.keys(secret.data).sort(), ['ca-cert.pem', 'ca-key.pem', 'cert-chain.pem', 'key.pem', 'root-cert.pem']);
  const rootPem = b64(secret.data['ca-cert.pem']);
  t.match(b64(secret.data['ca-key.pem']), /-----BEGIN RSA PRIVATE KEY-----/);
  // Written by the namespace controller once this daemon leads its election.
  await waitFor(
    () => d.log(),
    async () => (await api.find('/api/v1/namespaces/mesh-system/configmaps/mesh-ca-root-cert'))?.data?.['root-cert.pem'] === rootPem,
    { timeoutMs: 20_000 },
  );
  t.pass('the root is published in the ConfigMap mesh-ca-root-cert');
  t.notOk(fs.existsSync(path.join(cwd, 'var')), 'nothing is written to the working directory in a cluster');

  const ca = caClient(t, d.secureGrpc!, rootPem);
  const metrics = async () => (await fetch(`http://${d.monitoring}/metrics`)).text();

  await t.test('service-account tokens are checked by the API server (TokenReview, TOKEN_AUDIENCES)', async (t) => {
    const { csr } = opensslCsr(dir, 'ec', { san: 'URI:spiffe://cluster.local/ns/mesh-system/sa/meshd' });
    const chain = await createCertificate(ca, { csr, token: await token(api, 'demo', 'app') });
    t.same(sans(chain[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/app']);
    t.ok(opensslVerify(dir, rootPem, chain[0]!).ok);

    const failures0 = metricValue(await metrics(), 'ca_server_authentication_failure_count') ?? 0;
    const unauthenticated = { code: grpc.status.UNAUTHENTICATED };
    await t.rejects(
      createCertificate(ca, { csr, token: await token(api, 'demo', 'app', { audiences: ['https://kubernetes.default.svc.cluster.local'] }) }),
      unauthenticated,
      'a token for another audience',
    );
    await t.rejects(
      createCertificate(ca, { csr, token: kube.env.KUBE_TOKEN }),
      unauthenticated,
      'an admin token, which the API server does not accept for the audience mesh-ca',
    );
    await t.rejects(createCertificate(ca, { csr, token: 'eyJhbGciOiJSUzI1NiJ9.e30.c2ln' }), unauthenticated, 'a forged token');
    await t.rejects(
      createCertificate(ca, { csr, token: await token(api, 'demo', 'app'), headers: { clusterid: 'elsewhere' } }),
      unauthenticated,
      'a token that claims another cluster',
    );
    t.equal(metricValue(await metrics(), 'ca_server_authentication_failure_count'), failures0 + 4);
    t.match(
      d.log(),
      /Authenticator KubeJWTAuthenticator: failed to validate the JWT from cluster "": the service account authentication returns an error: .*token audiences \["https:\/\/kubernetes\.default\.svc\.cluster\.local"\] is invalid for the target audiences \["mesh-ca"\]/,
    );
    t.match(d.log(), /client claims to be in cluster "elsewhere", but we only know about local cluster "Orchestrator"/);
  });

  await t.test("the daemon's own tokens: with a cluster, trusted only once an operator puts a key in ./var/lib/mesh/ca", async (t) => {
    const keyDir = path.join(dir, 'operator-key');
    const key = tokenSigningKey(keyDir, true)!;
    const mine = mintWorkloadToken(key, { namespace: 'demo', serviceAccount: 'vm', audiences: ['mesh-ca'], ttlSeconds: 600 });
    const { csr } = opensslCsr(dir, 'ec');
    await t.rejects(createCertificate(ca, { csr, token: mine }), { code: grpc.status.UNAUTHENTICATED }, "no key in the daemon's directory: refused");
    const caDir = path.join(cwd, 'var/lib/mesh/ca');
    fs.mkdirSync(caDir, { recursive: true });
    fs.copyFileSync(path.join(keyDir, TOKEN_KEY_FILE), path.join(caDir, TOKEN_KEY_FILE));
    let chain: string[] = [];
    await waitFor(
      () => d.log(),
      async () => {
        chain = await createCertificate(ca, { csr, token: mine }).catch(() => []);
        return chain.length > 0;
      },
      { timeoutMs: 10_000 },
    );
    t.same(sans(chain[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/vm'], 'accepted once the key is there');
    fs.rmSync(path.join(cwd, 'var'), { recursive: true });
  });

  await t.test("node impersonation (CA_TRUSTED_NODE_ACCOUNTS): identities of pods on the caller's node only", async (t) => {
    const { csr } = opensslCsr(dir, 'ec');
    const nodeToken = await token(api, 'mesh-system', 'nodeproxy', { pod: { name: 'nodeproxy-a', uid: nodeproxyUid } });
    const asApp = await createCertificate(ca, { csr, token: nodeToken, metadata: { ImpersonatedIdentity: 'spiffe://cluster.local/ns/demo/sa/app' } });
    t.same(sans(asApp[0]!), ['URI:spiffe://cluster.local/ns/demo/sa/app'], 'app runs on node-a: allowed');
    const refused = { code: grpc.status.UNAUTHENTICATED, details: 'request impersonation authentication failure' };
    await t.rejects(
      createCertificate(ca, { csr, token: nodeToken, metadata: { ImpersonatedIdentity: 'spiffe://cluster.local/ns/demo/sa/db' } }),
      refused,
      'db runs on node-b only',
    );
    await t.rejects(
      createCertificate(ca, {
        csr,
        token: await token(api, 'demo', 'app'),
        metadata: { ImpersonatedIdentity: 'spiffe://cluster.local/ns/demo/sa/db' },
      }),
      refused,
      'an account that is not a node account',
    );
    await t.rejects(
      createCertificate(ca, { csr, token: nodeToken, metadata: { ImpersonatedIdentity: 'not-spiffe' } }),
      refused,
      'a malformed identity',
    );
    t.match(
      d.log(),
      /impersonation failed for identity spiffe:\/\/cluster\.local\/ns\/demo\/sa\/db, error: no instances of "demo\/db" found on node "node-a"/,
    );
  });

  await t.test('a restart keeps the root from the Secret', async (t) => {
    await d.stop();
    d = await startDaemon(args, env, 60_000, { cwd });
    t.match(d.log(), /Load signing key and cert from existing secret mesh-system\/mesh-ca-secret/);
    const again = await api.get('/api/v1/namespaces/mesh-system/secrets/mesh-ca-secret');
    t.equal(b64(again.data['ca-cert.pem']), rootPem);
    const ca2 = caClient(t, d.secureGrpc!, rootPem);
    const chain = await createCertificate(ca2, { csr: opensslCsr(dir, 'rsa').csr, token: await token(api, 'demo', 'db') });
    t.equal(chain.at(-1), rootPem, 'the same root signs after the restart');
  });

  await t.test('USE_CACERTS_FOR_SELF_SIGNED_CA: the root lives in the Secret cacerts', async (t) => {
    await api.create('/api/v1/namespaces', namespace('mesh-alt'));
    // One mesh per cluster writes the root ConfigMaps: the mesh-system daemon steps aside for this one.
    await d.stop();
    const alt = await startDaemon([...args, '--namespace', 'mesh-alt'], { USE_CACERTS_FOR_SELF_SIGNED_CA: 'true' }, 60_000, { cwd });
    t.teardown(() => alt.stop());
    const s = await api.get('/api/v1/namespaces/mesh-alt/secrets/cacerts');
    t.ok('mesh-generated' in s.data, 'marked as generated by the daemon');
    t.equal(await api.find('/api/v1/namespaces/mesh-alt/secrets/mesh-ca-secret'), undefined);
    const altRoot = b64(s.data['ca-cert.pem']);
    await waitFor(
      () => alt.log(),
      async () => (await api.find('/api/v1/namespaces/mesh-alt/configmaps/mesh-ca-root-cert'))?.data?.['root-cert.pem'] === altRoot,
      { timeoutMs: 20_000 },
    );
    t.not(altRoot, rootPem, "another root than mesh-system's");
  });
});
