// The README's Layout table is the map a newcomer reads first: it must name every folder of src/ (one line
// each) and nothing that is not there, so a new concern cannot land without its line.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';

const root = path.resolve(import.meta.dirname, '../..');

/** The backticked paths in the first column of the table under `## Layout`. */
function layoutPaths(readme: string): string[] {
  const section = readme.split(/^## /m).find((s) => s.startsWith('Layout\n'));
  if (!section) return [];
  return section
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...l.split('|')[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!));
}

t.test('the Layout table lists every folder of src/, and only what exists', async (t) => {
  const listed = layoutPaths(readFileSync(path.join(root, 'README.md'), 'utf8'));
  t.ok(listed.length > 10, `the table was found (${listed.length} paths)`);
  const folders = readdirSync(path.join(root, 'src'))
    .filter((name) => statSync(path.join(root, 'src', name)).isDirectory())
    .map((name) => `src/${name}/`);
  t.same(
    folders.filter((f) => !listed.includes(f)),
    [],
    'every folder of src/ has a line',
  );
  t.same(
    listed.filter((p) => !existsSync(path.join(root, p))),
    [],
    'every path in the table exists',
  );
});
