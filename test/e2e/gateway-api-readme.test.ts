// The README's "Gateway API" block, run line by line as printed: the built daemon serving a Gateway and an HTTPRoute
// from examples/gateway-api/config, a router started by hand with the label gateway.networking.k8s.io/gateway-name
// (through meshctl's workload group, as a VM gets its identity with no cluster), a request through the route, and
// the status page. The lines bind fixed ports (15010, 15012, 15021, 18080, 19090…), so they run in a network
// namespace of their own, in a scratch directory holding links to dist/ and examples/. Follows
// test/e2e/no-cluster-identity.test.ts, which runs the block this one is modelled on.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST } from '../helpers/binary';
import { REPO, section } from '../helpers/spec';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

function readmeLines(): string[] {
  const text = section(fs.readFileSync(path.join(REPO, 'README.md'), 'utf8'), '## Gateway API');
  const m = /```sh\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error('the README section has no sh block');
  return m[1]!.split('\n').filter((l) => l.trim() !== '');
}

function background(line: string): string | undefined {
  const m = /^(.*?[^&])&\s*(#.*)?$/.exec(line);
  return m ? m[1]!.trim() : undefined;
}

function readiness(cmd: string): string {
  if (cmd.includes('httpbin.mjs')) return 'http://127.0.0.1:19090/get';
  if (cmd.includes('pilot-discovery discovery')) return 'http://127.0.0.1:8080/ready';
  if (cmd.includes('pilot-agent proxy')) return 'http://127.0.0.1:15021/healthz/ready';
  throw new Error(`the test does not know when this README line is ready: ${cmd}`);
}

t.test('README: Gateway API with no cluster', { skip }, async (t) => {
  const lines = readmeLines();
  t.ok(lines.length >= 8, `${lines.length} lines in the README block`);
  const ns = createNetns(t, 'mesh-gwapi');
  const dir = tempDir(t, 'mesh-gwapi-');
  fs.symlinkSync(DIST, path.join(dir, 'dist'));
  fs.symlinkSync(path.join(REPO, 'examples'), path.join(dir, 'examples'));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir };
  const logs: Record<string, () => string> = {};
  const allLogs = () =>
    Object.entries(logs)
      .map(([k, f]) => `--- ${k}:\n${f().slice(-3000)}`)
      .join('\n');
  const outputs: Array<{ line: string; stdout: string }> = [];
  for (const line of lines) {
    const bg = background(line);
    if (bg !== undefined) {
      const child = spawnIn(ns, 'bash', ['-c', bg], { cwd: dir, env });
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
      logs[bg.slice(0, 60)] = () => out;
      const url = readiness(bg);
      await waitFor(
        () => `${bg}: not ready at ${url}\n${allLogs()}`,
        () => {
          if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}`);
          return httpGetIn(ns, url).status === 200;
        },
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      t.pass(`started: ${bg}`);
      continue;
    }
    const r = spawnSync('ip', ['netns', 'exec', ns, 'bash', '-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
    t.equal(r.status, 0, `ran: ${line}`, { stderr: r.stderr, logs: r.status === 0 ? '' : allLogs() });
    outputs.push({ line, stdout: r.stdout });
  }
  const out = (re: RegExp) => outputs.find((o) => re.test(o.line))?.stdout ?? '';
  const seen = JSON.parse(out(/curl -s http:\/\/127\.0\.0\.1:18080\/headers/)) as { headers: Record<string, string> };
  t.equal(seen.headers['X-Gateway-Api'], 'yes', "the HTTPRoute's RequestHeaderModifier reached the sample");
  const status = JSON.parse(out(/gateway-status/)) as Array<{
    kind: string;
    status: { conditions?: Array<{ type: string; status: string; reason: string }> };
  }>;
  const gw = status.find((o) => o.kind === 'Gateway');
  t.match(
    gw?.status.conditions?.find((c) => c.type === 'Accepted'),
    { status: 'True', reason: 'Accepted' },
    'the Gateway is Accepted',
  );
  t.match(
    gw?.status.conditions?.find((c) => c.type === 'Programmed'),
    { status: 'False', reason: 'AddressNotUsable' },
    'with no Service web-mesh, not Programmed, as Istio says',
  );
  t.ok(
    status.some((o) => o.kind === 'HTTPRoute'),
    'the HTTPRoute has a status',
  );
});
