// `pilot-agent wait` and `pilot-agent request` against local HTTP servers, with Istio's messages
// (app/wait.go, app/request.go, pilot/pkg/request): the timeout error with the last error, Go-style
// transport errors, the allowed debug ports, 404 printed as a success and other errors refused.
import t, { type Test } from 'tap';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { makeRequestHandler } from '../../src/agent/request-command';
import { checkIfReady, waitUntilReady } from '../../src/agent/wait-command';
import { freePort } from '../helpers/ports';
import { requestContext } from '../helpers/agent';

async function server(t: Test, handler: http.RequestListener): Promise<number> {
  const s = http.createServer(handler);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    s.closeAllConnections();
    s.close();
  });
  return (s.address() as AddressInfo).port;
}

t.test('wait: polls every period until 200', async (t) => {
  const seen: number[] = [];
  const port = await server(t, (_req, res) => {
    seen.push(Date.now());
    res.writeHead(seen.length < 3 ? 503 : 200);
    res.end();
  });
  const start = Date.now();
  await waitUntilReady({ url: `http://127.0.0.1:${port}/healthz/ready`, periodMs: 100, requestTimeoutMs: 500, timeoutMs: 5000 });
  t.equal(seen.length, 3, 'two 503s, then ready');
  t.ok(seen[0]! - start >= 90, 'the first attempt waits one period');
  t.ok(seen[2]! - seen[1]! >= 90, 'attempts are a period apart');
});

t.test('wait: gives up after the timeout with the last error', async (t) => {
  const port = await server(t, (_req, res) => {
    res.writeHead(503);
    res.end();
  });
  const start = Date.now();
  await t.rejects(waitUntilReady({ url: `http://127.0.0.1:${port}/x`, periodMs: 100, requestTimeoutMs: 500, timeoutMs: 1000 }), {
    message: 'timeout waiting for proxy to become ready. Last error: HTTP status code 503',
  });
  const took = Date.now() - start;
  // At most one period (100 ms) past the timeout, plus 400 ms of timer lateness on a loaded machine (1006-1040 ms
  // measured at load 15 on two cores).
  t.ok(took >= 950 && took < 1000 + 100 + 400, `after --timeoutSeconds (${took}ms)`);
  await t.rejects(
    waitUntilReady({ url: `http://127.0.0.1:${port}/x`, periodMs: 1000, requestTimeoutMs: 500, timeoutMs: 200 }),
    {
      message: 'timeout waiting for proxy to become ready. Last error: <nil>',
    },
    'no attempt before the timeout: Go prints a nil error',
  );
});

t.test('wait: transport errors read like Go', async (t) => {
  const closed = await freePort();
  t.equal(
    await checkIfReady(`http://127.0.0.1:${closed}/healthz/ready`, 500),
    `Get "http://127.0.0.1:${closed}/healthz/ready": dial tcp 127.0.0.1:${closed}: connect: connection refused`,
  );
  const port = await server(t, () => {
    // never answers
  });
  t.equal(
    await checkIfReady(`http://127.0.0.1:${port}/healthz/ready`, 200),
    `Get "http://127.0.0.1:${port}/healthz/ready": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
  );
});

t.test('request: allowed ports, body printed, 404 printed, other errors refused', async (t) => {
  const got: Array<{ method?: string; url?: string; body: string }> = [];
  const port = await server(t, (req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      got.push({ method: req.method, url: req.url, body });
      if (req.url === '/missing') {
        res.writeHead(404);
        res.end('not here');
      } else if (req.url === '/broken') {
        res.writeHead(500);
        res.end('boom');
      } else res.end('{"ok":true}');
    });
  });
  const handler = makeRequestHandler(() => `127.0.0.1:${port}`);
  const out = new PassThrough();
  let printed = '';
  out.on('data', (d) => (printed += d));

  t.equal(await handler(requestContext(['GET', 'config_dump'], 15000, out)), 0);
  t.equal(printed, '{"ok":true}\n', 'the body, and nothing else');
  t.same(got[0], { method: 'GET', url: '/config_dump', body: '' }, 'the path gets one leading slash');
  printed = '';
  t.equal(await handler(requestContext(['POST', '/logging?level=debug', 'payload'], 15020, out)), 0);
  t.same(got[1], { method: 'POST', url: '/logging?level=debug', body: 'payload' });
  printed = '';
  t.equal(await handler(requestContext(['GET', 'missing'], 15021, out)), 0, '404 is not an error');
  t.equal(printed, 'not here\n');
  await t.rejects(handler(requestContext(['GET', 'broken'], 15004, out)), { message: 'received unsuccessful status code 500: boom' });
  for (const bad of [15001, 15090, 8080]) {
    await t.rejects(handler(requestContext(['GET', 'stats'], bad, out)), {
      message: `debug port ${bad} is not in allowed list [15000 15004 15020 15021]`,
    });
  }
  t.equal(got.length, 4, 'refused ports are never contacted');
  const closed = await freePort();
  await t.rejects(makeRequestHandler(() => `localhost:${closed}`)(requestContext(['GET', 'stats'], 15000, out)), {
    message: new RegExp(`^Get "http://localhost:${closed}/stats": dial tcp (127\\.0\\.0\\.1|\\[::1\\]):${closed}: connect: connection refused$`),
  });
});
