// `pilot-agent envoy` as the agent runs it: Envoy's flags, a bootstrap file, exit 1 with the reason on
// a bad bootstrap, exit 0 on /quitquitquit and on SIGTERM.
import t from 'tap';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { backend, hcm, request, sock, listenerJson, anyHost, staticBootstrap, staticClusterJson } from './helpers';
import { freePort } from '../helpers/ports';
import { waitForValue } from '../helpers/wait';
import { tempDir } from '../helpers/temp';

const FIXTURE = path.join(import.meta.dirname, 'fixtures', 'envoy-command.ts');

function launch(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  return { child, exited, output: () => out };
}

const dir = tempDir(t, 'mesh-envoy-cmd-');

t.test('a bad bootstrap exits 1 naming the field', async (t) => {
  const f = path.join(dir, 'bad.yaml');
  writeFileSync(f, 'admin: {address: {socket_address: {address: 127.0.0.1, port_value: 0}}}\nstatic_resources: {clusters: [{name: c, typo: 1}]}\n');
  const p = launch(['-c', f]);
  t.equal(await p.exited, 1);
  t.match(p.output(), `Error: ${f}: static_resources.clusters[0].typo: unknown field in envoy.config.cluster.v3.Cluster`);
  const q = launch(['-c', f, '--allow-unknown-static-fields', '--log-level', 'nope']);
  t.equal(await q.exited, 1);
  t.match(q.output(), "error: invalid log level specified 'nope'");
});

t.test('serves a static bootstrap with Envoy flags; /quitquitquit and SIGTERM exit 0', async (t) => {
  const b = await backend('b');
  t.teardown(() => b.close());
  const [admin, port] = [await freePort(), await freePort()];
  const f = path.join(dir, 'envoy.json');
  writeFileSync(
    f,
    JSON.stringify(
      staticBootstrap(
        { id: 'router~127.0.0.1~gw.ns~ns.svc.cluster.local', cluster: 'gw' },
        [listenerJson('l', port, hcm({ routeConfig: anyHost([{ match: { prefix: '/' }, route: { cluster: 'b' } }]) }))],
        [staticClusterJson('b', [b.port], { connect_timeout: '1s' })],
        admin,
      ),
    ),
  );
  const args = [
    '-c',
    f,
    '--drain-time-s',
    '45',
    '--drain-strategy',
    'immediate',
    '--parent-shutdown-time-s',
    '60',
    '--local-address-ip-version',
    'v4',
    '--log-level',
    'warning',
    '--component-log-level',
    'misc:error',
    '--concurrency',
    '2',
    '--disable-hot-restart',
    '--allow-unknown-static-fields',
    '--log-format',
    '%Y-%m-%dT%T.%fZ\t%l\tenvoy %n %g:%#\t%v\tthread=%t',
  ];
  const p = launch(args);
  t.teardown(() => p.child.kill('SIGKILL'));
  await waitForValue('LIVE', async () => (await fetch(`http://127.0.0.1:${admin}/ready`)).status === 200, { timeoutMs: 20_000, intervalMs: 20 });
  t.equal((await request(port, '/x')).body, 'b /x');
  const info = (await (await fetch(`http://127.0.0.1:${admin}/server_info`)).json()) as { command_line_options: Record<string, unknown> };
  t.equal(info.command_line_options.drain_strategy, 'Immediate');
  t.equal(info.command_line_options.drain_time, '45s');
  t.equal(info.command_line_options.config_path, f);
  t.equal((await fetch(`http://127.0.0.1:${admin}/quitquitquit`, { method: 'POST' })).status, 200);
  t.equal(await p.exited, 0, '/quitquitquit exits 0');

  const q = launch(args);
  t.teardown(() => q.child.kill('SIGKILL'));
  await waitForValue('LIVE again', async () => (await fetch(`http://127.0.0.1:${admin}/ready`)).status === 200, {
    timeoutMs: 20_000,
    intervalMs: 20,
  });
  q.child.kill('SIGTERM');
  t.equal(await q.exited, 0, 'SIGTERM exits 0');
  t.match(q.output(), /\twarning\tenvoy main source\/main:0\tcaught SIGTERM\tthread=\d+/, "Istio's --log-format is honoured");
});
