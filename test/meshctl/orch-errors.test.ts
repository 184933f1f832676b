// Issue 28 item 10: an orchestrator API server that cannot be reached, refuses the credentials or the
// permission gets one line naming its address and what went wrong, exit 1, never a stack; a TLS client
// meeting a plaintext daemon port says so in words, and Node's DEP0123 warning never shows. The built
// binary, several commands, against a real API server and real sockets.
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST, exec } from '../helpers/binary';
import { kubeUnavailable, startKube } from '../helpers/kube';
import { freePort } from '../helpers/ports';
import { tempDir } from '../helpers/temp';
import { connectionFailure, describeDialFailure, describeOrchFailure } from '../../src/meshctl/orch-errors';

if (!built()) t.fail('dist/mesh is missing: run `npm run build` first');

const MESHCTL = path.join(DIST, 'meshctl');
const ENV = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' };
const meshctl = (args: string[], env: Record<string, string> = {}) => exec(MESHCTL, args, { env: { ...ENV, ...env } });

function kubeconfig(dir: string, name: string, server: string, user: Record<string, string>, ca?: string): string {
  const file = path.join(dir, `${name}.yaml`);
  const cluster = ca ? `certificate-authority: ${ca}` : 'insecure-skip-tls-verify: true';
  const userLines = Object.entries(user)
    .map(([k, v]) => `    ${k}: ${v}`)
    .join('\n');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ${server}
    ${cluster}
users:
- name: u
  user:
${userLines}
contexts:
- name: ctx
  context: {cluster: c, user: u, namespace: default}
current-context: ctx
`,
  );
  return file;
}

/** One `Error: ` line, nothing else: no stack, no second error, no Node warning. */
function oneLine(t: Test, r: { code: number | null; stderr: string }, re: RegExp): void {
  t.equal(r.code, 1, 'exit 1');
  t.equal(r.stderr.trimEnd().split('\n').length, 1, `one line: ${r.stderr}`);
  t.match(r.stderr, re);
  t.notMatch(r.stderr, /\n\s+at |TypeError|fetch failed|DEP0123/);
}

t.test('the mapping, as a table', async (t) => {
  const refused = Object.assign(new TypeError('fetch failed'), {
    cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }),
  });
  t.equal(connectionFailure(refused), 'connection refused (nothing listens there)');
  const agg = Object.assign(new TypeError('fetch failed'), { cause: { code: undefined, errors: [{ code: 'ECONNREFUSED', message: 'x' }] } });
  t.equal(connectionFailure(agg), 'connection refused (nothing listens there)');
  t.equal(connectionFailure({ cause: { code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND x' } }), 'no such host');
  t.match(connectionFailure({ cause: { code: 'DEPTH_ZERO_SELF_SIGNED_CERT', message: 'self-signed certificate' } }), /not trusted/);
  const e401 = Object.assign(new Error('GET /api/v1/namespaces: 401 Unauthorized: Unauthorized'), { statusCode: 401 });
  t.equal(
    describeOrchFailure('https://a:1', 'k.yaml', e401)?.message,
    'the orchestrator API server https://a:1 refused the credentials of k.yaml (401 Unauthorized)',
  );
  const e403 = Object.assign(new Error('GET /api/v1/namespaces: 403 Forbidden: namespaces is forbidden: User "x" cannot list'), { statusCode: 403 });
  t.equal(
    describeOrchFailure('https://a:1', 'k.yaml', e403)?.message,
    'the orchestrator API server https://a:1 denied permission (403 Forbidden): namespaces is forbidden: User "x" cannot list',
  );
  t.equal(describeOrchFailure('https://a:1', 'k.yaml', Object.assign(new Error('404'), { statusCode: 404 })), undefined, '404 is the caller’s');
  t.equal(
    describeDialFailure(
      '127.0.0.1:15010',
      'No connection established. Last error: Error: 80FC:error:0A00010B:SSL routines:ssl3_get_record:wrong version number:../deps/openssl/openssl/ssl/record/ssl3_record.c:350:\n. Resolution note: ',
      true,
    ),
    "could not dial 127.0.0.1:15010: it answered the TLS handshake in plain text: it is a plaintext port (such as the daemon's --grpcAddr :15010); give --plaintext, or point --xds-address at the TLS port (:15012)",
  );
  t.equal(
    describeDialFailure('127.0.0.1:9', 'No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.1:9. Resolution note: ', true),
    'could not dial 127.0.0.1:9: connection refused (nothing listens there)',
  );
});

t.test('nothing listens at the server', async (t) => {
  const dir = tempDir(t);
  const port = await freePort();
  const server = `https://127.0.0.1:${port}`;
  const kc = kubeconfig(dir, 'refused', server, { token: 'abc' });
  const want = new RegExp(
    `^Error: (?:[a-z -]+ mesh-system: )?cannot reach the orchestrator API server ${server.replace(/\./g, '\\.')} \\(${kc.replace(/[./]/g, '\\$&')}\\): connection refused`,
  );
  for (const args of [['tag', 'generate', 'canary', '--revision', 'x'], ['install', '-y'], ['analyze'], ['x', 'precheck']]) {
    const r = await meshctl([...args, '--orchconfig', kc]);
    if (/is not available in this build/.test(r.stderr)) continue; // commands other helpers add later
    oneLine(t, r, want);
  }
});

t.test('TLS towards a plaintext daemon port', async (t) => {
  const plain = http.createServer((_q, s) => s.end('plain'));
  await new Promise<void>((r) => plain.listen(0, '127.0.0.1', r));
  t.teardown(() => plain.close());
  const addr = `127.0.0.1:${(plain.address() as { port: number }).port}`;
  for (const args of [['proxy-status'], ['x', 'internal-debug', 'syncz']]) {
    const r = await meshctl([...args, '--xds-address', addr]);
    oneLine(t, r, new RegExp(`^Error: could not dial ${addr}: it answered the TLS handshake in plain text`));
    t.notMatch(r.stderr, /wrong version number|OpenSSL|ssl3_get_record/);
  }
});

t.test('credentials and permissions refused by a real API server', { skip: kubeUnavailable() }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const dir = tempDir(t);
  const server = kube.env.API_URL!;
  const bad = kubeconfig(dir, 'bad-token', server, { token: 'not-a-token' }, kube.env.KUBE_CA);
  await kube.api.create('/api/v1/namespaces/default/serviceaccounts', { metadata: { name: 'nobody' } });
  const tr = await kube.api.create('/api/v1/namespaces/default/serviceaccounts/nobody/token', {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { expirationSeconds: 3600 },
  });
  const weak = kubeconfig(dir, 'no-rbac', server, { token: tr.status.token }, kube.env.KUBE_CA);
  const host = server.replace(/[./]/g, '\\$&');
  for (const args of [
    ['tag', 'generate', 'canary', '--revision', 'x'],
    ['install', '-y'],
    ['uninstall', '--purge', '-y'],
  ]) {
    let r = await meshctl([...args, '--orchconfig', bad]);
    oneLine(t, r, new RegExp(`the orchestrator API server ${host} refused the credentials of .*bad-token\\.yaml \\(401 Unauthorized\\)`));
    r = await meshctl([...args, '--orchconfig', weak]);
    oneLine(
      t,
      r,
      new RegExp(`the orchestrator API server ${host} denied permission \\(403 Forbidden\\): .*User "system:serviceaccount:default:nobody" cannot`),
    );
  }
  // An http:// address for the TLS server.
  const plainUrl = kubeconfig(dir, 'http', server.replace('https:', 'http:'), { token: 'x' });
  const r = await meshctl(['tag', 'generate', 'canary', '--revision', 'x', '--orchconfig', plainUrl]);
  oneLine(t, r, /speaks TLS: its address in .* must start with https:\/\//);
});
