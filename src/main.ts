// Entry point of the multi-call binary `mesh`. Linked as pilot-discovery, pilot-agent, install-cni or
// meshctl it becomes that program; otherwise the first word picks it (`mesh discovery …`).
import net from 'node:net';
import path from 'node:path';
import { runProgram } from './cli/run';
import { loadHandler } from './main/handlers';
import { PROGRAMS, programByInvocation, programByWord } from './main/programs';
import { useRegexFreeNetChecks } from './lib/ip';
import { isSea } from './lib/sea';

/** The name the user invoked us by, before symlinks were resolved. */
function invocationName(): string {
  // In a single-executable build, argv[0]/execPath are already resolved to the real file; argv0 is not.
  if (isSea()) return path.basename(process.argv0);
  // `node dist/mesh.cjs` (or a symlink to it): the script path as typed.
  return path.basename(process.argv[1] ?? '');
}

/** The CNI plugin is not a command-line program: the container runtime drives it through CNI_* and stdin. */
const CNI_PLUGIN_NAME = 'mesh-cni';
const CNI_PLUGIN_WORD = 'cni-plugin';

async function runCniPlugin(): Promise<number> {
  const { runCniPlugin: run } = await import('./cni/plugin/main');
  return run({
    env: process.env,
    stdout: process.stdout,
    stderr: process.stderr,
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const c of process.stdin) chunks.push(c as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
  });
}

function meshUsage(): string {
  const rows = PROGRAMS.map(
    (p) => `  ${p.word.padEnd(11)} ${p.short} (also: link as ${p.name}${p.istioName !== p.name ? ` or ${p.istioName}` : ''})`,
  ).join('\n');
  return (
    `mesh: one executable for the whole service mesh.\n\nUsage:\n  mesh [program] [arguments]\n\n` +
    `Available Programs:\n${rows}\n  ${CNI_PLUGIN_WORD.padEnd(11)} The CNI plugin the container runtime calls (also: link as ${CNI_PLUGIN_NAME}; install-cni puts it on nodes)\n\nUse "mesh [program] --help" for more information about a program.\n`
  );
}

export async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const io = { stdout: process.stdout, stderr: process.stderr, env: process.env };
  const invokedAs = invocationName();
  if (invokedAs.replace(/\.(c?js|exe)$/, '') === CNI_PLUGIN_NAME || (args[0] === CNI_PLUGIN_WORD && programByInvocation(invokedAs) === undefined)) {
    return runCniPlugin();
  }
  const byName = programByInvocation(invokedAs);
  if (byName) return runProgram(await byName.load(), args, io, loadHandler);
  const byWord = programByWord(args[0]);
  if (byWord) return runProgram(await byWord.load(), args.slice(1), io, loadHandler);
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h' || args[0] === 'help') {
    process.stdout.write(meshUsage());
    return 0;
  }
  // Any other link name falls back to first-word dispatch; say so when the word is not a program either.
  const base = invokedAs.replace(/\.(c?js|exe)$/, '');
  const hint =
    base !== 'mesh' && base !== ''
      ? ` (invoked as "${base}", which is not a program name: link as ${PROGRAMS.map((p) => p.name).join(', ')} or ${PROGRAMS.filter(
          (p) => p.istioName !== p.name,
        )
          .map((p) => p.istioName)
          .join(', ')}, or give the program as the first word)`
      : '';
  process.stderr.write(`Error: unknown program "${args[0]}" for "mesh"${hint}\nRun 'mesh --help' for usage.\n`);
  return 1;
}

// A command that failed is over: its `Error:` line is the last thing it says. Exiting at once stops what it
// had started in the background (a config source still loading, watchers) from logging after it or
// keeping the process alive. Stdout and stderr are synchronous for files and pipes on Linux.
useRegexFreeNetChecks(net);
main().then(
  (code) => {
    if (code !== 0) process.exit(code);
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`Error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(255);
  },
);
