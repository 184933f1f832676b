// Discovery on a large cluster: a real Kubernetes API server (../shared/kube) holding `--services`
// Services, each with one EndpointSlice of `--podsPerService` endpoints whose targetRefs name Pods that
// exist (5000 Services and 10000 Pods by default), and the built `pilot-discovery discovery
// --orchconfig` started against it.
//   node scripts/bench/orch-scale.mjs [--services 5000] [--podsPerService 2] [--burst 500] [--concurrency 32] [--keep]
//        [--reuse DIR]   (an API server left by --keep with the same --services/--podsPerService: no population)
// PILOT_*/MESH_* variables of this process reach the daemon (e.g. PILOT_ENABLE_EDS_DEBOUNCE=false).
//
// Measured (goals of issue 13 in brackets):
// - sync: from the daemon's start to its "orchestrator config synced" line and to /ready [< 10 s];
// - serve: to a connected proxy (./orch-scale/proxy.mjs: CDS, then EDS of every cluster, ACKing) holding
//   the endpoints of every Service;
// - RSS of the daemon (VmRSS, sampled every 100 ms): the peak, and after the burst [< 1 GB];
// - a burst of `--burst` endpoint changes (one EndpointSlice of as many Services each, written as fast as
//   the API server takes them): per change, from just before its write to the ACK of the first EDS
//   response that carries it [p99 < 2 s], from the first write to the last such ACK, and from the last
//   write's answer to it. With Istio's default PILOT_ENABLE_EDS_DEBOUNCE=true a push waits for 100 ms
//   without changes (PILOT_DEBOUNCE_AFTER), so while writes keep coming the earliest changes wait for the
//   whole burst; PILOT_ENABLE_EDS_DEBOUNCE=false pushes endpoint changes as they come.
// The API server's own population time and request rate are printed too (they are not the daemon's).
import { execFile, fork } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { startDaemon } from './xds-scale/daemon.mjs';
import { RssSampler, rssBytes, cpuSeconds } from './xds-scale/proc.mjs';
import { parseOptions } from '../lib/bench.mjs';
import { Api, kubeDir, pool, readEnv } from '../lib/kube.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const BINARY = path.join(ROOT, 'dist', 'pilot-discovery');
const PROXY = path.join(ROOT, 'scripts', 'bench', 'orch-scale', 'proxy.mjs');
const run = promisify(execFile);

const OPTIONS = {
  services: { type: 'integer', min: 1, default: 5000, help: 'Services in the cluster' },
  podsPerService: { type: 'integer', min: 1, default: 2, help: 'endpoints (Pods) per Service' },
  burst: { type: 'integer', min: 1, default: 500, help: 'endpoint changes written at once (≤ --services)' },
  concurrency: { type: 'integer', min: 1, default: 32, help: 'API requests in flight while populating' },
  keep: { type: 'boolean', help: 'leave the API server running for --reuse' },
  reuse: { type: 'string', default: '', help: 'an API server left by --keep with the same --services/--podsPerService: no population' },
};

const nsOf = (i, o) => `bench-${String(Math.floor(i / o.servicesPerNamespace)).padStart(3, '0')}`;
const svcName = (i) => `svc-${String(i).padStart(5, '0')}`;
const podIp = (n) => `10.${16 + Math.floor(n / 62500)}.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
// A fresh second octet per run, so that a reused cluster's slices change again.
const BURST_NET = 200 + Math.floor(Math.random() * 50);
const burstIp = (i) => `10.${BURST_NET}.${Math.floor(i / 250)}.${(i % 250) + 1}`;

function slice(i, o, ips) {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `${svcName(i)}-1`, namespace: nsOf(i, o), labels: { 'kubernetes.io/service-name': svcName(i) } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: ips.map((ip, k) => ({
      addresses: [ip],
      conditions: { ready: true },
      nodeName: `node-${(i + k) % o.nodes}`,
      targetRef: { kind: 'Pod', name: `${svcName(i)}-${k}`, namespace: nsOf(i, o) },
    })),
  };
}

async function populate(api, o) {
  const t0 = performance.now();
  const namespaces = [...new Set(Array.from({ length: o.services }, (_, i) => nsOf(i, o)))];
  await pool(
    Array.from(
      { length: o.nodes },
      (_, n) => () =>
        api.request('POST', '/api/v1/nodes', {
          apiVersion: 'v1',
          kind: 'Node',
          metadata: { name: `node-${n}`, labels: { 'topology.kubernetes.io/region': 'bench', 'topology.kubernetes.io/zone': `zone-${n % 3}` } },
        }),
    ),
    o.concurrency,
  );
  await pool(
    namespaces.map((ns) => () => api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } })),
    o.concurrency,
  );
  const tasks = [];
  for (let i = 0; i < o.services; i++) {
    const ns = nsOf(i, o);
    tasks.push(() =>
      api.request('POST', `/api/v1/namespaces/${ns}/services`, {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: svcName(i), namespace: ns, labels: { app: svcName(i) } },
        spec: { selector: { app: svcName(i) }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
      }),
    );
    const ips = [];
    for (let k = 0; k < o.podsPerService; k++) {
      const ip = podIp(i * o.podsPerService + k);
      ips.push(ip);
      tasks.push(() =>
        api.request('POST', `/api/v1/namespaces/${ns}/pods`, {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `${svcName(i)}-${k}`, namespace: ns, labels: { app: svcName(i), version: 'v1' } },
          spec: {
            nodeName: `node-${(i + k) % o.nodes}`,
            containers: [{ name: 'app', image: 'example.invalid/app:1', ports: [{ containerPort: 8080, name: 'http' }] }],
          },
        }),
      );
    }
    tasks.push(() => api.request('POST', `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`, slice(i, o, ips)));
  }
  let done = 0;
  const progress = setInterval(() => process.stderr.write(`  populated ${done}/${tasks.length} objects\n`), 15_000);
  await pool(
    tasks.map((t) => async () => {
      await t();
      done++;
    }),
    o.concurrency,
  );
  clearInterval(progress);
  return { ms: performance.now() - t0, objects: tasks.length + namespaces.length + o.nodes };
}

// ---- measurements ------------------------------------------------------------------------------

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
};
const mb = (b) => `${(b / 1048576).toFixed(0)} MB`;
const sec = (ms) => `${(ms / 1000).toFixed(2)} s`;
const now = () => performance.timeOrigin + performance.now();

async function main() {
  const o = {
    ...parseOptions('scripts/bench/orch-scale.mjs', 'Discovery on a large cluster: a real API server, the built daemon against it.', OPTIONS),
    servicesPerNamespace: 100,
    nodes: 20,
  };
  if (o.burst > o.services) throw new Error('--burst cannot exceed --services');
  const kube = kubeDir();
  console.log(
    `orchestrator scale: ${o.services} Services, ${o.services * o.podsPerService} Pods, ${o.services} EndpointSlices, burst ${o.burst}; node ${process.version}, ${new Date().toISOString()}`,
  );
  let kubeconfig;
  if (o.reuse) {
    kubeconfig = path.join(o.reuse, 'kubeconfig');
    o.keep = true;
  } else {
    // --keep leaves the API server running for another look; otherwise it ends with this process at the latest.
    const owner = o.keep ? [] : ['--owner', String(process.pid)];
    const { stdout } = await run(path.join(kube, 'start'), [...owner, '--with-crds', 'istio', '--no-controller-manager'], { timeout: 300_000 });
    kubeconfig = stdout.trim().split('\n').pop();
  }
  const dir = path.dirname(kubeconfig);
  const env = readEnv(dir);
  const api = new Api(env, o.concurrency);
  let daemon;
  let proxy;
  try {
    if (!o.reuse) {
      const pop = await populate(api, o);
      console.log(
        `API server populated: ${pop.objects} objects in ${sec(pop.ms)} (${Math.round(pop.objects / (pop.ms / 1000))}/s, ${o.concurrency} at a time)`,
      );
    }
    const apiRss = rssBytes(Number(env.APISERVER_PID));
    console.log(`kube-apiserver RSS ${apiRss ? mb(apiRss) : '?'}`);

    // The daemon runs in its system namespace on a cluster, and its CA keeps the root in a Secret there.
    await api.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } }).catch((e) => {
      if (!/409|AlreadyExists/.test(String(e))) throw e;
    });

    // ---- sync and serve
    const started = now();
    daemon = await startDaemon([BINARY], ['--orchconfig', kubeconfig], {
      env: { PILOT_DEBOUNCE_AFTER: process.env.PILOT_DEBOUNCE_AFTER ?? '100ms' },
      timeoutMs: 300_000,
    });
    const rss = new RssSampler(daemon.pid, 100);
    const ready = now() - started;
    const synced = Number(/orchestrator config synced in (\d+)ms/.exec(daemon.log())?.[1] ?? NaN);
    proxy = fork(PROXY, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    const updates = [];
    let resolveInitial;
    const initial = new Promise((r) => (resolveInitial = r));
    proxy.on('message', (m) => {
      if (m.kind === 'initial') resolveInitial(m);
      else if (m.kind === 'eds') updates.push(m);
      else if (m.kind === 'error') console.error(`proxy: ${m.message}`);
    });
    const node = {
      id: 'sidecar~10.255.0.1~bench-client.bench-000~bench-000.svc.cluster.local',
      metadata: { NAMESPACE: 'bench-000', MESH_VERSION: '1.26.0', INSTANCE_IPS: '10.255.0.1', LABELS: { app: 'bench-client' } },
    };
    proxy.send({ cmd: 'start', address: daemon.grpc, node });
    const init = await Promise.race([
      initial,
      new Promise((_, rej) => setTimeout(() => rej(new Error('the proxy did not get every cluster in 5 min')), 300_000)),
    ]);
    const served = init.at - started;
    const cpuAfterSync = cpuSeconds(daemon.pid);
    await new Promise((r) => setTimeout(r, 2000));
    const rssSettled = rssBytes(daemon.pid);

    // ---- burst
    const picks = Array.from({ length: o.burst }, (_, j) => Math.floor((j * o.services) / o.burst));
    const wrote = new Map(); // cluster → {at, expect}
    const burstStart = now();
    await pool(
      picks.map((i, j) => async () => {
        const cluster = `outbound|80||${svcName(i)}.${nsOf(i, o)}.svc.cluster.local`;
        const ips = [burstIp(j), ...Array.from({ length: o.podsPerService - 1 }, (_, k) => podIp(i * o.podsPerService + k + 1))];
        wrote.set(cluster, {
          at: now(),
          expect: ips
            .map((ip) => `${ip}:8080`)
            .sort()
            .join(','),
        });
        await api.request(
          'PATCH',
          `/apis/discovery.k8s.io/v1/namespaces/${nsOf(i, o)}/endpointslices/${svcName(i)}-1`,
          { endpoints: slice(i, o, ips).endpoints },
          'application/merge-patch+json',
        );
      }),
      o.concurrency,
    );
    const writesDone = now();
    const converged = new Map();
    const deadline = Date.now() + 120_000;
    while (converged.size < wrote.size && Date.now() < deadline) {
      for (const u of updates.splice(0)) {
        for (const [name, addrs] of u.clusters) {
          const w = wrote.get(name);
          if (w && !converged.has(name) && addrs === w.expect) converged.set(name, u.ackAt - w.at);
        }
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const lat = [...converged.values()];
    const rssAfter = rssBytes(daemon.pid);
    const cpuEnd = cpuSeconds(daemon.pid);
    rss.stop();

    console.log('');
    console.log(`daemon synced (its log)            ${sec(synced)}      [goal < 10 s]`);
    console.log(`daemon ready (/ready 200)          ${sec(ready)}`);
    console.log(`proxy holds all ${init.clusters} clusters' endpoints ${sec(served)} after the daemon started`);
    console.log(`daemon CPU to there               ${cpuAfterSync?.toFixed(1)} s`);
    console.log(`daemon RSS: peak ${mb(rss.peak)}, settled after sync ${mb(rssSettled ?? 0)}, after the burst ${mb(rssAfter ?? 0)}   [goal < 1 GB]`);
    console.log(
      `burst: ${o.burst} EndpointSlice writes in ${sec(writesDone - burstStart)} (${Math.round(o.burst / ((writesDone - burstStart) / 1000))}/s accepted by the API server)`,
    );
    if (lat.length < wrote.size) console.log(`burst: only ${lat.length}/${wrote.size} changes reached the proxy within 2 min`);
    if (lat.length > 0) {
      console.log(
        `burst write → proxy ACK: p50 ${sec(quantile(lat, 0.5))}, p90 ${sec(quantile(lat, 0.9))}, p99 ${sec(quantile(lat, 0.99))}, max ${sec(Math.max(...lat))}   [goal p99 < 2 s]`,
      );
      const lastAck = Math.max(...[...converged.keys()].map((k) => wrote.get(k).at + converged.get(k)));
      console.log(
        `burst first write → last ACK: ${sec(lastAck - burstStart)}; last write answered → last ACK: ${sec(lastAck - writesDone)}; daemon CPU in the burst ${(cpuEnd - cpuAfterSync).toFixed(1)} s`,
      );
    }
    console.log(
      `daemon log: ${daemon.counts.lines} lines, ${daemon.counts.warn} warn, ${daemon.counts.error} error${daemon.firstProblems.length ? `; first: ${daemon.firstProblems[0]}` : ''}`,
    );
  } finally {
    proxy?.kill();
    await daemon?.stop();
    api.agent.destroy();
    if (!o.keep) await run(path.join(kube, 'stop'), [dir]).catch(() => undefined);
    else console.log(`kept the API server: ${dir} (stop with ${path.join(kube, 'stop')} ${dir})`);
  }
}

main().catch((e) => {
  console.error(e.stack ?? String(e));
  process.exit(1);
});
