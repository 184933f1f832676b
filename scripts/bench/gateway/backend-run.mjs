// Starts ./backend.mjs, the benchmarks' upstream with one small fixed response, in a process of its own behind an
// optional prefix (taskset, ulimit), and resolves with it once it printed `listening <port>`.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { waitFor } from '../../lib/wait.mjs';

const BACKEND = path.join(path.dirname(new URL(import.meta.url).pathname), 'backend.mjs');

/** `args`: backend.mjs's own (`--kind raw|node`, `--size N`). Resolves with `{child, port}`; kills the child if it does not start. */
export async function startBackend(prefix = [], args = []) {
  const argv = [...prefix, process.execPath, BACKEND, ...args];
  const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  try {
    await waitFor(
      () => `the backend did not start: ${out}`,
      () => /listening (\d+)/.test(out),
      { timeoutMs: 10_000, intervalMs: 100 },
    );
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
  return { child, port: Number(/listening (\d+)/.exec(out)[1]) };
}
