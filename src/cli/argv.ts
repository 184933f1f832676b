// Argument parsing with cobra/pflag semantics, driven by the command tables.
// Pass 1 finds the command the words name (flags may stand anywhere, as in cobra);
// pass 2 parses the flags against that command's flag set.
import type { CommandSpec, FlagSpec, ProgramSpec } from '../../commands/types';
import type { FlagValue } from './context';
import { allFlags, findSub, leaf, type Chain, commandPath } from './tree';
import { accumulates, checkAllowed, parseFlagValue, ValueError } from './values';
import { goQuote } from '../lib/duration';

/** A usage error: printed as `Error: …` followed by a usage hint. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly chain: Chain,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export interface ParsedArgv {
  chain: Chain;
  /** Raw occurrences of each flag, by long name, in order. */
  given: Map<string, FlagValue>;
  args: string[];
  help: boolean;
}

function isBool(f: FlagSpec | undefined): boolean {
  return f?.type === 'bool';
}

function lookupLong(flags: readonly FlagSpec[], name: string): FlagSpec | undefined {
  return flags.find((f) => f.name === name);
}
function lookupShort(flags: readonly FlagSpec[], c: string): FlagSpec | undefined {
  return flags.find((f) => f.short === c);
}

/** Pass 1 (cobra's Find + stripFlags): the command chain named by the non-flag words. */
export function findCommand(program: ProgramSpec, argv: readonly string[]): { chain: Chain; rest: string[] } {
  const chain: CommandSpec[] = [program.root];
  const rest: string[] = [];
  let i = 0;
  let positional = false;
  while (i < argv.length) {
    const a = argv[i]!;
    if (a === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    if (a.startsWith('-') && a.length > 1) {
      rest.push(a);
      const flags = allFlags(chain);
      // A non-bool flag without `=` consumes the next word, which is then not a command word.
      if (a.startsWith('--')) {
        if (!a.includes('=') && !isBool(lookupLong(flags, a.slice(2))) && lookupLong(flags, a.slice(2)) && i + 1 < argv.length) {
          rest.push(argv[++i]!);
        }
      } else if (a.length === 2 && lookupShort(flags, a[1]!) && !isBool(lookupShort(flags, a[1]!)) && i + 1 < argv.length) {
        rest.push(argv[++i]!);
      }
      i++;
      continue;
    }
    const sub = positional ? undefined : findSub(leaf(chain), a);
    if (sub) chain.push(sub);
    else {
      positional = true;
      rest.push(a);
    }
    i++;
  }
  return { chain, rest };
}

/** Pass 2 (pflag's Parse): flags and positional arguments of the found command. */
export function parseArgv(program: ProgramSpec, argv: readonly string[]): ParsedArgv {
  const { chain, rest } = findCommand(program, argv);
  const flags = allFlags(chain);
  const given = new Map<string, FlagValue>();
  const args: string[] = [];
  let help = false;

  const set = (f: FlagSpec, text: string, display: string) => {
    if (f.name === 'help') {
      help = true;
      return;
    }
    try {
      const prev = accumulates(f.type) ? given.get(f.name) : undefined;
      const v = parseFlagValue(f.type, text, prev);
      const notAllowed = checkAllowed(f, v);
      if (notAllowed) throw new ValueError(notAllowed);
      given.set(f.name, v);
    } catch (e) {
      if (e instanceof ValueError) {
        throw new UsageError(`invalid argument ${goQuote(text)} for ${goQuote(display)} flag: ${e.message}`, chain);
      }
      throw e;
    }
  };
  const flagDisplay = (f: FlagSpec) => (f.short ? `-${f.short}, --${f.name}` : `--${f.name}`);

  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a === '--') {
      args.push(...rest.slice(i + 1));
      break;
    }
    if (a.startsWith('--') && a.length > 2) {
      const eq = a.indexOf('=');
      const name = eq < 0 ? a.slice(2) : a.slice(2, eq);
      const f = lookupLong(flags, name);
      if (!f) throw new UsageError(`unknown flag: --${name}`, chain);
      if (eq >= 0) set(f, a.slice(eq + 1), flagDisplay(f));
      else if (isBool(f)) set(f, 'true', flagDisplay(f));
      else if (i + 1 < rest.length) set(f, rest[++i]!, flagDisplay(f));
      else throw new UsageError(`flag needs an argument: --${name}`, chain);
      continue;
    }
    if (a.startsWith('-') && a.length > 1) {
      const shorts = a.slice(1);
      for (let j = 0; j < shorts.length; j++) {
        const c = shorts[j]!;
        const f = lookupShort(flags, c);
        if (!f) throw new UsageError(`unknown shorthand flag: '${c}' in -${shorts}`, chain);
        if (shorts[j + 1] === '=') {
          set(f, shorts.slice(j + 2), flagDisplay(f));
          break;
        }
        if (isBool(f)) {
          set(f, 'true', flagDisplay(f));
          continue;
        }
        if (j + 1 < shorts.length) {
          set(f, shorts.slice(j + 1), flagDisplay(f));
          break;
        }
        if (i + 1 < rest.length) set(f, rest[++i]!, flagDisplay(f));
        else throw new UsageError(`flag needs an argument: '${c}' in -${shorts}`, chain);
      }
      continue;
    }
    args.push(a);
  }
  if (!help) checkArgs(program, chain, args);
  return { chain, given, args, help };
}

/** cobra's positional-argument validators, chosen from the table's ArgSpec list. */
function checkArgs(program: ProgramSpec, chain: Chain, args: readonly string[]): void {
  const cmd = leaf(chain);
  const specs = cmd.args ?? [];
  if (cmd.subcommands?.length && specs.length === 0) {
    if (args.length > 0) {
      const hint = suggest(cmd, args[0]!);
      throw new UsageError(`unknown command ${goQuote(args[0]!)} for ${goQuote(commandPath(program, chain))}${hint}`, chain);
    }
    return;
  }
  const min = specs.filter((a) => a.required || (!a.optional && !a.variadic)).length;
  const max = specs.some((a) => a.variadic) ? Infinity : specs.length;
  const n = args.length;
  if (specs.length === 0 && n > 0) {
    throw new UsageError(`unknown command ${goQuote(args[0]!)} for ${goQuote(commandPath(program, chain))}`, chain);
  }
  if (min === max && n !== min) throw new UsageError(`accepts ${min} arg(s), received ${n}`, chain);
  if (max === Infinity && n < min) throw new UsageError(`requires at least ${min} arg(s), only received ${n}`, chain);
  if (min === 0 && n > max) throw new UsageError(`accepts at most ${max} arg(s), received ${n}`, chain);
  if ((n < min || n > max) && max !== Infinity) throw new UsageError(`accepts between ${min} and ${max} arg(s), received ${n}`, chain);
}

/** cobra's "Did you mean this?" with Levenshtein distance ≤ 2 or a prefix match. */
function suggest(cmd: CommandSpec, word: string): string {
  const names: string[] = [];
  for (const s of cmd.subcommands ?? []) {
    if (s.hidden) continue;
    const cands = [s.name, ...(s.aliases ?? [])];
    if (cands.some((c) => levenshtein(c.toLowerCase(), word.toLowerCase()) <= 2 || c.startsWith(word))) names.push(s.name);
  }
  return names.length ? `\n\nDid you mean this?\n${names.map((n) => `\t${n}\n`).join('')}` : '';
}

function levenshtein(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length]![b.length]!;
}
