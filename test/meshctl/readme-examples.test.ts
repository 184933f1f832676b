// The README's "Files need no daemon at all" commands that name files of examples/meshctl/ run as printed
// (issue 24: they named files the repository did not have), from a folder laid out as the checkout is.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { built, DIST } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { tempDir } from '../helpers/temp';

if (!built()) t.fail('dist/mesh is missing: run `node build.mjs` first');

t.test('README commands on examples/meshctl work as printed', async (t) => {
  const lines = readFileSync(path.join(REPO, 'README.md'), 'utf8')
    .split('\n')
    .filter((l) => l.includes('examples/meshctl') || /^cd examples\/meshctl /.test(l))
    .filter((l) => /^(dist\/meshctl|cd examples)/.test(l));
  t.equal(lines.length, 3, lines.join('\n'));
  const dir = tempDir(t, 'mesh-readme-');
  symlinkSync(DIST, path.join(dir, 'dist'));
  symlinkSync(path.join(REPO, 'examples'), path.join(dir, 'examples'));
  for (const line of lines) {
    const cmd = line.replace(/\s+#.*$/, '');
    const out = execFileSync('bash', ['-eo', 'pipefail', '-c', cmd], { cwd: dir, encoding: 'utf8', env: { PATH: process.env.PATH, HOME: dir } });
    if (cmd.includes('nodeproxy-config')) t.match(out, /^NAMESPACE\s+POD NAME\s+ADDRESS/m, cmd);
    else if (cmd.includes('> injected.yaml')) t.match(readFileSync(path.join(dir, 'injected.yaml'), 'utf8'), /name: mesh-proxy/, cmd);
    else {
      t.match(out, /name: mesh-proxy/, cmd);
      t.match(out, /sidecar\.mesh\.io\/status/, cmd);
    }
  }
});
