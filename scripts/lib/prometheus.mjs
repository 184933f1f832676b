// A real Prometheus (Debian's `prometheus` package, 2.42) for the tests and the mesh demo: started by us, never
// as a service, on a port of our choosing with its storage in a directory of ours, scraping the targets the
// caller writes to a file-SD target file. Istio's samples/addons/prometheus.yaml finds pods with kubernetes_sd
// and the prometheus.io annotations instead; Debian builds Prometheus without Kubernetes discovery ("field
// kubernetes_sd_configs not found in type config.ScrapeConfig"), so that job cannot run with this package.
// Plain JavaScript so that the demo, which node runs without a TypeScript step, shares it with the tests
// (test/helpers/prometheus.ts re-exports it; types in prometheus.d.mts).
import { spawn } from 'node:child_process';
import { accessSync, constants, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Exited, waitFor } from './wait.mjs';

/** The prometheus executable: $MESH_TEST_PROMETHEUS, else `prometheus` on PATH; undefined when there is none. */
export function prometheusPath(env = process.env) {
  if (env.MESH_TEST_PROMETHEUS) return env.MESH_TEST_PROMETHEUS;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const file = path.join(dir, 'prometheus');
    try {
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Why Prometheus cannot run here (a skip reason), or false. */
export function prometheusUnavailable(env = process.env) {
  return prometheusPath(env) ? false : 'no prometheus executable: `apt-get install -y prometheus` (Debian 2.42) or set MESH_TEST_PROMETHEUS';
}

/**
 * The configuration file (JSON, which Prometheus reads as YAML): a `mesh-pods` job over the file-SD target file
 * (each target's `__metrics_path__` label may name its path; default /stats/prometheus, the merged endpoint).
 */
export function prometheusConfig({ targetsFile, interval = '1s' }) {
  const jobs = [];
  {
    jobs.push({
      job_name: 'mesh-pods',
      honor_labels: true,
      scrape_interval: interval,
      scrape_timeout: interval,
      metrics_path: '/stats/prometheus',
      file_sd_configs: [{ files: [targetsFile], refresh_interval: '1s' }],
    });
  }
  return JSON.stringify({ global: { scrape_interval: interval, evaluation_interval: interval }, scrape_configs: jobs }, null, 2) + '\n';
}

/** Writes the file-SD target groups (`[{targets: ['host:port'], labels: {...}}]`) atomically. */
export function writeTargets(file, groups) {
  writeFileSync(`${file}.tmp`, JSON.stringify(groups, null, 2));
  renameSync(`${file}.tmp`, file);
}

/** The path of an instant query (GET /api/v1/query). */
export function queryPath(query, time) {
  const q = new URLSearchParams({ query });
  if (time !== undefined) q.set('time', String(time));
  return `/api/v1/query?${q}`;
}

/** An instant query's answer (JSON text) as `[{metric, value}]`, value a number; throws on an error answer. */
export function parseQueryResult(query, text) {
  const body = JSON.parse(text);
  if (body.status !== 'success') throw new Error(`prometheus query ${query}: ${body.errorType}: ${body.error}`);
  if (body.data.resultType === 'scalar') return [{ metric: {}, value: Number(body.data.result[1]) }];
  return body.data.result.map((s) => ({ metric: s.metric, value: Number(s.value[1]) }));
}

export async function queryPrometheus(url, query, time) {
  const r = await fetch(`${url}${queryPath(query, time)}`);
  return parseQueryResult(query, await r.text());
}

/**
 * Starts prometheus on `host:port` with storage and configuration in `dir`; `targets` are the first file-SD
 * groups, `netns` runs it inside a network namespace.
 * Waits for /-/ready; stopped in `owner`'s teardown.
 */
export async function startPrometheus(owner, o) {
  const bin = prometheusPath();
  if (!bin) throw new Error(prometheusUnavailable());
  const host = o.host ?? '127.0.0.1';
  const targetsFile = path.join(o.dir, 'targets.json');
  writeTargets(targetsFile, o.targets ?? []);
  const configFile = path.join(o.dir, 'prometheus.yml');
  writeFileSync(configFile, prometheusConfig({ targetsFile, interval: o.interval }));
  const args = [
    `--config.file=${configFile}`,
    `--storage.tsdb.path=${path.join(o.dir, 'data')}`,
    `--web.listen-address=${host.includes(':') ? `[${host}]` : host}:${o.port}`,
    '--log.level=warn',
  ];
  const argv = o.netns ? ['ip', 'netns', 'exec', o.netns, bin, ...args] : [bin, ...args];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  for (const s of [child.stdout, child.stderr]) s.on('data', (d) => ((out += d), o.onOutput?.(String(d))));
  const exited = new Promise((r) => child.once('exit', r));
  owner.teardown(async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const force = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(force);
  });
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${o.port}`;
  const ready = async () => {
    if (child.exitCode !== null) throw new Exited(`prometheus exited ${child.exitCode}:\n${out}`);
    if (o.netns) return true; // only reachable inside the namespace: the caller checks from there
    return (await fetch(`${url}/-/ready`)).status === 200;
  };
  await waitFor(() => `prometheus ready at ${url}:\n${out.slice(-2000)}`, ready, { timeoutMs: o.timeoutMs ?? 30_000, intervalMs: 100 });
  return {
    url,
    child,
    out: () => out,
    configFile,
    targetsFile,
    setTargets: (groups) => writeTargets(targetsFile, groups),
    query: (q, time) => queryPrometheus(url, q, time),
  };
}
