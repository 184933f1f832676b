// `meshctl bug-report` with no cluster, with the built binary against a live daemon and gateway on loopback (in a
// network namespace of their own, as meshctl-live.test.ts runs them): the archive's real content, --dry-run,
// --timeout keeping partial results, --include/--exclude, secret redaction, the progress line on a terminal.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST, exec } from '../helpers/binary';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { tempDir } from '../helpers/temp';
import { meshctlHome, meshctlIn, startLiveDiscovery, waitForOk, watch } from '../helpers/live-mesh';
import { redactSecrets } from '../../src/meshctl/bugreport/command';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

t.test('bug-report with no cluster, against a live daemon and gateway', { skip, timeout: 240_000 }, async (t) => {
  const ns = createNetns(t, 'mesh-br');
  const dir = tempDir(t, 'mesh-bugreport-');
  const out: string[] = [];
  const logs = () => out.join('').slice(-6000);
  const base = await startLiveDiscovery(t, ns, dir, out);
  fs.mkdirSync(path.join(dir, 'gw'));
  const gw = spawnIn(ns, path.join(DIST, 'pilot-agent'), ['proxy', 'router', '--meshConfig', path.join(dir, 'mesh.yaml')], {
    env: {
      ...base,
      POD_NAME: 'gateway-0',
      POD_NAMESPACE: 'mesh-system',
      INSTANCE_IP: '127.0.0.1',
      MESH_METAJSON_LABELS: '{"mesh":"ingressgateway","app":"gw"}',
      PROXY_CONFIG: JSON.stringify({
        statusPort: 25020,
        proxyAdminPort: 25000,
        binaryPath: path.join(dir, 'no-envoy-here'),
        terminationDrainDuration: '1s',
      }),
    },
    cwd: path.join(dir, 'gw'),
  });
  watch(t, 'gw', gw, out);
  await waitForOk(ns, 'http://127.0.0.1:25020/healthz/ready', () => `the gateway is not ready:\n${logs()}`);
  const home = meshctlHome(dir);

  const meshctl = (args: readonly string[], cwd = dir) => meshctlIn(ns, args, { env: { PATH: process.env.PATH, HOME: home }, cwd });
  /** Unpacks with the system's tar: the archive must be a real tar.gz. */
  const unpack = (archive: string): string => {
    const to = fs.mkdtempSync(path.join(dir, 'x-'));
    execFileSync('tar', ['-xzf', archive, '-C', to]);
    return path.join(to, 'bug-report');
  };
  const read = (root: string, p: string) => fs.readFileSync(path.join(root, p), 'utf8');

  // the route reaches the gateway after its readiness: wait until its admin shows it
  const deadline = Date.now() + 30_000;
  while (!httpGetIn(ns, 'http://127.0.0.1:25000/config_dump').body.includes('http.8081') && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 300));

  await t.test('the archive holds the daemon’s debug pages and the gateway’s admin output', async (t) => {
    const outDir = path.join(dir, 'out1');
    const r = await meshctl(['bug-report', '--output-dir', outDir]);
    t.equal(r.code, 0, 'exits 0');
    if (r.code !== 0) t.comment(`${r.stderr}\n${logs()}`);
    t.match(r.stdout, `Creating an archive at ${outDir}/bug-report.tar.gz.\n`);
    t.match(r.stdout, /Done\.\n$/);
    const root = unpack(path.join(outDir, 'bug-report.tar.gz'));
    const daemonDirs = fs.readdirSync(path.join(root, 'mesh', 'mesh-system'));
    t.equal(daemonDirs.length, 1, 'one daemon');
    const debug = path.join('mesh', 'mesh-system', daemonDirs[0]!, 'debug');
    t.match(read(root, path.join(debug, 'syncz')), /gateway-0\.mesh-system/, 'syncz lists the gateway');
    t.match(read(root, path.join(debug, 'configz')), /backend\.example\.com/, 'configz holds the ServiceEntry');
    t.match(read(root, path.join(debug, 'adsz')), /gateway-0\.mesh-system/);
    const pdir = path.join('proxies', 'mesh-system', 'gateway-0');
    t.match(read(root, path.join(pdir, 'config_dump?include_eds')), /"http\.8081"/, 'the gateway’s route in its config dump');
    t.match(read(root, path.join(pdir, 'clusters')), /outbound\|80\|\|backend\.example\.com/, 'the gateway’s clusters');
    t.ok(fs.existsSync(path.join(root, pdir, 'certs')), 'certs');
    t.match(read(root, path.join(pdir, 'stats', 'prometheus')), /^# TYPE /m, 'Prometheus stats');
    t.match(read(root, 'versions'), /^client version: 1\.26\./);
    t.match(read(root, 'bug-report.log'), /1 proxies selected: gateway-0\.mesh-system/);
    const all = execFileSync('tar', ['-xzOf', path.join(outDir, 'bug-report.tar.gz')]).toString();
    t.notMatch(all, /PRIVATE KEY-----/, 'no private key in the archive');
  });

  await t.test('--exclude leaves the proxy out; --include picks it by label', async (t) => {
    const o1 = path.join(dir, 'out2');
    let r = await meshctl(['bug-report', '--output-dir', o1, '--exclude', 'mesh-system']);
    t.equal(r.code, 0, r.stderr);
    let root = unpack(path.join(o1, 'bug-report.tar.gz'));
    t.notOk(fs.existsSync(path.join(root, 'proxies')), 'no proxy output');
    t.ok(fs.existsSync(path.join(root, 'mesh', 'mesh-system')), 'the daemon’s pages are still there');
    const o2 = path.join(dir, 'out3');
    r = await meshctl(['bug-report', '--output-dir', o2, '--include', '///app=g*']);
    t.equal(r.code, 0, r.stderr);
    root = unpack(path.join(o2, 'bug-report.tar.gz'));
    t.ok(fs.existsSync(path.join(root, 'proxies', 'mesh-system', 'gateway-0', 'clusters')));
    r = await meshctl(['bug-report', '--include', 'ns///l*=v']);
    t.not(r.code, 0);
    t.equal(r.stderr, "Error: bad label/annotation selection l*=v, key cannot have '*' wildcards\n");
  });

  await t.test('--dry-run fetches and writes nothing', async (t) => {
    const o = path.join(dir, 'out4');
    const r = await meshctl(['bug-report', '--dry-run', '--output-dir', o]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /dry run: would fetch the daemon's debug\/syncz over xDS/);
    t.match(r.stdout, 'dry run: would GET http://127.0.0.1:25000/config_dump?include_eds into proxies/mesh-system/gateway-0/config_dump?include_eds');
    t.notOk(fs.existsSync(path.join(o, 'bug-report.tar.gz')));
  });

  await t.test('--filename: the file’s settings win over the flags', async (t) => {
    const f = path.join(dir, 'br.yaml');
    fs.writeFileSync(f, 'dryRun: true\nexclude:\n  - mesh-system\n');
    const o = path.join(dir, 'out7');
    const r = await meshctl(['bug-report', '-f', f, '--include', 'mesh-system', '--output-dir', o]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stdout, /dry run: would fetch the daemon's debug\/adsz/);
    t.notMatch(r.stdout, /gateway-0/, 'the file excludes the gateway’s namespace');
    t.notOk(fs.existsSync(path.join(o, 'bug-report.tar.gz')));
    fs.writeFileSync(f, 'commandTimeout: soon\n');
    const bad = await meshctl(['bug-report', '-f', f]);
    t.not(bad.code, 0);
    t.equal(bad.stderr, `Error: ${f}: commandTimeout: time: invalid duration "soon"\n`);
  });

  await t.test('--timeout keeps what was collected', async (t) => {
    const o = path.join(dir, 'out5');
    const r = await meshctl(['bug-report', '--timeout', '1ms', '--output-dir', o]);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stderr, 'Warning: --timeout 1ms reached: archiving what was collected so far\n');
    t.match(r.stdout, /Done \(partial: the timeout was reached\)\.\n$/);
    const root = unpack(path.join(o, 'bug-report.tar.gz'));
    t.match(read(root, 'bug-report.log'), /collection stopped at the timeout after 0 of \d+ requests/);
    t.match(read(root, 'versions'), /client version/);
  });

  await t.test('a progress line on a terminal', async (t) => {
    const o = path.join(dir, 'out6');
    const cmd = ['ip', 'netns', 'exec', ns, path.join(DIST, 'meshctl'), 'bug-report', '--output-dir', o].join(' ');
    const text = execFileSync('script', ['-qec', cmd, '/dev/null'], { env: { PATH: process.env.PATH, HOME: home }, cwd: dir }).toString();
    t.match(text, /\r\x1b\[K\[[#.]{24}\] \d+\/\d+ meshd debug\/adsz/, 'the progress bar names the step');
    t.ok(fs.existsSync(path.join(o, 'bug-report.tar.gz')));
  });

  await t.test('an unreachable daemon is one clear error', async (t) => {
    const r = await exec(path.join(DIST, 'meshctl'), ['bug-report'], {
      env: { PATH: process.env.PATH, HOME: dir, MESHCTL_XDS_ADDRESS: '127.0.0.1:1', MESHCTL_PLAINTEXT: 'true' },
      cwd: dir,
    });
    t.not(r.code, 0);
    t.match(r.stderr, /^Error: cannot collect from the control plane: could not dial 127\.0\.0\.1:1/);
  });
});

t.test('secret redaction', async (t) => {
  // An Envoy secrets dump section (admin /config_dump) and an orchestrator Secret.
  const dump = {
    configs: [
      {
        '@type': 'type.googleapis.com/envoy.admin.v3.SecretsConfigDump',
        dynamic_active_secrets: [
          {
            name: 'default',
            secret: { tls_certificate: { certificate_chain: { inline_bytes: 'Q0VSVA==' }, private_key: { inline_bytes: 'S0VZ' } } },
          },
        ],
      },
    ],
    secret: { kind: 'Secret', data: { 'tls.key': 'S0VZ' }, metadata: { name: 's' } },
  };
  const r = redactSecrets(dump) as any;
  const tls = r.configs[0].dynamic_active_secrets[0].secret.tls_certificate;
  t.same(tls.private_key, { inline_bytes: '[redacted]' });
  t.same(tls.certificate_chain, { inline_bytes: 'Q0VSVA==' }, 'certificates stay');
  t.same(r.secret.data, { 'tls.key': '[redacted]' });
  t.equal(r.secret.metadata.name, 's');
});
