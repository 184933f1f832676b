// `meshctl proxy-config log` input checks that need no proxy: a bad level is reported as such, before the
// command tries to reach the daemon (issue 24: it used to report the failed connection instead).
import t from 'tap';
import net from 'node:net';
import path from 'node:path';
import { built, DIST, exec } from '../helpers/binary';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

t.test('--level bogus: the level is the error, not the unreachable daemon', async (t) => {
  // a port nothing listens on: any attempt to connect would fail
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const env = { PATH: process.env.PATH, HOME: '/nonexistent', MESHCTL_XDS_ADDRESS: `127.0.0.1:${port}`, MESHCTL_PLAINTEXT: 'true' };
  for (const [level, bad] of [
    ['bogus', 'bogus'],
    ['jwt:bogus', 'bogus'],
    ['debug,http=loud', 'loud'],
  ]) {
    const r = await exec(path.join(DIST, 'meshctl'), ['proxy-config', 'log', 'gateway-0.mesh-system', '--level', level!], { env });
    t.equal(r.code, 1, `--level ${level} fails`);
    t.equal(r.stderr, `Error: unrecognized logging level: ${bad}\n`, `--level ${level}: one line naming the level`);
  }
  // a good level gets as far as the daemon
  const good = await exec(path.join(DIST, 'meshctl'), ['proxy-config', 'log', 'gateway-0.mesh-system', '--level', 'debug'], { env });
  t.equal(good.code, 1);
  t.match(good.stderr, /could not dial/);
});
