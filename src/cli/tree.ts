// Walking the command tables: which flags a command accepts, and how a word names a subcommand.
import type { CommandSpec, FlagSpec, ProgramSpec } from '../../commands/types';

/** cobra adds `-h, --help` to every command. */
export const HELP_FLAG: FlagSpec = { name: 'help', short: 'h', type: 'bool', help: 'help for %s' };

/** A command with its ancestors: chain[0] is the program's root. */
export type Chain = readonly CommandSpec[];

export function leaf(chain: Chain): CommandSpec {
  return chain[chain.length - 1]!;
}

/** Flags defined on the command itself (local) and persistent flags of itself. */
export function localFlags(chain: Chain): FlagSpec[] {
  const cmd = leaf(chain);
  return [...(cmd.flags ?? []), ...(cmd.persistentFlags ?? []), { ...HELP_FLAG, help: `help for ${cmd.name}` }];
}

/** Persistent flags of the ancestors (cobra's "Global Flags" of this command). */
export function inheritedFlags(chain: Chain): FlagSpec[] {
  const own = new Set(localFlags(chain).map((f) => f.name));
  const out: FlagSpec[] = [];
  for (const c of chain.slice(0, -1)) {
    for (const f of c.persistentFlags ?? []) if (!own.has(f.name)) out.push(f);
  }
  return out;
}

export function allFlags(chain: Chain): FlagSpec[] {
  return [...localFlags(chain), ...inheritedFlags(chain)];
}

export function findSub(cmd: CommandSpec, word: string): CommandSpec | undefined {
  return cmd.subcommands?.find((s) => s.name === word || (s.aliases ?? []).includes(word));
}

export function commandPath(program: ProgramSpec, chain: Chain): string {
  return [program.name, ...chain.slice(1).map((c) => c.name)].join(' ');
}

export function isRunnable(cmd: CommandSpec): boolean {
  return cmd.run !== undefined;
}

/** Every command of a program with its chain, depth first (root included). */
export function* walk(program: ProgramSpec): Generator<Chain> {
  function* rec(chain: CommandSpec[]): Generator<Chain> {
    yield chain;
    for (const s of leaf(chain).subcommands ?? []) yield* rec([...chain, s]);
  }
  yield* rec([program.root]);
}
