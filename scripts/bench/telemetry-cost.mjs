// The cost of Istio's standard metrics in the engine (issue 26's goals), in one run:
//   node scripts/bench/telemetry-cost.mjs [--services 1000] [--duration 8] [--connections 20] [--rounds 3]
//        [--warmup 1] [--scrapes 7] [--binary dist/mesh] [--proxyCpu 1] [--loadCpu 0] [--noPin] [--keep]
//
// Two engines (`pilot-agent envoy -c <bootstrap> --concurrency 1`, the built binary), each a sidecar's outbound
// listener with a sidecar's stats_matcher (Istio's inclusion list) and --services services (a virtual host per service routing to a cluster of its own, each cluster
// with Istio's `istio.services` metadata, all reaching the one backend): "on" has istiod's outbound
// istio.metadata_exchange and istio.stats filters before the router, "off" has not. Both are pinned to
// --proxyCpu, the backend and the load generator (./gateway/load.mjs, autocannon) to --loadCpu.
//   1. idle RSS of each, ready and settled, before any traffic: on − off (goal ≤ 5 MB);
//   2. requests per proxy core-second (completed requests / the engine's CPU seconds) for on and off,
//      alternating on, off, on, off… for --rounds rounds; the ratio of the medians (goal ≥ 0.9×);
//   3. the time of --scrapes GET /stats/prometheus on the admin port of "on" after that traffic (one service
//      called), then again after one request to every service (a series per service, as a sidecar calling all
//      of them would have): median and max wall time (goal < 50 ms), the engine's CPU time per scrape (what the
//      scrape costs the engine, less hit by a busy machine than the wall time), the size of the answer, and the
//      engine's RSS after the scrapes; both figures side by side at the end. The client only counts the bytes.
//      Yardstick: a plain node HTTP server on the engine's CPU answering as many bytes from memory (moving the
//      answer through loopback TCP costs that much whatever renders it): same-run ratios of wall and CPU time.
// --scrapeOnly skips 2; --concurrency N runs the engines with N workers (the scrape then merges every worker's
// stats: src/proxy/engine/worker/merge.ts); when N is not --sidecarConcurrency (2, a sidecar's default), a third
// engine ("on", with that many workers) gets traffic to every service and its scrape is timed in the same run.
// --cpuProf <dir> writes V8 CPU profiles of the "on" engine's threads (node --cpu-prof) to find where a scrape goes.
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import path from 'node:path';
import { cannotPin, median, parseOptions, PIN_OPTIONS, pinPrefix } from '../lib/bench.mjs';
import { freePort } from '../lib/ports.mjs';
import { waitFor } from '../lib/wait.mjs';
import { startBackend } from './gateway/backend-run.mjs';
import { runLoad } from './gateway/load-run.mjs';
import { programLinks, stopProcesses } from './gateway/mesh.mjs';
import { cpuSeconds, rssBytes } from './xds-scale/proc.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  services: { type: 'integer', min: 1, default: 1000, help: 'services (virtual hosts and clusters) in each engine' },
  duration: { type: 'number', min: 1, default: 8, help: 'seconds per throughput round and engine' },
  connections: { type: 'integer', min: 1, default: 20, help: 'load connections' },
  rounds: { type: 'integer', min: 1, default: 3, help: 'alternating on/off rounds' },
  warmup: { type: 'number', min: 0, default: 1, help: 'seconds of warm-up per run' },
  scrapes: { type: 'integer', min: 1, default: 7, help: 'timed /stats/prometheus scrapes' },
  scrapeOnly: { type: 'boolean', help: 'skip the throughput rounds (idle memory and scrapes only)' },
  concurrency: { type: 'integer', min: 1, default: 1, help: 'engine workers (--concurrency of each engine)' },
  sidecarConcurrency: {
    type: 'integer',
    min: 1,
    default: 2,
    help: 'workers of a third engine ("on") whose scrape is timed too when --concurrency differs: a sidecar\'s default (ProxyConfig.concurrency 2)',
  },
  binary: { type: 'path', default: path.join(ROOT, 'dist', 'mesh'), help: 'the build measured' },
  cpuProf: { type: 'path', help: 'write V8 CPU profiles of the "on" engine (every thread) into this directory' },
  ...PIN_OPTIONS,
  keep: { type: 'boolean', help: 'keep the work directory' },
};

const children = [];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const mib = (b) => (b / 1048576).toFixed(1);
const host = (i) => `svc-${i}.bench.svc.cluster.local`;

// A sidecar's node metadata (Istio's testdata/client_node_metadata.json.tmpl, trimmed).
const NODE = {
  id: 'sidecar~10.0.0.1~productpage-v1-84975bc778-pxz2w.default~default.svc.cluster.local',
  metadata: {
    LABELS: { app: 'productpage', version: 'v1', 'service.mesh.io/canonical-name': 'productpage', 'service.mesh.io/canonical-revision': 'v1' },
    NAME: 'productpage-v1-84975bc778-pxz2w',
    NAMESPACE: 'default',
    CLUSTER_ID: 'Kubernetes',
    OWNER: 'kubernetes://apis/apps/v1/namespaces/default/deployments/productpage-v1',
    WORKLOAD_NAME: 'productpage-v1',
  },
};
// istiod 1.26's outbound filters (pilot/pkg/xds/filters/filters.go, pilot/pkg/model/telemetry.go)
const TELEMETRY_FILTERS = [
  {
    name: 'istio.metadata_exchange',
    typed_config: {
      '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct',
      type_url: 'type.googleapis.com/io.istio.http.peer_metadata.Config',
      value: { upstream_discovery: [{ istio_headers: {} }, { workload_discovery: {} }], upstream_propagation: [{ istio_headers: {} }] },
    },
  },
  { name: 'istio.stats', typed_config: { '@type': 'type.googleapis.com/stats.PluginConfig' } },
];

const sock = (port) => ({ socket_address: { address: '127.0.0.1', port_value: port } });

function bootstrap(o) {
  const clusters = [];
  const vhosts = [];
  for (let i = 0; i < o.services; i++) {
    const name = `outbound|80||${host(i)}`;
    clusters.push({
      name,
      type: 'STATIC',
      connect_timeout: '1s',
      metadata: { filter_metadata: { istio: { services: [{ host: host(i), name: `svc-${i}`, namespace: 'bench' }] } } },
      load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: sock(o.backend) } }] }] },
    });
    vhosts.push({
      name: `${host(i)}:80`,
      domains: [host(i), `svc-${i}`, `svc-${i}.bench`],
      routes: [{ match: { prefix: '/' }, route: { cluster: name } }],
    });
  }
  const hcm = {
    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
    stat_prefix: 'outbound_0.0.0.0_80',
    route_config: { name: '80', virtual_hosts: vhosts },
    http_filters: [
      ...(o.telemetry ? TELEMETRY_FILTERS : []),
      { name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } },
    ],
  };
  return {
    node: NODE,
    // the stats a sidecar's bootstrap lets through (src/agent/bootstrap.ts, Istio's default inclusion list)
    stats_config: {
      stats_matcher: {
        inclusion_list: {
          patterns: [
            { prefix: 'reporter=' },
            ...['cluster_manager', 'listener_manager', 'server', 'cluster.xds-grpc', 'wasm'].map((prefix) => ({ prefix })),
            ...['rbac.allowed', 'rbac.denied', 'shadow_allowed', 'shadow_denied'].map((suffix) => ({ suffix })),
            { safe_regex: { regex: 'vhost\\.*\\.route\\.*' } },
            { prefix: 'component' },
            { prefix: 'istio' },
            { prefix: 'mesh' },
          ],
        },
      },
    },
    admin: { address: sock(o.admin) },
    static_resources: {
      listeners: [
        {
          name: '0.0.0.0_80',
          address: sock(o.port),
          traffic_direction: 'OUTBOUND',
          filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: hcm }] }],
        },
      ],
      clusters,
    },
  };
}

/** GET with node:http (fetch does not let a caller set Host). */
function get(url, headers = {}, { countOnly = false } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent: false, timeout: 10_000 }, (res) => {
      const chunks = [];
      let size = 0;
      res.on('data', (d) => {
        size += d.length;
        if (!countOnly) chunks.push(d);
      });
      res.on('end', () => resolve({ status: res.statusCode, size, body: countOnly ? '' : Buffer.concat(chunks).toString() }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

async function startEngine(opts, dir, agent, backend, telemetry, concurrency = opts.concurrency) {
  const port = await freePort();
  const admin = await freePort();
  const file = path.join(dir, `bootstrap-${telemetry ? 'on' : 'off'}-${concurrency}.json`);
  writeFileSync(file, JSON.stringify(bootstrap({ services: opts.services, backend, port, admin, telemetry })));
  // node --cpu-prof runs the bundle as pilot-agent (its first argument names the program)
  const program =
    telemetry && opts.cpuProf
      ? [process.execPath, '--cpu-prof', `--cpu-prof-dir=${opts.cpuProf}`, path.join(path.dirname(opts.binary), 'mesh.cjs'), 'pilot-agent']
      : agent;
  const argv = [...pinPrefix(opts.pin, opts.proxyCpu), ...program, 'envoy', '-c', file, '--concurrency', String(concurrency), '-l', 'warning'];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const url = `http://127.0.0.1:${port}/bench`;
  await waitFor(
    () => `the engine (${telemetry ? 'on' : 'off'}) did not serve:\n${out}`,
    async () => {
      if (child.exitCode !== null) throw new Error(`the engine exited ${child.exitCode}:\n${out}`);
      return (await get(url, { host: host(0) }).catch(() => ({ status: 0 }))).status === 200;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
  return { pid: child.pid, url, admin: `http://127.0.0.1:${admin}` };
}

/** One saturating run against `e`: completed rps and requests per engine core-second. */
async function throughput(opts, e) {
  const cpu0 = cpuSeconds(e.pid) ?? 0;
  const t0 = process.hrtime.bigint();
  const r = await runLoad(
    e.url,
    { connections: opts.connections, duration: opts.duration, warmup: opts.warmup, headers: { host: host(0) } },
    pinPrefix(opts.pin, opts.loadCpu),
  );
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = (cpuSeconds(e.pid) ?? cpu0) - cpu0;
  // as gateway.mjs: completed rps over the engine's share of a core across the run
  const cpuShare = cpu / wall;
  return { rps: r.rps, perCore: cpuShare > 0 ? r.rps / cpuShare : NaN, cpuShare, errors: r.errors + r.non2xx };
}

/** Alternating saturated runs of on and off: requests per engine core-second, and the ratio of the medians. */
async function throughputRounds(opts, on, off) {
  const runs = { on: [], off: [] };
  for (let round = 1; round <= opts.rounds; round++) {
    for (const [name, e] of [
      ['on', on],
      ['off', off],
    ]) {
      const r = await throughput(opts, e);
      runs[name].push(r);
      console.log(
        `round ${round} ${name.padEnd(3)} ${r.rps.toFixed(0).padStart(6)} rps, engine cpu ${(r.cpuShare * 100).toFixed(0)}%, ${r.perCore.toFixed(0)} requests per core-second${r.errors ? `, ${r.errors} errors` : ''}`,
      );
    }
  }
  const mOn = median(runs.on.map((r) => r.perCore));
  const mOff = median(runs.off.map((r) => r.perCore));
  console.log(`requests per core-second (median): on ${mOn.toFixed(0)}, off ${mOff.toFixed(0)}, on/off ${(mOn / mOff).toFixed(3)}×  goal ≥ 0.9×`);
  console.log(
    `rps (median): on ${median(runs.on.map((r) => r.rps)).toFixed(0)}, off ${median(runs.off.map((r) => r.rps)).toFixed(0)}, on/off ${(median(runs.on.map((r) => r.rps)) / median(runs.off.map((r) => r.rps))).toFixed(3)}×`,
  );
}

// The yardstick of a scrape: a plain node HTTP server, on the engine's CPU, sending the same number of bytes from
// memory in 128 KiB pieces (what moving an answer that size through loopback TCP costs, whatever renders it).
const YARDSTICK = `const http = require('node:http');
const b = Buffer.alloc(Number(process.argv[1]), 97);
const pieces = [];
for (let i = 0; i < b.length; i += 131072) pieces.push(b.subarray(i, i + 131072));
http.createServer((q, r) => {
  r.writeHead(200);
  (async () => {
    for (const p of pieces) {
      r.write(p);
      if (r.writableLength > 1048576) await new Promise((d) => r.once('drain', d));
    }
    r.end();
  })();
}).listen(Number(process.argv[2]), '127.0.0.1', () => console.log('ready'));`;

/** --scrapes timed GETs of the yardstick server answering `size` bytes: median wall and its CPU per answer. */
async function yardstick(opts, size) {
  const port = await freePort();
  const argv = [...pinPrefix(opts.pin, opts.proxyCpu), process.execPath, '-e', YARDSTICK, String(size), String(port)];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise((resolve) => child.stdout.once('data', resolve));
  const url = `http://127.0.0.1:${port}/`;
  await get(url, {}, { countOnly: true });
  const times = [];
  const cpu0 = cpuSeconds(child.pid) ?? 0;
  for (let i = 0; i < opts.scrapes; i++) {
    const t0 = performance.now();
    await get(url, {}, { countOnly: true });
    times.push(performance.now() - t0);
  }
  const cpu = (((cpuSeconds(child.pid) ?? cpu0) - cpu0) * 1000) / opts.scrapes;
  child.kill('SIGKILL');
  return { wall: median(times), cpu };
}

/** One request to every service of `e` (50 at a time): a series per service. */
async function everyService(opts, e) {
  for (let i = 0; i < opts.services; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, opts.services - i) }, (_, j) => get(e.url, { host: host(i + j) })));
  }
  return e;
}

/** --scrapes timed GETs of /stats/prometheus on `e` (the client counts bytes), then one read whole for its series. */
async function scrapes(opts, e, what) {
  const times = [];
  let size = 0;
  const cpu0 = cpuSeconds(e.pid) ?? 0;
  for (let i = 0; i < opts.scrapes; i++) {
    const t0 = performance.now();
    const r = await get(`${e.admin}/stats/prometheus`, {}, { countOnly: true });
    times.push(performance.now() - t0);
    size = r.size;
  }
  const cpu = (((cpuSeconds(e.pid) ?? cpu0) - cpu0) * 1000) / opts.scrapes;
  const series = ((await get(`${e.admin}/stats/prometheus`)).body.match(/^istio_requests_total\{/gm) ?? []).length;
  const wall = median(times);
  const floor = await yardstick(opts, size);
  console.log(
    `/stats/prometheus with ${opts.services} services, ${what} (${series} istio_requests_total series, ${(size / 1048576).toFixed(1)} MiB): ` +
      `median ${wall.toFixed(1)} ms, max ${Math.max(...times).toFixed(1)} ms, engine CPU ${cpu.toFixed(1)} ms per scrape, engine RSS ${mib(rssBytes(e.pid))} MiB  goal < 50 ms; ` +
      `yardstick (the same bytes from a plain node server's memory) ${floor.wall.toFixed(1)} / ${floor.cpu.toFixed(1)} ms: same-run ratio ${(wall / floor.wall).toFixed(2)}× wall, ${(cpu / floor.cpu).toFixed(2)}× CPU`,
  );
  return { wall, cpu };
}

async function main() {
  const { noPin, ...o } = parseOptions(
    'scripts/bench/telemetry-cost.mjs',
    "The cost of Istio's standard metrics: throughput, idle memory, scrape time.",
    OPTIONS,
  );
  const opts = { ...o, pin: !noPin };
  const whyNot = opts.pin ? cannotPin(opts.proxyCpu, opts.loadCpu) : undefined;
  if (whyNot) {
    console.log(`note: not pinning (${whyNot})`);
    opts.pin = false;
  }
  if (!existsSync(opts.binary)) throw new Error(`${opts.binary} is missing: run \`npm run build\` first`);
  const dir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-telemetry-'));
  try {
    const { agentCommand } = programLinks(opts.binary, dir);
    console.log(
      `telemetry cost, node ${process.version}, ${availableParallelism()} cpus (${cpus()[0]?.model ?? '?'}), ${new Date().toISOString()}; ` +
        `${opts.services} services; ${opts.connections} connections × ${opts.duration} s × ${opts.rounds} rounds; ${opts.pin ? `engines on cpu ${opts.proxyCpu}, load on cpu ${opts.loadCpu}` : 'not pinned'}`,
    );
    const { child: backendChild, port: backend } = await startBackend(pinPrefix(opts.pin, opts.loadCpu));
    children.push(backendChild);
    const on = await startEngine(opts, dir, agentCommand, backend, true);
    const off = await startEngine(opts, dir, agentCommand, backend, false);

    // 1. idle memory: ready, one request each (done by the readiness check), settled
    await sleep(5000);
    const idleOn = rssBytes(on.pid);
    const idleOff = rssBytes(off.pid);
    console.log(
      `idle RSS with ${opts.services} services: on ${mib(idleOn)} MiB, off ${mib(idleOff)} MiB, on − off ${mib(idleOn - idleOff)} MiB  goal ≤ 5 MB`,
    );

    // 2. throughput, alternating
    if (!opts.scrapeOnly) await throughputRounds(opts, on, off);

    // 3. the scrape after the traffic above (one service called), then with a series for every service
    const one = await scrapes(opts, on, 'after traffic to one service');
    const every = await scrapes(opts, await everyService(opts, on), 'after traffic to every service');
    console.log(
      `scrape with ${opts.services} services, --concurrency ${opts.concurrency} (median wall / engine CPU per scrape): one service has series ${one.wall.toFixed(1)} / ${one.cpu.toFixed(1)} ms, ` +
        `every service has series ${every.wall.toFixed(1)} / ${every.cpu.toFixed(1)} ms  goal < 50 ms`,
    );
    // a sidecar runs two workers unless told otherwise: its scrape merges both threads' stats (worker/merge.ts)
    if (opts.sidecarConcurrency !== opts.concurrency) {
      const side = await startEngine(opts, dir, agentCommand, backend, true, opts.sidecarConcurrency);
      const c = await scrapes(opts, await everyService(opts, side), `--concurrency ${opts.sidecarConcurrency}, after traffic to every service`);
      console.log(
        `scrape with ${opts.services} services after traffic to every service (median wall / engine CPU per scrape): --concurrency ${opts.concurrency} ` +
          `${every.wall.toFixed(1)} / ${every.cpu.toFixed(1)} ms, --concurrency ${opts.sidecarConcurrency} (a sidecar's default) ${c.wall.toFixed(1)} / ${c.cpu.toFixed(1)} ms; ` +
          `same-run ratio ${(c.wall / every.wall).toFixed(2)}× wall, ${(c.cpu / every.cpu).toFixed(2)}× CPU  goal < 50 ms`,
      );
    }
    console.log(`RSS after traffic and scrapes: on ${mib(rssBytes(on.pid))} MiB, off ${mib(rssBytes(off.pid))} MiB`);
  } finally {
    await stopProcesses(children, []);
    if (!opts.keep) rmSync(dir, { recursive: true, force: true });
    else console.log(`work directory kept: ${dir}`);
  }
}

try {
  await main();
  process.exit(0);
} catch (e) {
  console.error(`telemetry-cost failed: ${e.stack ?? e.message}`);
  await stopProcesses(children, []);
  process.exit(1);
}
