// `pilot-agent proxy sidecar|router`: resolves the agent's configuration (src/agent/prepare/), asks for the
// workload certificate first, then loads and runs the agent: xDS proxy on the local socket, status server,
// and the data-plane proxy (a real Envoy when one is found, else this binary's built-in engine), until the
// proxy exits or the agent is told to stop (Istio's pilot-agent proxy command).
import { stringify as yamlStringify } from 'yaml';
import { CommandError, type Handler } from '../cli/context';
import { buildInfo } from '../lib/buildinfo';
import { registerScope } from '../lib/log';
import { durationText } from './config';
import { proxyConfigToJson } from '../config/proxyconfig';
import { WorkloadIdentity } from './identity';
import { DnsConfigError } from '../dns/server';
import { startMemoryRelief } from '../proxy/common/memory-relief';
import { armTestFaults, FaultBoundary, parseTestFaults, type TestFault } from './boundary';
import { prepareAgent, type PreparedAgent } from './prepare';
import type { Agent, AgentOptions } from './agent';

const log = registerScope('default');

/** How long the agent waits for its first certificate before loading the rest of itself. */
const FIRST_CERTIFICATE_BEFORE_LOAD_MS = 1000;

export const run: Handler = async (ctx) => {
  const prepared = await prepareAgent(ctx);
  logPrepared(prepared);
  // MESH_TEST_FAULT is a test-only hook (see boundary.ts); a bad value fails the start rather than arming nothing.
  let testFaults: TestFault[] = [];
  try {
    testFaults = parseTestFaults(ctx.env['MESH_TEST_FAULT'] ?? '');
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  const boundary = new FaultBoundary();
  const identity = await firstCertificate(prepared.options, boundary);
  await checkTemplate(prepared);
  const { Agent } = await import('./agent');
  let agent: Agent;
  try {
    agent = new Agent({ ...prepared.options, boundary, ...(identity ? { workloadIdentity: identity } : {}) });
  } catch (e) {
    if (e instanceof DnsConfigError) throw new CommandError(`failed to start local DNS server: ${e.message}`);
    throw e;
  }
  const unwatch = watchSignals(agent);
  const relief = startMemoryRelief({ onRelease: (before, after) => log.debug(`released memory when idle: RSS ${mb(before)} → ${mb(after)} MB`) });
  // The data-plane engine shares this process: an exception of a side subsystem must not end it.
  const uninstall = boundary.install();
  const disarm = testFaults.length > 0 ? armTestFaults(boundary, testFaults) : undefined;
  try {
    try {
      await agent.start();
    } catch (e) {
      throw new CommandError((e as Error).message);
    }
    return await agent.run();
  } finally {
    disarm?.();
    uninstall();
    relief.stop();
    unwatch();
  }
};

function logPrepared(prepared: PreparedAgent): void {
  const { options, proxyConfig: pc } = prepared;
  log.info(`Version ${buildInfo().version}`);
  log.info(`Effective config: ${yamlStringify(proxyConfigToJson(pc)).trimEnd()}`);
  log.info('Proxy role', { ips: prepared.ipAddresses.join(','), type: prepared.nodeType, id: prepared.nodeId });
  for (const n of prepared.info) log.info(n);
  for (const n of prepared.notes) log.warn(n);
  log.info(
    `termination drain ${durationText(pc.terminationDrainDuration)}, exit on zero active connections ${options.exitOnZeroActiveConnections}` +
      (options.exitOnZeroActiveConnections ? ` (minimum drain ${durationText(options.minimumDrainDurationMs)})` : ''),
  );
}

/**
 * The workload certificate is asked for before the rest of the agent (xDS proxy, status server, Envoy's
 * message types) is loaded: a pod's first certificate is on the path to its readiness.
 */
async function firstCertificate(options: AgentOptions, boundary: FaultBoundary): Promise<WorkloadIdentity | undefined> {
  if (!options.identity) return undefined;
  const identity = new WorkloadIdentity({
    options: options.identity,
    cwd: options.cwd,
    serveSds: options.proxyLaunch !== undefined,
    guard: boundary,
  });
  try {
    await identity.begin();
  } catch (e) {
    throw new CommandError((e as Error).message);
  }
  // Loading the rest blocks this thread for ~0.1–0.3 s; the CA's answer waits for it unless it came first.
  // Nothing is lost by waiting: the xDS connection waits for this certificate (mutual TLS) and the proxy's
  // SDS for it too. A CA that is slow or down only delays the rest by this bound.
  await identity.certificateOrTimeout(FIRST_CERTIFICATE_BEFORE_LOAD_MS);
  return identity;
}

/** A bootstrap rendered from the user's template, checked against Envoy's schema: a warning, not a failure. */
async function checkTemplate(prepared: PreparedAgent): Promise<void> {
  if (!prepared.templateCheck) return;
  const { validateBootstrap } = await import('./bootstrap-schema');
  try {
    validateBootstrap(prepared.templateCheck.json, prepared.templateCheck.source);
  } catch (e) {
    // The schema knows the types mesh emits; a template may use others that Envoy knows.
    log.warn((e as Error).message);
  }
}

/** SIGTERM/SIGINT drain and stop the agent; returns what removes the handlers. */
function watchSignals(agent: Agent): () => void {
  let signals = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signals++;
    log.info(`Received ${sig}, starting graceful shutdown`);
    // A second SIGINT (an impatient Ctrl-C) stops at once.
    if (signals > 1 && sig === 'SIGINT') agent.quit();
    else agent.terminate();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  return () => {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
  };
}

const mb = (bytes: number) => (bytes / 1048576).toFixed(1);
