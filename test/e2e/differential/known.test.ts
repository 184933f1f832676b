// The README's table of differences between our engine and Envoy is well formed: each row names a scenario, a
// request (or `*`) and a field, gives both sides' values and a reason. The differential tests read the same
// rows (known.ts) and expect exactly them.
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { REPO } from '../../helpers/spec';
import { ANY } from '../../helpers/differential';
import { TABLE_TITLE, knownDifferences } from './known';

t.test('every row of the difference table parses and says why', async (t) => {
  const readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(TABLE_TITLE)).split(/\n## /)[0]!;
  const lines = section.split('\n').filter((l) => l.startsWith('| `'));
  const rows = knownDifferences(readme);
  t.equal(rows.length, lines.length);
  rows.forEach((r, i) => {
    t.match(r.where, /^[a-z0-9-]+\/[^/]+\/\S+$/, `row ${i + 1}: <scenario>/<request>/<field>`);
    if (r.engine !== ANY || r.envoy !== ANY) t.not(r.engine, r.envoy, `row ${i + 1}: the two sides differ`);
    t.match(lines[i]!.split(' | ')[3] ?? '', /\w{3}/, `row ${i + 1}: a reason`);
  });
});

t.test('cells: JSON in backticks, — for absent, * for any', async (t) => {
  const readme = `${TABLE_TITLE}\n\n| a | b | c | d |\n| --- | --- | --- | --- |\n| \`s/r/f\` | \`"x"\` | — | why |\n| \`s/*/g\` | * | \`1\` | why |\n`;
  t.same(knownDifferences(readme), [
    { where: 's/r/f', engine: '"x"', envoy: undefined },
    { where: 's/*/g', engine: '*', envoy: '1' },
  ]);
});
