// Option parsing of the log flags, against Istio's pkg/log behaviour (options.go / config.go):
// convertScopedLevel ("invalid output level format '%s'", "invalid output level '%s'" with the level only),
// a bare level meaning the default scope, defaults `default:info,grpc:none` and `default:none`, pflag's
// wording for bad bool / int flag values, and the historical "unknown scope '%s' specified".
import t from 'tap';
import {
  defaultLogOptions,
  formatScopedLevels,
  type LogFlagValues,
  type LogOptions,
  LogOptionsError,
  parseLogOptions,
  parseScopedLevel,
  setDefaultOutputLevel,
} from '../../src/lib/log/index';

const DEFAULTS: LogOptions = {
  jsonEncoding: false,
  logCallers: [],
  outputLevels: [],
  defaultOutputLevels: [
    { scope: 'default', level: 'info' },
    { scope: 'grpc', level: 'none' },
  ],
  stackTraceLevels: [{ scope: 'default', level: 'none' }],
  outputPaths: ['stdout'],
  klogVerbosity: 0,
};

t.test('defaults', async (t) => {
  t.same(defaultLogOptions(), DEFAULTS);
  t.same(parseLogOptions({}), DEFAULTS);
  // Unrelated flags of the command are ignored.
  t.same(parseLogOptions({ grpcAddr: ':15010', domain: 'cluster.local' }), DEFAULTS);
});

t.test('valid values', async (t) => {
  const cases: { name: string; values: LogFlagValues; want: Partial<LogOptions> }[] = [
    { name: 'json on', values: { log_as_json: true }, want: { jsonEncoding: true } },
    { name: 'json off', values: { log_as_json: false }, want: { jsonEncoding: false } },
    { name: 'json "true" (pflag ParseBool)', values: { log_as_json: 'true' }, want: { jsonEncoding: true } },
    { name: 'json "T"', values: { log_as_json: 'T' }, want: { jsonEncoding: true } },
    { name: 'json "0"', values: { log_as_json: '0' }, want: { jsonEncoding: false } },
    {
      name: 'bare level is the default scope',
      values: { log_output_level: 'debug' },
      want: { outputLevels: [{ scope: 'default', level: 'debug' }] },
    },
    {
      name: 'several scopes in order',
      values: { log_output_level: 'ads:debug,default:warn,model:none' },
      want: {
        outputLevels: [
          { scope: 'ads', level: 'debug' },
          { scope: 'default', level: 'warn' },
          { scope: 'model', level: 'none' },
        ],
      },
    },
    { name: 'all prefix', values: { log_output_level: 'all:error' }, want: { outputLevels: [{ scope: 'all', level: 'error' }] } },
    { name: 'fatal level', values: { log_output_level: 'ads:fatal' }, want: { outputLevels: [{ scope: 'ads', level: 'fatal' }] } },
    { name: 'empty output level flag', values: { log_output_level: '' }, want: { outputLevels: [] } },
    {
      name: 'unknown scope is kept (Istio ignores it)',
      values: { log_output_level: 'nosuch:debug' },
      want: { outputLevels: [{ scope: 'nosuch', level: 'debug' }] },
    },
    { name: 'stacktrace bare level', values: { log_stacktrace_level: 'error' }, want: { stackTraceLevels: [{ scope: 'default', level: 'error' }] } },
    {
      name: 'stacktrace scoped',
      values: { log_stacktrace_level: 'default:none,ads:warn' },
      want: {
        stackTraceLevels: [
          { scope: 'default', level: 'none' },
          { scope: 'ads', level: 'warn' },
        ],
      },
    },
    { name: 'caller list', values: { log_caller: 'ads,default' }, want: { logCallers: ['ads', 'default'] } },
    { name: 'caller empty entries dropped', values: { log_caller: 'ads,,default,' }, want: { logCallers: ['ads', 'default'] } },
    { name: 'caller empty', values: { log_caller: '' }, want: { logCallers: [] } },
    { name: 'caller all', values: { log_caller: 'all' }, want: { logCallers: ['all'] } },
    {
      name: 'targets',
      values: { log_target: ['stdout', 'stderr', '/var/log/mesh.log'] },
      want: { outputPaths: ['stdout', 'stderr', '/var/log/mesh.log'] },
    },
    { name: 'single target string', values: { log_target: 'stderr' }, want: { outputPaths: ['stderr'] } },
    { name: 'vklog number', values: { vklog: 9 }, want: { klogVerbosity: 9 } },
    { name: 'vklog string', values: { vklog: '3' }, want: { klogVerbosity: 3 } },
    { name: 'vklog zero', values: { vklog: 0 }, want: { klogVerbosity: 0 } },
  ];
  for (const c of cases) {
    t.same(parseLogOptions(c.values), { ...DEFAULTS, ...c.want }, c.name);
  }
});

t.test('invalid values and Istio error messages', async (t) => {
  const cases: { name: string; values: LogFlagValues; message: string; knownScopes?: string[] }[] = [
    { name: 'unknown level', values: { log_output_level: 'loud' }, message: "invalid output level 'loud'" },
    { name: 'unknown level with scope', values: { log_output_level: 'ads:loud' }, message: "invalid output level 'loud'" },
    { name: 'levels are lower case', values: { log_output_level: 'DEBUG' }, message: "invalid output level 'DEBUG'" },
    { name: 'warning is not a level', values: { log_output_level: 'default:warning' }, message: "invalid output level 'warning'" },
    { name: 'too many colons', values: { log_output_level: 'a:b:c' }, message: "invalid output level format 'a:b:c'" },
    { name: 'trailing comma', values: { log_output_level: 'debug,' }, message: "invalid output level ''" },
    { name: 'empty level after colon', values: { log_output_level: 'ads:' }, message: "invalid output level ''" },
    { name: 'bad second entry', values: { log_output_level: 'ads:debug,model:x' }, message: "invalid output level 'x'" },
    { name: 'stacktrace bad level', values: { log_stacktrace_level: 'ads:verbose' }, message: "invalid output level 'verbose'" },
    { name: 'stacktrace bad format', values: { log_stacktrace_level: 'x:y:z' }, message: "invalid output level format 'x:y:z'" },
    { name: 'stacktrace empty', values: { log_stacktrace_level: '' }, message: "invalid output level ''" },
    {
      name: 'json not a bool',
      values: { log_as_json: 'yes' },
      message: 'invalid argument "yes" for "--log_as_json" flag: strconv.ParseBool: parsing "yes": invalid syntax',
    },
    {
      name: 'vklog not a number',
      values: { vklog: 'x' },
      message: 'invalid argument "x" for "--vklog" flag: strconv.ParseInt: parsing "x": invalid syntax',
    },
    {
      name: 'vklog fractional',
      values: { vklog: 1.5 },
      message: 'invalid argument "1.5" for "--vklog" flag: strconv.ParseInt: parsing "1.5": invalid syntax',
    },
    {
      name: 'vklog out of int32 range',
      values: { vklog: '3000000000' },
      message: 'invalid argument "3000000000" for "--vklog" flag: strconv.ParseInt: parsing "3000000000": value out of range',
    },
    {
      name: 'strict: unknown output scope',
      values: { log_output_level: 'foo:debug' },
      knownScopes: ['ads', 'default'],
      message: "unknown scope 'foo' specified",
    },
    {
      name: 'strict: unknown stacktrace scope',
      values: { log_stacktrace_level: 'default:none,bar:error' },
      knownScopes: ['ads', 'default'],
      message: "unknown scope 'bar' specified",
    },
    {
      name: 'strict: unknown caller scope',
      values: { log_caller: 'ads,baz' },
      knownScopes: ['ads', 'default'],
      message: "unknown scope 'baz' specified",
    },
  ];
  for (const c of cases) {
    t.throws(
      () => parseLogOptions(c.values, c.knownScopes ? { knownScopes: c.knownScopes } : {}),
      { name: 'LogOptionsError', message: c.message },
      c.name,
    );
  }
  t.throws(() => parseLogOptions({ log_output_level: 'x' }), LogOptionsError);
});

t.test('strict scope check accepts all and known scopes', async (t) => {
  const o = parseLogOptions(
    { log_output_level: 'all:debug,ads:info', log_caller: 'all,ads', log_stacktrace_level: 'default:error' },
    { knownScopes: ['ads', 'default'] },
  );
  t.same(o.outputLevels, [
    { scope: 'all', level: 'debug' },
    { scope: 'ads', level: 'info' },
  ]);
});

t.test('parseScopedLevel', async (t) => {
  t.same(parseScopedLevel('none'), { scope: 'default', level: 'none' });
  t.same(parseScopedLevel('klog:fatal'), { scope: 'klog', level: 'fatal' });
  t.same(parseScopedLevel(':debug'), { scope: '', level: 'debug' });
  t.throws(() => parseScopedLevel('a:b:debug'), { message: "invalid output level format 'a:b:debug'" });
});

t.test('setDefaultOutputLevel (Istio SetDefaultOutputLevel)', async (t) => {
  const o = setDefaultOutputLevel(defaultLogOptions(), 'ads', 'warn');
  t.equal(formatScopedLevels(o.defaultOutputLevels), 'default:info,grpc:none,ads:warn');
  const o2 = setDefaultOutputLevel(o, 'default', 'debug');
  t.equal(formatScopedLevels(o2.defaultOutputLevels), 'default:debug,grpc:none,ads:warn');
  // The flag value still comes after the defaults.
  const o3 = parseLogOptions({ log_output_level: 'ads:error' }, { base: o2 });
  t.equal(formatScopedLevels(o3.defaultOutputLevels), 'default:debug,grpc:none,ads:warn');
  t.equal(formatScopedLevels(o3.outputLevels), 'ads:error');
  t.throws(() => setDefaultOutputLevel(o, 'ads', 'loud' as never), { message: "invalid output level 'loud'" });
});
