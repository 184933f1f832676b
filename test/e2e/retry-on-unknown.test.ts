// A retry_on value the proxy does not know must not sink the route configuration (issue 24 item 1, "every
// other place"). Envoy keeps the conditions it knows and ignores the rest (router config_impl.cc:
// `retry_on_ = RetryStateImpl::parseRetryOn(retry_policy.retry_on()).first`); the engine used to refuse the
// whole route configuration, i.e. every virtual host of the port. The same static bootstrap on the built
// engine and, where installed, the real Envoy: both serve, and both still retry on 5xx.
import t from 'tap';
import http from 'node:http';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing } from '../helpers/envoy';
import { httpBootstrap, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePort } from '../helpers/ports';
import { summarize } from '../helpers/agent';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

t.test('retry_on with an unknown value: served, and the known conditions still retry (engine and Envoy)', { timeout: 120_000 }, async (t) => {
  // the backend fails the first request of each path with 503, then answers 200
  const seen = new Map<string, number>();
  const backend = http.createServer((req, res) => {
    const n = (seen.get(req.url ?? '') ?? 0) + 1;
    seen.set(req.url ?? '', n);
    res.writeHead(n === 1 ? 503 : 200).end(`attempt ${n}\n`);
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => backend.close(() => r())));
  const backendPort = (backend.address() as { port: number }).port;
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);

  const results: Array<{ status: number; body: string; attempts: number | undefined }> = [];
  for (const plane of dataPlanes()) {
    const port = await freePort();
    const routeConfig = {
      name: 'local',
      virtual_hosts: [
        {
          name: 'all',
          domains: ['*'],
          routes: [{ match: { prefix: '/' }, route: { cluster: 'backend', retry_policy: { retry_on: '5xx,not-a-policy', num_retries: 1 } } }],
        },
      ],
    };
    const run = await runStatic(
      t,
      plane,
      httpBootstrap({ port, admin: await freePort(), routeConfig, clusters: [loopbackCluster('backend', backendPort)] }),
      port,
      '/ready',
    );
    if ('refused' in run) {
      t.fail(`${plane} refused the route configuration:\n${summarize(run.refused)}`);
      continue;
    }
    const path = `/flaky-${plane}`;
    const r = await run.get(path);
    t.equal(r.status, 200, `${plane}: the 503 was retried (5xx kept)`);
    results.push({ status: r.status, body: r.body, attempts: seen.get(path) });
  }
  if (results.length === 2) t.same(results[0], results[1], 'engine verdict = Envoy verdict');
});
