// The TLS listeners with certificates made by openssl: secure gRPC (client certificates verified when
// given, as Go's VerifyClientCertIfGiven), the HTTPS validation webhook with real AdmissionReviews,
// --tls-cipher-suites, and the certificate-file errors.
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { metricsText } from '../../src/lib/metrics';
import { DaemonStartError, startDaemon } from '../../src/meshd/daemon';
import { echo, FakeProviders, loopbackOptions, makeCerts, request, startTestDaemon } from './helpers';
import { tempDir } from '../helpers/temp';

const dir = tempDir(t, 'meshd-tls-');
const certs = makeCerts(dir);
const read = (f: string) => fs.readFileSync(f);
const tlsFlags = (cipherSuites: string[] = []) => ({ certFile: certs.serverCert, keyFile: certs.serverKey, caCertFile: certs.caCert, cipherSuites });

t.test('secure gRPC: server certificate, client certificates verified when presented', async (t) => {
  const { daemon, providers } = await startTestDaemon(t, { tls: tlsFlags() });
  const addr = daemon.addresses.secureGrpc!.address;
  t.match(addr, /^127\.0\.0\.1:\d+$/);
  t.same(providers.xds.attached, [{ secure: false }, { secure: true }], 'the xDS server is attached to both gRPC servers');

  const anonymous = grpc.credentials.createSsl(read(certs.caCert));
  t.equal(await echo(addr, anonymous, 'a'), 'secure:nocert:a', 'no client certificate is accepted (XDS_AUTH decides later)');
  const withCert = grpc.credentials.createSsl(read(certs.caCert), read(certs.clientKey), read(certs.clientCert));
  t.equal(await echo(addr, withCert, 'b'), 'secure:cert:b', 'a valid client certificate reaches the call');
  const stranger = grpc.credentials.createSsl(read(certs.caCert), read(certs.strangerKey), read(certs.strangerCert));
  await t.rejects(echo(addr, stranger, 'c'), { code: grpc.status.UNAVAILABLE }, 'a certificate from another CA is refused');
  const untrusting = grpc.credentials.createSsl(read(certs.strangerCert));
  await t.rejects(echo(addr, untrusting, 'd'), { code: grpc.status.UNAVAILABLE }, 'the server certificate is the one configured');
  t.equal(await echo(daemon.addresses.grpc!.address, grpc.credentials.createInsecure(), 'e'), 'plain:nocert:e', 'plain gRPC alongside');
});

const review = (over: { operation?: string; object?: unknown; apiVersion?: string } = {}) => ({
  kind: 'AdmissionReview',
  apiVersion: over.apiVersion ?? 'admission.k8s.io/v1',
  request: {
    uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
    kind: { group: 'networking.istio.io', version: 'v1', kind: 'VirtualService' },
    resource: { group: 'networking.istio.io', version: 'v1', resource: 'virtualservices' },
    requestKind: { group: 'networking.istio.io', version: 'v1', kind: 'VirtualService' },
    requestResource: { group: 'networking.istio.io', version: 'v1', resource: 'virtualservices' },
    name: 'reviews',
    namespace: 'default',
    operation: over.operation ?? 'CREATE',
    userInfo: { username: 'admin', uid: '014fbff9a07c', groups: ['system:authenticated'] },
    object: over.object ?? {
      apiVersion: 'networking.istio.io/v1',
      kind: 'VirtualService',
      metadata: { name: 'reviews', namespace: 'default' },
      spec: { hosts: ['reviews'], http: [{ route: [{ destination: { host: 'reviews' } }] }] },
    },
    oldObject: null,
    dryRun: false,
    options: { apiVersion: 'meta.k8s.io/v1', kind: 'CreateOptions' },
  },
});

t.test('validation webhook: AdmissionReview over HTTPS', async (t) => {
  const { daemon, providers } = await startTestDaemon(t, { tls: tlsFlags() });
  const base = `https://localhost:${daemon.addresses.https!.port}`;
  const ca = read(certs.caCert);
  const post = (body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }, p = '/validate') =>
    request(base + p, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body), headers, ca });
  const decide = async (body: unknown, p?: string) => {
    const r = await post(body, undefined, p);
    t.equal(r.status, 200);
    return JSON.parse(r.body) as { kind?: string; apiVersion?: string; response: Record<string, unknown> };
  };

  providers.validation = (obj) =>
    (obj.spec as { hosts?: unknown[] }).hosts?.length
      ? { errors: [], warnings: ['host "reviews" is short'] }
      : { errors: ['virtual service must have at least one host'] };
  const ok = await decide(review());
  t.same(ok, {
    kind: 'AdmissionReview',
    apiVersion: 'admission.k8s.io/v1',
    response: { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true, warnings: ['host "reviews" is short'] },
  });
  t.same(providers.validated.at(-1), review().request.object, 'the object is what validate sees');

  const invalidObject = { ...review().request.object, spec: { hosts: [] } };
  const denied = await decide(review({ object: invalidObject }), '/validate/');
  t.same(denied.response, {
    uid: '705ab4f5-6393-11e8-b7cc-42010a800002',
    allowed: false,
    status: { metadata: {}, message: 'configuration is invalid: virtual service must have at least one host' },
  });

  providers.validation = () => ({ errors: [], unknownType: true });
  const unknown = await decide(review({ object: { ...review().request.object, kind: 'Foo' } }));
  t.equal((unknown.response.status as { message: string }).message, 'unrecognized type networking.istio.io/v1, Kind=Foo');

  providers.validation = () => ({ errors: [] });
  const extra = await decide(review({ object: { ...review().request.object, extra: 1 } }));
  t.equal((extra.response.status as { message: string }).message, 'unknown field "extra" on VirtualService resource default/reviews');

  const calls = providers.validated.length;
  const del = await decide(review({ operation: 'DELETE' }));
  t.same(del.response, { uid: '705ab4f5-6393-11e8-b7cc-42010a800002', allowed: true }, 'DELETE is allowed unexamined');
  t.equal(providers.validated.length, calls);

  const beta = await decide(review({ apiVersion: 'admission.k8s.io/v1beta1' }));
  t.equal(beta.apiVersion, 'admission.k8s.io/v1beta1', 'answered in the version asked');

  const garbage = await decide({ kind: 'Pod', apiVersion: 'v1' });
  t.same(garbage, {
    response: { uid: '', allowed: false, status: { metadata: {}, message: 'could not decode body: no kind "Pod" is registered for version "v1"' } },
  });

  const wrongType = await post(review(), { 'content-type': 'application/yaml' });
  t.equal(wrongType.status, 415);
  t.equal(wrongType.body, 'invalid Content-Type, want `application/json`\n');
  const empty = await post('', { 'content-type': 'application/json' });
  t.equal(empty.status, 400);
  t.equal(empty.body, 'no body found\n');
  t.equal((await request(`${base}/inject`, { ca })).status, 404);

  const metrics = await metricsText();
  t.match(metrics, /^galley_validation_passed\{group="networking\.istio\.io",version="v1",resource="virtualservices"\} [1-9]/m);
  t.match(
    metrics,
    /^galley_validation_failed\{group="networking\.istio\.io",version="v1",resource="virtualservices",reason="invalid_resource"\} [1-9]/m,
  );
  t.match(metrics, /^galley_validation_failed\{[^}]*reason="unknown_type"\} [1-9]/m);
  t.match(metrics, /^galley_validation_failed\{[^}]*reason="unsupported_operation"\} [1-9]/m);
  t.match(metrics, /^galley_validation_http_error\{status="415"\} [1-9]/m);
  t.match(metrics, /^galley_validation_http_error\{status="400"\} [1-9]/m);
});

function handshake(port: number, ciphers: string): Promise<'ok' | string> {
  return new Promise((resolve) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        servername: 'localhost',
        path: '/validate',
        method: 'GET',
        ca: read(certs.caCert),
        maxVersion: 'TLSv1.2',
        ciphers,
        agent: false,
      },
      (res) => {
        res.resume();
        resolve('ok');
      },
    );
    req.on('error', (e) => resolve(e.message));
    req.end();
  });
}

t.test('--tls-cipher-suites restricts TLS 1.2 ciphers of the TLS listeners', async (t) => {
  const { daemon } = await startTestDaemon(t, { tls: tlsFlags(['TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384']) });
  const port = daemon.addresses.https!.port;
  t.equal(await handshake(port, 'ECDHE-RSA-AES256-GCM-SHA384'), 'ok');
  t.not(await handshake(port, 'ECDHE-RSA-AES128-GCM-SHA256'), 'ok', 'a cipher outside the list is refused');
});

t.test('certificate flag errors', async (t) => {
  const start = (tls: { certFile: string; keyFile: string; caCertFile: string }) =>
    startDaemon(loopbackOptions({ tls: { ...tls, cipherSuites: [] } }), new FakeProviders()).then(
      async (d) => {
        await d.shutdown('unexpectedly started');
        return 'started';
      },
      (e: Error) => e,
    );
  const onlyCert = await start({ certFile: certs.serverCert, keyFile: '', caCertFile: '' });
  t.type(onlyCert, DaemonStartError);
  t.equal((onlyCert as Error).message, `--tlsCertFile ${certs.serverCert} given without --tlsKeyFile`);
  const missing = path.join(dir, 'nope.pem');
  t.equal(
    ((await start({ certFile: missing, keyFile: certs.serverKey, caCertFile: '' })) as Error).message,
    `--tlsCertFile ${missing}: open ${missing}: no such file or directory`,
  );
  const mismatch = await start({ certFile: certs.serverCert, keyFile: certs.clientKey, caCertFile: '' });
  t.match((mismatch as Error).message, new RegExp(`^--tlsCertFile ${certs.serverCert} / --tlsKeyFile ${certs.clientKey}: .*key values mismatch`));
  const badCa = await start({ certFile: certs.serverCert, keyFile: certs.serverKey, caCertFile: certs.serverKey });
  t.equal((badCa as Error).message, `--caCertFile ${certs.serverKey}: no PEM certificate found`);
});
