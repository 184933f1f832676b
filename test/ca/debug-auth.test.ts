// The debug endpoints authenticate callers that are not on loopback with the daemon's chain (Istio's
// allowAuthenticatedOrLocalhost). In a network namespace of its own the daemon listens on a non-loopback
// address; a request from there without a credential gets 401, one whose trusted-gateway XFCC header names
// an identity gets the page, and loopback needs nothing.
import * as fs from 'node:fs';
import * as path from 'node:path';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { createNetns, httpGetIn, must, netnsUnavailable, spawnIn } from '../helpers/netns';
import { waitFor } from '../agent/helpers';
import { tempDir } from './helpers';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first (npm test does)');
const skip = netnsUnavailable();

t.test('debug endpoints: non-loopback callers are authenticated with the chain', { skip }, async (t) => {
  const ns = createNetns(t, 'mesh-ca-dbg');
  // A non-loopback address on lo: a connection to it comes from it, and it is not 127/8.
  must(['ip', '-n', ns, 'addr', 'add', '10.99.0.1/32', 'dev', 'lo']);
  const dir = tempDir(t);
  const cfg = path.join(dir, 'cfg');
  fs.mkdirSync(cfg);
  const child = spawnIn(ns, path.join(DIST, 'pilot-discovery'), ['discovery', '--configDir', cfg, '--registries', 'Mock', '--httpAddr', ':8080', '--ctrlz_port', '0'], {
    cwd: dir,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TRUSTED_GATEWAY_CIDR: '10.99.0.0/16' },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  t.teardown(() => child.kill('SIGKILL'));
  await waitFor(() => httpGetIn(ns, 'http://127.0.0.1:8080/ready').status === 200, 30_000, () => out);

  t.equal(httpGetIn(ns, 'http://127.0.0.1:8080/debug/registryz').status, 200, 'loopback: no credential needed');
  t.equal(httpGetIn(ns, 'http://10.99.0.1:8080/debug/registryz').status, 401, 'from 10.99.0.1 without a credential: 401');
  const xfcc = { 'x-forwarded-client-cert': 'By=spiffe://cluster.local/ns/mesh-system/sa/gateway;URI=spiffe://cluster.local/ns/ops/sa/debugger' };
  t.equal(httpGetIn(ns, 'http://10.99.0.1:8080/debug/registryz', xfcc).status, 200, 'with a trusted gateway\'s XFCC header: the page');
  const why = /debug request from 10\.99\.0\.1 not authenticated: Authenticator ClientCertAuthenticator: .*Authenticator XfccAuthenticator: caller from 10\.99\.0\.1:\d+ does not have Xfcc header/;
  await waitFor(() => why.test(out), 10_000, () => out);
  t.pass('the daemon logs why the caller was refused');
});
