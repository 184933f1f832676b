// package.json decides, for every dependency with an install script, whether npm may run it (npm 11's
// allowScripts; npm 11 warns about each one not covered, npm 12 blocks them): `npm ci` on a fresh checkout
// must print no such warning (issue 24).
import t from 'tap';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO } from '../helpers/spec';

t.test('allowScripts covers every install script the lockfile holds', async (t) => {
  const pkg = JSON.parse(readFileSync(path.join(REPO, 'package.json'), 'utf8')) as { allowScripts?: Record<string, boolean> };
  const lock = JSON.parse(readFileSync(path.join(REPO, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean }> };
  // the lockfile's key is the install path; its last node_modules/ segment is the package name
  const withScripts = Object.entries(lock.packages)
    .filter(([k, v]) => k !== '' && v.hasInstallScript)
    .map(([k]) => k.split('node_modules/').pop()!);
  t.ok(withScripts.length > 0, 'the lockfile records install scripts');
  for (const name of withScripts) t.type(pkg.allowScripts?.[name], 'boolean', `allowScripts decides for ${name}`);
});
