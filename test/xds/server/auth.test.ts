// XDS_AUTH semantics: the pure checks as a table (Istio's authenticate/authorize), then real TLS streams with
// client certificates carrying SPIFFE URI SANs made by openssl.
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { ClientCertAuthenticator } from '../../../src/ca/authn/client-cert';
import type { AuthGate, AuthOutcome } from '../../../src/ca/authn/types';
import { parseSpiffeIdentity } from '../../../src/lib/spiffe';
import { authenticateXdsPeer, xdsAuthenticator } from '../../../src/meshd/identity/authenticators';
import { authorizeXdsProxy, type XdsAuthSettings, type XdsClaim } from '../../../src/xds/server/index';
import { CDS, CLUSTER_A, node, SotwStream, startServer, world } from './helpers';
import { tempDir } from '../../helpers/temp';
import { EC_P256_KEY } from '../../helpers/openssl';

const ON: XdsAuthSettings = { identityCheck: true };
const ID_DEFAULT_APP = 'spiffe://cluster.local/ns/default/sa/app';
const ID_OTHER_APP = 'spiffe://cluster.local/ns/other/sa/app';

/** Both checks in the order a stream meets them: the chain's outcome on the stream, then the node's claim. */
function checkXdsAccess(s: XdsAuthSettings, outcome: AuthOutcome, secure: boolean, claim: XdsClaim) {
  const authn = authenticateXdsPeer(outcome, secure);
  return authn.ok ? authorizeXdsProxy(s, authn.identities, claim) : authn;
}

/** The daemon's hook with a chain of client certificates only. */
function certificateHook(gate: AuthGate) {
  return { authenticate: xdsAuthenticator([new ClientCertAuthenticator()], gate) };
}

t.test('checkXdsAccess table', async (t) => {
  // What the authenticator chain concluded (src/ca/authn), and over which listener.
  type Tr = { outcome: AuthOutcome; secure: boolean };
  const tls = (ids?: string[]): Tr => ({
    outcome: ids
      ? { kind: 'authenticated', caller: { source: 'client-certificate', identities: ids } }
      : {
          kind: 'failed',
          failures: ['Authenticator ClientCertAuthenticator: no verified chain is found: no client certificate is presented'],
          idExtraction: false,
        },
    secure: true,
  });
  const skipped = (secure: boolean): Tr => ({ outcome: { kind: 'skipped' }, secure });
  const plainFailed: Tr = {
    outcome: { kind: 'failed', failures: ['Authenticator ClientCertAuthenticator: unsupported auth type'], idExtraction: false },
    secure: false,
  };
  const cases: Array<{ name: string; s: XdsAuthSettings; tr: Tr; ns: string; sa?: string; want: 'ok' | number; msg?: RegExp }> = [
    { name: 'plaintext passes by default (the chain did not run)', s: ON, tr: skipped(false), ns: 'default', want: 'ok' },
    {
      name: 'XDS_AUTH_PLAINTEXT rejects plaintext nobody vouches for',
      s: ON,
      tr: plainFailed,
      ns: 'default',
      want: grpc.status.UNAUTHENTICATED,
      msg: /XDS_AUTH_PLAINTEXT/,
    },
    { name: 'XDS_AUTH=false skips everything', s: ON, tr: skipped(true), ns: 'default', want: 'ok' },
    {
      name: 'TLS without a verified client certificate',
      s: ON,
      tr: tls(undefined),
      ns: 'default',
      want: grpc.status.UNAUTHENTICATED,
      msg: /no client certificate/,
    },
    { name: 'namespace matches', s: ON, tr: tls([ID_DEFAULT_APP]), ns: 'default', want: 'ok' },
    { name: 'namespace and service account match', s: ON, tr: tls([ID_DEFAULT_APP]), ns: 'default', sa: 'app', want: 'ok' },
    {
      name: 'namespace differs',
      s: ON,
      tr: tls([ID_OTHER_APP]),
      ns: 'default',
      want: grpc.status.PERMISSION_DENIED,
      msg: /^authorization failed: no identities \(\[spiffe:\/\/cluster\.local\/ns\/other\/sa\/app\]\) matched default\/$/,
    },
    {
      name: 'service account differs',
      s: ON,
      tr: tls([ID_DEFAULT_APP]),
      ns: 'default',
      sa: 'db',
      want: grpc.status.PERMISSION_DENIED,
      msg: /matched default\/db/,
    },
    { name: 'one of several identities matches', s: ON, tr: tls(['https://example.com/x', ID_OTHER_APP, ID_DEFAULT_APP]), ns: 'default', want: 'ok' },
    {
      name: 'non-SPIFFE identities only',
      s: ON,
      tr: tls(['https://example.com/x', 'localhost']),
      ns: 'default',
      want: grpc.status.PERMISSION_DENIED,
    },
    { name: 'identity check off allows any namespace', s: { ...ON, identityCheck: false }, tr: tls([ID_OTHER_APP]), ns: 'default', want: 'ok' },
  ];
  for (const c of cases) {
    const r = checkXdsAccess(c.s, c.tr.outcome, c.tr.secure, { namespace: c.ns, serviceAccount: c.sa });
    if (c.want === 'ok') {
      t.equal(r.ok, true, c.name);
    } else {
      t.equal(r.ok, false, c.name);
      if (!r.ok) {
        t.equal(r.code, c.want, `${c.name}: code`);
        if (c.msg) t.match(r.message, c.msg, `${c.name}: message`);
      }
    }
  }
  const authn = authenticateXdsPeer(tls([ID_DEFAULT_APP]).outcome, true);
  t.same(authn, { ok: true, identities: [ID_DEFAULT_APP] });
  t.match(authorizeXdsProxy(ON, [ID_DEFAULT_APP], { namespace: 'default' }), {
    ok: true,
    identity: { trustDomain: 'cluster.local', namespace: 'default', serviceAccount: 'app' },
  });
});

t.test('SPIFFE IDs', async (t) => {
  t.same(parseSpiffeIdentity('spiffe://td.example/ns/a/sa/b'), { trustDomain: 'td.example', namespace: 'a', serviceAccount: 'b' });
  t.ok(parseSpiffeIdentity('spiffe://td/ns/a') instanceof Error);
  t.ok(parseSpiffeIdentity('spiffe://td/sa/b/ns/a') instanceof Error);
  t.ok(parseSpiffeIdentity('http://td/ns/a/sa/b') instanceof Error);
});

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}

/** A CA, a server certificate for 127.0.0.1, and client certificates with the given URI SANs. */
function makePki(dir: string, clients: Record<string, string>): void {
  openssl(dir, ['req', '-x509', ...EC_P256_KEY, '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '1', '-subj', '/CN=mesh-test-ca']);
  const leaf = (name: string, san: string) => {
    fs.writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    openssl(dir, ['req', ...EC_P256_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
    openssl(dir, [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-set_serial',
      String(Math.floor(Math.random() * 1e9)),
      '-out',
      `${name}.crt`,
      '-days',
      '1',
      '-extfile',
      `${name}.ext`,
    ]);
  };
  leaf('server', 'DNS:localhost,IP:127.0.0.1');
  for (const [name, uri] of Object.entries(clients)) leaf(name, `URI:${uri}`);
}

t.test('TLS listener: the client certificate must name the namespace the node claims', async (t) => {
  const dir = tempDir(t, 'ads-auth-');
  makePki(dir, { good: ID_DEFAULT_APP, other: ID_OTHER_APP });
  const read = (f: string) => fs.readFileSync(path.join(dir, f));
  // Istio verifies a client certificate if one is given: grpc-js does that with certificate providers
  // and requireClientCertificate=false.
  const identity = new grpc.experimental.FileWatcherCertificateProvider({
    certificateFile: path.join(dir, 'server.crt'),
    privateKeyFile: path.join(dir, 'server.key'),
    refreshIntervalMs: 600_000,
  });
  const ca = new grpc.experimental.FileWatcherCertificateProvider({ caCertificateFile: path.join(dir, 'ca.crt'), refreshIntervalMs: 600_000 });
  const creds = grpc.experimental.createCertificateProviderServerCredentials(identity, ca, false);
  const srv = await startServer(
    world('v1', { [CLUSTER_A]: ['10.1.0.1'] }),
    {},
    certificateHook({ xdsAuth: true, xdsAuthPlaintext: false }),
    creds,
    'tls',
  );
  t.teardown(srv.close);
  // The providers read the files asynchronously; handshakes before that fail, so wait for both.
  let idReady!: () => void;
  let caReady!: () => void;
  const ready = Promise.all([new Promise<void>((r) => (idReady = r)), new Promise<void>((r) => (caReady = r))]);
  const onId = (u: unknown) => u && idReady();
  const onCa = (u: unknown) => u && caReady();
  identity.addIdentityCertificateListener(onId);
  ca.addCaCertificateListener(onCa);
  await ready;
  // A provider with listeners keeps re-reading its files on a timer.
  identity.removeIdentityCertificateListener(onId);
  ca.removeCaCertificateListener(onCa);
  const sni = { 'grpc.ssl_target_name_override': 'localhost', 'grpc.default_authority': 'localhost' };
  const clientCreds = (name?: string) =>
    name ? grpc.credentials.createSsl(read('ca.crt'), read(`${name}.key`), read(`${name}.crt`)) : grpc.credentials.createSsl(read('ca.crt'));

  const good = new SotwStream(srv.address, { credentials: clientCreds('good'), channelOptions: sni });
  t.teardown(() => good.close());
  good.send({ node: node('sidecar~10.0.0.1~app-1.default~default.svc.cluster.local'), typeUrl: CDS });
  const r = await good.expect(CDS);
  t.equal(r.resources.length, 1, 'authorized stream is served');
  const [con] = srv.ads.connections();
  t.equal(con!.listener, 'tls');
  t.same(con!.identities, [ID_DEFAULT_APP]);

  const other = new SotwStream(srv.address, { credentials: clientCreds('other'), channelOptions: sni });
  t.teardown(() => other.close());
  other.send({ node: node('sidecar~10.0.0.2~app-2.default~default.svc.cluster.local'), typeUrl: CDS });
  const st = await other.inbox.status();
  t.equal(st.code, grpc.status.PERMISSION_DENIED);
  t.equal(st.details, `authorization failed: no identities ([${ID_OTHER_APP}]) matched default/`);

  const anonymous = new SotwStream(srv.address, { credentials: clientCreds(), channelOptions: sni });
  t.teardown(() => anonymous.close());
  anonymous.send({ node: node(), typeUrl: CDS });
  const st2 = await anonymous.inbox.status();
  t.equal(st2.code, grpc.status.UNAUTHENTICATED);
  t.match(st2.details, /no client certificate/);
  t.equal(srv.ads.connections().length, 1, 'only the authorized proxy is connected');
});

t.test('XDS_AUTH_PLAINTEXT rejects plaintext streams as unauthenticated', async (t) => {
  const srv = await startServer(world('v1', { [CLUSTER_A]: ['10.1.0.1'] }), {}, certificateHook({ xdsAuth: true, xdsAuthPlaintext: true }));
  t.teardown(srv.close);
  const s = new SotwStream(srv.address);
  t.teardown(() => s.close());
  s.send({ node: node(), typeUrl: CDS });
  const st = await s.inbox.status();
  t.equal(st.code, grpc.status.UNAUTHENTICATED);
  t.match(st.details, /^authentication failure: XDS_AUTH_PLAINTEXT is true/);
});
