// The differences between our engine and Envoy that the README lists on purpose ("Where the built-in engine
// differs from Envoy"), read from the README's table itself, so the table and the harness cannot drift: a row
// is `| \`<scenario>/<request>/<field>\` | \`<engine's value>\` | \`<Envoy's value>\` | why |`, values as the
// harness prints them (JSON; `—` for a field one side does not have, `*` for any value; `*` as the request: every
// request of the scenario).
import fs from 'node:fs';
import path from 'node:path';
import { REPO } from '../../helpers/spec';
import { ANY, type KnownDifference } from '../../helpers/differential';

export const TABLE_TITLE = '## Where the built-in engine differs from Envoy';

/** The table's rows, parsed. */
export function knownDifferences(readme = fs.readFileSync(path.join(REPO, 'README.md'), 'utf8')): KnownDifference[] {
  const start = readme.indexOf(TABLE_TITLE);
  if (start < 0) throw new Error(`README has no "${TABLE_TITLE}" section`);
  const section = readme.slice(start + TABLE_TITLE.length).split(/\n## /)[0]!;
  const cell = (c: string): string | undefined => (c.trim() === '—' ? undefined : c.trim() === ANY ? ANY : /^`(.*)`$/.exec(c.trim())?.[1]);
  return section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .map((l) => {
      const cells = l.split(' | ').map((c) => c.replace(/^\| |\s*\|$/g, ''));
      return { where: cell(cells[0]!)!, engine: cell(cells[1]!), envoy: cell(cells[2]!) };
    });
}
