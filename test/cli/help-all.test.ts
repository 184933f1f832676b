// `--help` of every command of every program exits 0, has cobra's sections, and lists every visible
// flag (local under Flags, inherited under Global Flags) with pflag's rendering of its default.
import t from 'tap';
import { ALL_PROGRAMS, run } from '../helpers/programs';
import { inheritedFlags, localFlags } from '../../src/cli/tree';
import { defaultIsZero, typeWord } from '../../src/cli/values';

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
      const check = (section: string, flags: ReturnType<typeof localFlags>, label: string) => {
        for (const f of flags) {
          if (f.hidden) continue;
          const head = f.short ? `-${f.short}, --${f.name}` : `--${f.name}`;
          const word = typeWord(f);
          const line = section.split('\n').find((l) => l.trimStart().startsWith(head + (word ? ` ${word} ` : ' ')) || l.trim() === head + (word ? ` ${word}` : ''));
          if (!t.ok(line, `${where}: ${label} lists ${head}`)) continue;
          if (!defaultIsZero(f, f.default) && !f.env) {
            const shown = f.type === 'string' ? `(default ${JSON.stringify(f.default)})` : `(default ${f.default})`;
            t.ok(line!.includes(shown), `${where}: --${f.name} shows ${shown}`);
          }
        }
      };
      check(flagsPart!, localFlags(chain), 'Flags');
      check(globalPart, inheritedFlags(chain), 'Global Flags');
    }
  }
  t.ok(commands > 100, `${commands} commands checked`);
});
