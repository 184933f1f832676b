// Access logs as istiod 1.26 configures them (pilot/pkg/model/telemetry_logging.go: EnvoyTextLogFormat through
// text_format_source, EnvoyJSONLogFormatIstio through json_format with sort_properties false, omit_empty_values,
// the req_without_query and CEL formatters, the CEL ExpressionFilter) on the HCM and on tcp_proxy, run on the
// built engine and, where installed, the real Envoy 1.36 with the same static bootstrap and the same requests.
// Expected lines are written from Envoy's command operator documentation; engine and Envoy must then agree field
// by field once the values that differ between two runs (times, ephemeral ports) are masked.
import t, { type Test } from 'tap';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing, type DataPlane } from '../helpers/envoy';
import { httpBootstrap, loopback, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePort } from '../helpers/ports';
import { summarize } from '../helpers/agent';
import { tempDir } from '../helpers/temp';
import { waitForValue } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

// Istio 1.26's EnvoyTextLogFormat and EnvoyJSONLogFormatIstio (pilot/pkg/model/telemetry_logging.go)
const ISTIO_TEXT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% %RESPONSE_FLAGS% ' +
  '%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% "%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% ' +
  '%DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" "%REQ(X-REQUEST-ID)%" ' +
  '"%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% ' +
  '%DOWNSTREAM_REMOTE_ADDRESS% %REQUESTED_SERVER_NAME% %ROUTE_NAME%\n';

const ISTIO_JSON = {
  start_time: '%START_TIME%',
  route_name: '%ROUTE_NAME%',
  method: '%REQ(:METHOD)%',
  path: '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%',
  protocol: '%PROTOCOL%',
  response_code: '%RESPONSE_CODE%',
  response_flags: '%RESPONSE_FLAGS%',
  response_code_details: '%RESPONSE_CODE_DETAILS%',
  connection_termination_details: '%CONNECTION_TERMINATION_DETAILS%',
  bytes_received: '%BYTES_RECEIVED%',
  bytes_sent: '%BYTES_SENT%',
  duration: '%DURATION%',
  upstream_service_time: '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%',
  x_forwarded_for: '%REQ(X-FORWARDED-FOR)%',
  user_agent: '%REQ(USER-AGENT)%',
  request_id: '%REQ(X-REQUEST-ID)%',
  authority: '%REQ(:AUTHORITY)%',
  upstream_host: '%UPSTREAM_HOST%',
  upstream_cluster: '%UPSTREAM_CLUSTER_RAW%',
  upstream_local_address: '%UPSTREAM_LOCAL_ADDRESS%',
  downstream_local_address: '%DOWNSTREAM_LOCAL_ADDRESS%',
  downstream_remote_address: '%DOWNSTREAM_REMOTE_ADDRESS%',
  requested_server_name: '%REQUESTED_SERVER_NAME%',
  upstream_transport_failure_reason: '%UPSTREAM_TRANSPORT_FAILURE_REASON%',
};

const FILE = 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog';

function fileLog(file: string, logFormat: object, filter?: object): object {
  return {
    name: 'envoy.access_loggers.file',
    ...(filter ? { filter } : {}),
    typed_config: { '@type': FILE, path: file, log_format: logFormat },
  };
}

const textSource = (s: string) => ({ text_format_source: { inline_string: s } });

function accessLogs(dir: string): object[] {
  return [
    fileLog(path.join(dir, 'text.log'), textSource(ISTIO_TEXT)),
    fileLog(path.join(dir, 'json.log'), { json_format: ISTIO_JSON, json_format_options: { sort_properties: false } }),
    fileLog(path.join(dir, 'omit.log'), {
      ...textSource('%REQ(X-ABSENT)%|%RESPONSE_CODE%|%REQ_WITHOUT_QUERY(:PATH)%|%CEL(request.url_path)%|%CEL(response.code + 1)%\n'),
      omit_empty_values: true,
      formatters: [
        {
          name: 'envoy.formatter.req_without_query',
          typed_config: { '@type': 'type.googleapis.com/envoy.extensions.formatter.req_without_query.v3.ReqWithoutQuery' },
        },
        { name: 'envoy.formatter.cel', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.formatter.cel.v3.Cel' } },
      ],
    }),
    // Envoy 1.36 keeps null values and '-' in JSON whatever omit_empty_values says, and sorts the keys
    fileLog(path.join(dir, 'json-omit.log'), {
      json_format: { code: '%RESPONSE_CODE%', absent: '%REQ(X-ABSENT)%', mixed: 'a-%REQ(X-ABSENT)%-b', nested: { z: 1, a: '%REQ(:METHOD)%' } },
      omit_empty_values: true,
    }),
    // Telemetry accessLogging filter.expression as istiod writes it
    fileLog(path.join(dir, 'errors.log'), textSource('%RESPONSE_CODE% %REQ(:PATH)%\n'), {
      extension_filter: {
        name: 'envoy.access_loggers.extension_filters.cel',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter',
          expression: "response.code >= 400 && request.headers['x-log'] == 'yes'",
        },
      },
    }),
    // the stream logger (a file logger on /dev/stdout is the same output for the engine; Envoy cannot open
    // /dev/stdout when its standard output is the socket pair the test reads)
    {
      name: 'envoy.access_loggers.stdout',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
        log_format: textSource('stream-stdout %RESPONSE_CODE% %REQ(:PATH)%\n'),
      },
    },
    fileLog(path.join(dir, 'status.log'), textSource('%RESPONSE_CODE%\n'), {
      and_filter: {
        filters: [
          { status_code_filter: { comparison: { op: 'GE', value: { default_value: 200, runtime_key: 'k' } } } },
          { header_filter: { header: { name: 'x-log', string_match: { exact: 'yes' } } } },
        ],
      },
    }),
  ];
}

/** Lines of `file` once `n` of them (not the readiness probe's) are written. */
async function lines(file: string, n: number, skip = '/ready'): Promise<string[]> {
  return waitForValue(
    `${n} lines in ${path.basename(file)}`,
    () => {
      const all = fs.existsSync(file)
        ? fs
            .readFileSync(file, 'utf8')
            .split('\n')
            .filter((l) => l && !l.includes(skip))
        : [];
      return all.length >= n ? all : undefined;
    },
    { timeoutMs: 15_000, intervalMs: 100 },
  );
}

/** Masks what differs between two runs: times, ephemeral ports, the listeners' own ports; names the backends'. */
function masked(line: string, ports: { http: number; tcp: number; backend: number; echo: number }): string {
  const named: Record<string, string> = { [ports.http]: 'LISTENER', [ports.tcp]: 'LISTENER', [ports.backend]: 'BACKEND', [ports.echo]: 'ECHO' };
  return line
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, 'TIME')
    .replace(/127\.0\.0\.1:(\d{2,5})\b/g, (_m, p: string) => `127.0.0.1:${named[p] ?? 'EPHEMERAL'}`);
}

type Run = {
  stdout: string[];
  text: string[];
  json: object[];
  omit: string[];
  jsonOmit: object[];
  errors: string[];
  status: string[];
  tcp: string[];
};

async function runPlane(t: Test, plane: DataPlane, backendPort: number, echoPort: number): Promise<Run | undefined> {
  const dir = tempDir(t, `mesh-access-log-${plane}-`);
  const port = await freePort();
  const tcpPort = await freePort();
  const routeConfig = {
    name: 'local',
    virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ name: 'default', match: { prefix: '/' }, route: { cluster: 'backend' } }] }],
  };
  const bootstrap = httpBootstrap({
    port,
    admin: await freePort(),
    routeConfig,
    clusters: [loopbackCluster('backend', backendPort), loopbackCluster('echo', echoPort)],
    hcmExtra: { access_log: accessLogs(dir) },
  }) as { static_resources: { listeners: object[] } };
  bootstrap.static_resources.listeners.push({
    name: 'tcp',
    address: loopback(tcpPort),
    filter_chains: [
      {
        filters: [
          {
            name: 'envoy.filters.network.tcp_proxy',
            typed_config: {
              '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
              stat_prefix: 'tcp',
              cluster: 'echo',
              access_log: [fileLog(path.join(dir, 'tcp.log'), textSource(ISTIO_TEXT))],
            },
          },
        ],
      },
    ],
  });
  const run = await runStatic(t, plane, bootstrap, port, '/ready');
  if ('refused' in run) {
    t.fail(`${plane} refused the access log configuration:\n${summarize(run.refused)}`);
    return undefined;
  }
  const headers = { 'user-agent': 'curl/8.5.0', 'x-request-id': 'rid-1', 'x-log': 'yes' };
  t.equal((await run.get('/ok?x=1', headers)).status, 200);
  t.equal((await run.get('/missing', headers)).status, 404);
  t.equal((await run.get('/missing', { ...headers, 'x-log': 'no' })).status, 404);
  // one TCP connection: 5 bytes out, echoed back
  await new Promise<void>((resolve, reject) => {
    const s = net.connect(tcpPort, '127.0.0.1', () => s.write('hello'));
    s.once('data', () => s.end());
    s.once('close', () => resolve());
    s.once('error', reject);
  });
  const m = (l: string) => masked(l, { http: port, tcp: tcpPort, backend: backendPort, echo: echoPort });
  const stdout = await waitForValue(
    `${plane}: access log lines on stdout`,
    () => {
      const ls = run
        .log()
        .split('\n')
        .filter((l) => /^stream-stdout \d+ \/(ok|missing)/.test(l));
      return ls.length >= 3 ? ls.sort() : undefined;
    },
    { timeoutMs: 15_000, intervalMs: 100 },
  );
  return {
    stdout,
    text: (await lines(path.join(dir, 'text.log'), 3)).map(m),
    json: (await lines(path.join(dir, 'json.log'), 3)).map((l) => JSON.parse(m(l)) as object),
    omit: await lines(path.join(dir, 'omit.log'), 3),
    jsonOmit: (await lines(path.join(dir, 'json-omit.log'), 4, '\u0000')).map((l) => JSON.parse(l) as object),
    errors: await lines(path.join(dir, 'errors.log'), 1),
    status: await lines(path.join(dir, 'status.log'), 2, '\u0000'),
    tcp: (await lines(path.join(dir, 'tcp.log'), 1)).map(m),
  };
}

t.test("Istio's access log formats and filters: engine and Envoy write the same lines", { timeout: 180_000 }, async (t) => {
  const backend = http.createServer((req, res) => {
    const ok = req.url?.startsWith('/ok') || req.url === '/ready';
    res.writeHead(ok ? 200 : 404, { 'content-type': 'text/plain' }).end(ok ? 'hello\n' : 'nope\n');
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => backend.close(() => r())));
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => echo.close(() => r())));
  const backendPort = (backend.address() as { port: number }).port;
  const echoPort = (echo.address() as { port: number }).port;
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);

  const runs = new Map<DataPlane, Run>();
  for (const plane of dataPlanes()) {
    const r = await runPlane(t, plane, backendPort, echoPort);
    if (!r) continue;
    runs.set(plane, r);
    // the documented values, independent of either implementation
    t.match(
      r.text[0],
      new RegExp(
        `^\\[TIME\\] "GET /ok\\?x=1 HTTP/1\\.1" 200 - via_upstream - "-" 0 6 \\d+ \\d+ "-" "curl/8\\.5\\.0" "rid-1" ` +
          `"127\\.0\\.0\\.1:LISTENER" "127\\.0\\.0\\.1:BACKEND" backend 127\\.0\\.0\\.1:EPHEMERAL 127\\.0\\.0\\.1:LISTENER 127\\.0\\.0\\.1:EPHEMERAL - default$`,
      ),
      `${plane}: Istio's text line for a 200`,
    );
    t.match(r.text[1], /"GET \/missing HTTP\/1\.1" 404 - via_upstream - "-" 0 5 /, `${plane}: Istio's text line for a 404`);
    t.match(r.json[0], { method: 'GET', path: '/ok?x=1', protocol: 'HTTP/1.1', response_code: 200, bytes_sent: 6, response_flags: '-' });
    t.same(
      r.omit,
      ['|200|/ok|/ok|201', '|404|/missing|/missing|405', '|404|/missing|/missing|405'],
      `${plane}: omit_empty_values, REQ_WITHOUT_QUERY, CEL`,
    );
    t.strictSame(r.jsonOmit[3], { absent: null, code: 404, mixed: 'a--b', nested: { a: 'GET', z: 1 } }, `${plane}: JSON nulls, '-' and nesting`);
    t.same(Object.keys(r.json[0]!), Object.keys(ISTIO_JSON).sort(), `${plane}: JSON keys sorted`);
    t.same(
      r.stdout,
      ['stream-stdout 200 /ok?x=1', 'stream-stdout 404 /missing', 'stream-stdout 404 /missing'],
      `${plane}: the stdout logger writes to standard output`,
    );
    t.same(r.errors, ['404 /missing'], `${plane}: the CEL filter logs the one 4xx with x-log: yes`);
    t.same(r.status, ['200', '404'], `${plane}: status and header filters`);
    t.match(
      r.tcp[0],
      new RegExp(
        `^\\[TIME\\] "- - -" 0 - - - "-" 5 5 \\d+ - "-" "-" "-" "-" "127\\.0\\.0\\.1:ECHO" echo 127\\.0\\.0\\.1:EPHEMERAL ` +
          `127\\.0\\.0\\.1:LISTENER 127\\.0\\.0\\.1:EPHEMERAL - -$`,
      ),
      `${plane}: Istio's text line for a TCP connection`,
    );
  }
  const engine = runs.get('engine');
  const envoy = runs.get('envoy');
  if (engine && envoy) {
    // durations and upstream service times may differ by a millisecond or two: compared as present, not equal
    const dur = (l: string) => l.replace(/(" 0 \d+ )\d+ \d+ /, '$1D S ').replace(/" (\d+) (\d+) \d+ - "/, '" $1 $2 D - "');
    t.same(engine.text.map(dur), envoy.text.map(dur), 'text lines: engine = Envoy');
    const noTimes = (o: object) => ({ ...o, duration: 'D', upstream_service_time: 'S' });
    t.same(engine.json.map(noTimes), envoy.json.map(noTimes), 'JSON lines: engine = Envoy');
    t.same(Object.keys(engine.json[0]!), Object.keys(envoy.json[0]!), 'JSON keys in the same order');
    t.same(engine.jsonOmit, envoy.jsonOmit, 'JSON with omit_empty_values: engine = Envoy');
    t.same(engine.omit, envoy.omit);
    t.same(engine.tcp.map(dur), envoy.tcp.map(dur), 'TCP lines: engine = Envoy');
  }
});
