// The agent's application health check (Istio's pkg/istio-agent/health): probers against real local servers
// with Istio's unhealthy messages, and the checker's thresholds (a report only when the state changes).
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { WorkloadHealthChecker, type ProbeEvent } from '../../src/agent/health/checker';
import { execProber, httpProber, parseReadinessProbe, tcpProber } from '../../src/agent/health/probe';
import { freePort } from '../helpers/ports';
import { waitFor } from '../helpers/wait';

t.test('probers', async (t) => {
  let code = 200;
  let ua = '';
  const server = http.createServer((req, res) => {
    ua = req.headers['user-agent'] ?? '';
    res.statusCode = code;
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const get = httpProber({ path: '/ready', port, scheme: 'http', httpHeaders: [] }, '127.0.0.1');
  t.equal(await get(1000), undefined, '200 is healthy');
  t.equal(ua, 'istio-probe/1.0', "Istio's probe user agent");
  code = 302;
  t.equal(await get(1000), undefined, '3xx is healthy');
  code = 503;
  t.equal(await get(1000), 'status code was not from [200,400), bad code 503');
  const closed = await freePort();
  t.equal(
    await httpProber({ path: '/', port: closed, scheme: 'http', httpHeaders: [] }, '127.0.0.1')(1000),
    `Get "http://127.0.0.1:${closed}/": dial tcp 127.0.0.1:${closed}: connect: connection refused`,
  );
  t.equal(await tcpProber({ port }, '127.0.0.1')(1000), undefined, 'TCP connect');
  t.equal(await tcpProber({ port: closed }, '127.0.0.1')(1000), `dial tcp 127.0.0.1:${closed}: connect: connection refused`);
  t.equal(await execProber({ command: ['true'] })(1000), undefined);
  t.equal(await execProber({ command: ['false'] })(1000), 'exit status 1');
  t.equal(await execProber({ command: ['sleep', '5'] })(200), 'command timeout exceeded: signal: killed');
});

t.test('thresholds: reported once per change, after successThreshold / failureThreshold in a row', async (t) => {
  const port = await freePort();
  let up: net.Server | undefined;
  const setUp = async (on: boolean) => {
    if (on && !up) {
      up = net.createServer((c) => c.destroy());
      await new Promise<void>((r) => up!.listen(port, '127.0.0.1', r));
    } else if (!on && up) {
      await new Promise<void>((r) => up!.close(() => r()));
      up = undefined;
    }
  };
  t.teardown(() => setUp(false));
  const probe = parseReadinessProbe({ tcpSocket: { port, host: '127.0.0.1' }, successThreshold: 2, failureThreshold: 2 })!;
  probe.periodMs = 40; // the API counts in seconds; a test cannot wait that long
  const events: ProbeEvent[] = [];
  const checker = new WorkloadHealthChecker(probe, { ipAddresses: ['10.255.255.1'] });
  t.teardown(() => checker.stop());
  checker.start((e) => events.push(e));
  const until = (n: number) => waitFor(`${n} probe events`, () => events.length >= n, { timeoutMs: 5000, intervalMs: 10 });
  await until(1);
  t.match(events, [{ healthy: false, message: `dial tcp 127.0.0.1:${port}: connect: connection refused` }], 'unhealthy after two failures');
  await setUp(true);
  await until(2);
  t.same(events[1], { healthy: true });
  await new Promise((r) => setTimeout(r, 300));
  t.equal(events.length, 2, 'no repeated report while the state holds');
});
