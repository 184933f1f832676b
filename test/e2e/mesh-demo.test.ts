// `npm run demo -- mesh` as a user meets it (issue 11): it starts the mesh in network namespaces, prints
// commands that work as printed (A reaches B by name over mutual TLS, B's app sees A's identity in the
// x-forwarded-client-cert header; C is refused by B's AuthorizationPolicy; where Prometheus is installed it
// scrapes the three pods and the printed `meshctl x metrics` line answers), and Ctrl-C leaves no namespace,
// process or file behind. Without root it says what it needs and fails. The demo names its namespaces with
// random suffixes, so runs in parallel do not meet.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createNetns, meshPodsUnavailable, netnsExists, sh } from '../../scripts/lib/mesh-pods.mjs';
import { built } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { prometheusUnavailable } from '../helpers/prometheus';
import { waitFor } from '../helpers/wait';

const DEMO = path.join(REPO, 'scripts/demo.mjs');
const skip = meshPodsUnavailable({ openssl: true }) || (spawnSync('curl', ['--version']).status !== 0 ? 'curl is not installed' : false);
if (!skip && !built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

/** The printed command whose comment starts with `comment`, without the comment. */
function printed(out: string, comment: string): string {
  const line = out.split('\n').find((l) => /^(nsenter -t \d+ -m )?ip netns exec /.test(l.trimStart()) && new RegExp(`#\\s*${comment}`).test(l));
  if (!line) throw new Error(`the demo printed no command commented "${comment}":\n${out}`);
  return line.replace(/\s+#.*$/, '').trim();
}

t.test('npm run demo -- mesh: printed commands work, Ctrl-C removes everything', { skip }, async (t) => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-demo-test-'));
  // as the system's /tmp: the sidecars (uid 1337) live below it
  fs.chmodSync(tmp, 0o1777);
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const child = spawn(process.execPath, [DEMO, 'mesh'], {
    cwd: REPO,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: tmp },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  const namespaces = () => [...new Set(out.match(/\bmesh-demo-(?:a|b|c|world)-[0-9a-f]{8}\b/g) ?? [])];
  t.teardown(async () => {
    // a failed assertion must not leave the demo's mesh behind
    if (child.exitCode === null) {
      child.kill('SIGINT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    }
    if (child.exitCode === null) child.kill('SIGKILL');
    for (const ns of namespaces()) {
      for (const pid of sh(['ip', 'netns', 'pids', ns]).stdout.split(/\s+/).filter(Boolean)) sh(['kill', '-9', pid]);
      sh(['ip', 'netns', 'del', ns]);
      fs.rmSync(path.join('/etc/netns', ns), { recursive: true, force: true });
    }
  });

  const deadline = Date.now() + 150_000;
  while (!out.includes('Ctrl-C stops everything.')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the demo did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(namespaces().length, 4, `four namespaces: ${namespaces().join(' ')}`);
  for (const ns of namespaces()) t.ok(netnsExists(ns), `${ns} exists while the demo runs`);

  // the first command, exactly as printed
  const byName = sh(['bash', '-c', printed(out, "B's app answers")]);
  t.equal(byName.code, 0, byName.stderr);
  const body = JSON.parse(byName.stdout) as { server: string; xfcc: string | null };
  t.equal(body.server, 'b', "B's app answered");
  // Istio's XFCC for a sidecar-to-sidecar call: By=<B's identity>;Hash=<A's cert>;Subject="";URI=<A's identity>
  t.match(
    body.xfcc,
    /^By=spiffe:\/\/cluster\.local\/ns\/b\/sa\/b;Hash=[0-9a-f]{64};Subject="";URI=spiffe:\/\/cluster\.local\/ns\/a\/sa\/a$/,
    'B saw A over mutual TLS',
  );

  const fromC = sh(['bash', '-c', printed(out, '403')]);
  t.match(fromC.stdout, /^HTTP\/1\.1 403 /, 'C is refused by the AuthorizationPolicy');
  t.match(fromC.stdout, /RBAC: access denied$/);

  const tcp = sh(['bash', '-c', printed(out, 'raw TCP')]);
  t.equal(tcp.stdout.trim(), 'b echo ping', 'the TCP echo of B through the mesh');

  // admin /certs lists the certificates A's TLS contexts use: its workload certificate (issue 24: it was empty)
  const a = namespaces().find((n) => n.startsWith('mesh-demo-a-'))!;
  const certs = sh(['ip', 'netns', 'exec', a, 'curl', '-s', 'localhost:15000/certs']);
  type Details = { subject_alt_names: Array<{ uri?: string }> };
  const list = (JSON.parse(certs.stdout) as { certificates: Array<{ ca_cert: Details[]; cert_chain: Details[] }> }).certificates;
  t.ok(
    list.flatMap((c) => c.cert_chain).some((d) => d.subject_alt_names.some((s) => s.uri === 'spiffe://cluster.local/ns/a/sa/a')),
    `A's /certs shows its SPIFFE certificate: ${certs.stdout.slice(0, 400)}`,
  );
  t.ok(
    list.some((c) => c.ca_cert.length === 1),
    'and the root its contexts trust',
  );

  // metrics: B's merged 15020 endpoint, then (with Prometheus installed) the printed Prometheus lines
  const merged = sh(['bash', '-c', printed(out, "B's merged metrics")]);
  t.ok(Number(merged.stdout.trim()) > 10, `B's 15020 /stats/prometheus answers (${merged.stdout.trim()} lines)`);
  if (prometheusUnavailable()) {
    t.match(out, /no Prometheus here: `apt-get install -y prometheus`/, 'the demo says how to get Prometheus');
  } else {
    const scrapes = printed(out, "the three pods' scrapes");
    await waitFor(
      () => `Prometheus did not scrape the three pods: ${sh(['bash', '-c', scrapes]).stdout}`,
      () => {
        const up = JSON.parse(sh(['bash', '-c', scrapes]).stdout || '{}') as {
          data?: { result?: Array<{ metric: { pod: string }; value: [number, string] }> };
        };
        const pods = (up.data?.result ?? []).filter((r) => r.value[1] === '1').map((r) => r.metric.pod);
        return pods.sort().join(' ') === 'a-1 b-1 c-1';
      },
      { timeoutMs: 30_000, intervalMs: 1000 },
    );
    t.pass("Prometheus scrapes the three pods' merged endpoints");
    const metrics = sh(['bash', '-c', printed(out, 'server-side RPS')]);
    t.equal(metrics.code, 0, `meshctl x metrics as printed: ${metrics.stderr}`);
    const [header, row] = metrics.stdout.split('\n');
    t.match(header, /^\s+WORKLOAD\s+TOTAL RPS\s+ERROR RPS\s+P50 LATENCY\s+P90 LATENCY\s+P99 LATENCY$/);
    t.match(row, /^\s+b\.b\s+\d+\.\d{3}\s+\d+\.\d{3}\s+\S+\s+\S+\s+\S+$/, 'a row for B');
  }

  child.kill('SIGINT');
  t.equal(await exited, 0, 'Ctrl-C stops the demo with exit 0');
  for (const ns of namespaces()) {
    t.notOk(netnsExists(ns), `${ns} is deleted`);
    t.notOk(fs.existsSync(path.join('/etc/netns', ns)), `/etc/netns/${ns} is removed`);
  }
  t.same(fs.readdirSync(tmp), [], 'nothing is left in the temp directory');
});

t.test(
  'without root the mesh demo says what it needs and fails',
  { skip: process.getuid?.() !== 0 ? 'needs root to drop to another user' : false },
  async (t) => {
    const r = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, DEMO, 'mesh'], {
      cwd: REPO,
      encoding: 'utf8',
      env: { PATH: process.env.PATH, HOME: os.tmpdir() },
      timeout: 30_000,
    });
    t.not(r.status, 0, 'non-zero exit');
    t.match(r.stderr, /needs root/);
    t.match(r.stderr, /iproute2/);
    t.match(r.stderr, /iptables/);
    t.equal(r.stdout, '', 'nothing else is printed');
  },
);

t.test('the mesh demo run inside a network namespace prints commands that work from another shell', { skip, timeout: 240_000 }, async (t) => {
  // `ip netns exec` gives the demo a mount namespace of its own, where its `ip netns add` mounts live.
  const outer = createNetns(t, 'mesh-demo-outer');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-demo-test-'));
  fs.chmodSync(tmp, 0o1777);
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const child = spawn('ip', ['netns', 'exec', outer, process.execPath, DEMO, 'mesh'], {
    cwd: REPO,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: tmp },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  t.teardown(async () => {
    if (child.exitCode === null) {
      child.kill('SIGINT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 20_000))]);
    }
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const deadline = Date.now() + 150_000;
  while (!out.includes('Ctrl-C stops everything.')) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`the demo did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  // from this process's shell, outside the demo's mount namespace, exactly as printed
  const byName = sh(['bash', '-c', printed(out, "B's app answers")]);
  t.equal(byName.code, 0, byName.stderr);
  t.equal((JSON.parse(byName.stdout) as { server: string }).server, 'b', "B's app answered");
  const status = sh(['bash', '-c', printed(out, 'the three sidecars')]);
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, /^NAME\s+CLUSTER/m);
  child.kill('SIGINT');
  t.equal(await exited, 0, 'Ctrl-C stops the demo with exit 0');
});
