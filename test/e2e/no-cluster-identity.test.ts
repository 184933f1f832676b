// The README's "Running sidecars without a cluster", run line by line as printed (issue 24 item 8): the built
// daemon, meshctl minting a workload token from the daemon's CA directory (no JWT_RULE, no issuer, no
// cluster), the agent getting its certificate with it, a request through the gateway, then an operator
// certificate from the same directory used by meshctl over mutual TLS on :15012. The lines bind fixed ports
// (15010, 15012, 15021, 18080, 19090…), so they run in a network namespace of their own, in a scratch
// directory holding links to dist/ and examples/ (the daemon writes ./var/lib/mesh/ca there).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST } from '../helpers/binary';
import { REPO, section } from '../helpers/spec';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { metricValue } from '../helpers/prometheus';
import { waitFor } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

/** The first ```sh block of the README section. */
function readmeLines(): string[] {
  const text = section(fs.readFileSync(path.join(REPO, 'README.md'), 'utf8'), '## Running sidecars without a cluster');
  const m = /```sh\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error('the README section has no sh block');
  return m[1]!.split('\n').filter((l) => l.trim() !== '');
}

/** `cmd &   # comment` → `cmd`, or undefined when the line runs in the foreground. */
function background(line: string): string | undefined {
  const m = /^(.*?[^&])&\s*(#.*)?$/.exec(line);
  return m ? m[1]!.trim() : undefined;
}

/** What a background line must be serving before the next line runs (the reader waits for it too). */
function readiness(cmd: string): string {
  if (cmd.includes('httpbin.mjs')) return 'http://127.0.0.1:19090/get';
  if (cmd.includes('pilot-discovery discovery')) return 'http://127.0.0.1:8080/ready';
  if (cmd.includes('pilot-agent proxy')) return 'http://127.0.0.1:15021/healthz/ready';
  throw new Error(`the test does not know when this README line is ready: ${cmd}`);
}

t.test('README: running sidecars without a cluster', { skip }, async (t) => {
  const lines = readmeLines();
  t.ok(lines.length >= 8, `${lines.length} lines in the README block`);
  const ns = createNetns(t, 'mesh-nocluster');
  const dir = tempDir(t, 'mesh-nocluster-');
  fs.symlinkSync(DIST, path.join(dir, 'dist'));
  fs.symlinkSync(path.join(REPO, 'examples'), path.join(dir, 'examples'));
  // HOME is the scratch directory: no ~/.meshctl/config.yaml of the machine's user changes meshctl's choices.
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir };
  const logs: Record<string, () => string> = {};
  const allLogs = () =>
    Object.entries(logs)
      .map(([k, f]) => `--- ${k}:\n${f().slice(-3000)}`)
      .join('\n');
  const outputs: Array<{ line: string; stdout: string; stderr: string }> = [];

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
    outputs.push({ line, stdout: r.stdout, stderr: r.stderr });
  }

  const out = (re: RegExp) => outputs.find((o) => re.test(o.line)) ?? { line: '', stdout: '', stderr: '' };
  // The files Istio's `x workload entry configure` writes, with the token the daemon's key signed.
  for (const f of ['cluster.env', 'mesh.yaml', 'root-cert.pem', 'mesh-token', 'hosts'])
    t.ok(fs.existsSync(path.join(dir, 'gateway', f)), `gateway/${f} written`);
  const claims = JSON.parse(Buffer.from(fs.readFileSync(path.join(dir, 'gateway/mesh-token'), 'utf8').split('.')[1]!, 'base64url').toString());
  t.equal(claims.sub, 'system:serviceaccount:mesh-system:ingressgateway', "the token names the group's namespace and service account");
  t.same(claims.aud, ['mesh-ca'], "for the CA audience (Istio's istio-ca, renamed)");
  t.equal(claims.exp - claims.iat, 3600, "for --tokenDuration's default, 1 h");
  t.equal(fs.statSync(path.join(dir, 'var/lib/mesh/ca/token-key.pem')).mode & 0o777, 0o600, "the token key is private to the daemon's user");
  t.equal(
    fs.readFileSync(path.join(dir, 'gateway/root-cert.pem'), 'utf8'),
    fs.readFileSync(path.join(dir, 'var/run/secrets/mesh/root-cert.pem'), 'utf8'),
    'root-cert.pem is the root the daemon publishes',
  );

  // The request went through the gateway to the sample.
  const headers = JSON.parse(out(/curl -s http:\/\/127\.0\.0\.1:18080\//).stdout) as { headers: Record<string, string> };
  t.equal(headers.headers['Host'], '127.0.0.1:18080', 'the sample answered through the gateway');
  t.ok(headers.headers['X-Request-Id'], 'the gateway added its request id');
  // Its certificate came from the daemon's CA, for the group's identity.
  const expiry = metricValue(out(/cert_expiry_seconds/).stdout, 'cert_expiry_seconds', 'resource_name="default"');
  t.ok(expiry !== undefined && expiry > 86_000 && expiry <= 86_400, `cert_expiry_seconds ≈ 24 h (${expiry})`);
  const daemonLog = Object.entries(logs).find(([k]) => k.includes('pilot-discovery'))![1]();
  t.match(daemonLog, /trusting workload tokens signed by .*var\/lib\/mesh\/ca\/token-key\.pem/);
  t.notMatch(daemonLog, /JWT_RULE/, 'no JWT_RULE involved');
  t.notMatch(daemonLog, /Failed to authenticate/, 'no caller was refused');
  const metrics = httpGetIn(ns, 'http://127.0.0.1:15014/metrics').body;
  t.equal(metricValue(metrics, 'ca_server_success_cert_issuance_count'), 1, 'the CA issued one certificate');

  // The operator's certificate, and meshctl over mutual TLS with it.
  const cert = new X509Certificate(fs.readFileSync(path.join(dir, 'certs/cert-chain.pem')));
  t.equal(cert.subjectAltName, 'URI:spiffe://cluster.local/ns/mesh-system/sa/default', "the identity istioctl's debug requests claim");
  t.ok(cert.verify(new X509Certificate(fs.readFileSync(path.join(dir, 'certs/root-cert.pem'))).publicKey), "signed by the daemon's root");
  const status = out(/proxy-status/).stdout;
  t.match(status, /^NAME\s+CLUSTER\s+CDS\s+LDS\s+EDS\s+RDS/m, 'proxy-status answered over :15012');
  t.match(status, /\.mesh-system\s+\S*\s+SYNCED/, 'and lists the gateway, synced');
});
