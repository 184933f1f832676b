// Runs the built executable (dist/mesh and its program links) as users do.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { REPO } from './spec';

export const DIST = path.join(REPO, 'dist');
export const MESH = path.join(DIST, 'mesh');

export function built(): boolean {
  return existsSync(MESH);
}

export interface ExecResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function exec(
  file: string,
  args: readonly string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string } = {},
): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      env: opts.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root' },
      cwd: opts.cwd,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(opts.input ?? '');
  });
}
