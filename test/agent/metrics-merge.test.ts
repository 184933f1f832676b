// The agent's merged /stats/prometheus as Istio 1.26's status server builds it
// (pilot/cmd/pilot-agent/status/server.go handleStats): the agent's metrics, then the proxy's Prometheus
// listener, then the application named by MESH_METRICS_ANNOTATIONS; the answer's Content-Type follows the
// application's (negotiateMetricsFormat); Accept, User-Agent and X-Prometheus-Scrape-Timeout-Seconds are
// passed on; an application that is down or failing costs only its own part (scrape_failures_total).
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import {
  FMT_OPENMETRICS_0_0_1,
  FMT_OPENMETRICS_1_0_0,
  FMT_TEXT,
  negotiateMetricsFormat,
  parseAppScrapeConfig,
  scrapeTimeoutMs,
} from '../../src/agent/metrics-merge';
import { AdminClient } from '../../src/agent/admin-client';
import { StatusServer } from '../../src/agent/status';
import { metricValue } from '../helpers/prometheus';
import { freePort } from '../helpers/ports';

t.test('MESH_METRICS_ANNOTATIONS: Istio defaults, scrape=false, the status port refused', async (t) => {
  const cases: Array<[string, ReturnType<typeof parseAppScrapeConfig> | RegExp]> = [
    ['{"scrape":"true","path":"/m","port":"8080"}', { path: '/m', port: '8080' }],
    ['{"scrape":"true"}', { path: '/metrics', port: '80' }],
    ['{"scrape":"","path":"","port":"9100"}', { path: '/metrics', port: '9100' }],
    ['{"scrape":"false","port":"8080"}', undefined],
    ['{"port":"15020"}', /application port is the same as agent port.*prometheus\.io\/port=15020/],
    ['{"port":8080}', /failed to unmarshal MESH_METRICS_ANNOTATIONS: port is not a string/],
    ['not json', /^failed to unmarshal MESH_METRICS_ANNOTATIONS: /],
  ];
  for (const [raw, want] of cases) {
    if (want instanceof RegExp) t.throws(() => parseAppScrapeConfig('MESH_METRICS_ANNOTATIONS', raw, 15020), want, raw);
    else t.same(parseAppScrapeConfig('MESH_METRICS_ANNOTATIONS', raw, 15020), want, raw);
  }
});

t.test('negotiateMetricsFormat: OpenMetrics versions, everything else is text 0.0.4', async (t) => {
  const cases: Array<[string | undefined, string]> = [
    [undefined, FMT_TEXT],
    ['', FMT_TEXT],
    ['text/plain; version=0.0.4', FMT_TEXT],
    ['application/openmetrics-text; version=1.0.0; charset=utf-8', FMT_OPENMETRICS_1_0_0],
    ['application/openmetrics-text; version=0.0.1', FMT_OPENMETRICS_0_0_1],
    ['application/openmetrics-text', FMT_OPENMETRICS_0_0_1],
    ['application/openmetrics-text; version=2.0.0', FMT_TEXT],
    ['application/json', FMT_TEXT],
  ];
  for (const [ct, want] of cases) t.equal(negotiateMetricsFormat(ct), want, String(ct));
  t.equal(FMT_TEXT, 'text/plain; version=0.0.4; charset=utf-8');
  t.equal(FMT_OPENMETRICS_1_0_0, 'application/openmetrics-text; version=1.0.0; charset=utf-8');
});

t.test('scrape timeout header: seconds as a float', async (t) => {
  t.equal(scrapeTimeoutMs('1.5'), 1500);
  t.equal(scrapeTimeoutMs('10'), 10_000);
  t.equal(scrapeTimeoutMs(undefined), undefined);
  t.equal(scrapeTimeoutMs('soon'), undefined);
});

interface Endpoint {
  port: number;
  seen: http.IncomingHttpHeaders[];
  paths: string[];
  answer: { status: number; type: string; body: string };
}

async function endpoint(t: Test, answer: Endpoint['answer']): Promise<Endpoint> {
  const e: Endpoint = { port: 0, seen: [], paths: [], answer };
  const srv = http.createServer((req, res) => {
    e.seen.push(req.headers);
    e.paths.push(req.url ?? '');
    res.writeHead(e.answer.status, { 'Content-Type': e.answer.type });
    res.end(e.answer.body);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  t.teardown(() => srv.close());
  e.port = (srv.address() as AddressInfo).port;
  return e;
}

const PROXY_TEXT = '# TYPE istio_requests_total counter\nistio_requests_total{reporter="destination"} 3\n';
const APP_TEXT = '# TYPE app_hits counter\napp_hits 41\n';
const APP_OPENMETRICS = '# TYPE app_hits counter\napp_hits_total 41\n# EOF\n';

async function merged(t: Test, app: Endpoint | number) {
  const proxy = await endpoint(t, { status: 200, type: 'text/plain; version=0.0.4', body: PROXY_TEXT });
  const appPort = typeof app === 'number' ? app : app.port;
  const server = new StatusServer({
    port: 0,
    host: '127.0.0.1',
    readiness: { check: async () => undefined },
    // the admin port itself is never asked: the merge reads the proxy's Prometheus listener
    admin: new AdminClient('127.0.0.1', 9),
    proxyStatsPort: proxy.port,
    app: { port: String(appPort), path: '/app/metrics' },
    onQuit: () => {},
    onDrain: () => {},
  });
  const port = await server.start();
  t.teardown(() => server.stop());
  const get = async (p: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`http://127.0.0.1:${port}${p}`, { headers });
    return { status: r.status, type: r.headers.get('content-type'), body: await r.text() };
  };
  return { proxy, get };
}

const SCRAPE_HEADERS = {
  Accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5',
  'User-Agent': 'Prometheus/2.42.0',
  'X-Prometheus-Scrape-Timeout-Seconds': '5',
};

t.test('the merge: agent, proxy, application in that order; headers passed on; text answer', async (t) => {
  const app = await endpoint(t, { status: 200, type: 'text/plain; version=0.0.4; charset=utf-8', body: APP_TEXT });
  const { proxy, get } = await merged(t, app);
  const r = await get('/stats/prometheus?usedonly', SCRAPE_HEADERS);
  t.equal(r.status, 200);
  t.equal(r.type, FMT_TEXT);
  const at = (s: string) => r.body.indexOf(s);
  t.ok(at('scrapes_total') >= 0 && at('scrapes_total') < at('istio_requests_total'), 'agent metrics before the proxy’s');
  t.ok(at('istio_requests_total') < at('app_hits'), 'the application last');
  t.ok(r.body.endsWith(APP_TEXT));
  t.same(proxy.paths, ['/stats/prometheus?usedonly'], "the proxy's listener, with the query");
  t.same(app.paths, ['/app/metrics'], 'the application at its annotated path, without the query');
  for (const e of [proxy, app]) {
    t.equal(e.seen[0]!['accept'], SCRAPE_HEADERS.Accept);
    t.equal(e.seen[0]!['user-agent'], SCRAPE_HEADERS['User-Agent']);
    t.equal(e.seen[0]!['x-prometheus-scrape-timeout-seconds'], '5');
  }
  const m = await get('/metrics');
  t.equal(m.status, 200, '/metrics is the same merge');
  t.ok(m.body.endsWith(APP_TEXT));
});

t.test('the merge: an OpenMetrics application makes the answer OpenMetrics, its # EOF last', async (t) => {
  const app = await endpoint(t, { status: 200, type: 'application/openmetrics-text; version=1.0.0; charset=utf-8', body: APP_OPENMETRICS });
  const { get } = await merged(t, app);
  const r = await get('/stats/prometheus', SCRAPE_HEADERS);
  t.equal(r.type, FMT_OPENMETRICS_1_0_0);
  t.ok(r.body.endsWith('app_hits_total 41\n# EOF\n'));
  t.equal(r.body.match(/# EOF/g)?.length, 1);
});

t.test('the merge: the application down or failing leaves the rest and counts the failure', async (t) => {
  const down = await freePort();
  const { get } = await merged(t, down);
  const failures = (body: string) => metricValue(body, 'scrape_failures_total', 'type="application"') ?? 0;
  const r1 = await get('/stats/prometheus');
  t.equal(r1.status, 200);
  t.equal(r1.type, FMT_TEXT, 'text when the application did not answer');
  t.match(r1.body, /istio_requests_total\{reporter="destination"\} 3\n$/, 'the proxy part closes the answer');
  const r2 = await get('/stats/prometheus');
  t.ok(failures(r2.body) > failures(r1.body), 'scrape_failures_total{type="application"} counts each failure');

  const app = await endpoint(t, { status: 500, type: 'text/plain', body: 'boom' });
  const { get: get2 } = await merged(t, app);
  const r3 = await get2('/stats/prometheus');
  t.equal(r3.status, 200);
  t.notMatch(r3.body, /boom/, "a failed application's body is not merged");
  t.ok(failures(r3.body) > failures(r2.body));
});

t.test('the merge streams: a proxy exposition of 24 MiB passes through whole; a part without a last newline gets one', async (t) => {
  const line = `istio_requests_total{reporter="source",destination_service="${'x'.repeat(600)}"} 1\n`;
  const big = `# TYPE istio_requests_total counter\n${line.repeat(Math.ceil((24 * 1048576) / line.length))}`;
  const proxy = await endpoint(t, { status: 200, type: 'text/plain; version=0.0.4', body: big.slice(0, -1) });
  const app = await endpoint(t, { status: 200, type: 'text/plain', body: 'app_hits 41' });
  const server = new StatusServer({
    port: 0,
    host: '127.0.0.1',
    readiness: { check: async () => undefined },
    admin: new AdminClient('127.0.0.1', 9),
    proxyStatsPort: proxy.port,
    app: { port: String(app.port), path: '/m' },
    onQuit: () => {},
    onDrain: () => {},
  });
  const port = await server.start();
  t.teardown(() => server.stop());
  const r = await fetch(`http://127.0.0.1:${port}/stats/prometheus`);
  t.equal(r.headers.get('content-length'), null, 'chunked: the answer is not held whole to count it');
  const body = await r.text();
  const from = body.indexOf('# TYPE istio_requests_total');
  t.ok(from > 0, 'agent metrics first');
  t.equal(body.slice(from), `${big}app_hits 41\n`, 'the proxy part byte for byte, a newline added to each part that lacked one');
});
