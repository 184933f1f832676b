// The `__complete` protocol the completion scripts call back into: the program itself says what can
// follow, from its tables. Output: one candidate per line (`value\tdescription`), then `:<directive>`.
import type { FlagSpec, ProgramSpec } from '../../commands/types';
import { allFlags, leaf } from './tree';
import { findCommand } from './argv';

export const DIRECTIVE = { error: 1, noSpace: 2, noFileComp: 4 } as const;

export interface Completion {
  candidates: Array<{ value: string; description: string }>;
  directive: number;
}

/** `words` are the arguments after the program name; the last one is the word being completed (may be ''). */
export function complete(program: ProgramSpec, words: readonly string[]): Completion {
  const done = words.slice(0, -1);
  const current = words[words.length - 1] ?? '';
  const { chain, rest } = findCommand(program, done);
  const flags = allFlags(chain).filter((f) => !f.hidden);
  const cmd = leaf(chain);

  // A value for the flag just typed (`--output <TAB>`)?
  const prev = done[done.length - 1];
  const prevFlag = prev ? flagNamedBy(flags, prev) : undefined;
  if (prevFlag && prevFlag.type !== 'bool' && !prev!.includes('=')) return values(prevFlag, current, '');

  // `--output=<TAB>`
  const eq = current.indexOf('=');
  if (current.startsWith('--') && eq > 0) {
    const f = flags.find((x) => x.name === current.slice(2, eq));
    if (f) return values(f, current.slice(eq + 1), current.slice(0, eq + 1));
  }

  if (current.startsWith('-')) {
    const candidates = [];
    for (const f of [...flags].sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const long = `--${f.name}`;
      if (long.startsWith(current)) candidates.push({ value: long, description: firstSentence(f.help) });
      if (current.length <= 2 && f.short && `-${f.short}`.startsWith(current))
        candidates.push({ value: `-${f.short}`, description: firstSentence(f.help) });
    }
    return { candidates, directive: DIRECTIVE.noFileComp };
  }

  const positionalGiven = rest.some((w) => !w.startsWith('-'));
  const subs = positionalGiven ? [] : (cmd.subcommands ?? []).filter((s) => !s.hidden && !s.deprecated);
  if (subs.length) {
    const candidates = subs
      .filter((s) => s.name.startsWith(current))
      .map((s) => ({ value: s.name, description: s.short }))
      .sort((a, b) => (a.value < b.value ? -1 : 1));
    if (chain.length === 1 && 'help'.startsWith(current)) candidates.push({ value: 'help', description: 'Help about any command' });
    return { candidates, directive: DIRECTIVE.noFileComp };
  }
  // Positional arguments: files are the sensible default; commands without arguments get nothing.
  return { candidates: [], directive: cmd.args?.length ? 0 : DIRECTIVE.noFileComp };
}

function flagNamedBy(flags: readonly FlagSpec[], word: string): FlagSpec | undefined {
  if (word.startsWith('--')) return flags.find((f) => f.name === word.slice(2));
  if (/^-[^-]$/.test(word)) return flags.find((f) => f.short === word[1]);
  return undefined;
}

function values(f: FlagSpec, current: string, prefix: string): Completion {
  if (f.enum) {
    return {
      candidates: f.enum.filter((v) => v.startsWith(current)).map((v) => ({ value: prefix + v, description: '' })),
      directive: DIRECTIVE.noFileComp,
    };
  }
  if (f.type === 'bool' || f.type === 'duration' || /int|float|Level/.test(f.type)) return { candidates: [], directive: DIRECTIVE.noFileComp };
  return { candidates: [], directive: 0 };
}

function firstSentence(help: string): string {
  const line = help.split('\n')[0]!;
  return line.length > 80 ? line.slice(0, 77) + '...' : line;
}

export function renderCompletion(c: Completion, withDescriptions: boolean): string {
  const lines = c.candidates.map((x) => (withDescriptions && x.description ? `${x.value}\t${x.description}` : x.value));
  return [...lines, `:${c.directive}`].join('\n') + '\n';
}
