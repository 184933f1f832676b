// Real rules in a real network namespace created for this test: traffic is actually redirected,
// the proxy's own traffic is not, re-applying is idempotent, drift is refused unless reconciled,
// cleanup removes every MESH_ chain, privileges are checked and --run-validation works.
//
// Each namespace holds a veth pair with 10.77.0.1/24 on v0, so 10.77.0.2 is a non-local address
// routed out of v0; it never leaves the namespace. A filter rule rejects TCP to 10.77.0.2 with a
// reset, so a connection that is NOT redirected fails at once instead of timing out.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import t, { type Test } from 'tap';
import { CommandError } from '../../src/cli/context';
import { runMeshIptables } from '../../src/iptables/command';
import { findExecutable } from '../../src/iptables/executor';
import { golden, REPO_ROOT, runContext, specFlagDefaults } from './helpers';
import { DIST, built } from '../helpers/binary';
import { asUserIn } from '../helpers/netns';

const FIXTURES = path.join(REPO_ROOT, 'test/iptables/fixtures');
const APP_UID = 4321;
const PROXY_UID = 1337;

const skip =
  process.getuid?.() !== 0
    ? 'needs root to create network namespaces'
    : ['iptables', 'iptables-save', 'iptables-restore'].some((b) => !findExecutable(b))
      ? 'iptables is not installed'
      : ['ip', 'setpriv'].some((b) => !findExecutable(b))
        ? 'iproute2 (ip) or util-linux (setpriv) is not installed'
        : false;

/** Children get a plain environment: tap's NODE_OPTIONS hooks would try to write tap's files as another UID. */
const CHILD_ENV = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };

function sh(args: string[], input?: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(args[0]!, args.slice(1), { encoding: 'utf8', input, timeout: 30_000, cwd: REPO_ROOT, env: CHILD_ENV });
  return { code: r.status ?? -1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
}
function must(args: string[]): string {
  const r = sh(args);
  if (r.code !== 0) throw new Error(`${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** Creates a namespace with lo up, the veth pair and the reject rule; deleted in teardown. */
function createNamespace(t: Test): string {
  const ns = `mesh-ipt-${randomBytes(4).toString('hex')}`;
  must(['ip', 'netns', 'add', ns]);
  t.teardown(() => void sh(['ip', 'netns', 'del', ns]));
  must(['ip', '-n', ns, 'link', 'set', 'lo', 'up']);
  must(['ip', '-n', ns, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1']);
  must(['ip', '-n', ns, 'addr', 'add', '10.77.0.1/24', 'dev', 'v0']);
  must(['ip', '-n', ns, 'link', 'set', 'v0', 'up']);
  must(['ip', '-n', ns, 'link', 'set', 'v1', 'up']);
  must([
    'ip',
    'netns',
    'exec',
    ns,
    'iptables',
    '-t',
    'filter',
    '-A',
    'OUTPUT',
    '-d',
    '10.77.0.2/32',
    '-p',
    'tcp',
    '-j',
    'REJECT',
    '--reject-with',
    'tcp-reset',
  ]);
  return ns;
}

const save = (ns: string, bin = 'iptables-save') => must(['ip', 'netns', 'exec', ns, bin]);
const meshLines = (text: string) => text.split('\n').filter((l) => l.includes('MESH_'));

/** Starts the stand-in proxy listener inside the namespace and waits until it accepts. */
async function startListener(t: Test, ns: string, port: number): Promise<void> {
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, path.join(FIXTURES, 'probe.mjs'), 'listen', String(port)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: CHILD_ENV,
  });
  t.teardown(() => void child.kill('SIGTERM'));
  await new Promise<void>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error('listener did not start within 10 s')), 10_000);
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('listening')) {
        clearTimeout(deadline);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`listener exited with ${code}`)));
  });
}

/** Connects from inside the namespace as the given user and group. */
function connectAs(ns: string, uid: number, gid: number, host = '10.77.0.2', port = 8080): { reply?: string; error?: string } {
  const r = must([...asUserIn(ns, uid, gid), process.execPath, path.join(FIXTURES, 'probe.mjs'), 'connect', host, String(port), '5000']);
  return JSON.parse(r.trim()) as { reply?: string; error?: string };
}

/** Runs the handler in a child process inside the namespace, as the given user. */
function runInNamespaceAs(ns: string, uid: number, flags: object): { code: number; stdout: string; stderr: string } {
  return sh([
    ...asUserIn(ns, uid),
    // tap injects its process-tracking hooks through NODE_OPTIONS; they cannot write tap's files as
    // another user, so this child runs without them.
    'env',
    '-u',
    'NODE_OPTIONS',
    process.execPath,
    '--import',
    'tsx',
    path.join(FIXTURES, 'run-mesh-iptables.ts'),
    JSON.stringify(flags),
  ]);
}

const defaults = specFlagDefaults();
const applyFlags = (ns: string, extra: object = {}) => ({
  ...defaults,
  'network-namespace': ns,
  'mesh-service-cidr': '*',
  'proxy-uid': String(PROXY_UID),
  'proxy-gid': String(PROXY_UID),
  ...extra,
});
async function apply(ns: string, extra: object = {}): Promise<string> {
  const run = runContext(applyFlags(ns, extra));
  await runMeshIptables(run.ctx);
  return run.stdout();
}

t.test('capture lifecycle in a network namespace', { skip }, async (t) => {
  const ns = createNamespace(t);
  await startListener(t, ns, 15001);

  t.same(connectAs(ns, APP_UID, APP_UID), { error: 'ECONNREFUSED' }, 'before capture the connection is rejected');

  await apply(ns);
  const installed = save(ns);
  const expectedChains = golden('empty')
    .split('\n')
    .filter((l) => l.startsWith('-N '))
    .map((l) => l.slice(3));
  const natChains = installed
    .split('*nat')[1]!
    .split('COMMIT')[0]!
    .split('\n')
    .filter((l) => l.startsWith(':MESH_'))
    .map((l) => l.slice(1).split(' ')[0]);
  t.same(natChains.sort(), [...expectedChains].sort(), 'nat holds the MESH_ chains of the golden output');
  t.match(installed, /^-A OUTPUT -j MESH_OUTPUT$/m, 'OUTPUT jumps into MESH_OUTPUT');

  t.same(connectAs(ns, APP_UID, APP_UID), { reply: 'proxy:15001' }, 'application traffic is redirected to the proxy port');
  t.same(connectAs(ns, PROXY_UID, PROXY_UID), { error: 'ECONNREFUSED' }, 'traffic of the proxy UID is not redirected');
  t.same(connectAs(ns, APP_UID, PROXY_UID), { error: 'ECONNREFUSED' }, 'traffic of the proxy GID is not redirected');

  t.test('applying again changes nothing', async (t) => {
    const out = await apply(ns);
    t.match(out, /already in place/);
    t.same(meshLines(save(ns)), meshLines(installed));
  });

  t.test('a deleted rule is drift: refused without --reconcile, repaired with it', async (t) => {
    must(['ip', 'netns', 'exec', ns, 'iptables', '-t', 'nat', '-D', 'MESH_OUTPUT', '-j', 'MESH_REDIRECT']);
    t.same(connectAs(ns, APP_UID, APP_UID), { error: 'ECONNREFUSED' }, 'without the rule nothing is redirected');

    const err = await apply(ns).catch((e: unknown) => e);
    t.type(err, CommandError);
    t.match((err as Error).message, /differ.*--reconcile/);

    await apply(ns, { reconcile: true });
    t.equal(sh(['ip', 'netns', 'exec', ns, 'iptables', '-t', 'nat', '-C', 'MESH_OUTPUT', '-j', 'MESH_REDIRECT']).code, 0, 'the rule is back');
    t.same(meshLines(save(ns)), meshLines(installed), 'the installed rules are as after the first apply');
    t.notMatch(save(ns), /-j DROP/, 'the reconcile guardrails are gone');
    t.same(connectAs(ns, APP_UID, APP_UID), { reply: 'proxy:15001' }, 'redirection works again');
  });

  t.test('--cleanup-only removes every MESH_ chain and jump', async (t) => {
    await apply(ns, { 'cleanup-only': true });
    const after = save(ns);
    t.same(meshLines(after), []);
    t.match(after, /-A OUTPUT -d 10\.77\.0\.2\/32 -p tcp -j REJECT/, 'rules that are not ours stay');
    t.same(connectAs(ns, APP_UID, APP_UID), { error: 'ECONNREFUSED' }, 'nothing is redirected any more');
  });
});

t.test('without CAP_NET_ADMIN the command fails with a clear message', { skip }, async (t) => {
  const ns = createNamespace(t);
  const r = runInNamespaceAs(ns, 65534, { 'mesh-service-cidr': '*' });
  t.not(r.code, 0);
  t.match(r.stderr, /permission denied.*CAP_NET_ADMIN/i);
  t.same(meshLines(save(ns)), [], 'nothing was installed');
});

t.test('--run-validation passes with capture rules and fails without them', { skip }, async (t) => {
  const ns = createNamespace(t);
  const validate = { 'skip-rule-apply': true, 'run-validation': true, 'probe-timeout': 300 };

  const before = runInNamespaceAs(ns, PROXY_UID, validate);
  t.equal(before.code, 126, 'validation error exit code');
  t.match(before.stderr, /validation failed/);

  await apply(ns);
  const after = runInNamespaceAs(ns, PROXY_UID, { ...validate, 'probe-timeout': 10_000 });
  t.equal(after.code, 0, after.stderr);
  t.match(after.stdout, /validation passed/);
});

t.test('TPROXY and IPv6: policy routing, ::6 on lo and ip6tables rules', { skip }, async (t) => {
  const ns = createNamespace(t);
  must(['ip', '-n', ns, '-6', 'addr', 'add', 'fd00:77::1/64', 'dev', 'v0', 'nodad']);
  const flags = { 'dual-stack': true, 'mesh-inbound-ports': '*', 'mesh-inbound-interception-mode': 'TPROXY' };
  await apply(ns, flags);
  await apply(ns, flags); // routes and rules must not be duplicated by a second run

  const rules = must(['ip', '-n', ns, '-4', 'rule', 'show'])
    .split('\n')
    .filter((l) => /fwmark 0x539 lookup 133/.test(l));
  t.equal(rules.length, 1, 'one fwmark rule for the TPROXY mark (1337 = 0x539) and table 133');
  t.match(must(['ip', '-n', ns, '-4', 'route', 'show', 'table', '133']), /^local default dev lo/m);
  t.match(must(['ip', '-n', ns, '-6', 'addr', 'show', 'dev', 'lo']), /inet6 ::6\/128/);

  for (const bin of ['iptables-save', 'ip6tables-save']) {
    const mangle = save(ns, bin).split('*mangle')[1]?.split('COMMIT')[0] ?? '';
    for (const chain of ['MESH_DIVERT', 'MESH_TPROXY', 'MESH_INBOUND']) t.match(mangle, `:${chain} `, `${bin}: mangle has ${chain}`);
  }
  await apply(ns, { ...flags, 'cleanup-only': true });
  t.same(meshLines(save(ns)), []);
  t.same(meshLines(save(ns, 'ip6tables-save')), []);
});

t.test(
  'the pod address is found while its interface has no carrier yet (a veth whose peer is still down)',
  { skip: skip || (built() ? false : 'dist/mesh is not built') },
  async (t) => {
    // os.networkInterfaces() leaves such an interface out; Istio (Go's net.InterfaceAddrs) sees its address
    const ns = createNamespace(t);
    must(['ip', '-n', ns, 'link', 'set', 'v1', 'down']);
    t.match(must(['ip', '-n', ns, 'link', 'show', 'v0']), /NO-CARRIER/, 'v0 is up without a carrier');
    const dryRun = () =>
      sh([
        'ip',
        'netns',
        'exec',
        ns,
        path.join(DIST, 'pilot-agent'),
        'mesh-iptables',
        '--dry-run',
        '-p',
        '15001',
        '-u',
        '1337',
        '-m',
        'REDIRECT',
        '-i',
        '*',
      ]);
    const r = dryRun();
    t.equal(r.code, 0, `mesh-iptables found the pod's address: ${r.stderr}`);
    t.match(r.stdout, /-A MESH_OUTPUT/);
    // with the carrier (both ends up) the address is found the usual way: the same rules
    must(['ip', '-n', ns, 'link', 'set', 'v1', 'up']);
    const withCarrier = dryRun();
    t.equal(withCarrier.code, 0, withCarrier.stderr);
    t.equal(r.stdout, withCarrier.stdout, 'the same rules as once the interface has its carrier');
  },
);
