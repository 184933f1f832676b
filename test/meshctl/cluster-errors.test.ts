// Issue 28 item 10 for the cluster commands of items 2, 3 and 9 (tag, waypoint, x injector list, bug-report with
// a cluster): an API server that cannot be reached, that refuses the credentials (401) or the permission (403)
// gives one line naming the server's address and what went wrong, exit 1, never a stack trace.
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import t from 'tap';
import { built } from '../helpers/binary';
import { requireKube, startKube, tokenKubeconfig } from '../helpers/kube';
import { meshctl, noStack } from './cluster-fixtures';

requireKube();
if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

/** A loopback port nothing listens on (bound, then released). */
function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

const COMMANDS: string[][] = [
  ['tag', 'set', 'prod', '--revision', 'canary'],
  ['tag', 'list'],
  ['tag', 'remove', 'prod', '-y'],
  ['tag', 'generate', 'prod', '--revision', 'canary'],
  ['waypoint', 'apply', '-n', 'default'],
  ['waypoint', 'list', '-A'],
  ['waypoint', 'status', '-n', 'default'],
  ['waypoint', 'delete', '--all', '-n', 'default'],
  ['x', 'injector', 'list'],
];

t.test('unreachable, refused credentials, refused permission', async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const dir = kube.dir;
  // A service account with no role bound: authenticated, allowed nothing.
  await kube.api.create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'nobody' } });
  const tr = await kube.api.create('/api/v1/namespaces/default/serviceaccounts/nobody/token', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  const write = (name: string, text: string) => {
    const f = path.join(dir, name);
    writeFileSync(f, text);
    return f;
  };
  const closed = `https://127.0.0.1:${await closedPort()}`;
  // The texts of src/meshctl/orch-errors.ts: the server, the client configuration it came from, the reason.
  const closedConf = write('closed.conf', tokenKubeconfig(kube, closed));
  const badConf = write('badtoken.conf', tokenKubeconfig(kube, kube.api.url, 'not-a-token'));
  const cases = [
    {
      name: 'unreachable',
      file: closedConf,
      want: `cannot reach the orchestrator API server ${closed} (${closedConf}): connection refused (nothing listens there)`,
    },
    {
      name: 'bad token',
      file: badConf,
      want: `the orchestrator API server ${kube.api.url} refused the credentials of ${badConf} (401 Unauthorized)`,
    },
    {
      name: 'no permission',
      file: write('nobody.conf', tokenKubeconfig(kube, kube.api.url, tr.status.token)),
      want: new RegExp(
        `^the orchestrator API server ${kube.api.url.replace(/[.]/g, '\\.')} denied permission \\(403 Forbidden\\): .*system:serviceaccount:default:nobody.* cannot (list|get|patch) resource`,
      ),
    },
  ];
  for (const c of cases) {
    for (const args of COMMANDS) {
      const r = await meshctl(args, { ORCHCONFIG: c.file });
      const what = `${c.name}: meshctl ${args.join(' ')}`;
      t.equal(r.code, 1, what);
      t.equal(r.stderr.split('\n').length, 2, `${what}: one line (${r.stderr})`);
      const line = r.stderr.replace(/^Error: /, '').trimEnd();
      if (typeof c.want === 'string') t.equal(line, c.want, what);
      else t.match(line, c.want, what);
      t.ok(noStack(r.stderr + r.stdout), `${what}: no stack`);
    }
  }
  // bug-report collects what the permissions allow (each refusal is named in its log); a server it cannot reach
  // or that refuses the credentials stops it with the same one line.
  for (const c of cases.slice(0, 2)) {
    const r = await meshctl(['bug-report', '--output-dir', dir], { ORCHCONFIG: c.file });
    t.equal(r.code, 1, `${c.name}: bug-report`);
    t.equal(r.stderr, `Error: ${c.want}\n`, `${c.name}: bug-report`);
  }
});
