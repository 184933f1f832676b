// `meshctl proxy-config` and `proxy-status` against real Envoy (issue 27 item 4): two pods, each its own network
// namespace with the built daemon on Istio's fixed ports and the same configuration (live-mesh.ts's gateway on
// 8081 and a plaintext mesh), a gateway (`pilot-agent proxy router`, gateway-0.mesh-system) and a sidecar
// (`pilot-agent proxy sidecar`, app-0.default); in one pod the agents run our engine, in the other the
// installed Envoy as their child. Every proxy-config subcommand runs against each proxy, live through its
// admin port and from its saved /config_dump (`-f`), and the two pods' outputs must be the same text.
// Normalised, and why: the proxies' names are the same in both pods (so nothing to do); a dump's version_info
// and last_updated are when and in which push the config arrived, different in any two runs; Envoy's and our
// engine's own version strings (bootstrap, proxy-status's VERSION column) name different programs on purpose.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { built, DIST, type ExecResult } from '../helpers/binary';
import { createNetns, httpGetIn, netnsUnavailable } from '../helpers/netns';
import { tempDir } from '../helpers/temp';
import { envoyMissing, envoyPath, type DataPlane } from '../helpers/envoy';
import { meshctlHome, meshctlIn, startLiveDiscovery, waitForOk, watch } from '../helpers/live-mesh';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable() ?? envoyMissing();
// two pods of three programs each and 80 meshctl runs: more than the default file limit on a loaded machine
t.setTimeout(600_000);

interface Pod {
  ns: string;
  dir: string;
  logs: () => string;
  meshctl(args: readonly string[]): Promise<ExecResult>;
}

const PROXIES = [
  { id: 'gateway-0.mesh-system', admin: 25000, sub: 'router', pod: 'gateway-0', namespace: 'mesh-system' },
  { id: 'app-0.default', admin: 15000, sub: 'sidecar', pod: 'app-0', namespace: 'default' },
] as const;

async function startPod(t: Test, plane: DataPlane): Promise<Pod> {
  const ns = createNetns(t, `mesh-dump-${plane}`);
  const dir = tempDir(t, `mesh-dumps-${plane}-`);
  const out: string[] = [];
  const logs = () => out.join('').slice(-6000);
  const base = await startLiveDiscovery(t, ns, dir, out);
  const binaryPath = plane === 'envoy' ? envoyPath()! : path.join(dir, 'no-envoy-here');
  for (const p of PROXIES) {
    const gw = p.sub === 'router';
    fs.mkdirSync(path.join(dir, p.pod));
    const env: NodeJS.ProcessEnv = {
      ...base,
      POD_NAME: p.pod,
      POD_NAMESPACE: p.namespace,
      INSTANCE_IP: '127.0.0.1',
      ...(gw ? { MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}', PROXY_STATUS_PORT: '25021', PROXY_METRICS_PORT: '25090' } : {}),
      PROXY_CONFIG: JSON.stringify({
        ...(gw ? { statusPort: 25020, proxyAdminPort: 25000 } : {}),
        binaryPath,
        terminationDrainDuration: '1s',
      }),
    };
    // its own process group (`ip netns exec` execs the agent): a SIGKILL to the agent alone would leave its
    // Envoy child running
    const agent = spawn('ip', ['netns', 'exec', ns, path.join(DIST, 'pilot-agent'), 'proxy', p.sub, '--meshConfig', path.join(dir, 'mesh.yaml')], {
      env,
      cwd: path.join(dir, p.pod),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    watch(t, `${plane} ${p.pod}`, agent, out);
    t.teardown(() => {
      try {
        process.kill(-agent.pid!, 'SIGKILL');
      } catch {
        /* gone already */
      }
    });
  }
  await waitForOk(ns, 'http://127.0.0.1:25020/healthz/ready', () => `${plane}: the gateway is not ready:\n${logs()}`);
  await waitForOk(ns, 'http://127.0.0.1:15020/healthz/ready', () => `${plane}: the sidecar is not ready:\n${logs()}`);
  const home = meshctlHome(dir);
  const meshctl = (args: readonly string[]) => meshctlIn(ns, args, { env: { PATH: process.env.PATH, HOME: home } });
  return { ns, dir, logs, meshctl };
}

/** Every proxy-config form compared, each with the arguments after the proxy (or the -f file). */
const FORMS: ReadonlyArray<readonly string[]> = [
  ['cluster'],
  ['listener'],
  ['listener', '--verbose=false'],
  ['route'],
  ['route', '--verbose=false'],
  ['endpoint'],
  ['secret'],
  ['bootstrap', '-o', 'short'],
  ['ecds'],
  ['all'],
];

/** What must differ between two runs and two programs, replaced by a fixed word (see the file's comment). */
export function normalise(text: string): string {
  return routeConfigsSorted(
    text
      // version_info and last_updated of a dump
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
      // the program's own version (bootstrap's summary), Envoy's `1.36.2/...` against our `1.26.x`
      .replace(/^(Envoy version:?\s+|VERSION\s+|Istio version:?\s+).*$/gim, '$1<version>')
      // proxy-status's time since the last push
      .replace(/\((\d+[smhd])+\)/g, '(<age>)')
      // proxy-status <pod>'s time of the last RDS load
      .replace(/last loaded at [^)]*/g, 'last loaded at <time>'),
  );
}

/**
 * Envoy keeps its route configs in hash containers (RouteConfigProviderManagerImpl,
 * source/common/rds/route_config_provider_manager.h: absl::node_hash_set of the static ones, those inline in a
 * listener, and absl::node_hash_map of the RDS ones), so their order in the dump is unspecified; istioctl
 * prints them in dump order (it sorts numeric names only). Each route table's rows are sorted here by route
 * config name, stably: the order of virtual hosts and routes inside one named config is kept and still compared.
 */
function routeConfigsSorted(text: string): string {
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const col = /^NAME(\s+)(VHOST NAME|VIRTUAL HOSTS)/.exec(lines[i]!);
    if (!col) continue;
    const width = 4 + col[1]!.length;
    let j = i + 1;
    while (j < lines.length && lines[j]!.trim() !== '') j++;
    const rows = lines.slice(i + 1, j).map((l, k) => ({ l, k, name: l.slice(0, width).trim() }));
    // unnamed configs (the static listeners' own) cannot be told apart: their rows are sorted whole
    const key = (r: (typeof rows)[number]) => (r.name === '' || r.name === 'route/' ? r.l : r.name);
    rows.sort((x, y) => (key(x) < key(y) ? -1 : key(x) > key(y) ? 1 : x.k - y.k));
    lines.splice(i + 1, j - i - 1, ...rows.map((r) => r.l));
    i = j;
  }
  return lines.join('\n');
}

async function dumpsAndTables(pod: Pod, proxy: (typeof PROXIES)[number]): Promise<Map<string, string>> {
  const file = path.join(pod.dir, `${proxy.pod}-dump.json`);
  const res = httpGetIn(pod.ns, `http://127.0.0.1:${proxy.admin}/config_dump?include_eds=true`);
  fs.writeFileSync(file, res.body);
  const runs: Array<[string, string[]]> = [];
  for (const form of FORMS) {
    const [sub, ...rest] = form;
    runs.push([`${proxy.id} live ${form.join(' ')}`, ['proxy-config', sub!, proxy.id, ...rest]]);
    runs.push([`${proxy.id} file ${form.join(' ')}`, ['proxy-config', sub!, '-f', file, ...rest]]);
  }
  const out = new Map<string, string>();
  // four at a time: the file's time limit holds on a loaded machine
  for (let i = 0; i < runs.length; i += 4) {
    const batch = runs.slice(i, i + 4);
    const results = await Promise.all(batch.map(([, args]) => pod.meshctl(args)));
    batch.forEach(([key], k) => out.set(key, `exit ${results[k]!.code}\n${normalise(results[k]!.stdout)}${results[k]!.stderr}`));
  }
  // proxy-status's per-proxy diff: the daemon's config against the proxy's dump
  const r = await pod.meshctl(['proxy-status', proxy.id]);
  out.set(`${proxy.id} proxy-status`, `exit ${r.code}\n${normalise(r.stdout)}${r.stderr}`);
  return out;
}

t.test('proxy-config tables: real Envoy and our engine, same configuration', { skip, timeout: 600_000 }, async (t) => {
  const [engine, envoy] = await Promise.all([startPod(t, 'engine'), startPod(t, 'envoy')]);
  // the proxies ACK after readiness: wait until both dumps have the gateway's route
  for (const pod of [engine, envoy]) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const r = await pod.meshctl(['proxy-config', 'route', 'gateway-0.mesh-system', '--name', 'http.8081']);
      if (/http\.8081/.test(r.stdout) || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 300));
    }
  }
  const status = await Promise.all([engine, envoy].map((p) => p.meshctl(['proxy-status'])));
  // the columns' widths follow the ages' digits
  const cells = (s: string) => normalise(s).replace(/ +/g, ' ');
  t.equal(cells(status[1]!.stdout), cells(status[0]!.stdout), 'proxy-status: the same table');
  t.match(status[1]!.stdout, /^gateway-0\.mesh-system\s+SYNCED/m, 'the Envoy gateway is SYNCED');
  for (const proxy of PROXIES) {
    const [a, b] = await Promise.all([dumpsAndTables(engine, proxy), dumpsAndTables(envoy, proxy)]);
    for (const [key, text] of a) {
      t.equal(b.get(key), text, `${key}: Envoy's table is the engine's`);
      // istioctl fails as we do when a dump has no ECDS section (neither program has an ECDS filter here)
      if (/ ecds$/.test(key))
        t.match(text, /^exit 1\nError: config dump has no configuration type type.googleapis.com\/envoy.admin.v3.EcdsConfigDump/);
      else t.match(text, /^exit 0\n/, `${key} exits 0`);
    }
  }
});
