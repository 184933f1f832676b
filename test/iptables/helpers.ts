// Shared test helpers: conformance data, spec flag defaults and a RunContext that captures output.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { CommandSpec, ProgramSpec } from '../../commands/types';
import type { FlagValue, RunContext } from '../../src/cli/context';

export const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CONFORMANCE_DIR = path.resolve(REPO_ROOT, '../shared/conformance/iptables');

/**
 * Run options of a plain apply (not a dry run); none of them shapes the rules. outboundPortsExclude is the one
 * rule input cases.yaml does not list, and its flag defaults to empty.
 */
export const RUN_OPTIONS = {
  outboundPortsExclude: '',
  dualStack: false,
  hostIP: '10.0.0.1',
  probePort: 15002,
  probeTimeoutMs: 5000,
  dryRun: false,
  cleanupOnly: false,
  forceApply: false,
  reconcile: false,
  skipRuleApply: false,
  networkNamespace: '',
  runValidation: false,
  cniMode: false,
};

export function golden(name: string): string {
  return readFileSync(path.join(CONFORMANCE_DIR, 'capture', `${name}.golden`), 'utf8');
}

/**
 * Flag values as the CLI hands them over when nothing is given: the defaults of the spec's
 * `mesh-iptables` flag table (section 4.4), typed like RunContext.flags.
 */
export function specFlagDefaults(): Record<string, FlagValue> {
  const doc = readFileSync(path.resolve(REPO_ROOT, '../shared/spec/02-agent-and-cni.md'), 'utf8');
  const start = doc.indexOf('### 4.4');
  const end = doc.indexOf('\n### ', start + 1);
  const out: Record<string, FlagValue> = {};
  for (const line of doc.slice(start, end).split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    const name = /^--([a-z][a-z0-9-]*)$/.exec(cells[1] ?? '')?.[1];
    if (!name) continue;
    const [type, def] = [cells[3]!, cells[4]!];
    if (type === 'boolean') out[name] = def === 'on';
    else if (type === 'uint16') out[name] = Number(def);
    else if (type === 'duration') out[name] = Number(/^([0-9]+)s$/.exec(def)![1]) * 1000;
    else out[name] = def === 'empty' ? '' : def;
  }
  return out;
}

export interface CapturedContext {
  ctx: RunContext;
  stdout(): string;
  stderr(): string;
}

export function runContext(flags: Record<string, FlagValue>, env: Record<string, string> = {}): CapturedContext {
  const out = new PassThrough();
  const err = new PassThrough();
  let stdout = '';
  let stderr = '';
  out.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  err.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const ctx: RunContext = {
    program: { name: 'pilot-agent' } as ProgramSpec,
    path: ['mesh-iptables'],
    command: { name: 'mesh-iptables' } as CommandSpec,
    flags,
    changed: new Set(),
    args: [],
    env,
    stdout: out,
    stderr: err,
  };
  return { ctx, stdout: () => stdout, stderr: () => stderr };
}
