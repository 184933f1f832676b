// The debug endpoints authenticate callers that are not on loopback with the daemon's chain (Istio's
// allowAuthenticatedOrLocalhost). In a network namespace of its own the daemon listens on a non-loopback
// address; a request from there without a credential gets 401, one whose trusted-gateway XFCC header names
// an identity gets the page, and loopback needs nothing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST, exec, type ExecResult } from '../helpers/binary';
import { createNetns, httpGetIn, must, netnsUnavailable, spawnIn } from '../helpers/netns';
import { openssl, opensslCsr, opensslPluginCa } from './helpers';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';
import { signWith } from '../helpers/openssl';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');
const skip = netnsUnavailable();

/** The built `pilot-discovery discovery` in `ns` (killed at teardown), once /ready answers on :8080; returns its log. */
async function discoveryIn(t: Test, ns: string, cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<() => string> {
  const child = spawnIn(ns, path.join(DIST, 'pilot-discovery'), ['discovery', ...args], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(() => child.kill('SIGKILL'));
  await waitFor(
    () => out,
    () => httpGetIn(ns, 'http://127.0.0.1:8080/ready').status === 200,
    { timeoutMs: 30_000, intervalMs: 50 },
  );
  return () => out;
}

t.test('debug endpoints: non-loopback callers are authenticated with the chain', { skip }, async (t) => {
  const ns = createNetns(t, 'mesh-ca-dbg');
  // A non-loopback address on lo: a connection to it comes from it, and it is not 127/8.
  must(['ip', '-n', ns, 'addr', 'add', '10.99.0.1/32', 'dev', 'lo']);
  const dir = tempDir(t);
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cfg);
  const log = await discoveryIn(t, ns, dir, ['--configDir', cfg, '--registries', 'Mock', '--httpAddr', ':8080', '--ctrlz_port', '0'], {
    TRUSTED_GATEWAY_CIDR: '10.99.0.0/16',
  });

  t.equal(httpGetIn(ns, 'http://127.0.0.1:8080/debug/registryz').status, 200, 'loopback: no credential needed');
  t.equal(httpGetIn(ns, 'http://10.99.0.1:8080/debug/registryz').status, 401, 'from 10.99.0.1 without a credential: 401');
  const xfcc = { 'x-forwarded-client-cert': 'By=spiffe://cluster.local/ns/mesh-system/sa/gateway;URI=spiffe://cluster.local/ns/ops/sa/debugger' };
  t.equal(httpGetIn(ns, 'http://10.99.0.1:8080/debug/registryz', xfcc).status, 200, "with a trusted gateway's XFCC header: the page");
  const why =
    /debug request from 10\.99\.0\.1 not authenticated: Authenticator ClientCertAuthenticator: .*Authenticator XfccAuthenticator: caller from 10\.99\.0\.1:\d+ does not have Xfcc header/;
  await waitFor(
    () => log(),
    () => why.test(log()),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.pass('the daemon logs why the caller was refused');
});

/** A client certificate for `spiffe` signed by the plug-in CA's intermediate, in meshctl's --cert-dir layout. */
function clientCertDir(parent: string, cacerts: string, name: string, spiffe: string): string {
  const dir = path.join(parent, name);
  fs.mkdirSync(dir);
  const { csr, key } = opensslCsr(dir, 'ec');
  fs.writeFileSync(path.join(dir, 'key.pem'), key);
  fs.writeFileSync(path.join(dir, 'leaf.csr'), csr);
  fs.writeFileSync(
    path.join(dir, 'leaf.ext'),
    `subjectAltName=critical,URI:${spiffe}\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\nbasicConstraints=critical,CA:FALSE\n`,
  );
  openssl(
    [
      ...signWith('leaf.csr', path.join(cacerts, 'ca-cert.pem'), path.join(cacerts, 'ca-key.pem')),
      '-days',
      '1',
      '-extfile',
      'leaf.ext',
      '-out',
      'leaf.pem',
    ],
    { cwd: dir },
  );
  fs.writeFileSync(
    path.join(dir, 'cert-chain.pem'),
    fs.readFileSync(path.join(dir, 'leaf.pem'), 'utf8') + fs.readFileSync(path.join(cacerts, 'ca-cert.pem'), 'utf8'),
  );
  fs.copyFileSync(path.join(cacerts, 'root-cert.pem'), path.join(dir, 'root-cert.pem'));
  return dir;
}

function meshctlIn(ns: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<ExecResult> {
  return exec('ip', ['netns', 'exec', ns, path.join(DIST, 'meshctl'), ...args], { env: { PATH: process.env.PATH, HOME: '/nonexistent', ...env } });
}

// Issue 24 item 6: the debug types over xDS (syncz, config_dump, debug pages) went to anyone who could reach
// the plaintext port. Now: loopback callers, or callers authenticated as an identity of the system namespace.
t.test('xDS debug types: loopback or an authenticated system-namespace identity, nobody else', { skip, timeout: 120_000 }, async (t) => {
  const ns = createNetns(t, 'mesh-ca-xdbg');
  must(['ip', '-n', ns, 'addr', 'add', '10.99.0.1/32', 'dev', 'lo']);
  const dir = tempDir(t);
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cfg);
  const cacerts = path.join(dir, 'etc', 'cacerts');
  opensslPluginCa(cacerts);
  const certs = path.join(dir, 'certs');
  fs.mkdirSync(certs);
  const system = clientCertDir(certs, cacerts, 'system', 'spiffe://cluster.local/ns/mesh-system/sa/default');
  const apps = clientCertDir(certs, cacerts, 'apps', 'spiffe://cluster.local/ns/apps/sa/default');
  // every address of the namespace, as a daemon run with --grpcAddr :15010 on a host is reachable
  const log = await discoveryIn(t, ns, dir, [
    '--configDir',
    cfg,
    '--registries',
    'Mock',
    '--grpcAddr',
    ':15010',
    '--secureGRPCAddr',
    ':15012',
    '--httpAddr',
    ':8080',
    '--ctrlz_port',
    '0',
  ]);

  const plain = (addr: string) => ['--xds-address', addr, '--plaintext'];
  const tls = (dir: string) => ['--xds-address', '10.99.0.1:15012', '--cert-dir', dir, '--authority', 'meshd.mesh-system.svc'];
  const served = async (what: string, args: string[], env: NodeJS.ProcessEnv = {}) => {
    const r = await meshctlIn(ns, args, env);
    t.equal(r.code, 0, `${what}: served`);
    if (r.code !== 0) t.comment(r.stderr);
    return r;
  };
  const refused = async (what: string, args: string[], why: RegExp, env: NodeJS.ProcessEnv = {}) => {
    const r = await meshctlIn(ns, args, env);
    t.equal(r.code, 1, `${what}: refused`);
    t.match(r.stderr, why, `${what}: says why`);
    t.notMatch(r.stdout, /\S/, `${what}: nothing printed`);
  };

  const page = await served('loopback, plaintext: a debug page', ['x', 'internal-debug', 'adsz', ...plain('127.0.0.1:15010')]);
  t.match(page.stdout, /"totalClients": ?\d+/, 'loopback gets the adsz page');
  await served('loopback, plaintext: syncz (proxy-status)', ['proxy-status', ...plain('127.0.0.1:15010')]);

  const unauth =
    /UNAUTHENTICATED: authentication required: istio\.io\/debug\S* is served to loopback callers and to callers authenticated as an identity of namespace mesh-system/;
  await refused('10.99.0.1, plaintext: a debug page', ['x', 'internal-debug', 'adsz', ...plain('10.99.0.1:15010')], unauth);
  await refused('10.99.0.1, plaintext: syncz', ['proxy-status', ...plain('10.99.0.1:15010')], unauth);
  await refused('10.99.0.1, plaintext: config_dump', ['proxy-status', 'gateway-0.mesh-system', ...plain('10.99.0.1:15010')], unauth);
  // XDS_AUTH (on by default) already ends a TLS stream no authenticator accepts
  await refused(
    '10.99.0.1, TLS without a client certificate',
    ['x', 'internal-debug', 'adsz', '--xds-address', '10.99.0.1:15012', '--insecure'],
    /UNAUTHENTICATED: authentication failure/,
  );

  const certPage = await served('10.99.0.1, client certificate of mesh-system: a debug page', ['x', 'internal-debug', 'adsz', ...tls(system)]);
  t.match(certPage.stdout, /"totalClients": ?\d+/, 'the certificate gets the adsz page');
  await served('10.99.0.1, client certificate of mesh-system: syncz', ['proxy-status', ...tls(system)]);
  await refused(
    '10.99.0.1, client certificate of namespace apps',
    ['x', 'internal-debug', 'adsz', ...tls(apps)],
    /PERMISSION_DENIED: the debug info is not available for identity \[spiffe:\/\/cluster\.local\/ns\/apps\/sa\/default\]/,
    { MESHCTL_MESHNAMESPACE: 'apps' },
  );
  await waitFor(
    () => log(),
    () => /istio\.io\/debug refused: authentication required/.test(log()),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.pass('the daemon logs the refusals');
});
