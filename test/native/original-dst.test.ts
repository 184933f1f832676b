// The SO_ORIGINAL_DST addon against the kernel: compiled here from src/native/original_dst.c, loaded
// in a network namespace made by the test, where real iptables rules redirect connections to it.
//
//   pod (10.77.0.1, fd00:77::1) ── veth ── client (10.77.0.2, fd00:77::2)
//
// In `pod`: nat OUTPUT REDIRECTs 10.77.1.0/24 and fd00:77:1::/64 to local listeners (outbound capture,
// Istio's REDIRECT mode), and mangle PREROUTING TPROXYs 10.77.2.0/24 from `client` to a transparent
// listener (Istio's TPROXY mode, with its fwmark 1337 rule and local route table 133). None of these
// destinations exists: a connection only succeeds if a rule took it to the listener.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { buildOriginalDstAddon } from '../../scripts/native-addon.mjs';
import { ADDON_FILE, loadAddonFile } from '../../src/native/original-dst';
import { TSX } from '../helpers/agent';
import { tempDir } from '../helpers/temp';
import { DIST, MESH, built } from '../helpers/binary';
import { createNetns, must, netnsUnavailable, sh } from '../helpers/netns';
import { REPO } from '../helpers/spec';
import { waitFor } from '../helpers/wait';

const SERVER = path.join(REPO, 'test/native/fixtures/origdst-server.ts');
const CHILD_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };

const skip = netnsUnavailable() || (spawnSync('iptables', ['--version']).status !== 0 ? 'iptables is not installed' : false);

interface Seen {
  listener: string;
  local: { address: string; port: number };
  original: { address: string; port: number } | null;
}

/** Connects from inside `ns` and returns the server's JSON line (or the error code). */
function connectFrom(ns: string, host: string, port: number): Seen | { error: string } {
  const script = `const c = require('node:net').connect(${port}, ${JSON.stringify(host)}); let d = '';
c.setTimeout(5000, () => { console.log(JSON.stringify({ error: 'timeout' })); process.exit(0); });
c.on('data', (x) => (d += x)); c.on('end', () => console.log(d.trim()));
c.on('error', (e) => console.log(JSON.stringify({ error: e.code })));`;
  const r = must(['ip', 'netns', 'exec', ns, process.execPath, '-e', script]);
  return JSON.parse(r.trim()) as Seen | { error: string };
}

async function startServer(t: Test, ns: string, addon: string, listens: object[]): Promise<void> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '--import', TSX, SERVER, addon, JSON.stringify(listens)], {
    env: CHILD_ENV,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  let err = '';
  child.stderr.on('data', (d) => (err += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 20_000);
    child.stdout.on('data', (d: Buffer) => {
      if (d.toString().includes('listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`server exited ${code}: ${err}`)));
  });
}

t.test('SO_ORIGINAL_DST after REDIRECT, the local address after TPROXY', { skip }, async (t) => {
  const dir = tempDir(t, 'mesh-addon-');
  const addon = path.join(dir, ADDON_FILE);
  const built = buildOriginalDstAddon(addon);
  if (!built.ok) {
    t.fail(`the addon does not compile here: ${built.reason}`);
    return;
  }

  const pod = createNetns(t, 'mesh-od');
  const client = createNetns(t, 'mesh-odc');
  must(['ip', '-n', pod, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1', 'netns', client]);
  must(['ip', '-n', pod, 'addr', 'add', '10.77.0.1/24', 'dev', 'v0']);
  must(['ip', '-n', client, 'addr', 'add', '10.77.0.2/24', 'dev', 'v1']);
  must(['ip', '-n', pod, '-6', 'addr', 'add', 'fd00:77::1/64', 'dev', 'v0', 'nodad']);
  must(['ip', '-n', client, '-6', 'addr', 'add', 'fd00:77::2/64', 'dev', 'v1', 'nodad']);
  must(['ip', '-n', pod, 'link', 'set', 'v0', 'up']);
  must(['ip', '-n', client, 'link', 'set', 'v1', 'up']);
  must(['ip', '-n', pod, 'route', 'add', '10.77.1.0/24', 'via', '10.77.0.2']);
  must(['ip', '-n', pod, '-6', 'route', 'add', 'fd00:77:1::/64', 'via', 'fd00:77::2']);
  must(['ip', '-n', client, 'route', 'add', '10.77.2.0/24', 'via', '10.77.0.1']);
  const ipt = (...args: string[]) => must(['ip', 'netns', 'exec', pod, 'iptables', ...args]);
  ipt('-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-d', '10.77.1.5', '-j', 'REDIRECT', '--to-ports', '15001');
  ipt('-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-d', '10.77.1.6', '-j', 'REDIRECT', '--to-ports', '15002');
  ipt(
    '-t',
    'mangle',
    '-A',
    'PREROUTING',
    '-p',
    'tcp',
    '-d',
    '10.77.2.0/24',
    '-j',
    'TPROXY',
    '--on-port',
    '15006',
    '--on-ip',
    '0.0.0.0',
    '--tproxy-mark',
    '0x539/0xffffffff',
  );
  must(['ip', '-n', pod, 'rule', 'add', 'fwmark', '0x539', 'lookup', '133']);
  must(['ip', '-n', pod, 'route', 'add', 'local', 'default', 'dev', 'lo', 'table', '133']);
  const v6 =
    sh([
      'ip',
      'netns',
      'exec',
      pod,
      'ip6tables',
      '-t',
      'nat',
      '-A',
      'OUTPUT',
      '-p',
      'tcp',
      '-d',
      'fd00:77:1::5',
      '-j',
      'REDIRECT',
      '--to-ports',
      '15001',
    ]).code === 0;

  await startServer(t, pod, addon, [
    { host: '0.0.0.0', port: 15001 },
    { host: '::', port: 15001, ipv6Only: true },
    // a dual-stack socket: IPv4 arrives as ::ffff:a.b.c.d, and its NAT record is an IPv4 one
    { host: '::', port: 15002 },
    { host: '0.0.0.0', port: 15006, transparent: true },
  ]);

  // REDIRECT: the NAT record names the address and port the application connected to
  t.has(
    connectFrom(pod, '10.77.1.5', 8080),
    { listener: '0.0.0.0:15001', local: { address: '127.0.0.1', port: 15001 }, original: { address: '10.77.1.5', port: 8080 } },
    'IPv4: the address and port before the REDIRECT',
  );
  t.has(
    connectFrom(pod, '10.77.1.5', 9443),
    { listener: '0.0.0.0:15001', original: { address: '10.77.1.5', port: 9443 } },
    'each connection its own destination',
  );
  t.has(
    connectFrom(pod, '10.77.1.6', 5432),
    { listener: ':::15002', local: { address: '::ffff:127.0.0.1', port: 15002 }, original: { address: '10.77.1.6', port: 5432 } },
    'IPv4 on a dual-stack socket',
  );
  // no NAT: whether the kernel keeps a record (conntrack loaded) or not, the destination is the local address
  t.has(
    connectFrom(pod, '127.0.0.1', 15001),
    { listener: '0.0.0.0:15001', destination: { address: '127.0.0.1', port: 15001 } },
    'not redirected: the listener itself is the destination',
  );
  t.has(
    connectFrom(client, '10.77.2.9', 8080),
    { listener: '0.0.0.0:15006', local: { address: '10.77.2.9', port: 8080 }, destination: { address: '10.77.2.9', port: 8080 } },
    'TPROXY: the transparent socket (IP_TRANSPARENT set by the addon) has the original destination as its local address',
  );
  if (v6) {
    t.has(
      connectFrom(pod, 'fd00:77:1::5', 9090),
      { listener: ':::15001', local: { address: '::1', port: 15001 }, original: { address: 'fd00:77:1::5', port: 9090 } },
      'IPv6: IP6T_SO_ORIGINAL_DST',
    );
  } else {
    t.pass('IPv6: IP6T_SO_ORIGINAL_DST', { skip: 'ip6tables nat is not usable here' });
  }
});

t.test('where the addon cannot be built or found, the reason is clear', async (t) => {
  const dir = tempDir(t, 'mesh-addon-');
  const saved = process.env.CC;
  process.env.CC = path.join(dir, 'no-such-cc');
  t.teardown(() => {
    if (saved === undefined) delete process.env.CC;
    else process.env.CC = saved;
  });
  const r = buildOriginalDstAddon(path.join(dir, ADDON_FILE));
  t.same(r, { ok: false, reason: `no C compiler (${path.join(dir, 'no-such-cc')}: ENOENT); install one (Debian: gcc) or set CC` });
  const missing = loadAddonFile(path.join(dir, ADDON_FILE));
  t.same(missing, { ok: false, reason: `${path.join(dir, ADDON_FILE)} does not exist (node build.mjs compiles it)` });
  const bogus = path.join(dir, 'bogus.node');
  fs.writeFileSync(bogus, 'not a shared object');
  const bad = loadAddonFile(bogus);
  t.equal(bad.ok, false);
  t.match(!bad.ok && bad.reason, `cannot load ${bogus}: `);
});

const BOOTSTRAP = `admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}
static_resources:
  listeners:
  - name: virtualOutbound
    address: {socket_address: {address: 127.0.0.1, port_value: 0}}
    use_original_dst: true
    filter_chains: [{filters: [{name: envoy.filters.network.tcp_proxy, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy, stat_prefix: x, cluster: PassthroughCluster}}]}]
  clusters:
  - {name: PassthroughCluster, type: ORIGINAL_DST, lb_policy: CLUSTER_PROVIDED, connect_timeout: 1s}
`;

t.test(
  'the built programs load the addon: embedded in dist/mesh, beside dist/mesh.cjs',
  { skip: built() ? false : 'dist/mesh is not built' },
  async (t) => {
    const dir = tempDir(t, 'mesh-addon-run-');
    const boot = path.join(dir, 'bootstrap.yaml');
    fs.writeFileSync(boot, BOOTSTRAP);
    const noexec = path.join(dir, 'noexec');
    fs.mkdirSync(noexec);
    const canUnshare = spawnSync('unshare', ['-m', 'true']).status === 0;
    const runs: Array<[string, string[], string, NodeJS.ProcessEnv?]> = [
      [MESH, [], 'executable asset original_dst.node'],
      [process.execPath, [path.join(DIST, 'mesh.cjs')], path.join(DIST, ADDON_FILE)],
    ];
    // a temp directory mounted noexec (hardened pods): the embedded addon is loaded from the working directory
    if (canUnshare)
      runs.push([
        'unshare',
        ['-m', 'sh', '-c', `mount -t tmpfs -o noexec tmpfs '${noexec}' && exec "$0" "$@"`, MESH],
        'executable asset original_dst.node',
        { ...CHILD_ENV, TMPDIR: noexec },
      ]);
    else t.pass('the addon loads from the working directory under a noexec temp directory', { skip: 'unshare -m is not available' });
    for (const [file, pre, from, env] of runs) {
      const child = spawn(file, [...pre, 'agent', 'envoy', '-c', boot, '--component-log-level', 'config:debug'], {
        env: env ?? CHILD_ENV,
        cwd: dir,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (out += d));
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      try {
        await waitFor(
          () => out,
          () => /starting workers/.test(out),
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        t.match(
          out,
          `listener 'virtualOutbound' restores original destinations with SO_ORIGINAL_DST (addon: ${from})`,
          `${path.basename(file === 'unshare' ? 'mesh with TMPDIR noexec' : (pre[0] ?? file))}: addon from ${from}`,
        );
        t.notMatch(out, /SO_ORIGINAL_DST cannot be read/);
      } finally {
        child.kill('SIGKILL');
        await exited;
      }
    }
  },
);
