// `--help` of every command of every program exits 0, has cobra's sections, and lists every visible
// flag (local under Flags, inherited under Global Flags) with pflag's rendering of its type and default.
// The rendering rules are written here from pflag's source (spf13/pflag v1.0.5, flag.go: UnquoteUsage for the
// type word, defaultIsZeroValue and FlagUsagesWrapped for the default), not taken from src/cli, which renders it;
// only the command table (commands/, data) says which flags exist.
import t from 'tap';
import { ALL_PROGRAMS, run } from '../helpers/programs';
import type { CommandSpec, FlagSpec } from '../../commands/types';

/** UnquoteUsage: a `backquoted` word in the usage names the value; else the Value's Type(), with these renamings. */
function pflagTypeWord(f: FlagSpec): string {
  const quoted = /`([^`]+)`/.exec(f.help);
  if (quoted) return quoted[1]!;
  const renamed: Record<string, string> = {
    bool: '',
    float64: 'float',
    int64: 'int',
    uint64: 'uint',
    stringSlice: 'strings',
    intSlice: 'ints',
    uintSlice: 'uints',
    boolSlice: 'bools',
  };
  return renamed[f.type] ?? f.type;
}

/** defaultIsZeroValue: per Value type; other types compare Value.String() with "false", "<nil>", "" and "0". */
function pflagDefaultIsZero(f: FlagSpec, def: string | undefined): boolean {
  if (def === undefined) return true;
  const zeroByType: Record<string, string[]> = {
    bool: ['false'],
    duration: ['0', '0s'],
    int: ['0'],
    int8: ['0'],
    int32: ['0'],
    int64: ['0'],
    uint: ['0'],
    uint8: ['0'],
    uint16: ['0'],
    uint32: ['0'],
    uint64: ['0'],
    float32: ['0'],
    float64: ['0'],
    string: [''],
    stringSlice: ['[]'],
    stringArray: ['[]'],
    intSlice: ['[]'],
  };
  return (zeroByType[f.type] ?? ['false', '<nil>', '', '0']).includes(def);
}

/** cobra: a command's own and persistent flags plus its help flag; ancestors' persistent flags are Global Flags. */
function flagsOf(chain: CommandSpec[]): { local: FlagSpec[]; inherited: FlagSpec[] } {
  const cmd = chain[chain.length - 1]!;
  const local = [...(cmd.flags ?? []), ...(cmd.persistentFlags ?? [])];
  const own = new Set([...local.map((f) => f.name), 'help']);
  const inherited = chain.slice(0, -1).flatMap((c) => (c.persistentFlags ?? []).filter((f) => !own.has(f.name)));
  return { local, inherited };
}

t.test('every command', async (t) => {
  let commands = 0;
  for (const p of ALL_PROGRAMS) {
    const stack = [[p.root]];
    while (stack.length) {
      const chain = stack.pop()!;
      const cmd = chain[chain.length - 1]!;
      for (const s of cmd.subcommands ?? []) stack.push([...chain, s]);
      const words = chain.slice(1).map((c) => c.name);
      const where = [p.name, ...words].join(' ');
      const res = await run(p, [...words, '--help']);
      commands++;
      if (!t.equal(res.code, 0, `${where} --help exits 0`)) continue;
      t.match(res.stdout, /^Usage:$/m, `${where}: Usage`);
      if (cmd.aliases?.length) t.match(res.stdout, `Aliases:\n  ${[cmd.name, ...cmd.aliases].join(', ')}\n`, `${where}: Aliases`);
      if (cmd.subcommands?.some((s) => !s.hidden)) t.match(res.stdout, /^Available Commands:$/m, `${where}: Available Commands`);
      const [flagsPart, globalPart = ''] = res.stdout.split(/^Global Flags:$/m);
      t.match(flagsPart, new RegExp(`^  -h, --help +help for ${cmd.name}$`, 'm'), `${where}: cobra's help flag`);
      const check = (section: string, flags: FlagSpec[], label: string) => {
        for (const f of flags) {
          if (f.hidden) continue;
          const head = f.short ? `-${f.short}, --${f.name}` : `--${f.name}`;
          const word = pflagTypeWord(f);
          const line = section
            .split('\n')
            .find((l) => l.trimStart().startsWith(head + (word ? ` ${word} ` : ' ')) || l.trim() === head + (word ? ` ${word}` : ''));
          if (!t.ok(line, `${where}: ${label} lists ${head}${word ? ` ${word}` : ''}`)) continue;
          if (!pflagDefaultIsZero(f, f.default) && !f.env) {
            const shown = f.type === 'string' ? `(default ${JSON.stringify(f.default)})` : `(default ${f.default})`;
            t.ok(line!.includes(shown), `${where}: --${f.name} shows ${shown}`);
          }
        }
      };
      const { local, inherited } = flagsOf(chain);
      check(flagsPart!, local, 'Flags');
      check(globalPart, inherited, 'Global Flags');
    }
  }
  t.ok(commands > 100, `${commands} commands checked`);
});
