// `pilot-discovery request <method> <path> [<body>]` against a live monitoring port, with the behaviour of
// Istio's pilot/pkg/request: the body printed, 404 printed too, other statuses above 399 an error.
import * as http from 'node:http';
import * as net from 'node:net';
import { PassThrough } from 'node:stream';
import t from 'tap';
import { pilotDiscovery } from '../../commands/pilot-discovery';
import { CommandError, type RunContext } from '../../src/cli/context';
import { makeRequestHandler, MONITORING_ADDRESS } from '../../src/meshd/request-command';
import { proxy, startTestDaemon } from './helpers';

const requestSpec = pilotDiscovery.root.subcommands!.find((c) => c.name === 'request')!;

async function runRequest(address: string, args: string[]): Promise<{ code: number; stdout: string }> {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d) => (out += d));
  const ctx: RunContext = {
    program: pilotDiscovery,
    path: ['request'],
    command: requestSpec,
    flags: {},
    changed: new Set(),
    args,
    env: {},
    stdout,
    stderr: new PassThrough(),
  };
  const code = await makeRequestHandler(address)(ctx);
  return { code, stdout: out };
}

t.test('the command talks to the monitoring port, like Istio', async (t) => {
  t.equal(MONITORING_ADDRESS, '127.0.0.1:15014');
  t.equal(requestSpec.run, 'discovery.request');
});

t.test('GET a debug page of a running daemon', async (t) => {
  const { daemon, providers } = await startTestDaemon(t);
  const addr = daemon.addresses.monitoring!.address;
  providers.xds.connections_ = [{ id: `${proxy().nodeId}-1`, proxy: proxy(), peerAddress: '10.0.0.7:1', connectedAt: 0, watched: [] }];
  const syncz = await runRequest(addr, ['GET', '/debug/syncz']);
  t.equal(syncz.code, 0);
  t.equal(syncz.stdout, '[{"cluster_id":"Orchestrator","proxy":"reviews-v1-abc.default","proxy_type":"sidecar","istio_version":"1.26.0"}]\n');
  const list = await runRequest(addr, ['GET', 'debug/list']);
  t.match(list.stdout, /^\["adsz",/, 'a path without the leading slash works');
  const notFound = await runRequest(addr, ['GET', '/no/such/page']);
  t.equal(notFound.code, 0, 'a 404 is not an error');
  t.equal(notFound.stdout, '404 page not found\n\n');
  await t.rejects(
    runRequest(addr, ['GET', '/debug/config_dump']),
    new CommandError('received unsuccessful status code 400: You must provide a proxyID in the query string\n'),
  );
});

t.test('method, path and body are sent as given', async (t) => {
  const seen: Array<{ method?: string; url?: string; body: string }> = [];
  const stub = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, body });
      res.end('fine');
    });
  });
  await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => stub.close(() => r())));
  const addr = `127.0.0.1:${(stub.address() as net.AddressInfo).port}`;
  t.same(await runRequest(addr, ['POST', '/want/path', 'body']), { code: 0, stdout: 'fine\n' });
  t.same(await runRequest(addr, ['PUT', 'want/path']), { code: 0, stdout: 'fine\n' });
  t.same(seen, [
    { method: 'POST', url: '/want/path', body: 'body' },
    { method: 'PUT', url: '/want/path', body: '' },
  ]);
});

t.test('a daemon that is not running: a clear error', async (t) => {
  const port = await new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
  const err = await runRequest(`127.0.0.1:${port}`, ['GET', '/debug/syncz']).catch((e: Error) => e);
  t.type(err, CommandError);
  t.equal(
    (err as Error).message,
    `Get "http://127.0.0.1:${port}/debug/syncz": dial tcp 127.0.0.1:${port}: connect: connection refused ` +
      `(is pilot-discovery running with its monitoring port on 127.0.0.1:${port}?)`,
  );
});
