// Per-pod footprint of the data plane (issue 15): resident memory of one `pilot-agent proxy` (the agent and,
// when it runs as a separate process, the built-in engine) idle after start and under an open-loop 1000 rps
// HTTP/1.1 load with 1 KB responses, as a gateway and as a sidecar, with the demo's config and with
// --services services in scope. Goals: ≤ 80 MB idle, ≤ 100 MB at 1000 rps (Istio's istio-proxy container is
// reported at 60–72 MB under that load). --planes engine,envoy measures the same pod with a real Envoy as the
// agent's data plane too (scripts/lib/envoy.mjs; its memory counts with the agent's, --concurrency workers) and
// prints engine/Envoy ratios from the same run (issue 27: engine pod ≤ Envoy pod idle, ≤ 1.2× at load).
//   node scripts/bench/footprint.mjs [--binary dist/mesh[,/tmp/other-mesh…]] [--roles gateway,sidecar]
//        [--configs demo,scale] [--services 1000] [--rate 1000] [--duration 10] [--settle 8] [--size 1024]
//        [--connections 64] [--saturate 5] [--saturateConnections 16] [--concurrency 2]
//        [--nodeOptions '<V8/Node flags for the agent>'] [--planes engine,envoy] [--json]
//
// Several --binary (comma-separated) are measured one after the other for each role and config, against the
// same discovery daemon (the first binary's) and backend, and compared with the first as the baseline. Copy
// binaries with `cp` before comparing them: how many of an executable's pages count in RSS depends on how its
// file was written and cached (a file written by the build measures ~10 MB more than a `cp` copy).
//
// Everything runs in a network namespace of its own (the script re-executes itself under `unshare --net`;
// needs root): the sidecar binds Istio's fixed ports, and its outbound traffic is captured by one iptables
// rule (127.0.0.2:8000 → 15001), so SO_ORIGINAL_DST is exercised as in a pod. Processes: the built
// `pilot-discovery discovery --configDir` (the demo's examples/gateway/config with its listener and
// workload ports rewritten, or the xds-scale generator's mesh of --services ServiceEntries plus the same
// backend and gateway), the backend (./gateway/backend.mjs --size), the agent, and the load generator (a
// worker thread of this script).
//
// RSS is VmRSS from /proc summed over the agent and every process under it. Idle: sampled every 500 ms for
// --settle s after the first routed request succeeded, the last sample is reported (and the spread shown).
// Load: requests are sent on a fixed schedule (open loop: a late response does not delay the next request;
// latency is measured from the scheduled time), up to --connections keep-alive connections; the largest
// RSS seen during the --duration s is reported. RSS is split into anonymous memory (heaps: the process's own)
// and file pages (mostly the executable's, shared with every process running the same file). Saturated
// (--saturate s, 0 = skip): --saturateConnections connections send back to back; requests per second and per
// proxy core-second (the throughput a smaller heap must not cost).
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { childPids, cmdline } from './gateway/mesh.mjs';
import { freePort } from '../lib/ports.mjs';
import { startDaemon } from './xds-scale/daemon.mjs';
import { writeConfigDir } from './xds-scale/config.mjs';
import { cpuSeconds, rssBytes } from './xds-scale/proc.mjs';
import { parseOptions } from '../lib/bench.mjs';
import { envoyBinary, envoyMissing } from '../lib/envoy.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');

const OPTIONS = {
  binary: { type: 'list', default: [path.join(ROOT, 'dist', 'mesh')], help: 'the builds measured, comma-separated, in one run' },
  saturate: { type: 'number', min: 0, default: 5, help: 'seconds of the saturated run' },
  saturateConnections: { type: 'number', min: 0, default: 16, help: 'connections of the saturated run' },
  roles: { type: 'list', oneOf: ['gateway', 'sidecar'], default: ['gateway', 'sidecar'], help: 'the proxies measured' },
  configs: { type: 'list', oneOf: ['demo', 'scale'], default: ['demo', 'scale'], help: 'the configurations measured' },
  services: { type: 'number', min: 0, default: 1000, help: 'services of the scale configuration' },
  rate: { type: 'number', min: 0, default: 1000, help: 'requests per second under load' },
  duration: { type: 'number', min: 0, default: 10, help: 'seconds under load' },
  settle: { type: 'number', min: 0, default: 8, help: 'seconds before the idle reading' },
  size: { type: 'number', min: 0, default: 1024, help: 'response bytes' },
  connections: { type: 'number', min: 0, default: 64, help: 'load connections' },
  concurrency: {
    type: 'number',
    min: 0,
    // the product's default: Istio's 2 for a sidecar; a gateway's is one per core, 2 on the 2-core machines we measure on
    default: 2,
    help: "engine workers (and Envoy --concurrency): a sidecar's default; a gateway's on two cores",
  },
  planes: {
    type: 'list',
    oneOf: ['engine', 'envoy'],
    default: ['engine', 'envoy'],
    help: "data planes: the built-in engine, and a real Envoy as the agent's child (the pod is then agent + Envoy)",
  },
  json: { type: 'boolean', help: 'print the results as JSON' },
  nodeOptions: { type: 'string', default: '', help: 'NODE_OPTIONS of the proxies' },
  inNetns: { type: 'boolean', help: 'internal: already inside the network namespace the script makes' },
};
const HERE = path.dirname(new URL(import.meta.url).pathname);
const GOAL_IDLE_MB = 80;
const GOAL_LOAD_MB = 100;
const SIDECAR_VIP = '127.0.0.2';
const SIDECAR_SERVICE_PORT = 8000;
const MB = 1024 * 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------
// The load generator (worker thread): open loop at `rate` requests/s for `durationS`.
if (!isMainThread) {
  const { host, port, hostHeader, rate, durationS, maxConnections, closed } = workerData;
  const request = Buffer.from(`GET /get HTTP/1.1\r\nhost: ${hostHeader}\r\nuser-agent: footprint\r\n\r\n`);
  const idle = [];
  const pending = []; // scheduled times of requests waiting for a connection
  let open = 0;
  let sent = 0;
  let ok = 0;
  let bad = 0;
  let errors = 0;
  const latencies = [];
  const t0 = performance.now();
  const end = t0 + durationS * 1000;
  let stopping = false;

  const connection = () => {
    open++;
    const s = net.connect(port, host);
    s.setNoDelay(true);
    let buf = Buffer.alloc(0);
    let current; // scheduled time of the request in flight
    let need = -1; // bytes of the response still expected once its head is parsed
    const next = () => {
      current = undefined;
      if (pending.length > 0 && !stopping) {
        current = pending.shift();
        s.write(request);
      } else if (closed && !stopping) {
        sent++;
        current = performance.now();
        s.write(request);
      } else idle.push(s);
    };
    s.send = (at) => {
      current = at;
      s.write(request);
    };
    s.on('connect', next);
    s.on('data', (d) => {
      buf = buf.length ? Buffer.concat([buf, d]) : d;
      for (;;) {
        if (need < 0) {
          const e = buf.indexOf('\r\n\r\n');
          if (e < 0) return;
          const head = buf.toString('latin1', 0, e);
          const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
          if (!head.startsWith('HTTP/1.1 200')) bad++;
          need = e + 4 + (cl ? Number(cl[1]) : 0);
        }
        if (buf.length < need) return;
        buf = buf.subarray(need);
        need = -1;
        if (current !== undefined) {
          latencies.push(performance.now() - current);
          ok++;
        }
        next();
      }
    });
    const gone = () => {
      open--;
      const i = idle.indexOf(s);
      if (i >= 0) idle.splice(i, 1);
      if (current !== undefined) errors++;
      current = undefined;
    };
    s.on('error', () => {});
    s.on('close', gone);
  };

  const tick = () => {
    const now = performance.now();
    if (now >= end) {
      stopping = true;
      const durationMs = now - t0;
      latencies.sort((a, b) => a - b);
      const q = (p) => (latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : NaN);
      parentPort.postMessage({
        sent,
        ok,
        bad,
        errors,
        unsent: pending.length,
        rps: ok / (durationMs / 1000),
        p50: q(0.5),
        p99: q(0.99),
        connections: open,
      });
      setTimeout(() => process.exit(0), 50);
      return;
    }
    // closed loop (saturating): each connection sends its next request as its response ends (next())
    const due = closed ? Math.min(sent + maxConnections - open, sent + 1) : Math.floor(((now - t0) / 1000) * rate);
    while (sent < due) {
      const at = closed ? now : t0 + (sent * 1000) / rate;
      sent++;
      const s = idle.pop();
      if (s) s.send(at);
      else {
        pending.push(at);
        if (open < maxConnections) connection();
      }
    }
    setTimeout(tick, 1);
  };
  tick();
} else {
  await main();
}

function runLoad(o) {
  return new Promise((resolve, reject) => {
    const w = new Worker(new URL(import.meta.url), { workerData: o });
    w.once('message', resolve);
    w.once('error', reject);
  });
}

// ---------------------------------------------------------------------------------------------------------

/** The demo's config (examples/gateway/config) with its gateway and workload ports set to this run's. */
function writeDemoConfig(dir, gatewayPort, backendPort) {
  const src = path.join(ROOT, 'examples', 'gateway', 'config');
  for (const f of readdirSync(src)) {
    const text = readFileSync(path.join(src, f), 'utf8')
      .replace(/number: 18080/g, `number: ${gatewayPort}`)
      .replace(/http: 19090/g, `http: ${backendPort}`);
    if (text === readFileSync(path.join(src, f), 'utf8') && f !== 'README')
      throw new Error(`examples/gateway/config/${f}: the ports this script rewrites (18080, 19090) are no longer there`);
    writeFileSync(path.join(dir, f), text);
  }
  // The agents here have no workload certificate (plaintext to discovery): with mesh mTLS (PERMISSIVE by
  // default) a sidecar's inbound chains would wait for one, as Envoy waits for SDS secrets.
  writeFileSync(
    path.join(dir, 'peerauthentication.yaml'),
    'apiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {name: default, namespace: mesh-system}\nspec:\n  mtls: {mode: DISABLE}\n',
  );
}

function sh(args) {
  const r = spawnSync(args[0], args.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
}

/** RssAnon and RssFile (+ RssShmem) of one process in bytes, from /proc/<pid>/status. */
function rssSplit(pid) {
  try {
    const st = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => Number(new RegExp(`^${k}:\\s+(\\d+)\\s+kB`, 'm').exec(st)?.[1] ?? 0) * 1024;
    return { anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem') };
  } catch {
    return { anon: 0, file: 0 };
  }
}

function treeRss(pid) {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) pids.push(...childPids(pids[i]));
  const per = pids.map((p) => ({ pid: p, rss: rssBytes(p) ?? 0, cmd: cmdline(p), ...rssSplit(p) }));
  return { total: per.reduce((s, x) => s + x.rss, 0), anon: per.reduce((s, x) => s + x.anon, 0), file: per.reduce((s, x) => s + x.file, 0), per };
}

function treeCpu(pid) {
  const pids = [pid];
  for (let i = 0; i < pids.length; i++) pids.push(...childPids(pids[i]));
  return pids.reduce((s, p) => s + (cpuSeconds(p) ?? 0), 0);
}

async function startBackend(size) {
  const child = spawn(process.execPath, [path.join(HERE, 'gateway', 'backend.mjs'), '--size', String(size)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const m = /listening (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (c) => reject(new Error(`backend exited ${c}`)));
  });
  return { child, port };
}

async function startAgent(o, binary, role, dir, discovery, plane) {
  const ports = { status: await freePort(), admin: await freePort(), proxyStatus: await freePort(), proxyMetrics: await freePort() };
  writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${discovery}\n  controlPlaneAuthPolicy: NONE\n`);
  const env = {
    PATH: '/usr/bin:/bin', // no `envoy` on it: the built-in engine serves
    HOME: process.env.HOME ?? '/root',
    POD_NAME: role === 'gateway' ? 'gw-footprint-0' : 'app-footprint-0',
    POD_NAMESPACE: role === 'gateway' ? 'mesh-system' : 'default',
    INSTANCE_IP: '127.0.0.1',
    ...(role === 'gateway' ? { MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}' } : {}),
    PROXY_STATUS_PORT: String(ports.proxyStatus),
    PROXY_METRICS_PORT: String(ports.proxyMetrics),
    PROXY_CONFIG: JSON.stringify({
      statusPort: ports.status,
      proxyAdminPort: ports.admin,
      drainDuration: '1s',
      terminationDrainDuration: '1s',
      ...(plane === 'envoy' ? { binaryPath: envoyBinary() } : {}),
    }),
    ...(o.nodeOptions ? { NODE_OPTIONS: o.nodeOptions } : {}),
  };
  const child = spawn(
    binary,
    ['pilot-agent', 'proxy', role === 'gateway' ? 'router' : 'sidecar', '--meshConfig', 'mesh.yaml', '--concurrency', String(o.concurrency)],
    { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  const keep = (d) => {
    out += d;
    if (out.length > 100_000) out = out.slice(-50_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  return { child, ports, output: () => out };
}

/** One request through the proxy: the status code, or 0 when it failed. */
function probe(host, port, hostHeader) {
  return new Promise((resolve) => {
    const s = net.connect(port, host, () => s.write(`GET /get HTTP/1.1\r\nhost: ${hostHeader}\r\nconnection: close\r\n\r\n`));
    let d = '';
    s.setTimeout(3000, () => s.destroy());
    s.on('data', (x) => (d += x));
    s.on('error', () => {});
    s.on('close', () => resolve(Number(/^HTTP\/1\.1 (\d+)/.exec(d)?.[1] ?? 0)));
  });
}

async function measure(o, binary, role, config, discovery, gatewayPort, plane) {
  const dir = mkdtempSync(path.join(tmpdir(), `mesh-footprint-${role}-`));
  const agent = await startAgent(o, binary, role, dir, discovery.grpc, plane);
  try {
    const target =
      role === 'gateway'
        ? { host: '127.0.0.1', port: gatewayPort, hostHeader: `127.0.0.1:${gatewayPort}` }
        : { host: SIDECAR_VIP, port: SIDECAR_SERVICE_PORT, hostHeader: `httpbin.demo.svc.cluster.local:${SIDECAR_SERVICE_PORT}` };
    const started = Date.now();
    for (;;) {
      if (agent.child.exitCode !== null) throw new Error(`the ${role} exited (${agent.child.exitCode}):\n${agent.output().slice(-4000)}`);
      if ((await probe(target.host, target.port, target.hostHeader)) === 200) break;
      if (Date.now() - started > 90_000) throw new Error(`no 200 through the ${role} within 90 s:\n${agent.output().slice(-4000)}`);
      await sleep(200);
    }
    const readyMs = Date.now() - started;
    const idleSamples = [];
    for (let i = 0; i < Math.max(1, Math.round(o.settle * 2)); i++) {
      await sleep(500);
      idleSamples.push(treeRss(agent.child.pid).total);
    }
    const idle = treeRss(agent.child.pid);
    const cpu0 = treeCpu(agent.child.pid);
    let max = idle.total;
    const sampler = setInterval(() => {
      const r = treeRss(agent.child.pid).total;
      if (r > max) max = r;
    }, 200);
    const load = await runLoad({ ...target, rate: o.rate, durationS: o.duration, maxConnections: o.connections });
    clearInterval(sampler);
    const cpu = treeCpu(agent.child.pid) - cpu0;
    const after = treeRss(agent.child.pid).total;
    let saturated;
    if (o.saturate > 0) {
      const c0 = treeCpu(agent.child.pid);
      const r = await runLoad({ ...target, closed: true, durationS: o.saturate, maxConnections: o.saturateConnections });
      const c = treeCpu(agent.child.pid) - c0;
      saturated = { ...r, cpuS: c, rpsPerCoreS: c > 0 ? r.ok / c : NaN };
    }
    return {
      binary,
      plane,
      role,
      config,
      readyMs,
      processes: idle.per.length,
      idleMB: idle.total / MB,
      idleAnonMB: idle.anon / MB,
      idleFileMB: idle.file / MB,
      idleMinMB: Math.min(...idleSamples) / MB,
      idleMaxMB: Math.max(...idleSamples) / MB,
      perProcessMB: idle.per.map((p) => ({ pid: p.pid, mb: p.rss / MB, cmd: p.cmd.split(' ').slice(0, 4).join(' ') })),
      loadMaxMB: Math.max(max, after) / MB,
      load,
      cpuS: cpu,
      saturated,
    };
  } finally {
    agent.child.kill('SIGTERM');
    const t = setTimeout(() => agent.child.kill('SIGKILL'), 10_000);
    if (agent.child.exitCode === null && agent.child.signalCode === null) await new Promise((r) => agent.child.once('exit', r));
    clearTimeout(t);
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main() {
  const { binary, ...rest } = parseOptions(
    'scripts/bench/footprint.mjs',
    'Memory of the gateway and the sidecar, idle and under load, in a network namespace of its own (as root).',
    OPTIONS,
  );
  const o = { ...rest, binaries: binary.map((b) => path.resolve(b)) };
  if (o.planes.includes('envoy') && envoyMissing()) {
    if (!o.inNetns) console.log(`note: ${envoyMissing()}; only the engine is measured`);
    o.planes = o.planes.filter((p) => p !== 'envoy');
  }
  if (!o.inNetns) {
    if (process.getuid?.() !== 0) throw new Error('footprint.mjs needs root: it runs in a network namespace of its own (unshare --net)');
    const r = spawnSync('unshare', ['--net', process.execPath, new URL(import.meta.url).pathname, ...process.argv.slice(2), '--inNetns'], {
      stdio: 'inherit',
    });
    process.exit(r.status ?? 1);
  }
  sh(['ip', 'link', 'set', 'lo', 'up']);
  // The sidecar's captured outbound traffic: the service address 127.0.0.2:8000 to virtualOutbound (15001).
  if (o.roles.includes('sidecar')) {
    sh(['ip', 'addr', 'add', `${SIDECAR_VIP}/32`, 'dev', 'lo']);
    const ipt = spawnSync('iptables', ['-V']).status === 0 ? 'iptables' : 'iptables-legacy';
    sh([
      ipt,
      '-t',
      'nat',
      '-A',
      'OUTPUT',
      '-p',
      'tcp',
      '-d',
      SIDECAR_VIP,
      '--dport',
      String(SIDECAR_SERVICE_PORT),
      '-j',
      'REDIRECT',
      '--to-ports',
      '15001',
    ]);
  }
  const backend = await startBackend(o.size);
  const results = [];
  const loadavg = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  try {
    for (const config of o.configs) {
      const dir = mkdtempSync(path.join(tmpdir(), `mesh-footprint-config-`));
      const gatewayPort = await freePort();
      if (config === 'demo') writeDemoConfig(dir, gatewayPort, backend.port);
      else {
        writeConfigDir(dir, o.services);
        const own = path.join(dir, 'footprint');
        cpSync(path.join(ROOT, 'examples', 'gateway', 'config'), own, { recursive: true });
        writeDemoConfig(own, gatewayPort, backend.port);
      }
      const discovery = await startDaemon([o.binaries[0], 'pilot-discovery'], ['--configDir', dir]);
      try {
        for (const role of o.roles) {
          for (const binary of o.binaries) {
            for (const plane of o.planes) {
              // Envoy is the same for every build: measured with the first only
              if (plane === 'envoy' && binary !== o.binaries[0]) continue;
              const r = await measure(o, binary, role, config, discovery, gatewayPort, plane);
              results.push(r);
              if (!o.json) print(r);
            }
          }
        }
      } finally {
        await discovery.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    }
  } finally {
    backend.child.kill('SIGTERM');
  }
  if (o.json)
    console.log(
      JSON.stringify(
        {
          loadavg,
          options: {
            rate: o.rate,
            duration: o.duration,
            size: o.size,
            services: o.services,
            concurrency: o.concurrency,
            saturate: o.saturate,
            saturateConnections: o.saturateConnections,
          },
          results,
          goals: { idleMB: GOAL_IDLE_MB, loadMB: GOAL_LOAD_MB },
        },
        null,
        2,
      ),
    );
  else {
    console.log(`\nload average at start: ${loadavg}`);
    const sat = o.saturate > 0;
    const several = o.binaries.length > 1;
    console.log(
      `${'role/config'.padEnd(18)} ${several ? 'binary'.padEnd(22) : ''}${'idle MB'.padStart(8)} ${'anon'.padStart(6)} ${'file'.padStart(6)} ${'÷80'.padStart(6)} ${`@${o.rate}rps MB`.padStart(13)} ${'÷100'.padStart(6)} ${'rps'.padStart(7)} ${'p99 ms'.padStart(8)} ${'cpu s'.padStart(6)}` +
        (sat ? ` ${'sat rps'.padStart(8)} ${'rps/core-s'.padStart(10)}` : ''),
    );
    for (const r of results) {
      const base = results.find((b) => b.role === r.role && b.config === r.config && b.binary === o.binaries[0] && b.plane === 'engine');
      const vs = (v, b) => (several && r !== base && b ? ` (×${(v / b).toFixed(2)})` : '');
      console.log(
        `${`${r.role}/${r.config}${r.plane === 'envoy' ? '/envoy' : ''}`.padEnd(18)} ${several ? path.basename(r.binary).slice(0, 21).padEnd(22) : ''}${r.idleMB.toFixed(1).padStart(8)} ${r.idleAnonMB.toFixed(1).padStart(6)} ${r.idleFileMB.toFixed(1).padStart(6)} ${(r.idleMB / GOAL_IDLE_MB).toFixed(2).padStart(6)} ${r.loadMaxMB.toFixed(1).padStart(13)} ${(r.loadMaxMB / GOAL_LOAD_MB).toFixed(2).padStart(6)} ${r.load.rps.toFixed(0).padStart(7)} ${r.load.p99.toFixed(1).padStart(8)} ${r.cpuS.toFixed(1).padStart(6)}` +
          (sat ? ` ${r.saturated.rps.toFixed(0).padStart(8)} ${r.saturated.rpsPerCoreS.toFixed(0).padStart(10)}` : '') +
          vs(r.idleMB, base?.idleMB) +
          (several && r !== base ? ` idle, ×${(r.loadMaxMB / base.loadMaxMB).toFixed(2)} load, ×${(r.cpuS / base.cpuS).toFixed(2)} cpu` : '') +
          (sat && several && r !== base ? `, ×${(r.saturated.rpsPerCoreS / base.saturated.rpsPerCoreS).toFixed(2)} rps/core-s` : ''),
      );
    }
    // the yardstick (issue 27): the pod with Envoy (agent + Envoy) against the pod with the engine, same run
    for (const v of results.filter((r) => r.plane === 'envoy')) {
      const e = results.find((r) => r.plane === 'engine' && r.role === v.role && r.config === v.config && r.binary === o.binaries[0]);
      if (!e) continue;
      console.log(
        `engine/Envoy pod ${v.role}/${v.config}: idle ${e.idleMB.toFixed(1)} / ${v.idleMB.toFixed(1)} MB = ${(e.idleMB / v.idleMB).toFixed(2)}× (goal ≤ 1.0×), ` +
          `at ${o.rate} rps ${e.loadMaxMB.toFixed(1)} / ${v.loadMaxMB.toFixed(1)} MB = ${(e.loadMaxMB / v.loadMaxMB).toFixed(2)}× (goal ≤ 1.2×)`,
      );
    }
    for (const binary of o.binaries) {
      const mine = results.filter((r) => r.binary === binary && r.plane === 'engine');
      const worst = { idle: Math.max(...mine.map((r) => r.idleMB)), load: Math.max(...mine.map((r) => r.loadMaxMB)) };
      console.log(
        `${several ? `${binary}: ` : ''}worst: idle ${worst.idle.toFixed(1)} MB (goal ≤ ${GOAL_IDLE_MB}: ${worst.idle <= GOAL_IDLE_MB ? 'met' : 'NOT met'}), at ${o.rate} rps ${worst.load.toFixed(1)} MB (goal ≤ ${GOAL_LOAD_MB}: ${worst.load <= GOAL_LOAD_MB ? 'met' : 'NOT met'})`,
      );
    }
  }
}

function print(r) {
  const name = (cmd) => (/(^|\/)envoy( |$)/.test(cmd.split(' ')[0] ?? '') ? 'Envoy' : cmd.includes(' envoy') ? 'engine' : 'agent');
  const procs = r.perProcessMB.map((p) => `${p.mb.toFixed(1)} MB ${name(p.cmd)}`).join(' + ');
  console.log(
    `${r.role}/${r.config}${r.plane === 'envoy' ? '/envoy' : ''}${path.basename(r.binary) === 'mesh' ? '' : ` [${path.basename(r.binary)}]`}: ready in ${r.readyMs} ms; idle ${r.idleMB.toFixed(1)} MB (${procs}; anon ${r.idleAnonMB.toFixed(1)}, file ${r.idleFileMB.toFixed(1)}; ${r.idleMinMB.toFixed(1)}–${r.idleMaxMB.toFixed(1)} while settling); ` +
      `at ${r.load.rps.toFixed(0)} rps max ${r.loadMaxMB.toFixed(1)} MB (ok ${r.load.ok}, non-200 ${r.load.bad}, errors ${r.load.errors}, unsent ${r.load.unsent}, p50 ${r.load.p50.toFixed(1)} ms, p99 ${r.load.p99.toFixed(1)} ms, ${r.load.connections} connections, proxy cpu ${r.cpuS.toFixed(1)} s)` +
      (r.saturated
        ? `; saturated ${r.saturated.rps.toFixed(0)} rps (non-200 ${r.saturated.bad}, errors ${r.saturated.errors}), ${r.saturated.rpsPerCoreS.toFixed(0)} per proxy core-second`
        : ''),
  );
}
