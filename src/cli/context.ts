// What a command's behaviour receives once the generated CLI has parsed and validated argv.
import type { CommandSpec, ProgramSpec } from '../../commands/types';

/** Parsed flag values keyed by the flag's long name (`grpcAddr`, `dry-run`). */
export type FlagValues = Readonly<Record<string, FlagValue>>;
/** bool → boolean; string → string; int/int32/uint16/uint32/float32/Level → number;
 *  duration → milliseconds (number); stringSlice/stringArray → string[]; stringToString → Record. */
export type FlagValue = boolean | string | number | readonly string[] | Readonly<Record<string, string>>;

export interface RunContext {
  program: ProgramSpec;
  /** Command path below the program, e.g. ['proxy-config', 'route']. */
  path: readonly string[];
  command: CommandSpec;
  flags: FlagValues;
  /** Names of the flags given explicitly on the command line (pflag's Changed). */
  changed: ReadonlySet<string>;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
}

/** A command's behaviour. Returns the process exit code. Throw CommandError for a user-facing failure. */
export type Handler = (ctx: RunContext) => Promise<number>;

/** Finds the behaviour behind a table's `run` key. Given to the runner by the composition root
 *  (src/main/handlers.ts), so that the CLI engine never imports the behaviours it runs. */
export type HandlerLoader = (key: string) => Promise<Handler>;

/** A failure the user caused or must act on; printed as `Error: <message>` with the program's exit code. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitCode?: number,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

export function flagString(ctx: RunContext, name: string): string {
  const v = ctx.flags[name];
  if (typeof v !== 'string') throw new Error(`flag --${name} is not a string flag of "${ctx.path.join(' ')}"`);
  return v;
}
export function flagBool(ctx: RunContext, name: string): boolean {
  const v = ctx.flags[name];
  if (typeof v !== 'boolean') throw new Error(`flag --${name} is not a bool flag of "${ctx.path.join(' ')}"`);
  return v;
}
export function flagNumber(ctx: RunContext, name: string): number {
  const v = ctx.flags[name];
  if (typeof v !== 'number') throw new Error(`flag --${name} is not a numeric flag of "${ctx.path.join(' ')}"`);
  return v;
}
export function flagList(ctx: RunContext, name: string): readonly string[] {
  const v = ctx.flags[name];
  if (!Array.isArray(v)) throw new Error(`flag --${name} is not a list flag of "${ctx.path.join(' ')}"`);
  return v as readonly string[];
}
