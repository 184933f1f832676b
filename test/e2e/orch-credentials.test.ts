// Gateway credentials from a real Kubernetes API server (../shared/kube) with the built daemon: a Secret
// created through the API reaches a gateway's ADS stream as the `kubernetes://<name>` SDS resource, and an
// edit follows; the gateway authenticates with a service-account token (TokenRequest) over TLS, and its
// right to the key pair is the API server's answer to a SubjectAccessReview (list secrets in its
// namespace), as Istio asks it: a service account without the Role gets the CA companion only. The stream
// is the engine's own ADS client (GrpcMux + SecretManager), as the gateway's engine runs it.
import * as grpc from '@grpc/grpc-js';
import { create } from '@bufbuild/protobuf';
import t, { type Test } from 'tap';
import { NodeSchema } from '../../src/gen/envoy/config/core/v3/base_pb';
import { SdsSecretConfigSchema, type Secret } from '../../src/gen/envoy/extensions/transport_sockets/tls/v3/secret_pb';
import { GrpcMux } from '../../src/proxy/xds/grpc-mux';
import { SecretManager, type SecretWatch } from '../../src/proxy/tls/secrets';
import { LoggerRegistry } from '../../src/proxy/log';
import { StatsStore } from '../../src/proxy/stats/store';
import { proxyTypeRegistry } from '../../src/proxy/registry';
import { sdsAdsConfig } from '../../src/xds/gen/tls';
import { built } from '../helpers/binary';
import { startDaemon } from '../helpers/daemon';
import { namespace, startKube, type KubeApi, requireKube } from '../helpers/kube';
import { tempDir } from '../helpers/temp';
import { generateRoot, rotatedRoot } from '../../src/ca/selfsigned';
import { waitFor } from '../helpers/wait';

requireKube();

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

const NS = 'mesh-system';
const b64 = (s: string) => Buffer.from(s).toString('base64');

async function token(api: KubeApi, sa: string): Promise<string> {
  const r = await api.create(`/api/v1/namespaces/${NS}/serviceaccounts/${sa}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { audiences: ['mesh-ca'], expirationSeconds: 3600 },
  });
  return r.status.token as string;
}

/** The engine's ADS client for `sa`'s gateway, over TLS to the daemon with the token as bearer credential. */
function gatewayAds(t: Test, address: string, rootPem: string, sa: string, bearer: string): { watch(name: string): SecretWatch } {
  const loggers = new LoggerRegistry('warning');
  const creds = grpc.credentials.combineChannelCredentials(
    // the daemon's certificate names its Service; this test dials an address
    grpc.credentials.createSsl(Buffer.from(rootPem), null, null, { checkServerIdentity: () => undefined }),
    grpc.credentials.createFromMetadataGenerator((_p, cb) => {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${bearer}`);
      cb(null, md);
    }),
  );
  const mux = new GrpcMux({
    target: address,
    credentials: creds,
    node: create(NodeSchema, {
      id: `router~127.0.0.1~${sa}-0.${NS}~${NS}.svc.cluster.local`,
      metadata: { NAMESPACE: NS, SERVICE_ACCOUNT: sa, CLUSTER_ID: 'Orchestrator', MESH_VERSION: '1.26.0' },
    }),
    service: 'ads',
    setNodeOnFirstMessageOnly: true,
    log: loggers.get('config'),
    typeRegistry: proxyTypeRegistry(),
  });
  t.teardown(() => mux.close());
  const manager = new SecretManager(() => ({ key: 'ads', mux }), loggers.get('secret'), new StatsStore());
  return { watch: (name) => manager.watch(create(SdsSecretConfigSchema, { name, sdsConfig: sdsAdsConfig() }), name) };
}

function inline(s: Secret | undefined): string | undefined {
  if (s?.type.case === 'tlsCertificate' && s.type.value.certificateChain?.specifier.case === 'inlineBytes')
    return Buffer.from(s.type.value.certificateChain.specifier.value).toString();
  if (s?.type.case === 'validationContext' && s.type.value.trustedCa?.specifier.case === 'inlineBytes')
    return Buffer.from(s.type.value.trustedCa.specifier.value).toString();
  return undefined;
}

t.test('a Secret created through the API reaches the gateway over ADS, subject to SubjectAccessReview', async (t) => {
  const kube = await startKube(t, { controllerManager: false });
  const api = kube.api;
  t.teardown(() => api.close());
  await api.create('/api/v1/namespaces', namespace(NS));
  for (const sa of ['ingressgateway', 'nobody'])
    await api.create(`/api/v1/namespaces/${NS}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: sa } });
  // What Istio's gateway chart grants its service account.
  await api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'gateway-sds' },
    rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['get', 'watch', 'list'] }],
  });
  await api.create(`/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings`, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'gateway-sds' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'gateway-sds' },
    subjects: [{ kind: 'ServiceAccount', name: 'ingressgateway' }],
  });

  const cwd = tempDir(t);
  const d = await startDaemon(['--orchconfig', kube.kubeconfig], {}, 60_000, { cwd });
  t.teardown(() => d.stop());
  const caSecret = await api.get(`/api/v1/namespaces/${NS}/secrets/mesh-ca-secret`);
  const rootPem = Buffer.from(caSecret.data['ca-cert.pem'], 'base64').toString();

  const gw = gatewayAds(t, d.secureGrpc!, rootPem, 'ingressgateway', await token(api, 'ingressgateway'));
  const cert = gw.watch('kubernetes://gw-cert');
  const ca = gw.watch('kubernetes://gw-cert-cacert');
  const nobody = gatewayAds(t, d.secureGrpc!, rootPem, 'nobody', await token(api, 'nobody'));
  const nobodyCert = nobody.watch('kubernetes://gw-cert');
  const nobodyCa = nobody.watch('kubernetes://gw-cert-cacert');

  // A real key pair, and a second certificate for the same key: the gateway's secret manager loads a key pair
  // before it takes it (as Envoy does), so placeholder text would be NACKed.
  const one = await generateRoot({ ttlMs: 3_600_000, org: 'gw', rsaKeySize: 2048 });
  const two = rotatedRoot(one, { ttlMs: 7_200_000, org: 'gw' });
  const caPem = (await generateRoot({ ttlMs: 3_600_000, org: 'gw-ca', rsaKeySize: 2048 })).certPem;
  // Made after the watches: it arrives through the informer and a push.
  await api.create(`/api/v1/namespaces/${NS}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'gw-cert' },
    type: 'kubernetes.io/tls',
    data: { 'tls.crt': b64(one.certPem), 'tls.key': b64(one.keyPem), 'ca.crt': b64(caPem) },
  });
  const why = () => d.log().slice(-4000);
  await waitFor(why, () => inline(cert.current()) === one.certPem, { timeoutMs: 30_000 });
  await waitFor(why, () => inline(ca.current()) === caPem, { timeoutMs: 30_000 });
  t.pass('the key pair and its -cacert companion reached the gateway');

  await api.merge(`/api/v1/namespaces/${NS}/secrets/gw-cert`, { data: { 'tls.crt': b64(two) } });
  await waitFor(why, () => inline(cert.current()) === two, { timeoutMs: 30_000 });
  t.pass('an edit through the API follows');

  await waitFor(why, () => inline(nobodyCa.current()) === caPem, { timeoutMs: 30_000 });
  t.equal(nobodyCert.current(), undefined, 'a service account that may not list Secrets gets no key pair, only the CA');
  t.match(
    d.log(),
    /proxy nobody-0\.mesh-system attempted to access unauthorized certificates gw-cert: nobody\/mesh-system is not authorized to read secrets/,
  );
});
