// In-process access to the tables and the runner, for table-driven tests that would be slow as
// hundreds of process spawns. End-to-end behaviour is tested against the built binary separately.
import type { CommandSpec, FlagSpec, ProgramSpec } from '../../commands/types';
import { pilotDiscovery } from '../../commands/pilot-discovery';
import { pilotAgent } from '../../commands/pilot-agent';
import { installCni } from '../../commands/install-cni';
import { meshctl } from '../../commands/meshctl';
import { runProgram } from '../../src/cli/run';
import { loadHandler } from '../../src/main/handlers';
import { allFlags, walk, leaf } from '../../src/cli/tree';
import { PassThrough } from 'node:stream';

export const ALL_PROGRAMS: readonly ProgramSpec[] = [pilotDiscovery, pilotAgent, installCni, meshctl];

export function program(name: string): ProgramSpec {
  const p = ALL_PROGRAMS.find((x) => x.name === name);
  if (!p) throw new Error(`no program ${name}`);
  return p;
}

/** The command at a path of canonical names or aliases (empty = root), with its chain. */
export function commandAt(p: ProgramSpec, words: readonly string[]): { chain: CommandSpec[]; cmd: CommandSpec } {
  const chain = [p.root];
  for (const w of words) {
    const next = leaf(chain).subcommands?.find((s) => s.name === w || s.aliases?.includes(w));
    if (!next) throw new Error(`${p.name}: no command "${words.join(' ')}" (stuck at "${w}")`);
    chain.push(next);
  }
  return { chain, cmd: leaf(chain) };
}

export function flagOf(p: ProgramSpec, words: readonly string[], name: string): FlagSpec | undefined {
  return allFlags(commandAt(p, words).chain).find((f) => f.name === name);
}

export function* everyCommand(p: ProgramSpec) {
  yield* walk(p);
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function run(p: ProgramSpec, argv: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<RunResult> {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.on('data', (d) => (stdout += d));
  err.on('data', (d) => (stderr += d));
  const code = await runProgram(p, argv, { stdout: out, stderr: err, env }, loadHandler);
  return { code, stdout, stderr };
}
