// Programming, checking and removing a pod's capture rules inside its network namespace, through the
// resolver, rule builder and configurator `pilot-agent mesh-iptables` uses (src/iptables).
import { statSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { resolveCaptureConfig, type CaptureConfig, type CaptureFacts, type Env, type IptablesFlags } from '../../iptables/config';
import { applyCapture, verifyCapture, type Logger } from '../../iptables/configurator';
import { DryRunRecorder, RealDependencies, type Dependencies } from '../../iptables/executor';
import { gatherFacts } from '../../iptables/facts';
import { configureRoutes } from '../../iptables/routes';
import { IPTABLES_FLAG_DEFAULTS } from '../../iptables/config';
import { CniError, CniErrorCode } from './skel';

/** Seams for tests: how commands run in a namespace. */
export interface CaptureIO {
  dependencies?: (netns: string) => Dependencies;
}

const realDeps = (netns: string) => new RealDependencies({ networkNamespace: netns });

/**
 * Refuses a namespace path that does not exist or is the plugin's own namespace: rules meant for a pod
 * must never land on the node.
 */
export function checkPodNetns(netns: string): void {
  let target;
  try {
    target = statSync(netns);
  } catch (e) {
    throw new CniError(CniErrorCode.Internal, `failed to open netns "${netns}": ${(e as Error).message}`);
  }
  let own;
  try {
    own = statSync('/proc/self/ns/net');
  } catch {
    return;
  }
  if (target.dev === own.dev && target.ino === own.ino) {
    throw new CniError(CniErrorCode.InvalidNetNS, "plugin's netns and netns from CNI_NETNS should not be the same");
  }
}

/** The pod's addresses decide IPv4/IPv6 rules: from the previous result, else read inside the namespace. */
async function factsFor(netns: string, addresses: readonly string[], deps: Dependencies): Promise<CaptureFacts> {
  if (addresses.length > 0) return { localAddresses: addresses, nameservers: [], users: {} };
  return gatherFacts(netns, deps);
}

export interface ProgramRequest {
  flags: IptablesFlags;
  env: Env;
  netns: string;
  podAddresses: readonly string[];
  log: Logger;
}

/**
 * Applies the rules and the routes they need. In dry run (DRY_RUN_FILE_PATH set) the restore input is
 * written to that file instead. A failure part-way removes whatever was applied, so a pod never starts
 * with half its capture.
 */
export async function programCapture(req: ProgramRequest, io: CaptureIO = {}): Promise<CaptureConfig> {
  const dryRunFile = req.env.DRY_RUN_FILE_PATH;
  if (req.flags['dry-run']) {
    const recorder = new DryRunRecorder();
    const cfg = resolveCaptureConfig(req.flags, req.env, await factsFor(req.netns, req.podAddresses, recorder));
    await applyCapture(cfg, recorder);
    if (dryRunFile) await writeFile(dryRunFile, recorder.lines.map((l) => `${l}\n`).join(''));
    return cfg;
  }
  const deps = (io.dependencies ?? realDeps)(req.netns);
  const cfg = resolveCaptureConfig(req.flags, req.env, await factsFor(req.netns, req.podAddresses, deps));
  try {
    await applyCapture(cfg, deps, req.log);
    await configureRoutes(cfg, deps);
  } catch (err) {
    try {
      await applyCapture({ ...cfg, cleanupOnly: true }, deps);
    } catch (cleanupErr) {
      req.log(`removing the partly applied rules failed too: ${(cleanupErr as Error).message}`);
    }
    throw err;
  }
  return cfg;
}

/** What is missing or different in the namespace compared with the pod's configuration. */
export async function checkCapture(req: Omit<ProgramRequest, 'log'>, io: CaptureIO = {}): Promise<string[]> {
  const deps = (io.dependencies ?? realDeps)(req.netns);
  const cfg = resolveCaptureConfig(req.flags, req.env, await factsFor(req.netns, req.podAddresses, deps));
  return verifyCapture(cfg, deps);
}

/** Removes every MESH_ chain and the jumps into them (DEL of a namespace that still exists). */
export async function removeCapture(netns: string, env: Env, log: Logger, io: CaptureIO = {}): Promise<void> {
  const deps = (io.dependencies ?? realDeps)(netns);
  const flags: IptablesFlags = { ...IPTABLES_FLAG_DEFAULTS, 'network-namespace': netns, 'cni-mode': true, 'cleanup-only': true };
  // Cleanup removes our chains from both families whatever the pod's addresses; the interface may be
  // gone already, so no address is read.
  const cfg = resolveCaptureConfig(flags, env, { localAddresses: ['0.0.0.0'], nameservers: [], users: {} });
  await applyCapture(cfg, deps, log);
}
