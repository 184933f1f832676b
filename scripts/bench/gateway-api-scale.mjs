// Gateway API at scale against its yardstick, the same routes written as Istio VirtualServices (issue 29: "1000
// HTTPRoutes: a route edit reaches the gateway as fast as the equivalent VirtualService edit (≤ 1.2×, same bench
// run), and the daemon's memory for them is ≤ 1.2× the VirtualService equivalent").
//   node scripts/bench/gateway-api-scale.mjs [--routes 1000] [--clients 10] [--edits 10] [--rounds 3] [--vhds]
//
// Each variant is a fresh `dist/pilot-discovery discovery --configDir <tree>`: the xds-scale tree (1000
// ServiceEntries with their WorkloadEntries, DestinationRules and VirtualServices) plus `--routes` routes on one
// more gateway listener, port 8080, hostnames r-<i>.bench.example, each sending / to service i:
//   vs           an Istio Gateway selecting `gateway.networking.k8s.io/gateway-name: bench` and one VirtualService
//                per route, bound to it;
//   gateway-api  a Gateway API Gateway `bench` (class mesh) and one HTTPRoute per route, its backend the service's
//                ServiceEntry host (Istio's `networking.istio.io/Hostname` backendRef);
//   none         neither: the memory the tree costs without the routes (the routes' share is the difference).
// `--clients` simulated routers (./xds-scale/clients.mjs; they carry the label of both gateways) connect and ACK
// everything; then route 0 is rewritten `--edits` times (a request header set to the edit's number, the same
// change in either form), each timed from the file write to the last router's ACK. The daemon's memory once
// settled after connecting and after the edits: RSS (VmRSS, /proc) and the V8 heap in use right after a full
// collection (ControlZ's force-collection), the figure the memory goal is judged on (RSS moves with GC timing). Variants alternate order round by round; the
// report gives medians over rounds and gateway-api ÷ vs for each figure.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { hostOf, namespaceOf, writeConfigDir } from './xds-scale/config.mjs';
import { heapAfterGc, metricSum, scrape, startDaemon } from './xds-scale/daemon.mjs';
import { checkHealthy, children, newSink, now, quantile, settle, sleep, startClients, until } from './xds-scale/driver.mjs';
import { cpuSeconds, RssSampler } from './xds-scale/proc.mjs';
import { median, parseOptions } from '../lib/bench.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const GATEWAY_NAME_LABEL = 'gateway.networking.k8s.io/gateway-name';
const EDIT_QUIET_MS = 300;

const OPTIONS = {
  routes: { type: 'integer', min: 1, default: 1000, help: 'routes on the bench gateway (one per service)' },
  clients: { type: 'integer', min: 1, default: 10, help: 'simulated routers of the gateway' },
  edits: { type: 'integer', min: 1, default: 10, help: 'edits of route 0 per variant and round' },
  rounds: { type: 'integer', min: 1, default: 3, help: 'rounds (each runs every variant; medians are reported)' },
  vhds: { type: 'boolean', help: 'the routers use delta xDS with VHDS (as our engine does) instead of full RDS (as Envoy)' },
  mesh: { type: 'path', default: path.join(ROOT, 'dist', 'pilot-discovery'), help: 'the pilot-discovery executable measured' },
};

/** Route i of the Istio form: a VirtualService in service i's namespace bound to mesh-system/bench. */
function virtualService(i, edit = 0) {
  return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bench-${i}, namespace: ${namespaceOf(i)}}
spec:
  hosts: [r-${i}.bench.example]
  gateways: [mesh-system/bench]
  http:
  - match:
    - uri: {prefix: /}
    headers:
      request:
        set: {x-bench-edit: "${edit}"}
    route:
    - destination: {host: ${hostOf(i)}, port: {number: 80}}
`;
}

/** Route i of the Gateway API form: an HTTPRoute in service i's namespace on the Gateway mesh-system/bench. */
function httpRoute(i, edit = 0) {
  return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: bench-${i}, namespace: ${namespaceOf(i)}}
spec:
  parentRefs: [{name: bench, namespace: mesh-system}]
  hostnames: [r-${i}.bench.example]
  rules:
  - matches:
    - path: {type: PathPrefix, value: /}
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: x-bench-edit, value: "${edit}"}]
    backendRefs:
    - {group: networking.istio.io, kind: Hostname, name: ${hostOf(i)}, port: 80}
`;
}

const VARIANTS = {
  none: { gateway: undefined, route: undefined },
  vs: {
    gateway: `apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: bench, namespace: mesh-system}
spec:
  selector: {${GATEWAY_NAME_LABEL}: bench}
  servers:
  - port: {number: 8080, name: http-bench, protocol: HTTP}
    hosts: ["*/*.bench.example"]
`,
    route: virtualService,
  },
  'gateway-api': {
    gateway: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bench, namespace: mesh-system}
spec:
  gatewayClassName: mesh
  listeners:
  - name: http
    port: 8080
    protocol: HTTP
    hostname: "*.bench.example"
    allowedRoutes:
      namespaces: {from: All}
`,
    route: httpRoute,
  },
};

const routeFile = (i) => path.join(namespaceOf(i), `bench-route-${i}.yaml`);

/** The tree of one variant in a fresh directory. */
function writeTree(base, variant, routes) {
  const dir = mkdtempSync(path.join(base, `${variant}-`));
  writeConfigDir(dir, routes);
  const v = VARIANTS[variant];
  if (v.gateway) writeFileSync(path.join(dir, 'mesh-system-bench-gateway.yaml'), v.gateway);
  if (v.route)
    for (let i = 0; i < routes; i++) {
      mkdirSync(path.join(dir, namespaceOf(i)), { recursive: true });
      writeFileSync(path.join(dir, routeFile(i)), v.route(i));
    }
  return dir;
}

/** One variant: connect the routers, settle, edit route 0 `edits` times. */
async function runVariant(variant, opts, base) {
  const dir = writeTree(base, variant, opts.routes);
  const daemon = await startDaemon([opts.mesh], ['--configDir', dir]);
  children.add(daemon.child);
  const rss = new RssSampler(daemon.pid, 100);
  const sink = newSink();
  let clients;
  try {
    clients = await startClients(sink);
    const cpu0 = cpuSeconds(daemon.pid);
    const sent = now();
    clients.send({
      cmd: 'start',
      address: daemon.grpc,
      clients: opts.clients,
      perChannel: 50,
      services: opts.routes,
      routerEvery: 1,
      ramp: 0,
      vhds: !!opts.vhds,
      routerLabels: { [GATEWAY_NAME_LABEL]: 'bench' },
    });
    await until(
      () => {
        checkHealthy(sink, daemon);
        return sink.initial.size === opts.clients;
      },
      5 * 60_000,
      `${opts.clients} routers to get their initial config (${variant})`,
    );
    const connectMs = Math.max(...[...sink.initial.values()].map((t) => t - sent));
    await settle(sink, daemon, opts.clients);
    const rejected = metricSum(await scrape(daemon), 'pilot_total_rejected_configs');
    if (rejected) throw new Error(`${variant}: the daemon rejected ${rejected} configs`);
    const cpuConnect = cpuSeconds(daemon.pid) - cpu0;
    const initialBytes = sink.totals.bytes;
    await sleep(2_000);
    const rssConnected = rss.sample() ?? NaN;
    const heapConnected = await heapAfterGc(daemon);
    const edits = [];
    if (VARIANTS[variant].route) {
      for (let k = 1; k <= opts.edits; k++) {
        const edit = { t0: now(), events: [], reached: new Set(), byType: {} };
        sink.edit = edit;
        writeFileSync(path.join(dir, routeFile(0)), VARIANTS[variant].route(0, k));
        await until(
          () => {
            checkHealthy(sink, daemon);
            return edit.reached.size === opts.clients && now() - sink.lastEventAt >= EDIT_QUIET_MS;
          },
          60_000,
          `edit ${k} to reach every router (${variant})`,
        );
        sink.edit = undefined;
        edits.push({ ms: Math.max(...edit.events.map((e) => e[5])) - edit.t0, bytes: edit.events.reduce((s, e) => s + e[3], 0) });
        await sleep(200); // consecutive edits are separate pushes
      }
    }
    await sleep(2_000);
    return {
      variant,
      connectMs,
      cpuConnect,
      initialMB: initialBytes / 1e6,
      rssConnectedMB: rssConnected / 1e6,
      rssAfterMB: (rss.sample() ?? NaN) / 1e6,
      heapConnectedMB: heapConnected / 1e6,
      heapAfterMB: (await heapAfterGc(daemon)) / 1e6,
      editP50: edits.length
        ? quantile(
            edits.map((e) => e.ms),
            0.5,
          )
        : NaN,
      editP99: edits.length
        ? quantile(
            edits.map((e) => e.ms),
            0.99,
          )
        : NaN,
      kBPerEdit: edits.length ? edits.reduce((s, e) => s + e.bytes, 0) / edits.length / 1e3 : NaN,
    };
  } finally {
    rss.stop();
    if (clients) await clients.stop();
    await daemon.stop();
    children.delete(daemon.child);
    rmSync(dir, { recursive: true, force: true });
  }
}

const FIGURES = [
  ['connectMs', 'connect+initial ms', 0],
  ['cpuConnect', 'daemon CPU connect s', 2],
  ['initialMB', 'initial MB', 1],
  ['editP50', 'edit p50 ms', 0],
  ['editP99', 'edit p99 ms', 0],
  ['kBPerEdit', 'kB per edit', 0],
  ['rssConnectedMB', 'RSS connected MB', 0],
  ['rssAfterMB', 'RSS after edits MB', 0],
  ['heapConnectedMB', 'heap after GC, connected MB', 1],
  ['heapAfterMB', 'heap after GC, after edits MB', 1],
];

function report(runs) {
  const med = (variant, key) => median(runs.filter((r) => r.variant === variant).map((r) => r[key]));
  const head = ['figure (median)', 'none', 'vs', 'gateway-api', 'gateway-api ÷ vs'];
  console.log(`\n| ${head.join(' | ')} |\n|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`);
  for (const [key, label, digits] of FIGURES) {
    const [n, v, g] = ['none', 'vs', 'gateway-api'].map((x) => med(x, key));
    const f = (x) => (Number.isFinite(x) ? x.toFixed(digits) : '–');
    console.log(`| ${label} | ${f(n)} | ${f(v)} | ${f(g)} | ${Number.isFinite(g / v) ? (g / v).toFixed(2) : '–'} |`);
  }
  for (const key of ['heapConnectedMB', 'heapAfterMB']) {
    const [n, v, g] = ['none', 'vs', 'gateway-api'].map((x) => med(x, key));
    console.log(
      `the routes' own heap (${key === 'heapConnectedMB' ? 'connected' : 'after the edits'}: heap after GC over the tree without them): vs ${(v - n).toFixed(1)} MB, gateway-api ${(g - n).toFixed(1)} MB, ratio ${((g - n) / (v - n)).toFixed(2)}`,
    );
  }
  const p99 = med('gateway-api', 'editP99') / med('vs', 'editP99');
  const mem = (med('gateway-api', 'heapAfterMB') - med('none', 'heapAfterMB')) / (med('vs', 'heapAfterMB') - med('none', 'heapAfterMB'));
  console.log(
    `\ngoal (issue 29): edit ≤ 1.2× the VirtualService edit → p99 ${p99.toFixed(2)}× (${p99 <= 1.2 ? 'met' : 'NOT met'}); memory for the routes ≤ 1.2× → ${mem.toFixed(2)}× (${mem <= 1.2 ? 'met' : 'NOT met'})`,
  );
}

async function main() {
  const opts = parseOptions(
    'scripts/bench/gateway-api-scale.mjs',
    'HTTPRoutes against the same routes as VirtualServices: edit → last ACK at the routers, and the daemon memory.',
    OPTIONS,
  );
  const base = mkdtempSync(path.join(tmpdir(), 'mesh-gateway-api-scale-'));
  process.on('exit', () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    rmSync(base, { recursive: true, force: true });
  });
  for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));
  console.log(
    `gateway-api-scale: node ${process.version}, ${availableParallelism()} cores, load ${loadavg()[0].toFixed(1)}, ${new Date().toISOString()}; ${opts.routes} routes, ${opts.clients} routers (${opts.vhds ? 'delta xDS with VHDS' : 'state of the world, full RDS'}), ${opts.edits} edits × ${opts.rounds} rounds`,
  );
  const runs = [];
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? ['none', 'vs', 'gateway-api'] : ['gateway-api', 'vs', 'none'];
    for (const variant of order) {
      const r = await runVariant(variant, opts, base);
      console.log(
        `round ${round + 1} ${variant}: ${FIGURES.map(([k, label, d]) => `${label} ${Number.isFinite(r[k]) ? r[k].toFixed(d) : '–'}`).join(', ')}`,
      );
      runs.push(r);
    }
  }
  report(runs);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(`gateway-api-scale failed: ${e instanceof Error ? e.stack : e}`);
    process.exit(1);
  },
);
