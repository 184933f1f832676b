// cobra's help layout (Usage, Aliases, Examples, Available Commands, Flags, Global Flags), rendered
// from the tables, with pflag's column alignment and default rendering.
import type { ArgSpec, CommandSpec, FlagSpec, ProgramSpec } from '../../commands/types';
import { commandPath, inheritedFlags, isRunnable, leaf, localFlags, type Chain } from './tree';
import { defaultIsZero, typeWord } from './values';

/** Effective defaults shown in help can come from env fallbacks; the caller supplies them. */
export type DefaultLookup = (flag: FlagSpec) => string | undefined;

const tableDefault: DefaultLookup = (f) => f.default;

export function renderArg(a: ArgSpec): string {
  let s = /[<[]/.test(a.name) ? a.name : `<${a.name}>`;
  if (a.variadic) s += '...';
  if (a.optional || (a.variadic && !a.required)) s = s.startsWith('[') && !a.variadic ? s : `[${s}]`;
  return s;
}

export function useLine(program: ProgramSpec, chain: Chain): string {
  const cmd = leaf(chain);
  const parts = [commandPath(program, chain), ...(cmd.args ?? []).map(renderArg)];
  return parts.join(' ') + ' [flags]';
}

/** pflag's FlagUsages: sorted, aligned, `(default …)` unless the default is the type's zero value. */
export function flagUsages(flags: readonly FlagSpec[], defaults: DefaultLookup = tableDefault): string {
  const visible = flags.filter((f) => !f.hidden).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const lines: Array<[string, string]> = [];
  let maxlen = 0;
  for (const f of visible) {
    let left = f.short ? `  -${f.short}, --${f.name}` : `      --${f.name}`;
    const word = typeWord(f);
    if (word) left += ' ' + word;
    maxlen = Math.max(maxlen, left.length);
    let usage = f.help.replace(/`([^`]+)`/, '$1');
    const shown = defaults(f);
    if (!defaultIsZero(f, shown)) usage += f.type === 'string' ? ` (default ${JSON.stringify(shown)})` : ` (default ${shown})`;
    if (f.deprecated) usage += ` (DEPRECATED: ${f.deprecated})`;
    lines.push([left, usage]);
  }
  // pflag pads to the longest left column plus three spaces, and indents continuation lines to match.
  return lines
    .map(([left, usage]) => {
      const pad = ' '.repeat(maxlen - left.length + 3);
      return (left + pad + usage.split('\n').join('\n' + ' '.repeat(maxlen + 3))).replace(/[ \t]+$/gm, '');
    })
    .join('\n');
}

function visibleSubs(cmd: CommandSpec): CommandSpec[] {
  return (cmd.subcommands ?? []).filter((s) => !s.hidden && !s.deprecated);
}

/** cobra's default help: Long (or Short), then the usage template. */
export function renderHelp(program: ProgramSpec, chain: Chain, defaults: DefaultLookup = tableDefault): string {
  const cmd = leaf(chain);
  const head = (cmd.long ?? cmd.short).replace(/\s+$/, '');
  return `${head}\n\n${renderUsage(program, chain, defaults)}`;
}

export function renderUsage(program: ProgramSpec, chain: Chain, defaults: DefaultLookup = tableDefault): string {
  const cmd = leaf(chain);
  const path = commandPath(program, chain);
  const isRoot = chain.length === 1;
  const subs = visibleSubs(cmd);
  // cobra lists an implicit `help` command at the root.
  const listed: Array<{ name: string; short: string }> = subs.map((s) => ({ name: s.name, short: s.short }));
  if (isRoot && subs.length) listed.push({ name: 'help', short: 'Help about any command' });
  listed.sort((a, b) => (a.name < b.name ? -1 : 1));

  let out = 'Usage:';
  if (isRunnable(cmd)) out += `\n  ${useLine(program, chain)}`;
  if (subs.length) out += `\n  ${path} [command]`;
  if (cmd.aliases?.length) out += `\n\nAliases:\n  ${[cmd.name, ...cmd.aliases].join(', ')}`;
  if (cmd.example) out += `\n\nExamples:\n${cmd.example.replace(/\s+$/, '')}`;
  if (listed.length) {
    const pad = Math.max(11, ...listed.map((l) => l.name.length));
    out += '\n\nAvailable Commands:';
    for (const l of listed) out += `\n  ${l.name.padEnd(pad)} ${l.short}`;
  }
  const local = localFlags(chain);
  if (local.some((f) => !f.hidden)) out += `\n\nFlags:\n${flagUsages(local, defaults)}`;
  const inherited = inheritedFlags(chain);
  if (inherited.some((f) => !f.hidden)) out += `\n\nGlobal Flags:\n${flagUsages(inherited, defaults)}`;
  if (subs.length) out += `\n\nUse "${path} [command] --help" for more information about a command.`;
  return out + '\n';
}
