// The runner routes and parses each command line once (src/cli/run.ts) and hands the parsed command to the
// behaviour the composition root's loader finds: here a recording loader stands in for src/main/handlers.ts,
// with the pflag/cobra forms clipanion could not route (values beginning with '-', flags between command
// words, `--bool=false`, glued short values).
import t from 'tap';
import { PassThrough } from 'node:stream';
import type { HandlerLoader, RunContext } from '../../src/cli/context';
import { runProgram } from '../../src/cli/run';
import { program } from '../helpers/programs';

async function routed(argv: string[]): Promise<{ code: number; keys: string[]; ctx?: RunContext; stderr: string }> {
  const keys: string[] = [];
  let seen: RunContext | undefined;
  const loader: HandlerLoader = async (key) => {
    keys.push(key);
    return async (ctx) => {
      seen = ctx;
      return 0;
    };
  };
  const err = new PassThrough();
  let stderr = '';
  err.on('data', (d) => (stderr += d));
  const code = await runProgram(program('meshctl'), argv, { stdout: new PassThrough(), stderr: err, env: {} }, loader);
  return { code, keys, ctx: seen, stderr };
}

t.test('the loader is asked for the table key of the command the words name, aliases included', async (t) => {
  for (const argv of [
    ['proxy-config', 'route', 'pod'],
    ['pc', 'r', 'pod'],
    ['proxy-config', '-o', 'json', 'routes', 'pod'],
  ]) {
    const r = await routed(argv);
    t.equal(r.code, 0, argv.join(' '));
    t.same(r.keys, ['meshctl.proxy-config.route'], argv.join(' '));
    t.same(r.ctx?.path, ['proxy-config', 'route'], `${argv.join(' ')}: the canonical path`);
    t.same(r.ctx?.args, ['pod'], `${argv.join(' ')}: the positional argument`);
  }
});

t.test('pflag forms reach the behaviour parsed', async (t) => {
  const r = await routed(['proxy-config', 'route', '--name', '-inbound', '-ojson', '--verbose=false', 'pod']);
  t.same(r.keys, ['meshctl.proxy-config.route']);
  t.equal(r.ctx?.flags['name'], '-inbound', 'a value beginning with -');
  t.equal(r.ctx?.flags['output'], 'json', 'a glued short value');
  t.equal(r.ctx?.flags['verbose'], false, '--bool=false');
  t.same([...(r.ctx?.changed ?? [])].sort(), ['name', 'output', 'verbose']);
});

t.test('a command line that does not parse never reaches the loader', async (t) => {
  const r = await routed(['proxy-config', 'route', 'pod', '--bogus']);
  t.same(r.keys, []);
  t.match(r.stderr, /^Error: unknown flag: --bogus\n/);
  t.equal(r.code, 64, "istioctl's usage exit code");
});

t.test('help and groups print help without loading a behaviour', async (t) => {
  t.same((await routed(['proxy-config', 'route', '--help'])).keys, []);
  t.same((await routed(['proxy-config'])).keys, []);
});
