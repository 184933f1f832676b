// meshctl against a live mesh with no cluster: the built daemon, an ingress gateway and a sidecar (both
// `pilot-agent proxy …` on our engine) on loopback, and the built meshctl finding them through the
// daemon's debug xDS. The sidecar binds Istio's fixed 15001/15006 and the daemon 15010: everything runs in
// a network namespace of its own. The gateway's admin and status ports are not Istio's defaults, so meshctl
// must learn them from the node metadata the agent sent.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST, type ExecResult } from '../helpers/binary';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { tempDir } from '../helpers/temp';
import { meshctlHome, meshctlIn, startLiveDiscovery, waitForOk, watch } from '../helpers/live-mesh';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable();

interface Mesh {
  ns: string;
  dir: string;
  home: string;
  logs: () => string;
  meshctl(args: readonly string[], env?: NodeJS.ProcessEnv): Promise<ExecResult>;
}

async function startMesh(t: Test): Promise<Mesh> {
  const ns = createNetns(t, 'mesh-ctl');
  const dir = tempDir(t, 'mesh-meshctl-live-');
  const out: string[] = [];
  const logs = () => out.join('').slice(-6000);
  const base = await startLiveDiscovery(t, ns, dir, out);

  for (const [name, sub] of [
    ['gw', 'router'],
    ['app', 'sidecar'],
  ] as const) {
    fs.mkdirSync(path.join(dir, name));
    const env: NodeJS.ProcessEnv =
      name === 'gw'
        ? {
            ...base,
            POD_NAME: 'gateway-0',
            POD_NAMESPACE: 'mesh-system',
            INSTANCE_IP: '127.0.0.1',
            MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
            PROXY_STATUS_PORT: '25021',
            PROXY_METRICS_PORT: '25090',
            // not Istio's 15000/15020: meshctl must read them from the node metadata
            PROXY_CONFIG: JSON.stringify({
              statusPort: 25020,
              proxyAdminPort: 25000,
              binaryPath: path.join(dir, 'no-envoy-here'),
              terminationDrainDuration: '1s',
            }),
          }
        : {
            ...base,
            POD_NAME: 'app-0',
            POD_NAMESPACE: 'default',
            INSTANCE_IP: '127.0.0.1',
            PROXY_CONFIG: JSON.stringify({ binaryPath: path.join(dir, 'no-envoy-here'), terminationDrainDuration: '1s' }),
          };
    const agent = spawnIn(ns, path.join(DIST, 'pilot-agent'), ['proxy', sub, '--meshConfig', path.join(dir, 'mesh.yaml')], {
      env,
      cwd: path.join(dir, name),
    });
    watch(t, name, agent, out);
  }
  await waitForOk(ns, 'http://127.0.0.1:25020/healthz/ready', () => `the gateway is not ready:\n${logs()}`);
  await waitForOk(ns, 'http://127.0.0.1:15020/healthz/ready', () => `the sidecar is not ready:\n${logs()}`);

  const home = meshctlHome(dir);
  const meshctl = (args: readonly string[], env: NodeJS.ProcessEnv = {}) =>
    meshctlIn(ns, args, { env: { PATH: process.env.PATH, HOME: home, ...env } });
  return { ns, dir, home, logs, meshctl };
}

/** Runs until check passes (the proxies' ACKs arrive after their readiness). */
async function eventually(m: Mesh, args: readonly string[], check: (r: ExecResult) => boolean, ms = 30_000): Promise<ExecResult> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await m.meshctl(args);
    if (check(r) || Date.now() > deadline) return r;
    await new Promise((r) => setTimeout(r, 300));
  }
}

t.test('meshctl with no cluster, against a live daemon, gateway and sidecar', { skip, timeout: 240_000 }, async (t) => {
  const m = await startMesh(t);
  const ok = (t: Test, r: ExecResult, what: string) => {
    t.equal(r.code, 0, `${what} exits 0`);
    t.equal(r.stderr, '', `${what} writes nothing to stderr`);
    if (r.code !== 0) t.comment(`${r.stderr}\n${m.logs()}`);
  };

  await t.test('proxy-status: both proxies, all SYNCED', async (t) => {
    const synced = (line: string | undefined) => !!line && (line.match(/SYNCED \(\d+[smhd]\)/g)?.length ?? 0) >= 3;
    const r = await eventually(
      m,
      ['proxy-status'],
      (r) => r.stdout.split('\n').filter((l) => /^(gateway-0|app-0)/.test(l) && synced(l)).length === 2,
    );
    ok(t, r, 'proxy-status');
    const lines = r.stdout.trimEnd().split('\n');
    t.match(lines[0], /^NAME\s+CLUSTER\s+CDS\s+LDS\s+EDS\s+RDS\s+ECDS\s+MESHD\s+VERSION$/, 'the header is Istio’s');
    const gw = lines.find((l) => l.startsWith('gateway-0.mesh-system '));
    const app = lines.find((l) => l.startsWith('app-0.default '));
    t.ok(gw && synced(gw), `the gateway is SYNCED: ${gw}`);
    t.ok(app && synced(app), `the sidecar is SYNCED: ${app}`);
    t.match(gw, /\s1\.26\.\d+\S*$/, 'the gateway reports its version');

    const ns = await m.meshctl(['proxy-status', '-n', 'mesh-system']);
    t.notMatch(ns.stdout, /app-0/, '-n keeps the namespace’s proxies');
    t.match(ns.stdout, /gateway-0\.mesh-system/);
  });

  await t.test('proxy-status <pod>: the daemon’s config and the proxy’s agree', async (t) => {
    const r = await m.meshctl(['proxy-status', 'gateway-0.mesh-system']);
    ok(t, r, 'proxy-status gateway-0.mesh-system');
    t.match(r.stdout, /^Clusters Match$/m);
    t.match(r.stdout, /^Listeners Match$/m);
    t.match(r.stdout, /^Routes Match/m);
  });

  await t.test('proxy-config route/cluster/listener/endpoint of the gateway', async (t) => {
    const route = await m.meshctl(['proxy-config', 'route', 'gateway-0.mesh-system']);
    ok(t, route, 'proxy-config route');
    t.match(route.stdout, /^NAME\s+VHOST NAME\s+DOMAINS\s+MATCH\s+VIRTUAL SERVICE$/m);
    t.match(route.stdout, /^http\.8081\s+\*:8081\s+\*\s+\/\*\s+gw\.mesh-system$/m, 'the gateway’s route, from its VirtualService');

    // the same table from the proxy's dump saved to a file
    const dump = path.join(m.dir, 'gateway-dump.json');
    fs.writeFileSync(dump, httpGetIn(m.ns, 'http://127.0.0.1:25000/config_dump').body);
    const fromFile = await m.meshctl(['proxy-config', 'route', '--file', dump]);
    ok(t, fromFile, 'proxy-config route --file');
    t.equal(fromFile.stdout, route.stdout, 'the saved dump gives the same table');

    const cluster = await m.meshctl(['pc', 'cluster', 'gateway-0.mesh-system', '--fqdn', 'backend.example.com']);
    ok(t, cluster, 'proxy-config cluster --fqdn');
    t.match(cluster.stdout, /^SERVICE FQDN\s+PORT\s+SUBSET\s+DIRECTION\s+TYPE\s+DESTINATION RULE$/m);
    t.match(cluster.stdout, /^backend\.example\.com\s+80\s+-\s+outbound\s+\S+/m);
    t.equal(cluster.stdout.trimEnd().split('\n').length, 2, '--fqdn keeps that service alone');

    const json = await m.meshctl(['pc', 'cluster', 'gateway-0.mesh-system', '--fqdn', 'backend.example.com', '-o', 'json']);
    ok(t, json, 'proxy-config cluster -o json');
    const clusters = JSON.parse(json.stdout) as Array<{ name: string }>;
    t.same(
      clusters.map((c) => c.name),
      ['outbound|80||backend.example.com'],
    );

    const listener = await m.meshctl(['pc', 'listener', 'gateway-0.mesh-system']);
    ok(t, listener, 'proxy-config listener');
    t.match(listener.stdout, /^0\.0\.0\.0\s+8081\s+ALL\s+Route: http\.8081$/m);

    const sidecar = await m.meshctl(['pc', 'listener', 'app-0.default', '--port', '15006']);
    ok(t, sidecar, 'proxy-config listener of the sidecar');
    t.match(sidecar.stdout, /^0\.0\.0\.0\s+15006\s+/m, 'the sidecar’s virtualInbound');
    t.notMatch(sidecar.stdout, /15001/, '--port filters');

    const ep = await m.meshctl(['pc', 'endpoint', 'gateway-0.mesh-system', '--cluster', 'outbound|80||backend.example.com']);
    ok(t, ep, 'proxy-config endpoint --cluster');
    t.match(ep.stdout, /^127\.0\.0\.1:80\s+HEALTHY\s+OK\s+outbound\|80\|\|backend\.example\.com$/m);
  });

  await t.test('experimental proxy-stats', async (t) => {
    const r = await m.meshctl(['x', 'proxy-stats', 'gateway-0.mesh-system']);
    ok(t, r, 'x proxy-stats');
    t.match(r.stdout, /^\S+: \d+$/m, 'Envoy’s name: value lines');
    const prom = await m.meshctl(['x', 'proxy-stats', 'gateway-0.mesh-system', '-o', 'prom']);
    ok(t, prom, 'x proxy-stats -o prom');
    t.match(prom.stdout, /^# TYPE \S+ (counter|gauge|histogram)$/m);
    const merged = await m.meshctl(['x', 'proxy-stats', 'gateway-0.mesh-system', '-o', 'prom-merged']);
    ok(t, merged, 'x proxy-stats -o prom-merged');
    t.match(merged.stdout, /^# TYPE /m);
  });

  await t.test('proxy-config log --level changes the proxy’s log level', async (t) => {
    const before = httpGetIn(m.ns, 'http://127.0.0.1:25000/logging');
    t.notMatch(before.body, /: debug$/m, 'nothing logs at debug before');
    const r = await m.meshctl(['proxy-config', 'log', 'gateway-0.mesh-system', '--level', 'debug']);
    ok(t, r, 'proxy-config log --level debug');
    t.match(r.stdout, /^gateway-0\.mesh-system:$/m);
    t.match(r.stdout, /: debug$/m);
    const after = httpGetIn(m.ns, 'http://127.0.0.1:25000/logging');
    t.match(after.body, /: debug$/m, 'the gateway’s admin now reports debug');
    const listing = await m.meshctl(['proxy-config', 'log', 'gateway-0.mesh-system']);
    t.match(listing.stdout, /: debug$/m, 'and meshctl reads it back');
    // -r with no cluster: the default level, and no warning about an injector ConfigMap (issue 24)
    const reset = await m.meshctl(['proxy-config', 'log', 'gateway-0.mesh-system', '-r']);
    ok(t, reset, 'proxy-config log -r');
    t.match(reset.stdout, /: warning$/m);
    t.notMatch(reset.stdout, /: debug$/m, 'the levels are back to warning');
  });

  await t.test('proxy-config bootstrap: the engine names its Envoy version', async (t) => {
    const r = await m.meshctl(['proxy-config', 'bootstrap', 'gateway-0.mesh-system', '-o', 'short']);
    ok(t, r, 'proxy-config bootstrap -o short');
    t.match(r.stdout, /^Mesh Version:\s+1\.26\.\d+/m);
    // Istio 1.26 runs Envoy 1.34 (it printed 0.0.0: issue 24)
    t.match(r.stdout, /^Envoy Version:\s+1\.34\.\d+\/\S+$/m);
  });

  await t.test('version, internal-debug', async (t) => {
    const v = await m.meshctl(['x', 'version']);
    ok(t, v, 'x version');
    t.match(v.stdout, /^client version: 1\.26\.\d+/m);
    t.match(v.stdout, /^control plane version: 1\.26\.\d+/m);
    t.match(v.stdout, /^data plane version: 1\.26\.\d+\S* \(2 proxies\)$/m);
    const remote = await m.meshctl(['version', '--remote']);
    ok(t, remote, 'version --remote');
    t.match(remote.stdout, /^control plane version: /m);

    const syncz = await m.meshctl(['x', 'internal-debug', 'syncz']);
    ok(t, syncz, 'x internal-debug syncz');
    const names = (JSON.parse(syncz.stdout) as Array<{ proxy: string }>).map((s) => s.proxy).sort();
    // Istio's /debug/syncz lists every connection, the asking client's own included
    t.ok(names.includes('app-0.default') && names.includes('gateway-0.mesh-system'), names.join(' '));
  });

  await t.test('where the daemon is: flags, MESHCTL_* env, $MESHCONFIG', async (t) => {
    const flags = await m.meshctl(['proxy-status', '--xds-address', '127.0.0.1:15010', '--plaintext'], { HOME: m.dir });
    ok(t, flags, 'with flags and no defaults file');
    t.match(flags.stdout, /gateway-0\.mesh-system/);
    const env = await m.meshctl(['proxy-config', 'route', 'gateway-0.mesh-system'], {
      HOME: m.dir,
      MESHCTL_XDS_ADDRESS: '127.0.0.1:15010',
      MESHCTL_PLAINTEXT: 'true',
    });
    ok(t, env, 'with MESHCTL_* variables');
    t.match(env.stdout, /^http\.8081 /m);
    const file = path.join(m.dir, 'elsewhere.yaml');
    fs.writeFileSync(file, 'xds-address: 127.0.0.1:15010\nplaintext: true\n');
    const other = await m.meshctl(['x', 'version'], { HOME: m.dir, MESHCONFIG: file });
    ok(t, other, 'with $MESHCONFIG');
    t.match(other.stdout, /^control plane version: /m);
  });

  await t.test('failures: one line, exit 1, nothing on stdout', async (t) => {
    const nowhere = { MESHCTL_XDS_ADDRESS: '127.0.0.1:1' };
    for (const [args, line, env] of [
      [['proxy-status', '--xds-address', '127.0.0.1:1', '--plaintext'], /^Error: could not dial 127\.0\.0\.1:1: .+\n$/, {}],
      // proxy-config has no XDS flags (as istioctl's): the address comes from the environment or the file
      [['proxy-config', 'route', 'gateway-0.mesh-system'], /^Error: could not dial 127\.0\.0\.1:1: .+\n$/, nowhere],
      [['x', 'proxy-stats', 'gateway-0.mesh-system'], /^Error: could not dial 127\.0\.0\.1:1: .+\n$/, nowhere],
      [['proxy-config', 'route', 'nosuch-0.default'], /^Error: pod "nosuch-0" not found in namespace "default": .*\n$/, {}],
    ] as const) {
      const r = await m.meshctl(args, env);
      t.equal(r.code, 1, `${args.join(' ')} exits 1`);
      t.equal(r.stdout, '', 'nothing on stdout');
      t.match(r.stderr, line, r.stderr);
    }
    const none = await m.meshctl(['proxy-status'], { HOME: m.dir });
    t.equal(none.code, 1, 'no address anywhere: exit 1');
    t.match(none.stderr, /^Error: no control plane address: give --xds-address/);
  });
});
