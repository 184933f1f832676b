// `pilot-agent mesh-iptables`: resolve the configuration, then apply it (or record a dry run),
// set up the routes it relies on, and optionally prove that capture works.

import { open, writeFile } from 'node:fs/promises';
import { CommandError, type Handler, type RunContext } from '../cli/context';
import {
  CaptureConfigError,
  ENV,
  networkNamespaceFlag,
  pickIptablesFlags,
  resolveCaptureConfig,
  type CaptureConfig,
  type CaptureFacts,
} from './config';
import { applyCapture } from './configurator';
import { VALIDATION_ERROR_EXIT_CODE } from './constants';
import { DriftError, MissingBinaryError, PermissionError, XtablesError } from './errors';
import { DryRunRecorder, RealDependencies, type Dependencies } from './executor';
import { gatherFacts } from './facts';
import { configureRoutes } from './routes';
import { ValidationError, validateCapture } from './validation';

/** Seams for tests: where facts and real commands come from. */
export interface MeshIptablesIO {
  readonly dependencies?: (networkNamespace: string) => Dependencies;
  readonly facts?: (networkNamespace: string, deps: Dependencies) => Promise<CaptureFacts>;
  /** The termination log written on a failed validation (default /dev/termination-log, only if it exists). */
  readonly terminationLog?: string;
}

/** Failures the user must act on become CommandErrors; anything else is a bug and propagates. */
function userFacing(err: unknown): unknown {
  if (
    err instanceof CaptureConfigError ||
    err instanceof MissingBinaryError ||
    err instanceof PermissionError ||
    err instanceof XtablesError ||
    err instanceof DriftError
  ) {
    return new CommandError(err.message);
  }
  if (err instanceof ValidationError) return new CommandError(err.message.trimEnd(), VALIDATION_ERROR_EXIT_CODE);
  return err;
}

/** Where the orchestrator reads a container's termination message from (its default terminationMessagePath). */
export const TERMINATION_LOG = '/dev/termination-log';

export async function runMeshIptables(ctx: RunContext, io: MeshIptablesIO = {}): Promise<number> {
  try {
    return await execute(ctx, io);
  } catch (err) {
    if (err instanceof ValidationError) {
      ctx.stderr.write(`validation probe: ${err.detail}\n`);
      await writeTerminationMessage(io.terminationLog ?? TERMINATION_LOG, err.message);
    }
    throw userFacing(err);
  }
}

/**
 * In a container the orchestrator mounts the termination log; the message written there becomes the
 * container's lastState.terminated.message, which race repair can match. Outside a container the file
 * does not exist and nothing is created.
 */
async function writeTerminationMessage(file: string, message: string): Promise<void> {
  try {
    const fh = await open(file, 'r+'); // never creates the file
    try {
      await fh.truncate(0);
      await fh.write(message, 0);
    } finally {
      await fh.close();
    }
  } catch {
    // no termination log here
  }
}

async function execute(ctx: RunContext, io: MeshIptablesIO): Promise<number> {
  const flags = pickIptablesFlags(ctx.flags);
  const namespace = networkNamespaceFlag(flags);
  const real = (io.dependencies ?? ((ns) => new RealDependencies({ networkNamespace: ns })))(namespace);
  const facts = await (io.facts ?? gatherFacts)(namespace, real);
  const cfg: CaptureConfig = resolveCaptureConfig(flags, ctx.env, facts);

  if (cfg.runValidation && cfg.networkNamespace !== '') {
    throw new CommandError(
      '--run-validation probes the network namespace it runs in and cannot be combined with --network-namespace; ' +
        'run the validation inside the pod (for example with --skip-rule-apply --run-validation)',
    );
  }

  const log = (line: string) => void ctx.stdout.write(`${line}\n`);
  if (!cfg.skipRuleApply) {
    if (cfg.dryRun) {
      const recorder = new DryRunRecorder();
      await applyCapture(cfg, recorder);
      const text = recorder.lines.map((l) => `${l}\n`).join('');
      ctx.stdout.write(text);
      const file = ctx.env[ENV.dryRunFile];
      if (file) await writeFile(file, text);
    } else {
      await applyCapture(cfg, real, log);
      if (!cfg.cleanupOnly) await configureRoutes(cfg, real);
    }
  }

  if (cfg.runValidation) {
    await validateCapture({
      ipv6: cfg.hostIP.includes(':'),
      listenPorts: [Number(cfg.proxyPort), Number(cfg.inboundCapturePort)],
      probePort: cfg.probePort,
      timeoutMs: cfg.probeTimeoutMs,
    });
    log('validation passed');
  }
  return 0;
}

export const run: Handler = (ctx) => runMeshIptables(ctx);
