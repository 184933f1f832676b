// The apply procedure: check what is already installed, then apply, skip, reconcile or clean up.
// All effects go through Dependencies, so a DryRunRecorder yields the exact command list.

import { buildCaptureRules } from './builder';
import type { CaptureConfig } from './config';
import { DriftError, MissingBinaryError, PermissionError, XtablesError, looksLikePermissionProblem } from './errors';
import type { Dependencies, IpFamily, RunResult, XtablesBinaries } from './executor';
import { checkCommands, guardrailRules, toRestoreText, type Rule } from './rules';
import { cleanupPlan, compareWithExpected, parseSave, type SavedState } from './state';

export type Logger = (line: string) => void;

interface Family {
  readonly family: IpFamily;
  readonly bins: XtablesBinaries;
  readonly rules: readonly Rule[];
  readonly restore: string;
  /** IPv6 when the pod has no IPv6: inspected and cleaned, but failures there are not fatal. */
  readonly optional: boolean;
  state: SavedState;
  status: 'clean' | 'unchanged' | 'drift';
  reasons: string[];
}

const familyName = (f: IpFamily) => (f === 4 ? 'IPv4' : 'IPv6');

/** Legacy iptables ≥ 1.6.2 serialises writers through the xtables lock; wait for it instead of failing. */
function needsLock(bins: XtablesBinaries): boolean {
  if (!bins.legacy || !bins.version) return false;
  const [a = 0, b = 0, c = 0] = bins.version.split('.').map(Number);
  return a > 1 || (a === 1 && (b > 6 || (b === 6 && c >= 2)));
}

export class Configurator {
  constructor(
    private readonly cfg: CaptureConfig,
    private readonly deps: Dependencies,
    private readonly log: Logger = () => {},
  ) {}

  private writeArgs(bins: XtablesBinaries, args: readonly string[]): string[] {
    return needsLock(bins) ? [...args, '--wait=30'] : [...args];
  }

  /**
   * In CNI mode we run from the node inside a pod's namespace: a node-wide lock would contend with
   * kube-proxy for nothing, so legacy iptables gets a per-pod lock file (the namespace file itself).
   */
  private writeEnv(bins: XtablesBinaries): Record<string, string> | undefined {
    if (!this.cfg.cniMode || !needsLock(bins)) return undefined;
    const ns = this.cfg.networkNamespace;
    if (ns === '') return undefined;
    return { XTABLES_LOCKFILE: ns.includes('/') ? ns : `/run/netns/${ns}` };
  }

  private async iptables(f: Family, args: readonly string[]): Promise<RunResult> {
    const env = this.writeEnv(f.bins);
    return this.deps.run(f.bins.iptables, this.writeArgs(f.bins, args), env ? { env } : {});
  }

  private fail(command: string, r: RunResult, hint = ''): Error {
    return looksLikePermissionProblem(r.stderr) ? new PermissionError(command, r.stderr) : new XtablesError(command, r.stderr, hint);
  }

  /** Best effort (cleanup, guardrail removal), but a permission problem still stops us. */
  private async tryIptables(f: Family, args: readonly string[]): Promise<void> {
    const r = await this.iptables(f, args);
    if (r.code !== 0 && looksLikePermissionProblem(r.stderr)) throw new PermissionError(f.bins.iptables, r.stderr);
  }

  private async loadFamily(family: IpFamily, rules: readonly Rule[]): Promise<Family | undefined> {
    const optional = family === 6 && !this.cfg.enableIPv6;
    let bins: XtablesBinaries;
    try {
      bins = await this.deps.detectXtables(family);
    } catch (err) {
      // Without IPv6 on the pod, a host without ip6tables is fine.
      if (optional && (err instanceof MissingBinaryError || err instanceof XtablesError)) return undefined;
      throw err;
    }
    const saved = await this.deps.run(bins.save, []);
    if (saved.code !== 0) {
      if (optional && !looksLikePermissionProblem(saved.stderr)) return undefined;
      throw this.fail(bins.save, saved);
    }
    const f: Family = {
      family,
      bins,
      rules,
      restore: toRestoreText(rules),
      optional,
      state: parseSave(saved.stdout),
      status: 'clean',
      reasons: [],
    };
    // Cleanup removes whatever is there; comparing it with the configuration would be wasted work.
    if (this.cfg.cleanupOnly) return f;
    const verdict = compareWithExpected(f.state, rules);
    if (verdict.kind === 'drift') {
      f.status = 'drift';
      f.reasons = verdict.reasons;
    } else if (verdict.kind === 'candidate') {
      f.status = 'unchanged';
      for (const args of checkCommands(rules)) {
        const r = await this.deps.run(bins.iptables, args);
        if (r.code !== 0) {
          if (looksLikePermissionProblem(r.stderr)) throw new PermissionError(bins.iptables, r.stderr);
          f.status = 'drift';
          f.reasons = [`rule missing: ${args.slice(3).join(' ')} (table ${args[1]})`];
          break;
        }
      }
    }
    return f;
  }

  async run(): Promise<void> {
    const rules = buildCaptureRules(this.cfg);
    const families: Family[] = [];
    for (const [family, list] of [
      [4, rules.v4],
      [6, rules.v6],
    ] as const) {
      const f = await this.loadFamily(family, list);
      if (f) families.push(f);
    }

    if (this.cfg.cleanupOnly) {
      for (const f of families) await this.cleanup(f);
      this.log('Removed MESH_ chains and the jumps into them');
    } else {
      await this.apply(families);
    }

    // Print the final state, as Istio does, so logs show what the pod ended up with.
    for (const f of families) {
      if (f.family === 6 && !this.cfg.enableIPv6) continue;
      const r = await this.deps.run(f.bins.save, []);
      if (r.code === 0 && r.stdout !== '') this.log(`Final iptables state (${familyName(f.family)}):\n${r.stdout.trimEnd()}`);
    }
  }

  /**
   * What differs between the namespace and this configuration, without changing anything: empty when
   * every rule is in place (the CNI plugin's CHECK).
   */
  async verify(): Promise<string[]> {
    const rules = buildCaptureRules(this.cfg);
    const problems: string[] = [];
    for (const [family, list] of [
      [4, rules.v4],
      [6, rules.v6],
    ] as const) {
      if (list.length === 0) continue;
      const f = await this.loadFamily(family, list);
      if (!f) continue;
      if (f.status === 'clean') problems.push(`${familyName(family)}: no MESH_ chains are installed`);
      else if (f.status === 'drift') problems.push(`${familyName(family)}: ${f.reasons.join(', ')}`);
    }
    return problems;
  }

  private async apply(families: Family[]): Promise<void> {
    const drifted = families.filter((f) => f.status === 'drift');
    if (drifted.length > 0 && !this.cfg.reconcile && !this.cfg.forceApply) {
      throw new DriftError(drifted.map((f) => `${familyName(f.family)}: ${f.reasons.join(', ')}`));
    }

    const toApply = families.filter((f) => f.status !== 'unchanged' || this.cfg.forceApply);
    for (const f of families) {
      if (!toApply.includes(f)) this.log(`${familyName(f.family)} rules already in place; nothing to do`);
    }

    const reconciling = this.cfg.reconcile ? drifted : [];
    const guarded: Family[] = [];
    try {
      if (reconciling.length > 0) {
        // While our chains are replaced, traffic would bypass the proxy; block it until we are done.
        for (const f of families) {
          for (const args of guardrailCleanup()) await this.tryIptables(f, args);
          for (const r of guardrailRules()) {
            const res = await this.iptables(f, ['-t', r.table, ...r.params]);
            if (res.code !== 0) throw this.fail(f.bins.iptables, res);
          }
          guarded.push(f);
        }
        for (const f of reconciling) {
          this.log(`Reconciling ${familyName(f.family)} rules: ${f.reasons.join(', ')}`);
          await this.cleanup(f);
        }
      }
      for (const f of toApply) {
        if (f.restore === '') continue;
        const env = this.writeEnv(f.bins);
        const r = await this.deps.run(f.bins.restore, this.writeArgs(f.bins, ['--noflush']), {
          stdin: f.restore,
          ...(env ? { env } : {}),
        });
        if (r.code !== 0) {
          const hint = /already exists/i.test(r.stderr) ? 'MESH_ chains already exist; use --reconcile to replace them' : '';
          throw this.fail(`${f.bins.restore} --noflush`, r, hint);
        }
        this.log(`Applied ${familyName(f.family)} rules with ${f.bins.restore}`);
      }
    } finally {
      for (const f of guarded) for (const args of guardrailCleanup()) await this.tryIptables(f, args).catch(() => {});
    }
  }

  private async cleanup(f: Family): Promise<void> {
    const plan = cleanupPlan(f.state, f.rules);
    for (const args of plan.commands) await this.tryIptables(f, args);
    if (plan.restore === '') return;
    const env = this.writeEnv(f.bins);
    const r = await this.deps.run(f.bins.restore, this.writeArgs(f.bins, ['--noflush']), {
      stdin: plan.restore,
      ...(env ? { env } : {}),
    });
    if (r.code !== 0) throw this.fail(`${f.bins.restore} --noflush (removing MESH_ chains)`, r);
  }
}

function guardrailCleanup(): string[][] {
  return guardrailRules().map((r) => ['-t', r.table, '-D', r.chain, ...r.params.slice(3)]);
}

/** Differences between the namespace's rules and the configuration; empty when all are in place. */
export async function verifyCapture(cfg: CaptureConfig, deps: Dependencies): Promise<string[]> {
  return new Configurator(cfg, deps).verify();
}

/** Runs the iptables part of mesh-iptables (no routes, no validation). */
export async function applyCapture(cfg: CaptureConfig, deps: Dependencies, log?: Logger): Promise<void> {
  await new Configurator(cfg, deps, log).run();
}
