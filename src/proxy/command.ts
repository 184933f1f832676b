// `pilot-agent envoy …`: the built-in engine with Envoy's command line, as a process of its own (`pilot-agent
// proxy` runs the same engine inside its own process, see src/agent/process.ts). Exits 0 on SIGTERM/SIGINT
// or /quitquitquit, 1 on a bad bootstrap.
import { CommandError, type Handler } from '../cli/context';
import type { Engine } from './engine';
import { engineOptionsFromFlags, launchEngine, LaunchError } from './launch';

export const run: Handler = async (ctx) => {
  let engine: Engine;
  try {
    engine = await launchEngine({ ...engineOptionsFromFlags(ctx.flags), logWriter: (l) => ctx.stderr.write(l) });
  } catch (e) {
    if (e instanceof LaunchError) throw new CommandError(e.message, e.exitCode);
    throw e;
  }
  const stop = (sig: string) => {
    engine.loggers.get('main').warn(`caught ${sig}`);
    void engine.close(0);
  };
  const onTerm = () => stop('SIGTERM');
  const onInt = () => stop('SIGINT');
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  // Started by another program (a supervisor), the engine must not outlive it: a parent killed outright
  // (SIGKILL, a crash) cannot stop its child, and an orphaned engine would keep the listener ports. Node
  // has no parent-death signal, so watch for being re-parented.
  const parent = process.ppid;
  const orphanWatch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(orphanWatch);
    stop('parent exit');
  }, 500);
  orphanWatch.unref();
  try {
    return await engine.exited;
  } finally {
    clearInterval(orphanWatch);
    process.off('SIGTERM', onTerm);
    process.off('SIGINT', onInt);
  }
};
