// What a disabled debug call costs on a hot path, against a call of an empty method in the same run (the
// yardstick: what any guarded call costs). Moved out of the parallel test suite, where a timing is noise.
//   node --import tsx scripts/bench/log.mjs [--calls 1000000] [--rounds 5]
import { configure, parseLogOptions, registerScope } from '../../src/lib/log/index.ts';
import { median, parseOptions } from '../lib/bench.mjs';

const { calls, rounds } = parseOptions('scripts/bench/log.mjs', 'A disabled debug call against an empty method call, in the same run.', {
  calls: { type: 'integer', min: 1, default: 1_000_000, help: 'calls per round' },
  rounds: { type: 'integer', min: 1, default: 5, help: 'rounds' },
});

configure(parseLogOptions({}), { scopes: ['ads'], sinks: [] });
const ads = registerScope('ads');
const empty = { debug(_msg, _fields) {} };

function nsPerCall(target) {
  const start = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) target.debug('never written', undefined);
  return Number(process.hrtime.bigint() - start) / calls;
}

const ratios = [];
for (let r = 0; r < rounds; r++) {
  const base = nsPerCall(empty);
  const disabled = nsPerCall(ads);
  ratios.push(disabled / base);
  console.log(
    `round ${r + 1}: disabled debug ${disabled.toFixed(1)} ns/call, empty method ${base.toFixed(1)} ns/call, ratio ${(disabled / base).toFixed(2)}`,
  );
}
console.log(`median ratio disabled debug / empty method: ${median(ratios).toFixed(2)}`);
