// The I/O edge: running iptables and ip, for real (optionally inside another network namespace)
// or as a dry run that only records what would run.

import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import path from 'node:path';
import { MissingBinaryError, PermissionError, XtablesError, looksLikePermissionProblem } from './errors';

export type IpFamily = 4 | 6;

/** The iptables tool set chosen for one address family. */
export interface XtablesBinaries {
  readonly iptables: string;
  readonly save: string;
  readonly restore: string;
  /** The x_tables ("legacy") backend, which serialises writers with a lock file; nf_tables does not. */
  readonly legacy: boolean;
  /** `1.8.9`, when known. */
  readonly version?: string;
}

export interface RunOptions {
  readonly stdin?: string;
  /** Extra environment variables for the command. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface Dependencies {
  /** Picks the iptables binaries for a family; throws MissingBinaryError / PermissionError. */
  detectXtables(family: IpFamily): Promise<XtablesBinaries>;
  /** Runs a command to completion. A non-zero exit is a result, not an exception. */
  run(command: string, args: readonly string[], options?: RunOptions): Promise<RunResult>;
}

// ---------------------------------------------------------------------------------------------
// Dry run

/**
 * Records commands instead of running them, in the format of the conformance goldens: a command
 * line per command, or the lines of its stdin for restores. Everything "succeeds" with no output,
 * which makes every table look clean.
 */
export class DryRunRecorder implements Dependencies {
  readonly lines: string[] = [];

  async detectXtables(family: IpFamily): Promise<XtablesBinaries> {
    const base = family === 6 ? 'ip6tables' : 'iptables';
    return { iptables: base, save: `${base}-save`, restore: `${base}-restore`, legacy: false };
  }

  async run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    if (options.stdin !== undefined) {
      const lines = options.stdin.split('\n');
      if (lines[lines.length - 1] === '') lines.pop();
      this.lines.push(...lines);
    } else {
      this.lines.push([command, ...args].join(' '));
    }
    return { code: 0, stdout: '', stderr: '' };
  }
}

// ---------------------------------------------------------------------------------------------
// Real commands

export interface RealDependenciesOptions {
  /** `ip netns` name or namespace path; commands then run inside that network namespace. */
  readonly networkNamespace?: string;
  /** Environment of spawned commands (PATH lookup included); defaults to process.env. */
  readonly env?: NodeJS.ProcessEnv;
  /** Upper bound for one command; iptables may wait up to 30 s for the xtables lock. */
  readonly timeoutMs?: number;
}

export function findExecutable(name: string, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (name.includes('/')) return isExecutable(name) ? name : undefined;
  for (const dir of (env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const full = path.join(dir, name);
    if (isExecutable(full)) return full;
  }
  return undefined;
}

function isExecutable(file: string): boolean {
  try {
    accessSync(file, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Counts rules in iptables-save output: a hint of which backend the namespace already uses. */
function countRules(saveOutput: string): number {
  return saveOutput.split('\n').filter((l) => l.startsWith('-A ')).length;
}

/** Protocol 255 is reserved, so this rule can never match; adding it proves kernel support and rights. */
const PROBE_RULE = ['-t', 'filter', '-A', 'INPUT', '-p', '255', '-j', 'DROP'];

export class RealDependencies implements Dependencies {
  private readonly env: NodeJS.ProcessEnv;
  private readonly detected = new Map<IpFamily, Promise<XtablesBinaries>>();

  constructor(private readonly options: RealDependenciesOptions = {}) {
    this.env = options.env ?? process.env;
  }

  /** The argv that runs `command` in the configured namespace. */
  private wrap(command: string, args: readonly string[]): [string, string[]] {
    const ns = this.options.networkNamespace ?? '';
    if (ns === '') return [command, [...args]];
    if (ns.includes('/')) return ['nsenter', [`--net=${ns}`, '--', command, ...args]];
    return ['ip', ['netns', 'exec', ns, command, ...args]];
  }

  async run(command: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
    if (!findExecutable(command, this.env)) throw new MissingBinaryError([command]);
    const [file, argv] = this.wrap(command, args);
    if (!findExecutable(file, this.env)) throw new MissingBinaryError([file]);
    return new Promise((resolve, reject) => {
      const child = spawn(file, argv, {
        env: { ...this.env, ...options.env },
        stdio: ['pipe', 'pipe', 'pipe'],
        timeout: this.options.timeoutMs ?? 60_000,
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      child.on('error', (err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') reject(new MissingBinaryError([file]));
        else if (err.code === 'EACCES' || err.code === 'EPERM') reject(new PermissionError(file, err.message));
        else reject(err);
      });
      child.on('close', (code, signal) => {
        resolve({ code: code ?? (signal ? 128 : 1), stdout, stderr: signal && code === null ? `${stderr}killed by ${signal}` : stderr });
      });
      // A command that exits without reading its stdin must not crash us with EPIPE.
      child.stdin.on('error', () => {});
      child.stdin.end(options.stdin ?? '');
    });
  }

  detectXtables(family: IpFamily): Promise<XtablesBinaries> {
    let p = this.detected.get(family);
    if (!p) {
      p = this.detect(family);
      this.detected.set(family, p);
    }
    return p;
  }

  /**
   * Chooses between the legacy and nf_tables tool sets like Istio: whichever backend already holds
   * more rules in this namespace wins (a pod sharing the node's backend must keep using it),
   * nf_tables on a tie, and the plain `iptables` names as the last resort.
   */
  private async detect(family: IpFamily): Promise<XtablesBinaries> {
    const base = family === 6 ? 'ip6tables' : 'iptables';
    const legacy = `${base}-legacy`;
    const nft = `${base}-nft`;
    const present = (b: string) => findExecutable(`${b}-save`, this.env) && findExecutable(b, this.env);

    const failures: Error[] = [];
    const save = async (bin: string): Promise<RunResult | undefined> => {
      const r = await this.run(`${bin}-save`, []);
      if (r.code === 0) return r;
      failures.push(this.failure(`${bin}-save`, r));
      return undefined;
    };

    const candidates: string[] = [];
    const legacySave = present(legacy) ? await save(legacy) : undefined;
    const nftSave = present(nft) ? await save(nft) : undefined;
    if (legacySave && nftSave) {
      candidates.push(...(countRules(legacySave.stdout) > countRules(nftSave.stdout) ? [legacy, nft] : [nft, legacy]));
    } else if (nftSave) candidates.push(nft);
    else if (legacySave) candidates.push(legacy);
    if (present(base)) candidates.push(base);

    if (candidates.length === 0 && failures.length === 0) {
      throw new MissingBinaryError([base, `${base}-save`, `${base}-restore`]);
    }
    for (const bin of candidates) {
      const usable = await this.probe(bin, failures);
      if (usable) return usable;
    }
    const permission = failures.find((f) => f instanceof PermissionError);
    throw permission ?? failures[0] ?? new MissingBinaryError([base]);
  }

  /** Confirms kernel support and permissions by adding and removing a rule that never matches. */
  private async probe(bin: string, failures: Error[]): Promise<XtablesBinaries | undefined> {
    const version = await this.run(bin, ['--version']);
    const add = await this.run(bin, PROBE_RULE);
    if (add.code !== 0 || /does not exist/.test(add.stderr)) {
      failures.push(this.failure(bin, add));
      return undefined;
    }
    await this.run(
      bin,
      PROBE_RULE.map((a) => (a === '-A' ? '-D' : a)),
    );
    const m = /v([0-9]+(?:\.[0-9]+)+)/.exec(version.stdout);
    return {
      iptables: bin,
      save: `${bin}-save`,
      restore: `${bin}-restore`,
      legacy: !version.stdout.includes('nf_tables'),
      ...(m ? { version: m[1]! } : {}),
    };
  }

  private failure(command: string, r: RunResult): Error {
    return looksLikePermissionProblem(r.stderr) ? new PermissionError(command, r.stderr) : new XtablesError(command, r.stderr);
  }
}
