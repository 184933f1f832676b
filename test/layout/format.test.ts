// One formatting for the whole tree (Prettier, .prettierrc.json; .prettierignore says what is left alone), so a
// diff shows what changed rather than how someone's editor wraps. `npx prettier --write .` fixes a failure.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';

const root = path.resolve(import.meta.dirname, '../..');

t.test('every source file is formatted as Prettier formats it', async (t) => {
  const r = spawnSync(path.join(root, 'node_modules/.bin/prettier'), ['--list-different', '.'], { cwd: root, encoding: 'utf8' });
  t.equal(r.error, undefined, 'prettier ran');
  t.equal(r.stderr, '', 'prettier read every file');
  t.same(r.stdout.split('\n').filter(Boolean), [], 'files that differ (npx prettier --write . fixes them)');
});
