// Every conformance case of cases.yaml through the real rule builder and the dry-run recorder,
// compared with its golden command list.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse } from 'yaml';
import type { CaptureConfig, CaptureRuleConfig } from '../../src/iptables/config';
import { applyCapture } from '../../src/iptables/configurator';
import { DryRunRecorder } from '../../src/iptables/executor';
import { CONFORMANCE_DIR, RUN_OPTIONS } from './helpers';

interface CasesFile {
  base: Partial<CaptureRuleConfig>;
  cases: Record<string, Partial<CaptureRuleConfig>>;
}
const file = parse(readFileSync(path.join(CONFORMANCE_DIR, 'cases.yaml'), 'utf8')) as CasesFile;

// A plain dry run: the run options shape none of the rules.
const runOptions = { ...RUN_OPTIONS, dryRun: true };

const names = Object.keys(file.cases);
t.equal(names.length, 27, 'cases.yaml holds 27 cases');

for (const name of names) {
  t.test(name, async (t) => {
    const cfg = { ...runOptions, ...file.base, ...file.cases[name] } as CaptureConfig;
    const recorder = new DryRunRecorder();
    await applyCapture(cfg, recorder);
    const golden = readFileSync(path.join(CONFORMANCE_DIR, 'capture', `${name}.golden`), 'utf8');
    t.equal(recorder.lines.join('\n').trim(), golden.trim());
  });
}
