// The plugin with real CNI: Debian's bridge + host-local give a network namespace its interface and
// address, then the built mesh-cni (chained, as install-cni configures it) programs the sidecar capture
// for the pod read from a real API server. Checked: the namespace's iptables equal what
// `pilot-agent mesh-iptables` produces for the same settings, a connection to an outside port lands on
// 15001, CHECK passes and then fails once a rule is gone, DEL removes the capture, VERSION answers, and
// bad input gives CNI error objects without leaving rules behind.
import { mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import t from 'tap';
import { built, DIST } from '../helpers/binary';
import { chainAdd, chainCheck, chainDel, DEBIAN_CNI_DIR, ensureReferencePlugins, execPlugin, type ChainArgs, type Conflist } from '../helpers/cni';
import { kubeUnavailable, startKube, tokenKubeconfig } from '../helpers/kube';
import { createNetns, must, netnsUnavailable, sh, spawnIn, asUserIn } from '../helpers/netns';
import { waitFor } from '../helpers/wait';

const bundle = process.env.MESH_TEST_BUNDLE === '1';
const skip = !built() ? 'needs the built binary (node build.mjs)' : netnsUnavailable() || ensureReferencePlugins() || kubeUnavailable();

/** iptables-save without comments and packet counters: the rules and chains only. */
function rulesIn(ns: string): string {
  return must(['ip', 'netns', 'exec', ns, 'iptables-save'])
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => l.replace(/ \[\d+:\d+\]$/, ''))
    .join('\n');
}

/** An IPv4 address on a veth inside the namespace (no dummy module on every machine). */
function addAddress(ns: string, cidr: string): void {
  must(['ip', '-n', ns, 'link', 'add', 'v0', 'type', 'veth', 'peer', 'name', 'v1']);
  must(['ip', '-n', ns, 'addr', 'add', cidr, 'dev', 'v0']);
  must(['ip', '-n', ns, 'link', 'set', 'v0', 'up']);
  must(['ip', '-n', ns, 'link', 'set', 'v1', 'up']);
}

/** A bin dir holding `mesh-cni` the way install-cni leaves it (the executable under the plugin's name). */
function pluginBinDir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-cni-bin-'));
  if (bundle) {
    writeFileSync(path.join(dir, 'mesh-cni'), `#!/bin/sh\nexec ${process.execPath} ${path.join(DIST, 'mesh.cjs')} cni-plugin "$@"\n`, {
      mode: 0o755,
    });
  } else {
    symlinkSync(path.join(DIST, 'mesh'), path.join(dir, 'mesh-cni'));
  }
  return dir;
}

/** Listens on :15001 inside the namespace and reports what arrives, as the proxy's outbound listener would see it. */
function listenIn(ns: string, port: number): { received: () => string; ready: Promise<void> } {
  const script = `require('net').createServer((s) => s.on('data', (d) => process.stdout.write(d))).listen(${port}, '0.0.0.0', () => process.stdout.write('LISTENING\\n'))`;
  const child = spawnIn(ns, process.execPath, ['-e', script]);
  let out = '';
  const ready = new Promise<void>((resolve) => {
    child.stdout!.on('data', (d) => {
      out += d;
      if (out.includes('LISTENING')) resolve();
    });
  });
  return { received: () => out, ready };
}

/** Connects from inside the namespace and sends a token; resolves with how the connection went. */
function connectFrom(ns: string, host: string, port: number, token: string): string {
  const script = `const s=require('net').connect(${port}, '${host}', () => { s.end('${token}\\n'); process.stdout.write('connected') }); s.on('error', (e) => { process.stdout.write('error ' + e.code); }); setTimeout(() => process.exit(0), 1500).unref()`;
  return sh(['ip', 'netns', 'exec', ns, process.execPath, '-e', script]).stdout;
}

/** `mesh-iptables --run-validation --skip-rule-apply` as the validation init container runs it (uid/gid 1337). */
function validateIn(ns: string, meshIptables: string[]) {
  return sh([
    ...asUserIn(ns, 1337),
    'env',
    '-u',
    'NODE_OPTIONS',
    ...meshIptables,
    'mesh-iptables',
    '--run-validation',
    '--skip-rule-apply',
    '--probe-timeout',
    '2s',
  ]);
}

t.test('a real chain: bridge + host-local, then mesh-cni', { skip, timeout: 180_000 }, async (t) => {
  const kube = await startKube(t, { crds: 'none', controllerManager: false });
  const runDir = mkdtempSync(path.join(tmpdir(), 'mesh-cni-run-'));
  writeFileSync(path.join(runDir, 'mesh-cni-kubeconfig'), tokenKubeconfig(kube), { mode: 0o600 });
  const binDir = pluginBinDir();

  await kube.api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'shop' } });
  const annotations = {
    'sidecar.mesh.io/status': '{"initContainers":["mesh-validation"],"containers":["mesh-proxy"]}',
    'traffic.sidecar.mesh.io/includeInboundPorts': '8080,9090',
    'traffic.sidecar.mesh.io/excludeOutboundIPRanges': '10.96.0.0/12',
    'traffic.sidecar.mesh.io/excludeOutboundPorts': '5555',
  };
  await kube.api.request('POST', '/api/v1/namespaces/shop/pods', {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'cart-1', namespace: 'shop', annotations },
    spec: {
      initContainers: [{ name: 'mesh-validation', image: 'example.invalid/proxy' }],
      containers: [
        { name: 'cart', image: 'example.invalid/cart' },
        { name: 'mesh-proxy', image: 'example.invalid/proxy', args: ['proxy', 'sidecar'] },
      ],
    },
  });

  const podNs = createNetns(t, 'mesh-cni');
  // 112–199: the pod's outbound excludes 10.96.0.0/12 (10.96–10.111), and a gateway inside it would not be
  // captured (one run in eight failed when the octet was drawn from 100–199)
  const octet = 112 + (randomBytes(1)[0]! % 88);
  const third = randomBytes(1)[0]!;
  const subnet = `10.${octet}.${third}.0/24`;
  const gateway = `10.${octet}.${third}.1`;
  const bridge = `cnimesh${randomBytes(2).toString('hex')}`;
  t.teardown(() => void sh(['ip', 'link', 'del', bridge]));
  const list: Conflist = {
    cniVersion: '1.0.0',
    name: 'mesh-test-net',
    plugins: [
      {
        type: 'bridge',
        bridge,
        isGateway: true,
        ipMasq: false,
        ipam: { type: 'host-local', subnet, routes: [{ dst: '0.0.0.0/0' }], dataDir: mkdtempSync(path.join(tmpdir(), 'mesh-ipam-')) },
      },
      {
        type: 'mesh-cni',
        ipam: {},
        dns: {},
        plugin_log_level: 'debug',
        cni_agent_run_dir: runDir,
        ambient_enabled: false,
        exclude_namespaces: ['kube-system'],
        pod_namespace: 'mesh-system',
      },
    ],
  };
  const args: ChainArgs = {
    containerID: `c${randomBytes(6).toString('hex')}`,
    netns: `/run/netns/${podNs}`,
    ifName: 'eth0',
    args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1;K8S_POD_INFRA_CONTAINER_ID=abc',
    cniPath: [DEBIAN_CNI_DIR, binDir],
  };

  const result = (await chainAdd(list, args)) as any;
  t.equal(result.cniVersion, '1.0.0', 'the chain result comes back in the list version');
  t.match(result.ips, [{ address: new RegExp(`^10\\.${octet}\\.${third}\\.\\d+/24$`), gateway }], "bridge's address passed through mesh-cni");

  // The same settings through mesh-iptables in a namespace of its own (an IPv4 pod, like this one).
  const refNs = createNetns(t, 'mesh-ref');
  addAddress(refNs, '10.9.9.2/24');
  // Istio's plugin: proxy uid/gid 1337, REDIRECT, all outbound except the excluded range, the listed
  // inbound ports, the proxy's status/health/metrics ports excluded inbound, 5555 excluded outbound.
  const meshIptables = bundle ? [process.execPath, path.join(DIST, 'mesh.cjs'), 'agent'] : [path.join(DIST, 'pilot-agent')];
  const ref = sh([
    'ip',
    'netns',
    'exec',
    refNs,
    ...meshIptables,
    'mesh-iptables',
    '-p',
    '15001',
    '-z',
    '15006',
    '-u',
    '1337',
    '-g',
    '1337',
    '-m',
    'REDIRECT',
    '-i',
    '*',
    '-x',
    '10.96.0.0/12',
    '-b',
    '8080,9090',
    '-d',
    '15020,15021,15090',
    '-o',
    '5555',
  ]);
  t.equal(ref.code, 0, `mesh-iptables applied the reference rules: ${ref.stderr}`);
  const podRules = rulesIn(podNs);
  t.match(podRules, /-A MESH_OUTPUT -j MESH_REDIRECT/, 'capture rules are in the pod namespace');
  t.equal(podRules, rulesIn(refNs), 'the pod namespace holds exactly what mesh-iptables produces');

  // The validation init container (mesh-validation, running as the proxy's 1337) finds the capture in place.
  const validated = validateIn(podNs, meshIptables);
  t.equal(validated.code, 0, `validation passes once mesh-cni ran: ${validated.stderr}`);
  t.match(validated.stdout, /validation passed/);

  // A connection from the pod to an outside address lands on the proxy's outbound port.
  const proxy = listenIn(podNs, 15001);
  await proxy.ready;
  const token1 = `redirected-${randomBytes(4).toString('hex')}`;
  t.match(connectFrom(podNs, gateway, 8443, token1), /connected/);
  await waitFor('the connection to the gateway reaches :15001', () => proxy.received().includes(token1), { timeoutMs: 5000, intervalMs: 50 });
  t.pass('connection to an outside port was redirected to 15001');

  // CHECK passes with the rules in place…
  await chainCheck(list, result, args);
  t.pass('CHECK of the whole chain passes');
  // …and fails once a rule is gone.
  must(['ip', 'netns', 'exec', podNs, 'iptables', '-t', 'nat', '-D', 'MESH_OUTPUT', '-j', 'MESH_REDIRECT']);
  const meshConf = { ...list.plugins[1], name: list.name, cniVersion: list.cniVersion, prevResult: result };
  const failed = await execPlugin('mesh-cni', 'CHECK', meshConf, args);
  t.equal(failed.code, 1, 'CHECK fails when a rule is missing');
  t.equal(failed.json?.code, 999);
  t.match(failed.json?.msg, /capture rules of pod shop\/cart-1 are not in place/);
  t.match(failed.json?.details, /MESH_OUTPUT/);

  // DEL: mesh-cni runs first (reverse order) and removes the capture; the pod's traffic then reaches the
  // host on the gateway address instead of :15001.
  const host = net.createServer((s) => s.on('data', (d) => (hostGot += d)));
  let hostGot = '';
  await new Promise<void>((r) => host.listen(8443, gateway, r));
  t.teardown(() => host.close());
  await chainDel(list, result, args, async (type) => {
    if (type !== 'mesh-cni') return;
    t.notMatch(rulesIn(podNs), /MESH_/, 'DEL of mesh-cni removed every MESH_ chain and jump');
    // Without capture the validation container fails with the exit code race repair looks for.
    const invalid = validateIn(podNs, meshIptables);
    t.equal(invalid.code, 126, 'validation exits 126 without capture');
    t.match(invalid.stderr, /Error: iptables validation failed; workload is not ready for Mesh\.\nWhen using Mesh CNI/);
    const token2 = `direct-${randomBytes(4).toString('hex')}`;
    t.match(connectFrom(podNs, gateway, 8443, token2), /connected/);
    await waitFor('the connection reaches the host, not :15001', () => hostGot.includes(token2), { timeoutMs: 5000, intervalMs: 50 });
    t.notOk(proxy.received().includes(token2), 'nothing was redirected after DEL');
  });
  // A second DEL (runtimes retry) of a namespace without rules, or without the namespace, succeeds.
  const again = await execPlugin('mesh-cni', 'DEL', meshConf, args);
  t.equal(again.code, 0, `DEL is idempotent: ${again.stdout}`);
  const gone = await execPlugin('mesh-cni', 'DEL', meshConf, { ...args, netns: '/run/netns/does-not-exist' });
  t.equal(gone.code, 0, 'DEL of a namespace that is already gone succeeds');
});

t.test('VERSION, and CNI error objects for bad input without leaving rules', { skip, timeout: 120_000 }, async (t) => {
  const binDir = pluginBinDir();
  const podNs = createNetns(t, 'mesh-cni');
  addAddress(podNs, '10.9.8.2/24');
  const base: ChainArgs = {
    containerID: 'c1',
    netns: `/run/netns/${podNs}`,
    ifName: 'eth0',
    args: 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=cart-1',
    cniPath: [binDir],
  };
  const before = rulesIn(podNs);

  const v = await execPlugin('mesh-cni', 'VERSION', {}, base);
  t.equal(v.code, 0);
  t.same(v.json, { cniVersion: '1.1.0', supportedVersions: ['0.1.0', '0.2.0', '0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] });

  const runDir = mkdtempSync(path.join(tmpdir(), 'mesh-cni-run-'));
  const conf = { cniVersion: '1.0.0', name: 'net', type: 'mesh-cni', cni_agent_run_dir: runDir, exclude_namespaces: [] };

  // Malformed stdin: the spec's decoding failure.
  const malformed = await execPlugin('mesh-cni', 'ADD', '{"cniVersion": "1.0.0", "name": ', base);
  t.equal(malformed.code, 1);
  t.equal(malformed.json.code, 6, 'malformed configuration: code 6 (decoding failure)');
  t.match(malformed.json.msg, /error unmarshall network config/);

  const noName = await execPlugin('mesh-cni', 'ADD', { cniVersion: '1.0.0', type: 'mesh-cni' }, base);
  t.equal(noName.json?.code, 7, 'no network name: code 7 (invalid network configuration)');

  const badVersion = await execPlugin('mesh-cni', 'ADD', { ...conf, cniVersion: '9.9.9' }, base);
  t.equal(badVersion.json?.code, 1, 'unsupported cniVersion: code 1');

  const noNetns = await execPlugin('mesh-cni', 'ADD', conf, { ...base, netns: '' });
  t.equal(noNetns.code, 1);
  t.same(noNetns.json, { cniVersion: '1.1.0', code: 4, msg: 'required env variables [CNI_NETNS] missing' }, 'missing CNI_NETNS: code 4');

  const checkOld = await execPlugin('mesh-cni', 'CHECK', { ...conf, cniVersion: '0.3.1' }, base);
  t.equal(checkOld.json?.code, 1, 'CHECK needs a 0.4.0+ configuration');

  // An orchestrator that does not answer: Istio's 30 attempts a second apart, then an error.
  const closed = net.createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as net.AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  writeFileSync(
    path.join(runDir, 'mesh-cni-kubeconfig'),
    `apiVersion: v1\nkind: Config\nclusters:\n- name: local\n  cluster:\n    server: https://127.0.0.1:${port}\n    insecure-skip-tls-verify: true\ncontexts:\n- name: c\n  context:\n    cluster: local\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: x\n`,
  );
  const started = Date.now();
  const unreachable = await execPlugin('mesh-cni', 'ADD', conf, base);
  t.equal(unreachable.code, 1);
  t.equal(unreachable.json?.code, 999);
  t.match(unreachable.json?.msg, /failed to get pod shop\/cart-1 from the orchestrator \(30 attempts\)/);
  t.ok(Date.now() - started >= 25_000, 'it kept trying for about 30 s');
  t.equal(rulesIn(podNs), before, 'no rules were left in the pod namespace');
});
