// Runs the first ```sh block of a README section line by line, as a reader would: in a network namespace of its
// own (the lines bind fixed ports), in a scratch directory holding links to dist/ and examples/, with HOME there
// (no ~/.meshctl/config.yaml of the machine's user changes meshctl's choices). A line ending in `&` starts in the
// background and the next line waits until it serves its readiness URL; every other line must exit 0.
import type { Test } from 'tap';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { DIST } from './binary';
import { REPO, section } from './spec';
import { createNetns, httpGetIn, spawnIn } from './netns';
import { waitFor } from './wait';
import { tempDir } from './temp';

export interface LineOutput {
  line: string;
  stdout: string;
  stderr: string;
}

export interface ReadmeRun {
  ns: string;
  dir: string;
  /** The output of the first foreground line matching `re` (empty when none ran). */
  out(re: RegExp): LineOutput;
  /** What the first background line matching `re` printed so far. */
  logOf(re: RegExp): string;
}

/** The first ```sh block of the README section titled `title`, one entry per non-empty line. */
export function readmeLines(title: string): string[] {
  const text = section(fs.readFileSync(path.join(REPO, 'README.md'), 'utf8'), title);
  const m = /```sh\n([\s\S]*?)```/.exec(text);
  if (!m) throw new Error(`the README section ${title} has no sh block`);
  return m[1]!.split('\n').filter((l) => l.trim() !== '');
}

/** `cmd &   # comment` → `cmd`, or undefined when the line runs in the foreground. */
function background(line: string): string | undefined {
  const m = /^(.*?[^&])&\s*(#.*)?$/.exec(line);
  return m ? m[1]!.trim() : undefined;
}

/** What a background line must be serving before the next line runs. */
function readiness(cmd: string): string {
  if (cmd.includes('httpbin.mjs')) return 'http://127.0.0.1:19090/get';
  if (cmd.includes('pilot-discovery discovery')) return 'http://127.0.0.1:8080/ready';
  if (cmd.includes('pilot-agent proxy')) return 'http://127.0.0.1:15021/healthz/ready';
  throw new Error(`the test does not know when this README line is ready: ${cmd}`);
}

/** `minLines`: how many lines the block must have at least (a block cut short by an edit fails). */
export async function runReadmeBlock(t: Test, title: string, name: string, minLines = 8): Promise<ReadmeRun> {
  const lines = readmeLines(title);
  t.ok(lines.length >= minLines, `${lines.length} lines in the README block`);
  const ns = createNetns(t, name);
  const dir = tempDir(t, `${name}-`);
  fs.symlinkSync(DIST, path.join(dir, 'dist'));
  fs.symlinkSync(path.join(REPO, 'examples'), path.join(dir, 'examples'));
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir };
  const logs: Record<string, () => string> = {};
  const allLogs = () =>
    Object.entries(logs)
      .map(([k, f]) => `--- ${k}:\n${f().slice(-3000)}`)
      .join('\n');
  const outputs: LineOutput[] = [];
  for (const line of lines) {
    const bg = background(line);
    if (bg !== undefined) {
      const child = spawnIn(ns, 'bash', ['-c', bg], { cwd: dir, env });
      let out = '';
      child.stdout!.on('data', (d) => (out += d));
      child.stderr!.on('data', (d) => (out += d));
      logs[bg.slice(0, 60)] = () => out;
      const url = readiness(bg);
      await waitFor(
        () => `${bg}: not ready at ${url}\n${allLogs()}`,
        () => {
          if (child.exitCode !== null) throw new Error(`exited ${child.exitCode}`);
          return httpGetIn(ns, url).status === 200;
        },
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      t.pass(`started: ${bg}`);
      continue;
    }
    const r = spawnSync('ip', ['netns', 'exec', ns, 'bash', '-c', line], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
    t.equal(r.status, 0, `ran: ${line}`, { stderr: r.stderr, logs: r.status === 0 ? '' : allLogs() });
    outputs.push({ line, stdout: r.stdout, stderr: r.stderr });
  }
  return {
    ns,
    dir,
    out: (re) => outputs.find((o) => re.test(o.line)) ?? { line: '', stdout: '', stderr: '' },
    logOf: (re) => Object.entries(logs).find(([k]) => re.test(k))?.[1]() ?? '',
  };
}
