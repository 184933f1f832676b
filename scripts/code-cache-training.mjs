// Training runs for the chunks' code caches (build.mjs). A cache made when a chunk is compiled holds only its
// top level; every module body and function it runs is compiled lazily at each start (~70 ms of an agent's
// start). Caches made after a real run hold what that run compiled, so the build runs what matters most for
// start-up once, against itself, on loopback with ports the kernel picks: `meshctl version` and an agent that
// obtains its first workload certificate from a discovery daemon (the daemon itself is not trained). src/boot.ts
// writes the caches on exit (MESH_BUILD_CODE_CACHE_DIR) and keeps, per chunk, the largest.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startIssuer } from '../examples/claim-routing/issuer.mjs';
import { Exited, waitFor } from './lib/wait.mjs';
import { freePort } from './lib/ports.mjs';
import { ephemeralListeners } from './lib/daemon-flags.mjs';

const TIMEOUT_MS = 30_000;

function start(bundle, args, o) {
  const child = spawn(process.execPath, [bundle, ...args], { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  return { child, out: () => out, exited };
}

/** Waits for `check`, giving up at once if `proc` exits first. */
function waitWhileRunning(check, what, proc) {
  const exitedEarly = () => {
    if (proc.child.exitCode !== null) throw new Exited(`exited before ${what}:\n${proc.out().slice(-2000)}`);
    return false;
  };
  return waitFor(
    () => `${what}:\n${proc.out().slice(-2000)}`,
    () => check() || exitedEarly(),
    { timeoutMs: TIMEOUT_MS, intervalMs: 20 },
  );
}

/** Stops a program the way a pod stop does, so that it exits on its own and writes its caches. */
async function stop(proc, what) {
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), TIMEOUT_MS);
  const { signal } = await proc.exited;
  clearTimeout(timer);
  if (signal) throw new Error(`${what} did not exit on SIGTERM (${signal}); its code caches are not written`);
}

/** Runs the training; throws with the program's output when a run fails (the build then keeps compile-time caches). */
export async function trainCodeCaches(dist) {
  const bundle = path.join(dist, 'mesh.cjs');
  const cacheDir = path.join(dist, 'chunks');
  const noTraining = { PATH: process.env.PATH, HOME: process.env.HOME };
  const base = { ...noTraining, MESH_BUILD_CODE_CACHE_DIR: cacheDir };
  const work = mkdtempSync(path.join(tmpdir(), 'mesh-code-cache-'));
  const cleanup = [() => rmSync(work, { recursive: true, force: true })];
  try {
    const v = spawnSync(process.execPath, [bundle, 'meshctl', 'version', '--short', '--remote=false'], { env: base, encoding: 'utf8' });
    if (v.status !== 0) throw new Error(`meshctl version: ${v.stderr}`);

    const issuer = await startIssuer({ port: 0 });
    cleanup.push(() => issuer.close());
    mkdirSync(path.join(work, 'config'));
    const daemon = start(bundle, ['pilot-discovery', 'discovery', '--configDir', 'config', ...ephemeralListeners()], {
      cwd: work,
      // Not trained: a chunk the daemon shares with the agent would get the daemon's larger cache, and V8 makes
      // bytecode for every function a cache holds, used or not (+18 MB RSS per agent when the daemon was trained).
      env: { ...noTraining, JWT_RULE: JSON.stringify({ issuer: issuer.issuer, jwks_uri: issuer.jwksUri, audiences: ['mesh-ca'] }) },
    });
    cleanup.push(() => daemon.child.kill('SIGKILL'));
    const listening = /secure discovery gRPC listening on (\S+)/;
    await waitWhileRunning(() => listening.test(daemon.out()), "the daemon's secure port", daemon);
    const secure = listening.exec(daemon.out())[1];

    const agentDir = path.join(work, 'agent');
    mkdirSync(path.join(agentDir, 'var/run/secrets/tokens'), { recursive: true });
    writeFileSync(
      path.join(agentDir, 'var/run/secrets/tokens/mesh-token'),
      await issuer.mint({ sub: 'system:serviceaccount:training:agent' }, { audience: 'mesh-ca' }),
    );
    writeFileSync(path.join(agentDir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${secure}\n`);
    const root = path.join(work, 'var/run/secrets/mesh/root-cert.pem');
    const agent = start(bundle, ['pilot-agent', 'proxy', 'router', '--meshConfig', 'mesh.yaml'], {
      cwd: agentDir,
      env: {
        ...base,
        DISABLE_PROXY: 'true',
        POD_NAME: 'training-0',
        POD_NAMESPACE: 'training',
        SERVICE_ACCOUNT: 'agent',
        MESHD_SAN: 'meshd.mesh-system.svc',
        CA_ROOT_CA: root,
        XDS_ROOT_CA: root,
        OUTPUT_CERTS: 'out',
        PROXY_CONFIG: JSON.stringify({ statusPort: await freePort(), terminationDrainDuration: '0s' }),
      },
    });
    cleanup.push(() => agent.child.kill('SIGKILL'));
    await waitWhileRunning(() => existsSync(path.join(agentDir, 'out', 'cert-chain.pem')), "the agent's first certificate", agent);
    // The agent installs its signal handlers with the proxy command, after the certificate.
    await waitWhileRunning(() => /status server listening/.test(agent.out()), "the agent's status server", agent);
    await new Promise((r) => setTimeout(r, 300));
    await stop(agent, 'pilot-agent');
    await stop(daemon, 'pilot-discovery');
  } finally {
    for (const c of cleanup.reverse()) await c();
  }
}
