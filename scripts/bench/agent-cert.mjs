// Time from agent start to its first workload certificate (issue 10; goal < 300 ms on loopback), for RSA 2048
// (the default) and ECDSA P-256 keys, against the built daemon's CA, with the process start of the same
// binary (`pilot-agent version --short`) measured in the same run as the baseline. scripts/bench/ca.mjs runs
// it after the signing throughput; alone:
//   node scripts/bench/agent-cert.mjs [--repeat 7] [--agentCpu 1] [--daemonCpu 0] [--noPin] [--cpuProf <dir>] [--dist <dir>]
// (--dist: the build to measure, default this checkout's dist/; to compare two builds, run the script once
// for each, alternating)
// (--cpuProf: agents run from dist/mesh.cjs under node --cpu-prof, one profile per run in <dir>; the figures
// then include the profiler's cost and are not the record)
//
// The daemon (`dist/pilot-discovery discovery`, in a temporary directory where it keeps and publishes its
// root) trusts a loopback OIDC issuer (examples/claim-routing/issuer.mjs) through JWT_RULE, as the demo does.
// Each run starts `dist/pilot-agent proxy router` with DISABLE_PROXY (the certificate, not the proxy, is
// measured) and OUTPUT_CERTS: "wall" is spawn → cert-chain.pem written, "agent CPU" the CPU time the agent
// used until then (a figure that a busy machine inflates less than wall time), "in agent" is what the agent
// logs (its own start → certificate, without exec), "ask→cert" is key generation + CSR + the CA's signature.
import { spawn, spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { startIssuer } from '../../examples/claim-routing/issuer.mjs';
import { cpuSeconds } from './xds-scale/proc.mjs';
import { waitFor } from '../lib/wait.mjs';
import { median, parseOptions, pinPrefix } from '../lib/bench.mjs';
import { freePort } from '../lib/ports.mjs';
import { ephemeralListeners } from '../lib/daemon-flags.mjs';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
let DIST = path.join(ROOT, 'dist');

const OPTIONS = {
  repeat: { type: 'integer', min: 0, default: 7, help: 'runs of each key type' },
  agentCpu: { type: 'integer', min: 0, default: 1, help: 'CPU the agent is pinned to' },
  daemonCpu: { type: 'integer', min: 0, default: 0, help: 'CPU the daemon is pinned to' },
  noPin: { type: 'boolean', help: 'pin nothing (nothing is pinned on one CPU either)' },
  cpuProf: { type: 'path', help: 'agents run from dist/mesh.cjs under node --cpu-prof, profiles in this directory' },
  dist: { type: 'path', help: "the build to measure (default this checkout's dist/)" },
};

let opts;
const pin = (cpu) => pinPrefix(opts.pin, cpu);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let cleanup = [];

function run(cmd, args, o) {
  const [file, ...rest] = [...(o.cpu !== undefined ? pin(o.cpu) : []), cmd, ...args];
  const child = spawn(file, rest, {
    cwd: o.cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  return { child, out: () => out, exited: new Promise((r) => child.on('exit', r)) };
}

/** Measures; resolves with { base, results } where results map a key kind to one row per run. */
export async function measureAgentStart(options) {
  opts = { repeat: 7, agentCpu: 1, daemonCpu: 0, pin: availableParallelism() >= 2, ...options };
  if (!existsSync(path.join(DIST, 'pilot-agent'))) throw new Error(`${DIST}/pilot-agent is missing: run \`node build.mjs\` first`);
  cleanup = [];
  try {
    return await measure();
  } finally {
    for (const c of cleanup.reverse()) await c();
  }
}

async function measure() {
  const issuer = await startIssuer({ port: 0 });
  cleanup.push(() => issuer.close());
  const daemonDir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-ca-'));
  cleanup.push(() => rmSync(daemonDir, { recursive: true, force: true }));
  mkdirSync(path.join(daemonDir, 'config'));
  const daemon = run(path.join(DIST, 'pilot-discovery'), ['discovery', '--configDir', 'config', ...ephemeralListeners()], {
    cwd: daemonDir,
    cpu: opts.daemonCpu,
    env: { JWT_RULE: JSON.stringify({ issuer: issuer.issuer, jwks_uri: issuer.jwksUri, audiences: ['mesh-ca'] }) },
  });
  cleanup.push(() => daemon.child.kill('SIGKILL'));
  await waitFor(
    () => `the daemon's secure port:\n${daemon.out()}`,
    () => /secure discovery gRPC listening on (\S+)/.test(daemon.out()),
    { timeoutMs: 60_000, intervalMs: 1 },
  );
  const secure = /secure discovery gRPC listening on (\S+)/.exec(daemon.out())[1];
  const root = path.join(daemonDir, 'var/run/secrets/mesh/root-cert.pem');
  const token = await issuer.mint({ sub: 'system:serviceaccount:bench:agent' }, { audience: 'mesh-ca' });

  const baseline = [];
  for (let i = 0; i < opts.repeat; i++) {
    const t0 = performance.now();
    const cmd = [...pin(opts.agentCpu), path.join(DIST, 'pilot-agent'), 'version', '--short'];
    const r = spawnSync(cmd[0], cmd.slice(1), { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`pilot-agent version: ${r.stderr}`);
    baseline.push(performance.now() - t0);
  }

  const results = {};
  for (const [name, env] of [
    ['RSA 2048', {}],
    ['ECDSA P-256', { ECC_SIGNATURE_ALGORITHM: 'ECDSA' }],
  ]) {
    const rows = [];
    for (let i = 0; i < opts.repeat; i++) {
      const dir = mkdtempSync(path.join(tmpdir(), 'mesh-bench-agent-'));
      mkdirSync(path.join(dir, 'var/run/secrets/tokens'), { recursive: true });
      writeFileSync(path.join(dir, 'var/run/secrets/tokens/mesh-token'), token);
      writeFileSync(path.join(dir, 'mesh.yaml'), `defaultConfig:\n  discoveryAddress: ${secure}\n`);
      const t0 = performance.now();
      const agentCmd = opts.cpuProf
        ? [
            process.execPath,
            ['--cpu-prof', '--cpu-prof-dir', path.join(opts.cpuProf, name.replace(/\W+/g, '-')), path.join(DIST, 'mesh.cjs'), 'pilot-agent'],
          ]
        : [path.join(DIST, 'pilot-agent'), []];
      const agent = run(agentCmd[0], [...agentCmd[1], 'proxy', 'router', '--meshConfig', 'mesh.yaml'], {
        cwd: dir,
        cpu: opts.agentCpu,
        env: {
          DISABLE_PROXY: 'true',
          POD_NAME: 'bench-0',
          POD_NAMESPACE: 'bench',
          SERVICE_ACCOUNT: 'agent',
          MESHD_SAN: 'meshd.mesh-system.svc',
          CA_ROOT_CA: root,
          XDS_ROOT_CA: root,
          OUTPUT_CERTS: 'out',
          PROXY_CONFIG: JSON.stringify({ statusPort: await freePort() }),
          ...env,
        },
      });
      const certFile = path.join(dir, 'out', 'cert-chain.pem');
      await waitFor(
        () => `a certificate from the agent:\n${agent.out()}`,
        () => existsSync(certFile),
        { timeoutMs: 60_000, intervalMs: 1 },
      );
      const wall = performance.now() - t0;
      const cpu = (cpuSeconds(agent.child.pid) ?? NaN) * 1000;
      await waitFor(
        () => `the agent's log line:\n${agent.out()}`,
        () => /first workload certificate \d+ms after the agent started/.test(agent.out()),
        { timeoutMs: 5000, intervalMs: 1 },
      );
      const m = /first workload certificate (\d+)ms after the agent started \((\d+)ms after it asked\)/.exec(agent.out());
      rows.push({ wall, cpu, inAgent: Number(m[1]), asked: Number(m[2]) });
      // A profile is written when the process exits on its own: SIGTERM lets the agent shut down, once it has
      // installed its signal handlers (they come with the proxy command, after the certificate).
      if (opts.cpuProf) await sleep(2000);
      agent.child.kill(opts.cpuProf ? 'SIGTERM' : 'SIGKILL');
      await agent.exited;
      rmSync(dir, { recursive: true, force: true });
    }
    results[name] = rows;
  }
  return { base: median(baseline), results };
}

export function printAgentStart({ base, results }) {
  console.log(
    `agent start → first workload certificate, ${opts.repeat} runs each, medians (ms)${opts.pin ? `, agent on CPU ${opts.agentCpu}, daemon on CPU ${opts.daemonCpu}` : ''}`,
  );
  console.log(`  baseline: pilot-agent version --short (process start and exit)  ${base.toFixed(0)}`);
  console.log(
    `  load average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} on ${cpus().length} CPUs`,
  );
  for (const [name, rows] of Object.entries(results)) {
    const wall = median(rows.map((r) => r.wall));
    const inAgent = median(rows.map((r) => r.inAgent));
    const asked = median(rows.map((r) => r.asked));
    const cpu = median(rows.map((r) => r.cpu));
    console.log(
      `  ${name.padEnd(12)} wall ${wall.toFixed(0).padStart(5)}  (${(wall / base).toFixed(2)}× baseline; min ${Math.min(...rows.map((r) => r.wall)).toFixed(0)}, max ${Math.max(...rows.map((r) => r.wall)).toFixed(0)})` +
        `  agent CPU ${cpu.toFixed(0)}  in agent ${inAgent}  ask→cert ${asked}  goal < 300: ${wall < 300 ? 'met' : 'not met'}`,
    );
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { noPin, dist, ...o } = parseOptions(
    'scripts/bench/agent-cert.mjs',
    'Time from agent start to its first workload certificate, against `pilot-agent version` in the same run.',
    OPTIONS,
  );
  if (dist) DIST = dist;
  printAgentStart(await measureAgentStart({ ...o, pin: !noPin && availableParallelism() >= 2 }));
}
