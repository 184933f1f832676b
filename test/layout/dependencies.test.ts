// The layering of src/ (.dependency-cruiser.cjs says which rules and why), checked by dependency-cruiser itself
// so that a new import that closes a cycle or reaches upward fails the suite with the rule and the edge named.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import t from 'tap';

const root = path.resolve(import.meta.dirname, '../..');

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
  cycle?: Array<{ name: string } | string>;
}

t.test('dependency-cruiser finds no violation of the layering rules', async (t) => {
  const r = spawnSync(path.join(root, 'node_modules/.bin/depcruise'), ['src', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  t.equal(r.error, undefined, 'depcruise ran');
  const result = JSON.parse(r.stdout) as { summary: { violations: Violation[]; totalCruised: number } };
  t.ok(result.summary.totalCruised > 400, `cruised the whole of src/ (${result.summary.totalCruised} modules)`);
  const lines = result.summary.violations.map((v) => {
    const cycle = v.cycle?.map((c) => (typeof c === 'string' ? c : c.name)).join(' → ');
    return `${v.rule.name}: ${v.from} → ${cycle ?? v.to}`;
  });
  t.same(lines, [], 'no violations');
});
