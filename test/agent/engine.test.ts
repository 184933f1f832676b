// Without an `envoy` executable the agent runs the built-in engine (src/proxy) inside its own process, with
// the same bootstrap and the flags `pilot-agent envoy` takes.
import t from 'tap';
import * as fs from 'node:fs';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { built } from '../helpers/binary';
import { freePort, freePorts } from '../helpers/ports';
import { gatewayConfig } from '../helpers/mesh-yaml';
import { runAgent, summarize, GATEWAY_POD_ENV } from '../helpers/agent';
import { startDiscovery } from '../helpers/daemon';
import { tempDir } from '../helpers/temp';
import { waitFor } from '../helpers/wait';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

function childPids(pid: number): number[] {
  return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

t.test('no envoy executable: the agent runs the built-in engine in its own process with the bootstrap', async (t) => {
  const dir = tempDir(t);
  const configDir = path.join(dir, 'config');
  fs.mkdirSync(configDir);
  const ports = await freePorts('status', 'admin', 'envoyStatus', 'envoyMetrics', 'gw');
  fs.writeFileSync(path.join(configDir, 'gateway.yaml'), gatewayConfig(ports.gw));
  const daemon = await startDiscovery({ configDir });
  t.teardown(() => daemon.stop());
  const a = runAgent(['proxy', 'router'], {
    cwd: dir,
    env: {
      ...GATEWAY_POD_ENV,
      MESH_METAJSON_LABELS: '{"mesh":"ingressgateway"}',
      PROXY_STATUS_PORT: String(ports.envoyStatus),
      PROXY_METRICS_PORT: String(ports.envoyMetrics),
      PROXY_CONFIG: JSON.stringify({
        binaryPath: path.join(dir, 'no-such-envoy'),
        discoveryAddress: daemon.grpc,
        controlPlaneAuthPolicy: 'NONE',
        statusPort: ports.status,
        proxyAdminPort: ports.admin,
        terminationDrainDuration: '1s',
      }),
    },
  });
  t.teardown(() => a.stop());
  await a.waitForLog(/Proxy command: /);
  t.match(a.out(), /no envoy executable \(binaryPath .*no-such-envoy, PATH\): using the built-in proxy engine/);
  const cmd = /Proxy command: (.*)/.exec(a.out())![1]!;
  t.ok(
    cmd.startsWith(
      `built-in engine in the agent process (pid ${a.child.pid}): envoy -c ${path.join(dir, 'etc/mesh/proxy/envoy-rev.json')} --drain-time-s 45 --drain-strategy immediate`,
    ),
    `the engine runs inside the agent with Envoy's flags: ${cmd}`,
  );
  t.notOk(cmd.includes('--file-flush-interval-msec'), 'no Envoy-only flags for the built-in engine');
  await waitFor(
    () => `not ready with the built-in engine:\n${summarize(a.out())}`,
    async () => (await fetch(`http://127.0.0.1:${ports.status}/healthz/ready`)).status === 200,
    { timeoutMs: 60_000, intervalMs: 50 },
  );
  t.equal(
    (await fetch(`http://127.0.0.1:${ports.envoyStatus}/healthz/ready`)).status,
    200,
    "the engine's :15021 listener forwards readiness to the agent",
  );
  const dumpRes = await fetch(`http://127.0.0.1:${ports.admin}/config_dump`);
  const dumpText = await dumpRes.text();
  t.equal(dumpRes.status, 200, `/config_dump: ${dumpText.slice(0, 300)}`);
  let dump: { configs?: unknown[] } = {};
  try {
    dump = JSON.parse(dumpText) as typeof dump;
  } catch {
    // reported below
  }
  t.ok(Array.isArray(dump.configs), 'the engine serves /config_dump as JSON');
  t.same(childPids(a.child.pid!), [], 'one process per pod: no engine process beside the agent');
  const metrics = await (await fetch(`http://127.0.0.1:${ports.status}/stats/prometheus`)).text();
  t.match(metrics, /xds_proxy_requests/, 'agent metrics');
  a.child.kill('SIGTERM');
  t.equal(await a.exited, 0, 'graceful termination with the built-in engine');
});

t.test("built-in engine: a bootstrap it cannot run is the agent's exit status 1, with the engine's message", async (t) => {
  const dir = tempDir(t);
  const ports = { status: await freePort(), admin: await freePort() };
  // Istio's customConfigFile: used as it is; this one is not a bootstrap.
  fs.writeFileSync(path.join(dir, 'custom.json'), JSON.stringify({ static_resources: { clusters: 'not a list' } }));
  const daemon = await startDiscovery({ configDir: tempDir(t) });
  t.teardown(() => daemon.stop());
  const a = runAgent(['proxy', 'router'], {
    cwd: dir,
    env: {
      ...GATEWAY_POD_ENV,
      PROXY_CONFIG: JSON.stringify({
        binaryPath: path.join(dir, 'no-such-envoy'),
        customConfigFile: 'custom.json',
        discoveryAddress: daemon.grpc,
        controlPlaneAuthPolicy: 'NONE',
        statusPort: ports.status,
        proxyAdminPort: ports.admin,
      }),
    },
  });
  t.teardown(() => a.stop());
  t.equal(await a.exited, 1, summarize(a.out()));
  t.match(a.out(), /Error: .*custom\.json.*clusters/, "the engine's error names the file and the field");
  t.match(a.out(), /Envoy exited with error: exit status 1/);
});
