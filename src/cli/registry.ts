// clipanion Command classes generated from a program's table: one class per runnable command, with
// its canonical path and every alias path. clipanion routes; the table-driven pflag engine in argv.ts
// has already parsed the flags (clipanion cannot take option values that begin with `-`, as pflag does).
import { Cli, Command, Option, type BaseContext } from 'clipanion';
import type { CommandSpec, ProgramSpec } from '../../commands/types';
import type { HandlerLoader, RunContext } from './context';
import { walk, leaf } from './tree';

export interface MeshContext extends BaseContext {
  prepared?: RunContext;
}

/** Every spelling of a command's path: each level by its name or any alias. */
export function aliasPaths(chain: readonly CommandSpec[]): string[][] {
  let paths: string[][] = [[]];
  for (const c of chain.slice(1)) {
    const names = [c.name, ...(c.aliases ?? [])];
    paths = paths.flatMap((p) => names.map((n) => [...p, n]));
  }
  return paths;
}

/** The clipanion classes of a program: every runnable command, or only those named (start-up cost
 *  grows with the number of registered classes, and the argv engine has already found the command). */
export function buildCli(program: ProgramSpec, loadHandler: HandlerLoader, only?: readonly CommandSpec[][]): Cli<MeshContext> {
  const cli = new Cli<MeshContext>({ binaryName: program.name, enableCapture: false, enableColors: false });
  for (const chain of only ?? walk(program)) {
    const spec = leaf(chain);
    if (!spec.run) continue;
    const run = spec.run;
    class TableCommand extends Command<MeshContext> {
      static override paths = aliasPaths(chain);
      static override usage = Command.Usage({ description: spec.short, details: spec.long, examples: undefined });
      // Already parsed by argv.ts; clipanion only has to route.
      rest = Option.Proxy();
      async execute(): Promise<number> {
        const prepared = this.context.prepared;
        if (!prepared) throw new Error(`${program.name}: command "${spec.name}" reached without parsed arguments`);
        return (await loadHandler(run))(prepared);
      }
    }
    cli.register(TableCommand);
  }
  return cli;
}
