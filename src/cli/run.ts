// Runs one program of the multi-call binary: parse with the tables (argv.ts, pflag/cobra semantics), report
// errors as cobra does, then run the behaviour the composition root (src/main/handlers.ts) finds for the command.
//
// One parser routes and parses. clipanion was tried as the router for every command (one Cli, a class per table
// command) and cannot carry the semantics the spec tests (test/cli/**) require. Against clipanion 3.2.1, with
// `proxy-config route` taking `-o,--output` (string), `--name` (string) and `--verbose` (boolean):
//   proxy-config route --name -inbound pod   → "Not enough arguments to option --name." (pflag takes `-inbound`)
//   proxy-config --output json route pod     → "Command not found" (cobra allows flags between command words)
//   proxy-config route --verbose=false pod   → "Invalid option name ("--verbose=false")."
//   proxy-config route -ojson pod            → "Unsupported option name ("-ojson")." (pflag's glued short value)
//   proxy-config route pod --bogus           → "Command not found; did you mean…" (cobra: "unknown flag: --bogus")
// Routing with clipanion after argv.ts had parsed meant walking the same argv twice, so argv.ts alone routes.
import type { FlagSpec, ProgramSpec } from '../../commands/types';
import { CommandError, type FlagValue, type HandlerLoader, type RunContext } from './context';
import { parseArgv, UsageError } from './argv';
import { EnvError, EnvTable } from '../lib/env';
import { renderHelp } from './help';
import { allFlags, commandPath, leaf, type Chain } from './tree';
import { flagEnvFallback, parseDefault, renderValue } from './values';
import { complete, renderCompletion } from './complete';
import { configure, parseLogOptions, LogOptionsError, SinkOpenError } from '../lib/log';

export interface IO {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env: NodeJS.ProcessEnv;
}

/** The defaults a command shows and uses: the table's, or the flag's env fallback when that is set. */
export function effectiveDefaults(chain: Chain, env: NodeJS.ProcessEnv): Map<string, { value: FlagValue; shown?: string }> {
  const out = new Map<string, { value: FlagValue; shown?: string }>();
  for (const f of allFlags(chain)) {
    const fromEnv = flagEnvFallback(f, env);
    out.set(
      f.name,
      fromEnv ? { value: fromEnv.value, shown: renderValue(f.type, fromEnv.value, fromEnv.raw) } : { value: parseDefault(f), shown: f.default },
    );
  }
  return out;
}

/** Runs `argv` against a program's table; `loadHandler` (the composition root's, src/main/handlers.ts) finds the behaviour. */
export async function runProgram(program: ProgramSpec, argv: readonly string[], io: IO, loadHandler: HandlerLoader): Promise<number> {
  const fail = (message: string, chain?: Chain, code = program.errorExitCode): number => {
    io.stderr.write(`Error: ${message}\n`);
    if (chain) io.stderr.write(`Run '${commandPath(program, chain)} --help' for usage.\n`);
    return code;
  };

  if (argv[0] === '__complete' || argv[0] === '__completeNoDesc') {
    io.stdout.write(renderCompletion(complete(program, argv.slice(1)), argv[0] === '__complete'));
    return 0;
  }
  // cobra's `help [command]`.
  if (argv[0] === 'help') return runProgram(program, [...argv.slice(1), '--help'], io, loadHandler);

  let parsed;
  try {
    parsed = parseArgv(program, argv);
  } catch (e) {
    if (e instanceof UsageError) return fail(e.message, e.chain, program.usageExitCode ?? program.errorExitCode);
    throw e;
  }
  const { chain } = parsed;
  const cmd = leaf(chain);

  let defaults;
  try {
    defaults = effectiveDefaults(chain, io.env);
  } catch (e) {
    if (e instanceof EnvError) return fail(e.message);
    throw e;
  }
  if (parsed.help || !cmd.run) {
    io.stdout.write(renderHelp(program, chain, (f: FlagSpec) => defaults.get(f.name)?.shown));
    return 0;
  }

  const envErrors = new EnvTable(program.env, io.env).errors();
  if (envErrors.length) return fail(envErrors.join('\nError: '));

  const flags: Record<string, FlagValue> = {};
  for (const [name, d] of defaults) flags[name] = d.value;
  for (const [name, v] of parsed.given) flags[name] = v;
  delete flags['help'];
  for (const f of allFlags(chain)) {
    if (f.deprecated && parsed.given.has(f.name)) io.stderr.write(`Flag --${f.name} has been deprecated, ${f.deprecated}\n`);
  }
  if (cmd.deprecated) io.stderr.write(`Command "${cmd.name}" is deprecated, ${cmd.deprecated}\n`);

  if (program.logScopes && 'log_target' in flags) {
    try {
      configure(parseLogOptions(flags), { scopes: [...program.logScopes] });
    } catch (e) {
      if (e instanceof LogOptionsError || e instanceof SinkOpenError) return fail(e.message, chain);
      throw e;
    }
  }

  const path = chain.slice(1).map((c) => c.name);
  const prepared: RunContext = {
    program,
    path,
    command: cmd,
    flags,
    changed: new Set(parsed.given.keys()),
    args: parsed.args,
    env: io.env,
    stdout: io.stdout,
    stderr: io.stderr,
  };
  try {
    // A runnable command has its `run` key (checked above: a group without one printed its help).
    return await (
      await loadHandler(cmd.run)
    )(prepared);
  } catch (e) {
    if (e instanceof CommandError) return fail(e.message, undefined, e.exitCode ?? program.errorExitCode);
    throw e;
  }
}
