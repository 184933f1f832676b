// Every conformance case of cases.yaml through the real rule builder and the dry-run recorder,
// compared with its golden command list.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { parse } from 'yaml';
import type { CaptureConfig, CaptureRuleConfig } from '../../src/iptables/config';
import { applyCapture } from '../../src/iptables/configurator';
import { DryRunRecorder } from '../../src/iptables/executor';

const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
const dataDir = path.resolve(repoRoot, '../shared/conformance/iptables');

interface CasesFile {
  base: Partial<CaptureRuleConfig>;
  cases: Record<string, Partial<CaptureRuleConfig>>;
}
const file = parse(readFileSync(path.join(dataDir, 'cases.yaml'), 'utf8')) as CasesFile;

// Run options of a plain dry run; none of them shapes the rules. outboundPortsExclude is the one
// rule input cases.yaml does not list, and its flag defaults to empty.
const runOptions = {
  outboundPortsExclude: '',
  dualStack: false,
  hostIP: '10.0.0.1',
  probePort: 15002,
  probeTimeoutMs: 5000,
  dryRun: true,
  cleanupOnly: false,
  forceApply: false,
  reconcile: false,
  skipRuleApply: false,
  networkNamespace: '',
  runValidation: false,
  cniMode: false,
};

const names = Object.keys(file.cases);
t.equal(names.length, 27, 'cases.yaml holds 27 cases');

for (const name of names) {
  t.test(name, async (t) => {
    const cfg = { ...runOptions, ...file.base, ...file.cases[name] } as CaptureConfig;
    const recorder = new DryRunRecorder();
    await applyCapture(cfg, recorder);
    const golden = readFileSync(path.join(dataDir, 'capture', `${name}.golden`), 'utf8');
    t.equal(recorder.lines.join('\n').trim(), golden.trim());
  });
}
