// An access-log format naming a command Envoy knows but the engine does not render must not sink the listener
// (issue 24 item 1, "every other place"): every HCM carries the mesh's access log, so one such command in
// meshConfig.accessLogFormat refused every listener of every proxy. Envoy serves it; a command Envoy does not
// know it refuses too ("Not supported field in StreamInfo"). The same static bootstrap on the built engine and,
// where installed, the real Envoy: the same verdicts, and the engine logs "-" for what it has no value for.
import t from 'tap';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { built } from '../helpers/binary';
import { dataPlanes, envoyMissing } from '../helpers/envoy';
import { httpBootstrap, loopbackCluster, runStatic } from '../helpers/static-plane';
import { freePort } from '../helpers/ports';
import { summarize } from '../helpers/agent';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

t.test('access log commands: Envoy-known ones are served, unknown ones refused (engine and Envoy)', { timeout: 120_000 }, async (t) => {
  const backend = http.createServer((_req, res) => res.end('ok\n'));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => backend.close(() => r())));
  const backendPort = (backend.address() as { port: number }).port;
  if (envoyMissing()) t.comment(`the real Envoy is not run: ${envoyMissing()}`);
  const dir = tempDir(t, 'mesh-access-log-');

  const start = async (plane: string, format: string) => {
    const port = await freePort();
    const logFile = path.join(dir, `${plane}-${port}.log`);
    const hcmExtra = {
      access_log: [
        {
          name: 'envoy.access_loggers.file',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog',
            path: logFile,
            log_format: { text_format_source: { inline_string: format } },
          },
        },
      ],
    };
    const routeConfig = {
      name: 'local',
      virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'backend' } }] }],
    };
    const run = await runStatic(
      t,
      plane as 'engine' | 'envoy',
      httpBootstrap({ port, admin: await freePort(), routeConfig, clusters: [loopbackCluster('backend', backendPort)], hcmExtra }),
      port,
    );
    return { run, logFile };
  };

  const lines: string[] = [];
  for (const plane of dataPlanes()) {
    // Envoy knows both commands; the engine renders neither yet
    const { run, logFile } = await start(plane, '%RESPONSE_CODE% %UPSTREAM_PEER_URI_SAN% %TLS_JA3_FINGERPRINT%\n');
    if ('refused' in run) {
      t.fail(`${plane} refused the access log format:\n${summarize(run.refused)}`);
    } else {
      t.equal((await run.get('/logged')).status, 200, `${plane}: served`);
      await waitFor(
        () => `${plane} wrote no access log line`,
        () => fs.existsSync(logFile) && fs.readFileSync(logFile, 'utf8').includes('\n'),
        { timeoutMs: 15_000, intervalMs: 50 },
      );
      const line = fs
        .readFileSync(logFile, 'utf8')
        .split('\n')
        .find((l) => l.startsWith('200'));
      t.equal(line, '200 - -', `${plane}: no value is "-"`);
      lines.push(line ?? '');
    }
    const bad = await start(plane, '%RESPONSE_CODE% %NOT_AN_ENVOY_COMMAND%\n');
    t.ok('refused' in bad.run, `${plane}: a command Envoy does not know is refused`);
    if ('refused' in bad.run) t.match(bad.run.refused, 'Not supported field in StreamInfo: NOT_AN_ENVOY_COMMAND', `${plane}: naming it`);
  }
  if (lines.length === 2) t.equal(lines[0], lines[1], 'engine line = Envoy line');
});
