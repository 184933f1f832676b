// Logging behaviour against Istio's pkg/log (zap console/JSON encoders with Istio's encoder config):
// text `time\tlevel\tscope\tcaller\tmsg` with the scope column omitted for `default`, labels folded into the
// message as `\tk=v k2=v2`, JSON keys level,time,scope,caller,msg,<fields>,stack, UTC microsecond timestamps,
// stack traces on following lines in text, `all:` overriding every scope and ending the list, --vklog turning
// the klog scope to debug, grpc defaulting to none, fatal exiting with 1.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import t from 'tap';
import {
  configure,
  defaultScope,
  findScope,
  formatTimestamp,
  getScopes,
  info as pkgInfo,
  Level,
  type LogFlagValues,
  MemorySink,
  parseLogOptions,
  registerScope,
  setExitFunction,
  setLogCallers,
  setOutputLevel,
  setStackTraceLevel,
  setTimeSource,
  warn as pkgWarn,
} from '../../src/lib/log/index';

// 2026-11-22T04:00:00Z in epoch microseconds.
const T0 = Date.UTC(2026, 10, 22, 4, 0, 0) * 1000;
const TS = '2026-11-22T04:00:00.000000Z';
const SCOPES = ['ads', 'all', 'default', 'grpc', 'klog', 'model'];

setTimeSource(() => T0);

function setup(values: LogFlagValues = {}, scopes: readonly string[] = SCOPES): MemorySink {
  const sink = new MemorySink();
  configure(parseLogOptions(values), { scopes, sinks: [sink] });
  return sink;
}

/** Line number of the logging call written on the line after the one that created `e` (a formatter keeps
 *  each statement on its own line, so the call cannot share the Error's line). */
function lineOf(e: Error): number {
  const m = /:(\d+):\d+\)?$/m.exec((e.stack ?? '').split('\n')[1] ?? '');
  return Number(m?.[1]) + 1;
}

class ExitCalled extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

t.test('timestamps: UTC with six fractional digits', async (t) => {
  t.equal(formatTimestamp(T0), '2026-11-22T04:00:00.000000Z');
  t.equal(formatTimestamp(T0 + 1), '2026-11-22T04:00:00.000001Z');
  t.equal(formatTimestamp(T0 + 123_456), '2026-11-22T04:00:00.123456Z');
  t.equal(formatTimestamp(T0 + 59_999_999), '2026-11-22T04:00:59.999999Z');
  t.equal(formatTimestamp(Date.UTC(2027, 0, 2, 3, 4, 5) * 1000 + 6), '2027-01-02T03:04:05.000006Z');
  // The system clock (used when no source is set) has the same shape and is close to Date.now().
  setTimeSource();
  const sink = setup();
  const before = Date.now();
  registerScope('ads').info('now');
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(\d{6})Z\t/.exec(sink.text);
  t.ok(m, sink.text);
  const ms = Date.parse(`${m?.[1]}.${m?.[2]?.slice(0, 3)}Z`);
  t.ok(ms >= before - 1 && ms <= Date.now() + 1, 'within the call');
  setTimeSource(() => T0);
});

t.test('text format', async (t) => {
  const sink = setup({ log_output_level: 'ads:debug,default:debug' });
  const ads = registerScope('ads', 'ADS debugging');
  ads.info('message', { key: 'value' });
  ads.debug('plain');
  ads.warn('careful', { n: 3, ok: true, missing: null });
  ads.error('bad', { err: new Error('boom'), list: [1, 'a'] });
  defaultScope.info('message');
  defaultScope.debug('message', { key: 'value' });
  pkgWarn('from the package function');
  t.same(sink.lines(), [
    `${TS}\tinfo\tads\tmessage\tkey=value`,
    `${TS}\tdebug\tads\tplain`,
    `${TS}\twarn\tads\tcareful\tn=3 ok=true missing=<nil>`,
    `${TS}\terror\tads\tbad\terr=boom list=[1 a]`,
    `${TS}\tinfo\tmessage`,
    `${TS}\tdebug\tmessage\tkey=value`,
    `${TS}\twarn\tfrom the package function`,
  ]);
  t.equal(sink.text.endsWith('\n'), true, 'each entry ends with a newline');
});

t.test('withLabels', async (t) => {
  const sink = setup();
  const ads = registerScope('ads');
  const l = ads.withLabels('conn', 'c-1', 'version', 7);
  l.info('push');
  l.info('push', { type: 'cds', version: 8 }); // re-set key keeps its position
  ads.withLabels({ pod: 'p' }).withLabels('node', 'n').info('obj');
  ads.info('no labels on the parent');
  ads.withLabels('a', 1, 'b').info('odd');
  ads.withLabels(5, 'x').info('non-string key');
  ads.withLabels('a', 1).withoutLabels('a').info('removed');
  t.same(sink.lines(), [
    `${TS}\tinfo\tads\tpush\tconn=c-1 version=7`,
    `${TS}\tinfo\tads\tpush\tconn=c-1 version=8 type=cds`,
    `${TS}\tinfo\tads\tobj\tpod=p node=n`,
    `${TS}\tinfo\tads\tno labels on the parent`,
    `${TS}\tinfo\tads\todd\tWithLabels error=even number of parameters required, got 3`,
    `${TS}\tinfo\tads\tnon-string key\tWithLabels error=label name 5 must be a string, got number `,
    `${TS}\tinfo\tads\tremoved`,
  ]);
  // Views share the scope's levels.
  setOutputLevel('ads', 'warn');
  l.info('hidden');
  t.equal(l.infoEnabled(), false);
  t.equal(sink.lines().length, 7);
});

t.test('JSON format', async (t) => {
  const sink = setup({ log_as_json: true });
  const ads = registerScope('ads');
  ads.info('message', { key: 'value' });
  defaultScope.warn('unscoped');
  ads.withLabels('n', 1).error('typed', { obj: { a: [1, 2] }, flag: false, err: new Error('boom'), nil: null });
  ads.info('quote " and\nnewline');
  t.same(sink.lines(), [
    `{"level":"info","time":"${TS}","scope":"ads","msg":"message","key":"value"}`,
    `{"level":"warn","time":"${TS}","msg":"unscoped"}`,
    `{"level":"error","time":"${TS}","scope":"ads","msg":"typed","n":1,"obj":{"a":[1,2]},"flag":false,"err":"boom","nil":null}`,
    `{"level":"info","time":"${TS}","scope":"ads","msg":"quote \\" and\\nnewline"}`,
  ]);
  for (const line of sink.lines()) t.doesNotThrow(() => JSON.parse(line));
});

t.test('caller information', async (t) => {
  t.test('text, only for listed scopes', async (t) => {
    const sink = setup({ log_caller: 'ads' });
    const ads = registerScope('ads');
    const model = registerScope('model');
    const e = new Error();
    ads.info('here');
    model.info('no caller');
    t.same(sink.lines(), [`${TS}\tinfo\tads\tlib/log.test.ts:${lineOf(e)}\there`, `${TS}\tinfo\tmodel\tno caller`]);
  });
  t.test('labels and fields after the caller', async (t) => {
    const sink = setup({ log_caller: 'ads' });
    const e = new Error();
    registerScope('ads').withLabels('k', 'v').warn('m', { x: 1 });
    t.equal(sink.text, `${TS}\twarn\tads\tlib/log.test.ts:${lineOf(e)}\tm\tk=v x=1\n`);
  });
  t.test('JSON caller between scope and msg', async (t) => {
    const sink = setup({ log_caller: 'ads', log_as_json: true });
    const e = new Error();
    registerScope('ads').info('m', { k: 'v' });
    t.equal(sink.text, `{"level":"info","time":"${TS}","scope":"ads","caller":"lib/log.test.ts:${lineOf(e)}","msg":"m","k":"v"}\n`);
  });
  t.test('default scope and package-level functions', async (t) => {
    const sink = setup({ log_caller: 'default' });
    const e1 = new Error();
    defaultScope.info('a');
    const e2 = new Error();
    pkgInfo('b');
    t.same(sink.lines(), [`${TS}\tinfo\tlib/log.test.ts:${lineOf(e1)}\ta`, `${TS}\tinfo\tlib/log.test.ts:${lineOf(e2)}\tb`]);
  });
  t.test('all turns callers on for every scope', async (t) => {
    const sink = setup({ log_caller: 'all' });
    const e = new Error();
    registerScope('model').info('m');
    t.equal(sink.text, `${TS}\tinfo\tmodel\tlib/log.test.ts:${lineOf(e)}\tm\n`);
  });
  t.test('runtime switch', async (t) => {
    const sink = setup();
    t.equal(setLogCallers('ads', true), true);
    const e = new Error();
    registerScope('ads').info('m');
    t.equal(sink.text, `${TS}\tinfo\tads\tlib/log.test.ts:${lineOf(e)}\tm\n`);
  });
});

t.test('stack trace level', async (t) => {
  t.test('text: stack on the following lines for entries at or above the level', async (t) => {
    const sink = setup({ log_stacktrace_level: 'ads:error' });
    const ads = registerScope('ads');
    ads.warn('no stack');
    ads.error('with stack');
    const lines = sink.lines();
    t.equal(lines[0], `${TS}\twarn\tads\tno stack`);
    t.equal(lines[1], `${TS}\terror\tads\twith stack`);
    t.ok(lines.length > 3, 'stack lines follow');
    t.match(lines[2], /\S/, 'function line');
    t.match(lines[3], /^\t.*test\/lib\/log\.test\.ts:\d+$/, 'first frame is the test, library frames removed');
    t.notMatch(sink.text, /src\/lib\/log\//, 'no library frames');
  });
  t.test('JSON: stack is the last key', async (t) => {
    const sink = setup({ log_stacktrace_level: 'ads:warn', log_as_json: true });
    registerScope('ads').warn('w', { k: 1 });
    const obj = JSON.parse(sink.text) as Record<string, unknown>;
    t.same(Object.keys(obj), ['level', 'time', 'scope', 'msg', 'k', 'stack']);
    t.match(obj.stack, /test\/lib\/log\.test\.ts:\d+/);
  });
  t.test('default none: no stacks', async (t) => {
    const sink = setup();
    registerScope('ads').error('e');
    defaultScope.error('e');
    t.same(sink.lines(), [`${TS}\terror\tads\te`, `${TS}\terror\te`]);
  });
  t.test('bare level applies to the default scope only', async (t) => {
    const sink = setup({ log_stacktrace_level: 'info' });
    registerScope('ads').error('e');
    defaultScope.info('i');
    const lines = sink.lines();
    t.equal(lines[0], `${TS}\terror\tads\te`);
    t.equal(lines[1], `${TS}\tinfo\ti`);
    t.ok(lines.length > 2);
    t.equal(defaultScope.getStackTraceLevel(), Level.Info);
  });
  t.test('runtime switch', async (t) => {
    const sink = setup();
    t.equal(setStackTraceLevel('model', 'debug'), true);
    registerScope('model').debug('hidden by output level');
    registerScope('model').info('i');
    t.ok(sink.lines().length > 1);
    t.equal(sink.lines()[0], `${TS}\tinfo\tmodel\ti`);
  });
});

t.test('output levels', async (t) => {
  t.test('default is info; debug suppressed', async (t) => {
    const sink = setup();
    const ads = registerScope('ads');
    ads.debug('x');
    t.equal(ads.debugEnabled(), false);
    t.equal(ads.infoEnabled(), true);
    t.equal(sink.text, '');
  });
  t.test('none silences everything', async (t) => {
    const sink = setup({ log_output_level: 'ads:none' });
    const ads = registerScope('ads');
    ads.debug('d');
    ads.info('i');
    ads.warn('w');
    ads.error('e');
    ads.log('error', 'e');
    t.same([ads.debugEnabled(), ads.infoEnabled(), ads.warnEnabled(), ads.errorEnabled(), ads.fatalEnabled()], [false, false, false, false, false]);
    t.equal(sink.text, '');
  });
  t.test('each level admits the more severe ones', async (t) => {
    const sink = setup({ log_output_level: 'ads:warn,model:error,default:fatal' });
    const ads = registerScope('ads');
    const model = registerScope('model');
    for (const s of [ads, model, defaultScope]) {
      s.debug('d');
      s.info('i');
      s.warn('w');
      s.error('e');
    }
    t.same(sink.lines(), [`${TS}\twarn\tads\tw`, `${TS}\terror\tads\te`, `${TS}\terror\tmodel\te`]);
  });
  t.test('bare level sets the default scope', async (t) => {
    setup({ log_output_level: 'debug' });
    t.equal(defaultScope.getOutputLevel(), Level.Debug);
    t.equal(registerScope('ads').getOutputLevel(), Level.Info);
  });
  t.test('grpc defaults to none; a flag enables it', async (t) => {
    setup();
    t.equal(findScope('grpc')?.getOutputLevel(), Level.None);
    setup({ log_output_level: 'grpc:info' });
    t.equal(findScope('grpc')?.getOutputLevel(), Level.Info);
  });
  t.test('later entries win', async (t) => {
    setup({ log_output_level: 'ads:debug,ads:error' });
    t.equal(registerScope('ads').getOutputLevel(), Level.Error);
  });
  t.test('configure resets scopes not mentioned', async (t) => {
    setup({ log_output_level: 'model:debug', log_caller: 'model', log_stacktrace_level: 'model:error' });
    setup();
    const m = registerScope('model');
    t.same([m.getOutputLevel(), m.getStackTraceLevel(), m.getLogCallers()], [Level.Info, Level.None, false]);
  });
  t.test('log() with an explicit level and time', async (t) => {
    const sink = setup();
    registerScope('ads').log('warn', 'w', { k: 1 }, new Date(Date.UTC(2020, 0, 1)));
    registerScope('ads').log(Level.Info, 'i', undefined, Date.UTC(2020, 0, 1) * 1000 + 5);
    registerScope('ads').log('none', 'never');
    t.same(sink.lines(), ['2020-01-01T00:00:00.000000Z\twarn\tads\tw\tk=1', '2020-01-01T00:00:00.000005Z\tinfo\tads\ti']);
  });
});

t.test('all: prefix', async (t) => {
  t.test('sets every scope', async (t) => {
    setup({ log_output_level: 'all:debug' });
    for (const n of ['ads', 'default', 'grpc', 'klog', 'model']) t.equal(findScope(n)?.getOutputLevel(), Level.Debug, n);
  });
  t.test('overrides earlier entries and ends the list (Istio: override replaces everything)', async (t) => {
    setup({ log_output_level: 'ads:debug,all:error,model:debug' });
    t.equal(findScope('ads')?.getOutputLevel(), Level.Error);
    t.equal(findScope('model')?.getOutputLevel(), Level.Error);
  });
  t.test('stack trace levels too', async (t) => {
    setup({ log_stacktrace_level: 'all:warn' });
    for (const n of ['ads', 'default', 'model']) t.equal(findScope(n)?.getStackTraceLevel(), Level.Warn, n);
  });
  t.test('all is not registered as a scope', async (t) => {
    setup();
    t.equal(findScope('all'), undefined);
    t.notOk(getScopes().some((s) => s.name === 'all'));
  });
});

t.test('scopes registered after configure get their configured settings', async (t) => {
  setup({
    log_output_level: 'late1:debug,late2:none',
    log_stacktrace_level: 'late1:error',
    log_caller: 'late1',
  });
  const late1 = registerScope('late1', 'registered late');
  const late2 = registerScope('late2');
  const late3 = registerScope('late3');
  t.same([late1.getOutputLevel(), late1.getStackTraceLevel(), late1.getLogCallers()], [Level.Debug, Level.Error, true]);
  t.equal(late2.getOutputLevel(), Level.None);
  t.same([late3.getOutputLevel(), late3.getStackTraceLevel(), late3.getLogCallers()], [Level.Info, Level.None, false]);

  setup({ log_output_level: 'all:warn', log_caller: 'all' });
  const late4 = registerScope('late4');
  t.same([late4.getOutputLevel(), late4.getLogCallers()], [Level.Warn, true]);
});

t.test('--vklog', async (t) => {
  setup({ vklog: 0 });
  t.equal(findScope('klog')?.getOutputLevel(), Level.Info);
  setup({ vklog: 4 });
  t.equal(findScope('klog')?.getOutputLevel(), Level.Debug);
  // Applied after the level flags, as in Istio's Configure.
  setup({ vklog: 4, log_output_level: 'klog:error' });
  t.equal(findScope('klog')?.getOutputLevel(), Level.Debug);
  setup({ vklog: 0, log_output_level: 'klog:error' });
  t.equal(findScope('klog')?.getOutputLevel(), Level.Error);
  // Also for a klog scope registered after configure.
  setup({ vklog: 2 }, ['default']);
  t.equal(registerScope('klog').getOutputLevel(), Level.Debug);
});

t.test('fatal', async (t) => {
  const codes: number[] = [];
  setExitFunction((code) => {
    codes.push(code);
    throw new ExitCalled(code);
  });
  t.teardown(() => setExitFunction());
  const sink = setup();
  const ads = registerScope('ads');
  t.throws(() => ads.fatal('cannot continue', { k: 'v' }), { message: 'exit 1' });
  t.equal(sink.text, `${TS}\tfatal\tads\tcannot continue\tk=v\n`);
  t.same(codes, [1]);
  // Silenced scopes write nothing but still exit.
  sink.clear();
  setOutputLevel('ads', 'none');
  t.throws(() => ads.fatal('quiet'), { message: 'exit 1' });
  t.equal(sink.text, '');
  t.same(codes, [1, 1]);
});

t.test('file targets', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-log-'));
  t.teardown(() => {
    configure(parseLogOptions({}), { sinks: [new MemorySink()] });
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const f1 = path.join(dir, 'a.log');
  const f2 = path.join(dir, 'b.log');
  fs.writeFileSync(f1, 'existing\n');
  configure(parseLogOptions({ log_target: [f1, f2] }), { scopes: SCOPES });
  registerScope('ads').info('to files', { k: 1 });
  const line = `${TS}\tinfo\tads\tto files\tk=1\n`;
  t.equal(fs.readFileSync(f1, 'utf8'), 'existing\n' + line, 'appended');
  t.equal(fs.readFileSync(f2, 'utf8'), line, 'created');

  // A target that cannot be opened fails configure() and keeps the previous outputs.
  const bad = path.join(dir, 'missing', 'c.log');
  t.throws(() => configure(parseLogOptions({ log_target: [f2, bad], log_as_json: true })), {
    message: `open sink "${bad}": open ${bad}: no such file or directory`,
  });
  registerScope('ads').info('still text to the old files');
  t.equal(fs.readFileSync(f2, 'utf8'), line + `${TS}\tinfo\tads\tstill text to the old files\n`);

  // Reconfiguring to another file closes the old one and writes JSON to the new.
  const f3 = path.join(dir, 'c.log');
  configure(parseLogOptions({ log_target: f3, log_as_json: true }));
  registerScope('ads').info('json');
  t.equal(fs.readFileSync(f3, 'utf8'), `{"level":"info","time":"${TS}","scope":"ads","msg":"json"}\n`);
  t.equal(fs.readFileSync(f2, 'utf8'), line + `${TS}\tinfo\tads\tstill text to the old files\n`);
});

t.test('runtime control and listing', async (t) => {
  setup({ log_output_level: 'ads:debug', log_caller: 'model' });
  registerScope('ads', 'ADS debugging');
  const list = getScopes();
  t.same(
    list.map((s) => s.name),
    [...list.map((s) => s.name)].sort(),
    'sorted by name',
  );
  t.same(
    list.find((s) => s.name === 'ads'),
    { name: 'ads', description: 'ADS debugging', outputLevel: 'debug', stackTraceLevel: 'none', logCallers: false },
  );
  t.same(
    list.find((s) => s.name === 'default'),
    {
      name: 'default',
      description: 'Unscoped logging messages.',
      outputLevel: 'info',
      stackTraceLevel: 'none',
      logCallers: false,
    },
  );
  t.equal(list.find((s) => s.name === 'model')?.logCallers, true);
  t.equal(setOutputLevel('ads', 'error'), true);
  t.equal(getScopes().find((s) => s.name === 'ads')?.outputLevel, 'error');
  t.equal(setOutputLevel('nosuch', 'error'), false);
  t.equal(setStackTraceLevel('nosuch', 'error'), false);
  t.equal(setLogCallers('nosuch', true), false);
  t.throws(() => setOutputLevel('ads', 'loud' as never), { message: "invalid output level 'loud'" });
  // The description given by the code that owns the scope fills one registered without.
  registerScope('model', 'model things');
  t.equal(getScopes().find((s) => s.name === 'model')?.description, 'model things');
});

t.test('scope names', async (t) => {
  for (const n of ['a:b', 'a,b', 'a.b']) {
    t.throws(() => registerScope(n), { message: `scope name ${n} is invalid, it cannot contain colons, commas, or periods` });
  }
  t.equal(registerScope('same').name, 'same');
  registerScope('same').setOutputLevel('debug');
  t.equal(registerScope('same').getOutputLevel(), Level.Debug, 'same state for the same name');
});

t.test('strict configure rejects unknown scopes', async (t) => {
  t.throws(() => configure(parseLogOptions({ log_output_level: 'nosuchscope:debug' }), { scopes: ['default'], strict: true, sinks: [] }), {
    message: "unknown scope 'nosuchscope' specified",
  });
  t.doesNotThrow(() => configure(parseLogOptions({ log_output_level: 'nosuchscope:debug' }), { scopes: ['default'], sinks: [] }));
});

t.test('a disabled debug call reads nothing and writes nothing (its cost: scripts/bench/log.mjs)', async (t) => {
  const sink = setup();
  const ads = registerScope('ads');
  let touched = 0;
  const msg = { toString: () => String(++touched) };
  const fields = new Proxy({}, { ownKeys: () => (touched++, []), get: () => (touched++, undefined) });
  ads.debug(msg, fields);
  t.equal(touched, 0, 'neither the message nor the fields were read');
  t.equal(sink.text, '', 'nothing reached the sink');
  ads.info(msg, fields);
  t.ok(touched > 0 && sink.lines().length === 1, 'the same call at an enabled level is written (the check above can fail)');
});
