// Shutdown of a real daemon process: SIGTERM/SIGINT stop accepting, let the xDS server finish, close the
// streams and exit 0 within --shutdownDuration, forcing the rest when pushes do not finish in time.
import { type ChildProcess, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { pilotDiscovery } from '../../commands/pilot-discovery';
import { CommandError, type RunContext } from '../../src/cli/context';
import { runDaemon } from '../../src/meshd/daemon';
import { FakeProviders, HOLD_METHOD, request } from './helpers';
import { waitForValue } from '../helpers/wait';

const here = path.dirname(fileURLToPath(import.meta.url));
const FIXTURE = path.join(here, 'fixtures', 'run-daemon.ts');
const ROOT = path.resolve(here, '..', '..');

interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  address: (purpose: string) => string;
}

async function spawnDaemon(t: { teardown(fn: () => unknown): void }, cfg: object): Promise<Running> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, JSON.stringify(cfg)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  await waitForValue('the daemon to start', () => (out.includes('ControlZ listening on') ? true : undefined), { timeoutMs: 30_000 }).catch(
    (e: Error) => {
      throw new Error(`${e.message}\n${out}`);
    },
  );
  const address = (purpose: string) => {
    const m = new RegExp(`\\t${purpose} listening on (\\S+)`).exec(out);
    if (!m) throw new Error(`no "${purpose} listening on" line in:\n${out}`);
    return m[1]!;
  };
  return { child, output: () => out, exited, address };
}

/** Opens a held bidi stream on the plain gRPC port; resolves `ended` when the server ends or cuts it. */
function holdStream(address: string): { ended: Promise<string>; established: Promise<void>; client: grpc.Client } {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const call = client.makeBidiStreamRequest(
    HOLD_METHOD,
    (b: Buffer) => b,
    (b: Buffer) => b,
  );
  const ended = new Promise<string>((resolve) => {
    call.on('status', (s: grpc.StatusObject) => resolve(`status ${grpc.status[s.code]}`));
    call.on('error', () => {});
  });
  // The echo of the first message proves the stream reached the server's handler.
  const established = new Promise<void>((resolve) => call.once('data', () => resolve()));
  call.write(Buffer.from('hello'));
  return { ended, established, client };
}

t.test('SIGTERM: in-flight work finishes, streams end, exit 0 well within --shutdownDuration', async (t) => {
  const d = await spawnDaemon(t, { shutdownDurationMs: 3000, stopDelayMs: 300 });
  const grpcAddr = d.address('discovery gRPC');
  const httpAddr = d.address('discovery HTTP');
  t.equal((await request(`http://${httpAddr}/ready`)).status, 200);
  const held = holdStream(grpcAddr);
  await held.established;
  const sent = Date.now();
  d.child.kill('SIGTERM');
  const exit = await d.exited;
  t.equal(exit.code, 0, d.output());
  t.ok(exit.at - sent < 3000, `exited ${exit.at - sent} ms after SIGTERM`);
  t.equal(await held.ended, 'status OK', 'the ADS-like stream was ended by the server, not cut');
  held.client.close();
  t.match(d.output(), /\tinfo\treceived SIGTERM/);
  t.match(d.output(), /shutting down \(SIGTERM\): 3s allowed for in-flight pushes/);
  t.match(d.output(), /\tinfo\tshutdown complete/);
  // Nothing listens any more.
  const refused = await new Promise<string>((resolve) => {
    const s = net.connect(Number(httpAddr.split(':')[1]), '127.0.0.1');
    s.on('connect', () => resolve('connected'));
    s.on('error', (e: NodeJS.ErrnoException) => resolve(e.code ?? 'error'));
  });
  t.equal(refused, 'ECONNREFUSED');
});

t.test('pushes that never finish are cut at --shutdownDuration; still exit 0', async (t) => {
  const d = await spawnDaemon(t, { shutdownDurationMs: 1500, stopDelayMs: null });
  const grpcAddr = d.address('discovery gRPC');
  const held = holdStream(grpcAddr);
  await held.established;
  const sent = Date.now();
  d.child.kill('SIGTERM');
  const exit = await d.exited;
  const took = exit.at - sent;
  t.equal(exit.code, 0, d.output());
  // The grace period ends 150 ms (a tenth, at most 500 ms) before the deadline so that closing fits in it.
  t.ok(took >= 1300, `waited for the grace period (${took} ms)`);
  // The margin is for process teardown on a loaded machine: 1469-1607 ms measured at load 15 on two cores.
  t.ok(took < 1500 + 1000, `exited by the deadline, give or take process teardown on a loaded machine (${took} ms)`);
  t.match(await held.ended, /^status (CANCELLED|UNAVAILABLE|INTERNAL)$/, 'the stream was cut');
  held.client.close();
  t.match(d.output(), /in-flight pushes did not finish within --shutdownDuration/);
});

t.test('SIGINT shuts down the same way', async (t) => {
  const d = await spawnDaemon(t, { shutdownDurationMs: 2000, stopDelayMs: 0 });
  d.child.kill('SIGINT');
  const exit = await d.exited;
  t.equal(exit.code, 0, d.output());
  t.match(d.output(), /received SIGINT/);
});

t.test("ControlZ's exit request shuts the daemon down gracefully", async (t) => {
  const d = await spawnDaemon(t, { shutdownDurationMs: 2000, stopDelayMs: 0 });
  const r = await request(`http://${d.address('ControlZ')}/homej/exit`, { method: 'PUT' });
  t.equal(r.status, 202);
  const exit = await d.exited;
  t.equal(exit.code, 0, d.output());
  t.match(d.output(), /shutting down \(ControlZ exit request\)/);
});

t.test('runDaemon: a start-up failure is a CommandError naming the flag', async (t) => {
  const discovery = pilotDiscovery.root.subcommands!.find((c) => c.name === 'discovery')!;
  const ctx: RunContext = {
    program: pilotDiscovery,
    path: ['discovery'],
    command: discovery,
    flags: {
      grpcAddr: 'nonsense',
      secureGRPCAddr: '',
      httpAddr: '127.0.0.1:0',
      httpsAddr: '',
      monitoringAddr: '127.0.0.1:0',
      ctrlz_address: '127.0.0.1',
      ctrlz_port: 0,
      keepaliveInterval: 30_000,
      keepaliveTimeout: 10_000,
      keepaliveMaxServerConnectionAge: 9_223_372_036_854,
      tlsCertFile: '',
      tlsKeyFile: '',
      caCertFile: '',
      'tls-cipher-suites': [],
      shutdownDuration: 1000,
      profile: false,
    },
    changed: new Set(),
    args: [],
    env: {},
    stdout: process.stdout,
    stderr: process.stderr,
  };
  await t.rejects(
    runDaemon(ctx, new FakeProviders()),
    new CommandError('--grpcAddr nonsense: listen tcp: address nonsense: missing port in address'),
  );
});
