// What every step of preparing `pilot-agent proxy` reads (the command's flags, the program's typed
// environment, the working directory) and what it adds to the start-up log: facts, and notes the user may
// want to act on. The steps follow Istio's pilot-agent (pilot/cmd/pilot-agent/app/cmd.go, options/).
import * as fs from 'node:fs';
import { CommandError, type RunContext } from '../../cli/context';
import type { EnvValues } from '../../lib/env';

export interface PrepareStep {
  ctx: RunContext;
  env: EnvValues;
  /** Relative paths (configPath, mesh config, templates) resolve from here. */
  cwd: string;
  /** Facts worth a log line. */
  info: string[];
  /** Things the user may want to fix. */
  notes: string[];
}

/** A file's text, or undefined when it does not exist; any other failure to read it is the user's to fix. */
export function readOptional(file: string, what: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new CommandError(`failed to read ${what} ${file}: ${(e as Error).message}`);
  }
}
