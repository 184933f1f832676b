// `meshctl analyze` on 1000 resources (the bar: under 2 s), with `meshctl version` (the
// program's start-up) measured in the same run as the baseline.
//   node scripts/bench/analyze.mjs [--runs 7] [--resources 1000] [--format yaml|json] (or the three alone, as before)
//   node scripts/bench/analyze.mjs --live   the same mesh created on a real API server (../shared/kube), then
//        `meshctl analyze -A` against it (issue 28's bar: under 3 s)
// Writes a realistic mesh into a temporary directory: per namespace a Namespace, Services with
// Deployments and Pods, ServiceEntries, DestinationRules with subsets, VirtualServices routing to
// them (some bound to a shared Gateway, some with JWT claim matches), Sidecars, AuthorizationPolicies,
// RequestAuthentications, PeerAuthentications. Prints median and p90 wall time of each command.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseOptions } from '../lib/bench.mjs';
import { Api, kubeDir, pool, readEnv } from '../lib/kube.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const meshctl = path.join(root, 'dist', 'meshctl');
const {
  runs,
  resources: target,
  format,
  live,
} = parseOptions('scripts/bench/analyze.mjs', '`meshctl analyze` on a generated mesh, with `meshctl version` as the same-run baseline.', {
  runs: { type: 'integer', min: 1, default: 7, positional: true, help: 'runs of each command' },
  resources: { type: 'integer', min: 1, default: 1000, positional: true, help: 'resources in the generated mesh' },
  format: { type: 'string', oneOf: ['yaml', 'json'], default: 'yaml', positional: true, help: 'file format of the mesh' },
  live: { type: 'boolean', help: 'create the mesh on a real API server (../shared/kube) and analyze the live cluster' },
});

/** One namespace's worth of resources (16 documents). */
function namespace(i) {
  const ns = `team-${i}`;
  const docs = [];
  docs.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'mesh-injection': 'enabled' } } });
  for (const app of ['web', 'api']) {
    const labels = { app, version: 'v1' };
    docs.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: app, namespace: ns },
      spec: { selector: { app }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
    });
    docs.push({
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: app, namespace: ns },
      spec: {
        selector: { matchLabels: labels },
        template: { metadata: { labels }, spec: { containers: [{ name: app, image: `example/${app}:1`, ports: [{ containerPort: 8080 }] }] } },
      },
    });
    docs.push({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `${app}-0`, namespace: ns, labels },
      spec: {
        containers: [
          { name: app, image: `example/${app}:1` },
          { name: 'mesh-proxy', image: 'mesh/proxyv2:1.26.0' },
        ],
      },
    });
    docs.push({
      apiVersion: 'networking.istio.io/v1',
      kind: 'DestinationRule',
      metadata: { name: app, namespace: ns },
      spec: { host: app, subsets: [{ name: 'v1', labels: { version: 'v1' } }], trafficPolicy: { tls: { mode: 'ISTIO_MUTUAL' } } },
    });
    docs.push({
      apiVersion: 'networking.istio.io/v1',
      kind: 'VirtualService',
      metadata: { name: app, namespace: ns },
      spec: {
        hosts: [app],
        http: [
          { match: [{ uri: { prefix: '/v1' } }], route: [{ destination: { host: app, subset: 'v1' } }], timeout: '5s' },
          // Every tenth namespace routes to a host that does not exist: analysis has findings to report.
          { route: [{ destination: { host: i % 10 === 0 && app === 'api' ? 'legacy' : app, port: { number: 80 } } }] },
        ],
      },
    });
  }
  docs.push({
    apiVersion: 'networking.istio.io/v1',
    kind: 'ServiceEntry',
    metadata: { name: 'external', namespace: ns },
    spec: {
      hosts: [`api-${i}.example.com`],
      ports: [{ number: 443, name: 'https', protocol: 'HTTPS' }],
      resolution: 'DNS',
      location: 'MESH_EXTERNAL',
    },
  });
  docs.push({
    apiVersion: 'networking.istio.io/v1',
    kind: 'VirtualService',
    metadata: { name: 'public', namespace: ns },
    spec: {
      hosts: [`${ns}.example.com`],
      gateways: ['mesh-system/public'],
      http: [
        {
          match: [{ headers: { '@request.auth.claims.iss': { exact: 'https://issuer.example.com' } } }],
          route: [{ destination: { host: `web.${ns}.svc.cluster.local` } }],
        },
      ],
    },
  });
  docs.push({
    apiVersion: 'networking.istio.io/v1',
    kind: 'Sidecar',
    metadata: { name: 'default', namespace: ns },
    spec: { egress: [{ hosts: ['./*', 'mesh-system/*'] }] },
  });
  docs.push({
    apiVersion: 'security.istio.io/v1',
    kind: 'AuthorizationPolicy',
    metadata: { name: 'web', namespace: ns },
    spec: {
      selector: { matchLabels: { app: 'web' } },
      rules: [{ from: [{ source: { namespaces: [ns] } }], to: [{ operation: { methods: ['GET'] } }] }],
    },
  });
  docs.push({
    apiVersion: 'security.istio.io/v1',
    kind: 'PeerAuthentication',
    metadata: { name: 'default', namespace: ns },
    spec: { mtls: { mode: 'STRICT' } },
  });
  return docs;
}

const shared = [
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'mesh-system' } },
  {
    apiVersion: 'networking.istio.io/v1',
    kind: 'Gateway',
    metadata: { name: 'public', namespace: 'mesh-system' },
    spec: { selector: { mesh: 'ingressgateway' }, servers: [{ port: { number: 80, name: 'http', protocol: 'HTTP' }, hosts: ['*/*.example.com'] }] },
  },
  {
    apiVersion: 'security.istio.io/v1',
    kind: 'RequestAuthentication',
    metadata: { name: 'public', namespace: 'mesh-system' },
    spec: {
      selector: { matchLabels: { mesh: 'ingressgateway' } },
      jwtRules: [{ issuer: 'https://issuer.example.com', jwksUri: 'https://issuer.example.com/jwks.json' }],
    },
  },
];

const dir = mkdtempSync(path.join(os.tmpdir(), 'mesh-analyze-bench-'));
let count = shared.length;
const files = [shared];
for (let i = 0; count < target; i++) {
  const docs = namespace(i).slice(0, target - count);
  files.push(docs);
  count += docs.length;
}
const { stringify } = await import('yaml');
files.forEach((docs, i) =>
  format === 'json'
    ? writeFileSync(path.join(dir, `ns-${String(i).padStart(3, '0')}.json`), JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs }))
    : writeFileSync(path.join(dir, `ns-${String(i).padStart(3, '0')}.yaml`), docs.map((d) => stringify(d)).join('---\n')),
);

// CPU time (user + system) of the child comes from GNU time when the machine has it: on a shared,
// loaded machine wall time measures the neighbours as much as the command.
const gnuTime = spawnSync('/usr/bin/time', ['-f', '%U %S', 'true']).status === 0;

function time(args, okCodes = [0]) {
  const t0 = process.hrtime.bigint();
  const r = gnuTime
    ? spawnSync('/usr/bin/time', ['-f', 'CPU %U %S', meshctl, ...args], { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 })
    : spawnSync(meshctl, args, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  if (!okCodes.includes(r.status)) throw new Error(`meshctl ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  const stderr = r.stderr.toString();
  const cpu = /CPU ([\d.]+) ([\d.]+)\s*$/.exec(stderr);
  return { ms, cpuMs: cpu ? (Number(cpu[1]) + Number(cpu[2])) * 1000 : NaN, stdout: r.stdout.toString(), stderr };
}

/** A collection's plural as the CRDs and the core API name it (lower case, consonant+y → ies). */
const plural = (kind) => kind.toLowerCase().replace(/([^aeiou])y$/, '$1ie') + 's';

/** Starts an API server and creates every generated object on it; returns how to stop it. */
async function liveCluster() {
  const kube = kubeDir();
  const kubeconfig = execFileSync(path.join(kube, 'start'), ['--owner', String(process.pid), '--with-crds', 'all', '--no-controller-manager'], {
    encoding: 'utf8',
    timeout: 300_000,
  })
    .trim()
    .split('\n')
    .pop();
  const dir = path.dirname(kubeconfig);
  const api = new Api(readEnv(dir), 16);
  const docs = files.flat();
  const create = (d) => () => {
    const base = d.apiVersion.includes('/') ? `/apis/${d.apiVersion}` : `/api/${d.apiVersion}`;
    const ns = d.metadata.namespace ? `/namespaces/${d.metadata.namespace}` : '';
    return api.request('POST', `${base}${ns}/${plural(d.kind)}`, d);
  };
  const t0 = performance.now();
  await pool(docs.filter((d) => d.kind === 'Namespace').map(create), 16);
  await pool(docs.filter((d) => d.kind !== 'Namespace').map(create), 16);
  console.log(`API server populated: ${docs.length} objects in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  process.env.ORCHCONFIG = kubeconfig;
  return () => execFileSync(path.join(kube, 'stop'), [dir]);
}

const stopKube = live ? await liveCluster() : undefined;
const bar = live ? 3000 : 2000;
const cases = [
  ['meshctl version (start-up baseline)', ['version', '--remote=false']],
  live
    ? [`meshctl analyze -A (live cluster, ${count} resources)`, ['analyze', '-A', '--color=false']]
    : [`meshctl analyze -A (${count} resources, ${format})`, ['analyze', '--use-kube=false', '-A', '--color=false', dir]],
];
try {
  const first = time(cases[1][1], [0, 79]);
  const lines = first.stdout.split('\n').filter(Boolean);
  const samples = cases.map(() => []);
  const cpu = cases.map(() => []);
  for (let i = 0; i < runs; i++)
    cases.forEach(([, a], j) => {
      const r = time(a, [0, 79]);
      samples[j].push(r.ms);
      cpu[j].push(r.cpuMs);
    });
  const q = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))];
  const base = q(samples[0], 0.5);
  console.log(
    `runs: ${runs}, node ${process.version}, load average ${os
      .loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')}, ${new Date().toISOString()}`,
  );
  console.log(`analysis messages: ${lines.length} (${[...new Set(lines.map((l) => /\[(\w+)\]/.exec(l)?.[1]))].join(' ')})`);
  console.log(`${'command'.padEnd(44)} ${'median ms'.padStart(10)} ${'p90 ms'.padStart(8)} ${'× start-up'.padStart(11)} ${'CPU ms'.padStart(8)}`);
  cases.forEach(([name], j) => {
    const med = q(samples[j], 0.5);
    console.log(
      `${name.padEnd(44)} ${med.toFixed(1).padStart(10)} ${q(samples[j], 0.9).toFixed(1).padStart(8)} ${(med / base).toFixed(2).padStart(11)} ${q(cpu[j], 0.5).toFixed(0).padStart(8)}`,
    );
  });
  const med = q(samples[1], 0.5);
  const cpuMed = q(cpu[1], 0.5);
  const cores = os.availableParallelism();
  const loaded = os.loadavg()[0] > cores;
  const verdict =
    med < bar
      ? 'PASS'
      : cpuMed < bar && loaded
        ? `PASS on CPU time (wall time inflated: load average ${os.loadavg()[0].toFixed(1)} on ${cores} cores)`
        : 'FAIL';
  console.log(
    `${count} resources analyzed in ${(med / 1000).toFixed(2)} s wall, ${(cpuMed / 1000).toFixed(2)} s CPU (bar: ${bar / 1000} s) — ${verdict}`,
  );
  if (verdict === 'FAIL') process.exitCode = 1;
} finally {
  stopKube?.();
  if (!process.env.KEEP) rmSync(dir, { recursive: true, force: true });
  else console.log(`kept ${dir}`);
}
