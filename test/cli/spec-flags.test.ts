// Every flag the specification documents exists on its command with the documented short form,
// type and default, and `--help` shows it. Expectations come from ../shared/spec, not our tables.
import t from 'tap';
import { section, specDoc, tableRows } from '../helpers/spec';
import { commandAt, flagOf, program, run } from '../helpers/programs';
import { parseDefault } from '../../src/cli/values';

/** The spec writes a few types by other names. */
const TYPE_NAMES: Record<string, string> = { boolean: 'bool' };
const ZERO = new Set(['empty', 'off', '0', '[]', '']);

interface Row {
  prog: string;
  path: string[];
  name: string;
  short?: string;
  type: string;
  def: string;
}

function rowsFromTable(prog: string, path: string[], rows: string[][], hasShort: boolean): Row[] {
  const out: Row[] = [];
  for (const r of rows) {
    const [flagCell, ...rest] = r;
    const [short, type, def] = hasShort ? [rest[0], rest[1], rest[2]] : [undefined, rest[0], rest[1]];
    // `--grpcAddr, --httpAddr, …` rows and `--namespace, -n` rows.
    const names = [...flagCell!.matchAll(/--([\w-]+)/g)].map((m) => m[1]!);
    const inlineShort = /, -(\w)$/.exec(flagCell!)?.[1];
    for (const name of names) {
      out.push({ prog, path, name, short: (short || inlineShort || undefined)?.replace(/^-/, ''), type: TYPE_NAMES[type!] ?? type!, def: def! });
    }
  }
  return out;
}

const doc1 = specDoc(1);
const doc2 = specDoc(2);
const rows: Row[] = [
  ...rowsFromTable('pilot-discovery', ['discovery'], tableRows(section(doc1, '### 4.4'), 'Flag'), false),
  ...rowsFromTable('pilot-agent', ['proxy'], tableRows(section(doc2, '### 4.3'), 'Flag'), false),
  ...rowsFromTable('pilot-agent', ['mesh-iptables'], tableRows(section(doc2, '### 4.4'), 'Flag'), true),
  ...rowsFromTable('install-cni', [], tableRows(section(doc2, '### 4.5'), 'Flag'), false),
];

/** Listener defaults of doc 1 §4.2 for the `see 4.2` row. */
const LISTENERS: Record<string, string> = {
  grpcAddr: ':15010',
  secureGRPCAddr: ':15012',
  httpAddr: ':8080',
  httpsAddr: ':15017',
  monitoringAddr: ':15014',
};

t.test('spec flag tables: every flag, short form, type and default', async (t) => {
  t.ok(rows.length > 90, `read ${rows.length} flag rows from the spec`);
  for (const r of rows) {
    const p = program(r.prog);
    const f = flagOf(p, r.path, r.name);
    const where = `${r.prog} ${r.path.join(' ')} --${r.name}`;
    if (!t.ok(f, `${where} exists`)) continue;
    t.equal(f!.short, r.short, `${where} short form`);
    t.equal(f!.type, r.type, `${where} type`);
    const documented = r.def === 'see 4.2' ? LISTENERS[r.name]! : r.def;
    if (ZERO.has(documented)) t.ok(f!.default === undefined || ZERO.has(f!.default) || f!.default === 'false', `${where} default is the zero value`);
    else t.equal(f!.default, documented, `${where} default`);
  }
});

t.test('doc 2 §4.2: request and wait flags', async (t) => {
  const agent = program('pilot-agent');
  t.match(flagOf(agent, ['request'], 'debug-port'), { type: 'int32', default: '15000' });
  t.match(flagOf(agent, ['wait'], 'periodMillis'), { type: 'int', default: '500' });
  t.match(flagOf(agent, ['wait'], 'requestTimeoutMillis'), { type: 'int', default: '500' });
  t.match(flagOf(agent, ['wait'], 'timeoutSeconds'), { type: 'int', default: '60' });
  t.match(flagOf(agent, ['wait'], 'url'), { type: 'string', default: 'http://localhost:15021/healthz/ready' });
});

t.test('log flags on every command of the daemons (doc 1 §4.3/§4.4, doc 2 §4.2/§4.5)', async (t) => {
  for (const [prog, path, vklog] of [
    ['pilot-discovery', ['discovery'], true],
    ['pilot-discovery', ['request'], true],
    ['pilot-discovery', ['version'], true],
    ['pilot-agent', ['proxy'], true],
    ['pilot-agent', ['wait'], true],
    ['pilot-agent', ['completion', 'bash'], true],
    ['install-cni', [], false],
    ['install-cni', ['version'], false],
  ] as const) {
    const p = program(prog);
    t.match(flagOf(p, path, 'log_as_json'), { type: 'bool' });
    t.match(flagOf(p, path, 'log_caller'), { type: 'string' });
    t.match(flagOf(p, path, 'log_output_level'), { type: 'string' });
    t.match(flagOf(p, path, 'log_stacktrace_level'), { type: 'string', default: 'default:none' });
    t.match(flagOf(p, path, 'log_target'), { type: 'stringArray', default: '[stdout]' });
    if (vklog) t.match(flagOf(p, path, 'vklog'), { type: 'Level' }, `${prog} ${path.join(' ')} --vklog`);
  }
});

t.test('log scope lists match the spec', async (t) => {
  const scopesIn = (text: string) => {
    const m = /Scope list for the scope flags: ([^.]+)\.|scope list ([^.]+)\.|Log scopes for the three `--log_\*` scope flags: ([^.]+)\./.exec(text);
    return (m![1] ?? m![2] ?? m![3])!.split(' / ').map((s) => s.trim());
  };
  const cases: Array<[string, string]> = [
    ['pilot-discovery', section(doc1, '### 4.4')],
    ['pilot-agent', section(doc2, '### 4.2')],
    ['install-cni', section(doc2, '### 4.5')],
  ];
  for (const [prog, text] of cases) {
    const help = flagOf(program(prog), [], 'log_output_level')!.help;
    for (const s of scopesIn(text)) t.ok(help.includes(s + ',') || help.includes(s + ']'), `${prog}: scope ${s} listed`);
  }
});

t.test('--help of each spec command exits 0 and shows every documented flag with its default', async (t) => {
  const groups = new Map<string, Row[]>();
  for (const r of rows) groups.set(`${r.prog}|${r.path.join(' ')}`, [...(groups.get(`${r.prog}|${r.path.join(' ')}`) ?? []), r]);
  for (const [key, rs] of groups) {
    const [prog, path] = key.split('|') as [string, string];
    const words = path ? path.split(' ') : [];
    const res = await run(program(prog), [...words, '--help']);
    t.equal(res.code, 0, `${prog} ${path} --help exits 0`);
    t.match(res.stdout, /^Usage:$/m);
    t.match(res.stdout, /^Flags:$/m);
    for (const r of rs) {
      const line = res.stdout.split('\n').find((l) => new RegExp(`--${r.name}\\b(?![-\\w])`).test(l));
      if (!t.ok(line, `${prog} ${path} help lists --${r.name}`)) continue;
      if (r.short) t.match(line!, `-${r.short}, --${r.name}`);
      const documented = r.def === 'see 4.2' ? LISTENERS[r.name]! : r.def;
      if (!ZERO.has(documented)) {
        const shown = r.type === 'string' ? `(default "${documented}")` : `(default ${documented})`;
        t.ok(line!.includes(shown), `${prog} ${path} --${r.name} shows ${shown}`);
      }
    }
  }
});

t.test('documented defaults parse to the documented values', async (t) => {
  const disc = program('pilot-discovery');
  const agent = program('pilot-agent');
  const cni = program('install-cni');
  const expect: Array<[ReturnType<typeof program>, string[], string, unknown]> = [
    [disc, ['discovery'], 'keepaliveInterval', 30_000],
    [disc, ['discovery'], 'keepaliveTimeout', 10_000],
    // 2562047h47m16.854775807s = 2^63-1 ns = 9223372036854.775807 ms
    [disc, ['discovery'], 'keepaliveMaxServerConnectionAge', 9223372036854.775807],
    [disc, ['discovery'], 'shutdownDuration', 10_000],
    [disc, ['discovery'], 'orchApiQPS', 80],
    [disc, ['discovery'], 'orchApiBurst', 160],
    [disc, ['discovery'], 'ctrlz_port', 9876],
    [disc, ['discovery'], 'clusterAliases', {}],
    [disc, ['discovery'], 'registries', ['Orchestrator']],
    [disc, ['discovery'], 'tls-cipher-suites', []],
    [disc, ['discovery'], 'profile', false],
    [disc, ['discovery'], 'log_target', ['stdout']],
    [disc, ['discovery'], 'vklog', 0],
    [agent, ['mesh-iptables'], 'probe-timeout', 5_000],
    [agent, ['mesh-iptables'], 'iptables-probe-port', 15002],
    [agent, ['mesh-iptables'], 'proxy-port', '15001'],
    [agent, ['request'], 'debug-port', 15000],
    [cni, [], 'orchconfig-mode', 384],
    [cni, [], 'repair-init-container-exit-code', 126],
    [cni, [], 'ctrlz_port', 9876],
  ];
  for (const [p, path, name, value] of expect) {
    const f = flagOf(p, path, name)!;
    t.same(parseDefault(f), value, `${p.name} ${path.join(' ')} --${name} default parses to ${JSON.stringify(value)}`);
  }
});

t.test('commands of doc 1 §4.3 and doc 2 §4.2/§4.5 exist with their arguments', async (t) => {
  const disc = program('pilot-discovery');
  t.same(
    commandAt(disc, ['request']).cmd.args?.map((a) => a.name),
    ['method', 'path', 'body'],
  );
  for (const shell of ['bash', 'fish', 'powershell', 'zsh']) {
    for (const prog of ['pilot-discovery', 'pilot-agent', 'install-cni', 'meshctl']) {
      t.ok(flagOf(program(prog), ['completion', shell], 'no-descriptions'), `${prog} completion ${shell} --no-descriptions`);
    }
  }
  for (const prog of ['pilot-discovery', 'pilot-agent', 'install-cni', 'meshctl']) {
    t.match(flagOf(program(prog), ['version'], 'output'), { short: 'o', type: 'string' }, `${prog} version -o`);
    t.match(flagOf(program(prog), ['version'], 'short'), { short: 's', type: 'bool' }, `${prog} version -s`);
  }
  const agent = program('pilot-agent');
  for (const c of ['proxy', 'mesh-iptables', 'request', 'wait', 'version']) t.ok(commandAt(agent, [c]).cmd.run, `pilot-agent ${c} runnable`);
});
