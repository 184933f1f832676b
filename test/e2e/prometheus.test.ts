// A real Prometheus (Debian's 2.42) scraping a sidecar's merged 15020 /stats/prometheus by file service
// discovery (pods with no cluster; Debian's build has no Kubernetes discovery, so Istio's kubernetes-pods job
// with the prometheus.io annotations cannot be run with it). The series come back through /api/v1/query: the agent's own metrics, the proxy's, and the application's
// (MESH_METRICS_ANNOTATIONS), each part of the merge. The sidecar binds Istio's fixed ports, so the daemon, the
// sidecar, its application and Prometheus run in a network namespace of their own.
import * as fs from 'node:fs';
import path from 'node:path';
import t, { type Test } from 'tap';
import { built, DIST } from '../helpers/binary';
import { createNetns, httpGetIn, netnsUnavailable, spawnIn } from '../helpers/netns';
import { startLiveDiscovery, waitForOk, watch } from '../helpers/live-mesh';
import { parseQueryResult, prometheusUnavailable, queryPath, startPrometheus, type Sample } from '../helpers/prometheus';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');
const skip = netnsUnavailable() || prometheusUnavailable();

const APP_PORT = 19100;
const PROM = 'http://127.0.0.1:19090';

interface Pod {
  ns: string;
  logs(): string;
}

/** The daemon, an application serving its own metrics on :19100, and its sidecar (built-in engine), ready. */
async function startPod(t: Test): Promise<Pod> {
  const ns = createNetns(t, 'mesh-prom');
  const dir = tempDir(t, 'mesh-prometheus-');
  const out: string[] = [];
  const logs = () => out.join('').slice(-6000);
  const base = await startLiveDiscovery(t, ns, dir, out);
  const app = `require('http').createServer((q,s)=>{if(q.url!=='/app-metrics'){s.writeHead(404);return s.end()}s.writeHead(200,{'Content-Type':'text/plain; version=0.0.4'});s.end('# TYPE shop_orders_total counter\\nshop_orders_total{kind="book"} 42\\n')}).listen(${APP_PORT},'127.0.0.1')`;
  watch(t, 'app', spawnIn(ns, process.execPath, ['-e', app]), out);
  fs.mkdirSync(path.join(dir, 'shop'));
  const env = {
    ...base,
    POD_NAME: 'shop-0',
    POD_NAMESPACE: 'shop',
    INSTANCE_IP: '127.0.0.1',
    MESH_METAJSON_LABELS: '{"app":"shop"}',
    // what the injector writes from the pod's own prometheus.io annotations
    MESH_METRICS_ANNOTATIONS: JSON.stringify({ scrape: 'true', path: '/app-metrics', port: String(APP_PORT) }),
    PROXY_CONFIG: JSON.stringify({ binaryPath: path.join(dir, 'no-envoy-here'), terminationDrainDuration: '1s' }),
  };
  const agent = spawnIn(ns, path.join(DIST, 'pilot-agent'), ['proxy', 'sidecar', '--meshConfig', path.join(dir, 'mesh.yaml')], {
    env,
    cwd: path.join(dir, 'shop'),
  });
  watch(t, 'sidecar', agent, out);
  await waitForOk(ns, 'http://127.0.0.1:15020/healthz/ready', () => `the sidecar is not ready:\n${logs()}`);
  return { ns, logs };
}

/** An instant query made inside the namespace, retried until it returns a series. */
async function series(p: Pod, prom: { out(): string }, q: string): Promise<Sample[]> {
  return waitForValue(
    () => `${q} from prometheus:\n${prom.out().slice(-1500)}\n${p.logs()}`,
    async () => {
      const r = httpGetIn(p.ns, `${PROM}${queryPath(q)}`);
      if (r.status !== 200) return undefined;
      const s = parseQueryResult(q, r.body);
      return s.length > 0 ? s : undefined;
    },
    { timeoutMs: 30_000, intervalMs: 500 },
  );
}

async function prometheusIn(t: Test, p: Pod, o: { targets: Array<{ targets: string[]; labels?: Record<string, string> }> }) {
  const prom = await startPrometheus(t, { dir: tempDir(t, 'mesh-prometheus-data-'), port: 19090, netns: p.ns, ...o });
  await waitForOk(p.ns, `${PROM}/-/ready`, () => `prometheus is not ready:\n${prom.out()}`);
  return prom;
}

t.test("file service discovery: the sidecar's merged 15020 endpoint, queried back", { skip, timeout: 240_000 }, async (t) => {
  const p = await startPod(t);
  const prom = await prometheusIn(t, p, { targets: [{ targets: ['127.0.0.1:15020'], labels: { namespace: 'shop', pod: 'shop-0' } }] });
  const up = await series(p, prom, 'up{job="mesh-pods"}');
  t.same(
    up.map((s) => [s.metric['instance'], s.metric['pod'], s.value]),
    [['127.0.0.1:15020', 'shop-0', 1]],
    'one target, up',
  );
  const shop = await series(p, prom, 'shop_orders_total');
  t.equal(shop[0]!.value, 42, "the application's metric, merged last");
  t.equal(shop[0]!.metric['kind'], 'book');
  t.equal(shop[0]!.metric['namespace'], 'shop', 'with the target labels');
  t.ok((await series(p, prom, 'xds_proxy_requests'))[0]!.value >= 1, "the agent's own metrics");
  t.ok((await series(p, prom, 'scrapes_total'))[0]!.value >= 1, 'scrapes_total counts the scrapes');
  const proxy = await series(p, prom, 'count({__name__=~"envoy_.+", job="mesh-pods"})');
  t.ok(proxy[0]!.value > 0, `the proxy's stats (${proxy[0]!.value} envoy_* series)`);
  const failed = await series(p, prom, 'sum(scrape_failures_total) or vector(0)');
  t.equal(failed[0]!.value, 0, 'no part of the merge failed');
});
