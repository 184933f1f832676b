// Every case of ../shared/conformance/inject/cases.yaml (Istio 1.26.8's TestInjection) through the built
// `meshctl orch-inject`, compared with Istio's golden output. The cases are shared between
// conformance-{1,2}.test.ts (every other case each) so that each file stays well inside the runner's timeout
// on a loaded machine; each process start of the binary is most of the time.
//
// Each case runs with the built binary as written (with the injector configuration of
// inputs/injector-config.yaml), and again, in process (hundreds of process starts would be slow), with the
// templates built into mesh (Istio 1.26.8's chart templates, renamed) in place of that file.
// inputs/injector-config.yaml was taken from an older chart rendering than the one Istio's test used for the
// goldens (pilot_default.golden.yaml predates the 1.26 template: no `sidecar.mesh.io/nativeSidecar`
// annotation, no `mesh.io/reroute-virtual-interfaces`, no `initContainers: []` for interception mode NONE,
// enable-core-dump as a separate init container, no
// `service.mesh.io/workload-name` label), so the goldens of STALE_INPUT cannot come out of it; those
// cases run through the binary with the built-in templates instead. One golden, NOT_RESORTED, kept Istio's key order where
// the renaming changed a key's sort position (`mesh.io/rev` stays before `kubectl.kubernetes.io/*`); it is
// compared as data.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { parse, parseAllDocuments } from 'yaml';
import { built, DIST, exec, type ExecResult } from '../helpers/binary';
import { REPO } from '../helpers/spec';
import { meshctl } from '../../commands/meshctl';
import { runProgram } from '../../src/cli/run';
import { loadHandler } from '../../src/main/handlers';
import { Writable } from 'node:stream';

const DATA = [path.resolve(REPO, '../shared/conformance/inject'), path.resolve(REPO, '../../shared/conformance/inject')].find((d) => existsSync(d))!;

interface Case {
  name: string;
  in: string;
  want?: string;
  error?: string;
  stderr?: string;
  args: string[];
  env?: Record<string, string>;
  core?: boolean;
}

const STALE_INPUT = new Set([
  'reroute-virtual-interfaces.yaml',
  'reroute-virtual-interfaces_list.yaml',
  'native-sidecar-opt-in.yaml+native-sidecars=false',
  'native-sidecar-opt-out.yaml+native-sidecars=true',
  'gateway-with-default-container.yaml',
  'init-no-intercept-no-native-sidecar.yaml',
  'deploymentconfig-with-canonical-service-label.yaml',
]);
const NOT_RESORTED = new Set(['deploymentconfig-with-canonical-service-label.yaml']);

function loadCases(): Case[] {
  const cases = (parse(readFileSync(path.join(DATA, 'cases.yaml'), 'utf8')) as { cases: Case[] }).cases;
  t.equal(cases.length, 106, 'cases.yaml holds 106 cases');
  return cases;
}

const MESHCTL = path.join(DIST, 'meshctl');
const baseEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root' };

/** Runs the cases a few at a time: each is a process start, mostly waiting. */
async function pool<T>(items: readonly T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) await fn(items[next++]!);
    }),
  );
}

function withoutInjectConfig(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--injectConfigFile' && args[i + 1] === 'inputs/injector-config.yaml') {
      i++;
      continue;
    }
    out.push(args[i]!);
  }
  return out;
}

function docs(text: string): unknown[] {
  return parseAllDocuments(text).map((d) => d.toJS());
}

type Mode = 'as written' | 'built-in templates';

function argsFor(c: Case, mode: Mode): string[] {
  return mode === 'as written' ? c.args : withoutInjectConfig(c.args);
}

/** How each case runs: the binary as written (built-in templates where the input is stale), then in process. */
function modesOf(c: Case): Array<{ mode: Mode; binary: boolean }> {
  const modes: Array<{ mode: Mode; binary: boolean }> = [];
  const usesInputs = c.args.includes('inputs/injector-config.yaml');
  if (STALE_INPUT.has(c.name)) modes.push({ mode: 'built-in templates', binary: true });
  else {
    modes.push({ mode: 'as written', binary: true });
    if (usesInputs) modes.push({ mode: 'built-in templates', binary: false });
  }
  return modes;
}

/** meshctl in this process, for the in-process runs. */
async function runInProcess(args: string[], env: Record<string, string>): Promise<ExecResult> {
  let stdout = '';
  let stderr = '';
  const sink = (add: (s: string) => void) =>
    new Writable({
      write(chunk, _enc, cb) {
        add(String(chunk));
        cb();
      },
    });
  const cwd = process.cwd();
  process.chdir(DATA);
  try {
    const code = await runProgram(
      meshctl,
      args,
      { stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)), env: { ...baseEnv, ...env } },
      loadHandler,
    );
    return { code, stdout, stderr };
  } finally {
    process.chdir(cwd);
  }
}

/** Runs the cases whose index is `part` modulo `parts`. */
export function runConformance(part: number, parts: number): void {
  if (!built()) {
    t.fail('dist/mesh is missing: run `npm run build` first (npm test does)');
    return;
  }
  if (!DATA) {
    t.fail('../shared/conformance/inject not found');
    return;
  }
  const cases = loadCases().filter((_c, i) => i % parts === part);
  t.test(`cases ${part + 1} of ${parts}`, async (t) => {
    // Run every case first, a few processes at a time, then assert case by case in cases.yaml order.
    const runs = new Map<string, ExecResult>();
    const jobs = cases.flatMap((c) => modesOf(c).map((m) => ({ c, ...m })));
    await pool(
      jobs.filter((j) => j.binary),
      4,
      async ({ c, mode }) => {
        runs.set(
          `${c.name}|${mode}`,
          await exec(MESHCTL, ['orch-inject', ...argsFor(c, mode)], { cwd: DATA, env: { ...baseEnv, ...(c.env ?? {}) } }),
        );
      },
    );
    for (const { c, mode } of jobs.filter((j) => !j.binary))
      runs.set(`${c.name}|${mode}`, await runInProcess(['orch-inject', ...argsFor(c, mode)], c.env ?? {}));
    for (const c of cases) {
      t.test(c.name, async (t) => {
        for (const { mode } of modesOf(c)) {
          const r = runs.get(`${c.name}|${mode}`)!;
          if (c.error) {
            t.not(r.code, 0, `${mode}: exits non-zero`);
            t.match(r.stderr.toLowerCase(), c.error, `${mode}: the error names ${c.error}`);
            t.equal(r.stdout, '', `${mode}: nothing written on failure`);
            continue;
          }
          t.equal(r.code, 0, `${mode}: exit 0 ${r.stderr.trim().split('\n')[0] ?? ''}`);
          const want = readFileSync(path.join(DATA, 'testdata', c.want!), 'utf8');
          if (NOT_RESORTED.has(c.name)) t.same(docs(r.stdout), docs(want), `${mode}: same documents as ${c.want}`);
          else t.equal(r.stdout.trim(), want.trim(), `${mode}: equals ${c.want}`);
          if (c.stderr) t.match(r.stderr, c.stderr, `${mode}: warns`);
        }
      });
    }
  });
}
